//! Hostile plugins at load time: what a
//! plugin's `describe` may do and return, and how plugin text reaches a
//! terminal. The hostile plugin (`tests/plugins/hostile`) shapes its
//! `describe` by the `HOSTILE_DESCRIBE` variable its manifest grants.
//!
//! `Host` is driven directly for what the host keeps; the real binary for what
//! a person reads (`toolhost tools`, `toolhost call`, `plugin inspect`).

use std::path::Path;

use toolhost_runtime::{Host, HostConfig, StartError};
use toolhost_runtime::{LoadError, MAX_DESCRIPTION_BYTES, MAX_TOOL_NAME_LEN, MAX_TOOLS_PER_PLUGIN};

use crate::support::{add_hostile, dirs, use_cache};

fn config(ws: &Path, state: &Path) -> HostConfig {
    use_cache(state);
    HostConfig::new(ws.to_path_buf(), state.to_path_buf())
}

/// The built-in bash tool still runs a real command.
async fn assert_bash_runs(host: &Host) {
    let out = host
        .call_tool("bash", serde_json::json!({"command": "echo still-alive"}))
        .await
        .expect("bash");
    assert_eq!(out.text().trim_end(), "still-alive");
    assert!(!out.is_error);
}

/// Item 4: `describe` runs with no session services, so its `start` is denied
/// before any grant, policy or approver is consulted, even with an exec grant
/// and an allow-all policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_cannot_start_processes() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    let wasm = add_hostile(
        dir.path(),
        "hostile",
        Some("start"),
        "exec = [\"touch *\"]\n",
    );
    let mut cfg = config(ws.path(), state.path());
    cfg.policy_rules = crate::support::ALLOW_ALL.into();
    cfg.plugins = vec![wasm];
    let host = Host::new(cfg).await.expect("host");
    let hello = host.tools().iter().find(|t| t.name == "hello").unwrap();
    assert!(
        hello.spec.description.starts_with("describe start: Err(")
            && hello.spec.description.contains("Denied"),
        "{}",
        hello.spec.description
    );
    assert!(!ws.path().join("describe-marker").exists());
    assert!(
        host.sessions()
            .list(&toolhost_process::Caller::Host)
            .is_empty()
    );
    // The same grant works in a tool call: only `describe` lacks authority.
    let out = host
        .call_tool("exec", serde_json::json!({"command": "touch call-marker"}))
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.text());
}

/// Item 10: in `--plugins-dir`, a `describe` that traps or spins is skipped
/// with its error; the other plugins and the built-in bash load and run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_or_hanging_describe_is_skipped_and_the_rest_load() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    add_hostile(dir.path(), "broken", Some("trap"), "");
    add_hostile(dir.path(), "good", None, "");
    add_hostile(dir.path(), "spinner", Some("hang"), "");
    let mut cfg = config(ws.path(), state.path());
    cfg.plugins_dir = Some(dir.path().to_path_buf());
    let host = Host::new(cfg).await.expect("the host starts without them");

    let skipped = host.skipped_plugins();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].file.ends_with("broken.wasm"), "{skipped:?}");
    assert!(
        skipped[0].error.contains("`broken`") && skipped[0].error.contains("trapped"),
        "{skipped:?}"
    );
    assert!(skipped[1].file.ends_with("spinner.wasm"), "{skipped:?}");
    assert!(
        skipped[1].error.contains("`spinner`") && skipped[1].error.contains("CPU time limit"),
        "{skipped:?}"
    );
    let ids: Vec<String> = host.plugins().iter().map(|p| p.id().to_string()).collect();
    assert_eq!(ids, ["bash", "good"]);
    let hello = host.tools().iter().find(|t| t.name == "hello").unwrap();
    assert_eq!(hello.plugin.id(), "good");
    assert_bash_runs(&host).await;
    let out = host
        .call_tool("hello", serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(out.text(), "hello");
}

/// Item 10, decided: an explicit `--plugin` whose `describe` traps is still an
/// error, naming the plugin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_plugin_whose_describe_traps_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    let wasm = add_hostile(dir.path(), "hostile", Some("trap"), "");
    let mut cfg = config(ws.path(), state.path());
    cfg.plugins = vec![wasm];
    match Host::new(cfg).await {
        Err(StartError::Load(LoadError::Describe { plugin, message })) => {
            assert_eq!(plugin, "hostile");
            assert!(message.contains("trapped"), "{message}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a trapping describe loaded"),
    }
}

/// Item 8: a plugin describing 100,000 tools is refused at once, naming the
/// limit (no quadratic merge); in `--plugins-dir` the others still load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_tools_are_refused_with_a_named_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    let many = add_hostile(dir.path(), "many", Some("many"), "");
    add_hostile(dir.path(), "good", None, "");

    let mut cfg = config(ws.path(), state.path());
    cfg.plugins = vec![many.clone()];
    match Host::new(cfg).await {
        Err(StartError::Load(e @ LoadError::TooManyTools { .. })) => {
            let LoadError::TooManyTools {
                ref plugin,
                count,
                limit,
            } = e
            else {
                unreachable!()
            };
            assert_eq!((plugin.as_str(), count, limit), ("many", 100_000, 256));
            assert_eq!(limit, MAX_TOOLS_PER_PLUGIN);
            assert!(e.to_string().contains("MAX_TOOLS_PER_PLUGIN"), "{e}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("100,000 tools loaded"),
    }

    let (ws, state) = dirs();
    let mut cfg = config(ws.path(), state.path());
    cfg.plugins_dir = Some(dir.path().to_path_buf());
    let host = Host::new(cfg).await.expect("host");
    let skipped = host.skipped_plugins();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].file.ends_with("many.wasm"));
    assert!(
        skipped[0].error.contains("100000 tools")
            && skipped[0].error.contains("MAX_TOOLS_PER_PLUGIN"),
        "{skipped:?}"
    );
    assert!(host.tools().iter().any(|t| t.name == "hello"));
}

/// Item 12: names outside `tool.wit`'s rules, duplicates and oversized
/// descriptions or schemas are refused with reasons; the plugin's other tools
/// are offered; the built-in `bash` keeps its name and the plugin's `bash` is
/// `hostile__bash`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tool_names_are_refused_and_bash_stays_bash() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    let wasm = add_hostile(dir.path(), "hostile", Some("bad-names"), "");
    let mut cfg = config(ws.path(), state.path());
    cfg.plugins = vec![wasm];
    let host = Host::new(cfg).await.expect("host");

    let bash = host.tools().iter().find(|t| t.name == "bash").unwrap();
    assert_eq!(bash.plugin.id(), "bash");
    let theirs = host
        .tools()
        .iter()
        .find(|t| t.name == "hostile__bash")
        .expect("the plugin's bash, prefixed");
    assert_eq!(theirs.plugin_tool, "bash");
    assert_eq!(
        host.tools().iter().filter(|t| t.name == "hello").count(),
        1,
        "one hello: the duplicate is refused"
    );
    for t in host.tools() {
        assert!(
            toolhost_runtime::tool_name_error(&t.plugin_tool).is_none(),
            "served a bad name {:?}",
            t.name
        );
    }

    let refused = host.refused_tools();
    let reason = |name: &str| -> String {
        refused
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name:?} not refused: {refused:?}"))
            .reason
            .clone()
    };
    assert!(reason("a b").contains("[A-Za-z0-9_-]"), "{refused:?}");
    assert!(reason("a b").contains("a space"), "{refused:?}");
    assert!(
        reason(&"x".repeat(65)).contains("MAX_TOOL_NAME_LEN"),
        "{refused:?}"
    );
    assert_eq!(MAX_TOOL_NAME_LEN, 64);
    assert!(reason("hello").contains("unique"), "{refused:?}");
    assert!(reason("").contains("empty"), "{refused:?}");
    assert!(reason("\u{1b}[31mred").contains("U+001B"), "{refused:?}");
    assert!(reason("caf\u{e9}").contains("U+00E9"), "{refused:?}");
    assert!(
        reason("big_description").contains("MAX_DESCRIPTION_BYTES")
            && reason("big_description").contains(&MAX_DESCRIPTION_BYTES.to_string()),
        "{refused:?}"
    );
    assert!(
        reason("bad_schema").contains("not valid JSON"),
        "{refused:?}"
    );
    assert!(refused.iter().all(|r| r.plugin == "hostile"));

    assert_bash_runs(&host).await;
    let out = host
        .call_tool("hello", serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(out.text(), "hello");
}

/// Review item: a plugin cannot squat the name the host gives another plugin's
/// colliding tool. `aaa` describes `zzz__run`, `zzz__env` and `x__y`; `zzz` and
/// `aaa` both offer `run` and `env`, so the host names them `aaa__run`,
/// `zzz__run`, ... Every `__` name a plugin describes is refused with the reason
/// (its other tools are kept), and `zzz__run`/`zzz__env` are `zzz`'s own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_cannot_squat_another_plugins_prefixed_name() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    let aaa = add_hostile(dir.path(), "aaa", Some("squat"), "");
    let zzz = add_hostile(dir.path(), "zzz", None, "[env]\nWHO = \"zzz-itself\"\n");
    let mut cfg = config(ws.path(), state.path());
    cfg.plugins = vec![aaa, zzz];
    let host = Host::new(cfg).await.expect("host");

    let owner = |name: &str| -> (String, String) {
        let t = host
            .tools()
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} not offered"));
        (t.plugin.id().to_string(), t.plugin_tool.clone())
    };
    assert_eq!(owner("zzz__run"), ("zzz".into(), "run".into()));
    assert_eq!(owner("zzz__env"), ("zzz".into(), "env".into()));
    assert_eq!(owner("aaa__run"), ("aaa".into(), "run".into()));
    assert_eq!(owner("aaa__hello"), ("aaa".into(), "hello".into()));
    assert!(host.tools().iter().all(|t| t.name != "x__y"));
    // Every `<id>__` name is plugin `<id>`'s own tool.
    for t in host.tools() {
        if let Some((id, tool)) = t.name.split_once("__") {
            assert_eq!((t.plugin.id(), t.plugin_tool.as_str()), (id, tool));
        }
    }

    let refused = host.refused_tools();
    for name in ["zzz__run", "zzz__env", "x__y"] {
        let r = refused
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name} not refused: {refused:?}"));
        assert_eq!(r.plugin, "aaa");
        assert!(r.reason.contains("`__`, which is reserved"), "{r:?}");
    }
    assert!(
        refused.iter().all(|r| r.plugin == "aaa"),
        "only the squats are refused: {refused:?}"
    );

    // The call reaches `zzz`: it sees its own env, not `aaa`'s.
    let out = host
        .call_tool("zzz__env", serde_json::json!({}))
        .await
        .expect("zzz__env");
    assert!(out.text().contains("zzz-itself"), "{out:?}");
    assert!(!out.text().contains("HOSTILE_DESCRIBE"), "{out:?}");
    assert_bash_runs(&host).await;
}
