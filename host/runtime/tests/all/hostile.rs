//! Untrusted plugins: manifests, grants, limits and containment, checked with
//! the test-only hostile plugin (`tests/plugins/hostile`, built by
//! `tests/fixtures` for the test suite only, never embedded in the binary).
//!
//! Every hostile tool is contained with a specific, named outcome, and after
//! each the host still runs the bash plugin and the hostile plugin again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use toolhost_runtime::CompileSource;
use toolhost_runtime::LimitExceeded;
use toolhost_runtime::{CallError, LoadError, MAX_OUTPUT_BYTES};
use toolhost_runtime::{Host, HostConfig, StartError, ToolCallError, ToolResult};

use toolhost_test_fixtures::HOSTILE;

use crate::support::{dirs, hostile_dir, hostile_manifest, use_cache};

/// A host with the hostile plugin loaded from `dir/hostile.wasm` and the
/// given manifest text (none: no manifest file).
struct Env {
    host: Host,
    dir: tempfile::TempDir,
    _ws: tempfile::TempDir,
    _state: tempfile::TempDir,
}

fn config(files: Vec<PathBuf>, ws: &Path, state: &Path) -> HostConfig {
    use_cache(state);
    HostConfig {
        plugins: files,
        ..HostConfig::new(ws.to_path_buf(), state.to_path_buf())
    }
}

/// Like [`env`] but returns the host's `Result` (plus the temp dirs to keep).
async fn try_env(manifest: Option<&str>) -> (Result<Host, StartError>, [tempfile::TempDir; 3]) {
    let dir = hostile_dir(manifest);
    let (ws, state) = dirs();
    let cfg = config(
        vec![dir.path().join("hostile.wasm")],
        ws.path(),
        state.path(),
    );
    (Host::new(cfg).await, [dir, ws, state])
}

async fn env(manifest: Option<&str>) -> Env {
    let dir = hostile_dir(manifest);
    let (ws, state) = dirs();
    let cfg = config(
        vec![dir.path().join("hostile.wasm")],
        ws.path(),
        state.path(),
    );
    let host = Host::new(cfg).await.expect("host with the hostile plugin");
    Env {
        host,
        dir,
        _ws: ws,
        _state: state,
    }
}

async fn call(
    host: &Host,
    tool: &str,
    args: serde_json::Value,
) -> Result<ToolResult, ToolCallError> {
    host.call_tool(tool, args).await
}

/// The host carries on: the bash plugin runs a real command and the hostile
/// plugin answers again in a fresh instance.
async fn assert_host_alive(host: &Host) {
    let out = call(
        host,
        "bash",
        serde_json::json!({"command": "echo still-alive"}),
    )
    .await
    .expect("bash after a hostile call");
    assert_eq!(out.text().trim_end(), "still-alive");
    assert!(!out.is_error);
    let out = call(host, "hello", serde_json::json!({})).await.unwrap();
    assert_eq!(out.text(), "hello");
}

fn limit_of(result: Result<ToolResult, ToolCallError>) -> LimitExceeded {
    match result {
        Err(ToolCallError::Plugin(CallError::Limit { plugin, limit })) => {
            assert_eq!(plugin, "hostile");
            limit
        }
        other => panic!("expected a limit error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_hits_the_cpu_limit() {
    let env = env(Some(&hostile_manifest("cpu = \"200ms\"\n"))).await;
    let start = Instant::now();
    let limit = limit_of(call(&env.host, "spin", serde_json::json!({})).await);
    assert_eq!(
        limit,
        LimitExceeded::Cpu {
            limit: Duration::from_millis(200)
        }
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(limit.to_string().contains("CPU time limit of 200 ms"));
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_in_a_host_call_hits_the_wall_limit() {
    let env = env(Some(&hostile_manifest("wall = \"500ms\"\n"))).await;
    let start = Instant::now();
    let limit = limit_of(call(&env.host, "sleep", serde_json::json!({"ms": 60000})).await);
    assert_eq!(
        limit,
        LimitExceeded::Wall {
            limit: Duration::from_millis(500)
        }
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gib_allocation_hits_the_memory_limit() {
    let env = env(Some(&hostile_manifest("memory = \"32MiB\"\n"))).await;
    match limit_of(call(&env.host, "alloc", serde_json::json!({"mib": 1024})).await) {
        LimitExceeded::Memory { limit, requested } => {
            assert_eq!(limit, 32 << 20);
            assert!(requested > limit);
        }
        other => panic!("{other:?}"),
    }
    // Within the limit, the same tool works.
    let out = call(&env.host, "alloc", serde_json::json!({"mib": 8}))
        .await
        .unwrap();
    assert_eq!(out.text(), format!("allocated {} bytes", 8 << 20));
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_hits_the_stack_limit() {
    let env = env(None).await;
    let limit = limit_of(call(&env.host, "recurse", serde_json::json!({})).await);
    assert!(matches!(limit, LimitExceeded::Stack { .. }), "{limit:?}");
    assert!(limit.to_string().contains("stack limit"));
    // With frames in linear memory, Rust's shadow stack runs out first: a
    // guest fault (out-of-bounds trap), contained all the same.
    match call(&env.host, "recurse", serde_json::json!({"frames": true})).await {
        Err(ToolCallError::Plugin(CallError::Trap { message, .. })) => {
            assert!(message.contains("out of bounds"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_is_refused_by_the_host_cap() {
    let env = env(None).await;
    match call(&env.host, "huge", serde_json::json!({"mib": 20})).await {
        Err(ToolCallError::Plugin(CallError::OutputTooLarge {
            plugin,
            bytes,
            limit,
        })) => {
            assert_eq!(plugin, "hostile");
            assert_eq!(bytes, 20 << 20);
            assert_eq!(limit, MAX_OUTPUT_BYTES);
        }
        other => panic!("{:?}", other.map(|r| r.text().len())),
    }
    // Just under the cap is fine.
    let out = call(&env.host, "huge", serde_json::json!({"mib": 1}))
        .await
        .unwrap();
    assert_eq!(out.text().len(), 1 << 20);
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_a_trap_and_the_instance_is_discarded() {
    let env = env(None).await;
    match call(&env.host, "trap", serde_json::json!({})).await {
        Err(ToolCallError::Plugin(CallError::Trap { plugin, message })) => {
            assert_eq!(plugin, "hostile");
            assert!(message.contains("unreachable"), "{message}");
            // The report carries the guest's last stderr lines: the panic
            // message, not only `unreachable`.
            assert!(
                message.contains("the plugin's last stderr lines:")
                    && message.contains("the hostile plugin panics on purpose"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_files_without_a_preopen() {
    let env = env(None).await;
    let out = call(
        &env.host,
        "read",
        serde_json::json!({"path": "/etc/passwd"}),
    )
    .await
    .unwrap();
    assert!(out.is_error, "{}", out.text());
    assert!(!out.text().contains("root"), "{}", out.text());
    let secret = env.dir.path().join("secret");
    let out = call(
        &env.host,
        "read",
        serde_json::json!({"path": secret.display().to_string()}),
    )
    .await
    .unwrap();
    assert!(out.is_error, "{}", out.text());
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preopen_grants_its_directory_and_nothing_above_it() {
    let env = env(Some(&hostile_manifest(
        "[[preopen]]\nhost = \"granted\"\nguest = \"/data\"\nmode = \"read-only\"\n",
    )))
    .await;
    let read = |path: &str| {
        let host = &env.host;
        let path = path.to_string();
        async move {
            call(host, "read", serde_json::json!({"path": path}))
                .await
                .unwrap()
        }
    };
    let ok = read("/data/file.txt").await;
    assert_eq!(ok.text(), format!("ok: {}", "granted content".len()));
    for escape in [
        "/data/../secret",
        "../secret",
        "/secret",
        "/data/../../etc/passwd",
    ] {
        let out = read(escape).await;
        assert!(out.is_error, "{escape}: {}", out.text());
    }
    // Read-only: writing is refused, and nothing is created.
    let out = call(
        &env.host,
        "write",
        serde_json::json!({"path": "/data/new.txt", "text": "x"}),
    )
    .await
    .unwrap();
    assert!(out.is_error, "{}", out.text());
    assert!(!env.dir.path().join("granted/new.txt").exists());
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_preopen_allows_writes_inside_it_only() {
    let env = env(Some(&hostile_manifest(
        "[[preopen]]\nhost = \"granted\"\nguest = \"/data\"\nmode = \"read-write\"\n",
    )))
    .await;
    let out = call(
        &env.host,
        "write",
        serde_json::json!({"path": "/data/new.txt", "text": "written"}),
    )
    .await
    .unwrap();
    assert!(!out.is_error, "{}", out.text());
    assert_eq!(
        std::fs::read_to_string(env.dir.path().join("granted/new.txt")).unwrap(),
        "written"
    );
    let out = call(
        &env.host,
        "write",
        serde_json::json!({"path": "/data/../escaped.txt", "text": "x"}),
    )
    .await
    .unwrap();
    assert!(out.is_error, "{}", out.text());
    assert!(!env.dir.path().join("escaped.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_holds_only_granted_keys() {
    let env_none = env(None).await;
    let out = call(&env_none.host, "env", serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(out.text(), "", "no grant, no environment");

    // PATH is set in the test's environment; HOME is not granted.
    let granted = env(Some(&hostile_manifest(
        "[env]\nPATH = true\nHOSTILE_MODE = \"literal\"\n",
    )))
    .await;
    let out = call(&granted.host, "env", serde_json::json!({}))
        .await
        .unwrap();
    let text = out.text();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "HOSTILE_MODE=literal".to_string(),
            format!("PATH={}", std::env::var("PATH").unwrap())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_are_denied() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let env = env(Some(&hostile_manifest("exec = [\"**\"]\n"))).await;
    let out = call(&env.host, "socket", serde_json::json!({"addr": addr}))
        .await
        .unwrap();
    assert!(out.is_error, "{}", out.text());
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the guest must not have connected"
    );
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_without_a_grant_is_denied_by_the_manifest_step() {
    let env = env(None).await;
    let marker = env.host.config().sessions.workspace.join("pwned");
    let out = call(
        &env.host,
        "exec",
        serde_json::json!({"command": format!("touch {}", marker.display())}),
    )
    .await
    .unwrap();
    assert!(out.is_error);
    assert!(out.text().contains("Denied"), "{}", out.text());
    assert!(out.text().contains("denied by manifest"), "{}", out.text());
    assert!(!marker.exists());
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_grant_patterns_allow_only_matching_simple_commands() {
    let env = env(Some(&hostile_manifest(
        "exec = [\"echo granted\", \"true **\"]\n",
    )))
    .await;
    let out = call(
        &env.host,
        "exec",
        serde_json::json!({"command": "echo granted"}),
    )
    .await
    .unwrap();
    assert!(!out.is_error, "{}", out.text());
    assert!(out.text().starts_with("ok: \"bg_"), "{}", out.text());
    let marker = env.host.config().sessions.workspace.join("pwned");
    for bypass in [
        format!("echo granted; touch {}", marker.display()),
        format!("echo granted && touch {}", marker.display()),
        format!("echo granted $(touch {})", marker.display()),
        format!("true `touch {}`", marker.display()),
        format!("true\ntouch {}", marker.display()),
        format!("echo granted > {}", marker.display()),
        "echo other".to_string(),
    ] {
        let out = call(&env.host, "exec", serde_json::json!({"command": bypass}))
            .await
            .unwrap();
        assert!(out.is_error, "{bypass}: {}", out.text());
        assert!(
            out.text().contains("denied by manifest"),
            "{bypass}: {}",
            out.text()
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_plugins_sessions_cannot_be_seen_or_killed() {
    let env = env(None).await;
    let out = call(
        &env.host,
        "bash",
        serde_json::json!({"command": "sleep 30", "run_in_background": true}),
    )
    .await
    .unwrap();
    let id = out
        .text()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| w.starts_with("bg_") && w.len() == 15)
        .unwrap_or_else(|| panic!("no session id in {:?}", out.text()))
        .to_string();
    let stolen = call(&env.host, "steal", serde_json::json!({"id": id}))
        .await
        .unwrap();
    assert!(stolen.is_error, "{}", stolen.text());
    assert_eq!(
        stolen.text().matches("UnknownSession").count(),
        3,
        "{}",
        stolen.text()
    );
    assert!(stolen.text().contains("list: 0"), "{}", stolen.text());
    // The session is untouched and still the bash plugin's to manage.
    let out = call(
        &env.host,
        "bash_output",
        serde_json::json!({"session_id": id}),
    )
    .await
    .unwrap();
    assert!(out.text().contains("running"), "{}", out.text());
    let out = call(
        &env.host,
        "kill_shell",
        serde_json::json!({"session_id": id}),
    )
    .await
    .unwrap();
    assert!(!out.is_error, "{}", out.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_component_is_refused_as_a_tool_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notatool.wasm");
    std::fs::write(&path, toolhost_runtime::POLICY).unwrap();
    let (ws, state) = dirs();
    let err = Host::new(config(vec![path], ws.path(), state.path()))
        .await
        .err()
        .expect("a policy component is not a tool plugin");
    match &err {
        StartError::Load(LoadError::WrongWorld { plugin, .. }) => assert_eq!(plugin, "notatool"),
        other => panic!("{other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("does not export toolhost:plugin/tool@0.1.0"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_the_host_does_not_provide_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("http.wasm");
    std::fs::write(&path, crate::support::component_importing_http()).unwrap();
    let (ws, state) = dirs();
    let err = Host::new(config(vec![path], ws.path(), state.path()))
        .await
        .err()
        .expect("refused");
    let message = err.to_string();
    assert!(
        message
            .contains("imports wasi:http/outgoing-handler@0.2.0, which toolhost does not provide"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sha256_pin_must_match() {
    let wrong = "0".repeat(64);
    let (host, _dir) = try_env(Some(&hostile_manifest(&format!("sha256 = \"{wrong}\"\n")))).await;
    match host.err().expect("pin mismatch refused") {
        StartError::Load(LoadError::Sha256Mismatch {
            plugin,
            expected,
            actual,
        }) => {
            assert_eq!(plugin, "hostile");
            assert_eq!(expected, wrong);
            assert_eq!(actual, toolhost_runtime::sha256_hex(HOSTILE));
        }
        other => panic!("{other:?}"),
    }
    let right = toolhost_runtime::sha256_hex(HOSTILE).to_uppercase();
    let env = env(Some(&hostile_manifest(&format!("sha256 = \"{right}\"\n")))).await;
    assert_host_alive(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_manifests_are_refused_before_anything_runs() {
    let cases: &[(&str, &[&str])] = &[
        (
            "id = \"hostile\"\ncontract = \"0.1.0\"\nexce = [\"ls\"]\n",
            &["line 3", "unknown field `exce`"],
        ),
        (
            "id = \"Hostile!\"\ncontract = \"0.1.0\"\n",
            &["`id`", "not a plugin id"],
        ),
        (
            "id = \"hostile\"\ncontract = \"9.0.0\"\n",
            &["`contract`", "not supported"],
        ),
        (
            "id = \"hostile\"\ncontract = \"0.1.0\"\nmemory = \"lots\"\n",
            &["`memory`", "does not start with a number"],
        ),
        (
            "id = \"hostile\"\ncontract = \"0.1.0\"\ncpu = \"5 fortnights\"\n",
            &["`cpu`", "unit"],
        ),
        (
            "id = \"hostile\"\ncontract = \"0.1.0\"\n[[preopen]]\nhost = \"missing\"\nguest = \"/m\"\nmode = \"read-only\"\n",
            &["preopen[0].host", "missing"],
        ),
        (
            "id = \"hostile\"\ncontract = \"0.1.0\"\nexec = [\"git status; rm\"]\n",
            &["`exec`", "metacharacter"],
        ),
        ("id = \"bash\"\ncontract = \"0.1.0\"\n", &["already taken"]),
    ];
    for (text, expected) in cases {
        let (host, _dir) = try_env(Some(text)).await;
        let message = host.err().expect("invalid manifest refused").to_string();
        assert!(
            message.contains("hostile.toml") || message.contains("already taken"),
            "{message}"
        );
        for e in *expected {
            assert!(message.contains(e), "{text:?}: {message}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_start_loads_third_party_plugins_from_the_cache() {
    // Its own cache (not the shared one) so the first start really compiles.
    let dir = hostile_dir(None);
    let (ws, state) = dirs();
    let cfg = HostConfig {
        plugins: vec![dir.path().join("hostile.wasm")],
        ..HostConfig::new(ws.path().to_path_buf(), state.path().to_path_buf())
    };
    let source = |host: &Host| {
        host.plugins()
            .iter()
            .find(|p| p.id() == "hostile")
            .unwrap()
            .source
    };
    let first = Host::new(cfg.clone()).await.unwrap();
    assert_eq!(source(&first), CompileSource::Compiled);
    drop(first);
    let second = Host::new(cfg).await.unwrap();
    assert_eq!(source(&second), CompileSource::Cache);
    assert_host_alive(&second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_dir_loads_every_component_with_its_manifest() {
    let dir = hostile_dir(Some(&hostile_manifest("exec = [\"echo hi\"]\n")));
    let (ws, state) = dirs();
    use_cache(state.path());
    let cfg = HostConfig {
        plugins_dir: Some(dir.path().to_path_buf()),
        ..HostConfig::new(ws.path().to_path_buf(), state.path().to_path_buf())
    };
    let host = Host::new(cfg).await.unwrap();
    let hostile = host
        .plugins()
        .into_iter()
        .find(|p| p.id() == "hostile")
        .expect("loaded from the dir");
    assert_eq!(
        hostile.manifest().exec,
        toolhost_runtime::ExecGrant::Patterns(vec!["echo hi".into()])
    );
    assert!(host.tools().iter().any(|t| t.name == "spin"));
}

/// Each tool call after the first runs in an instance made after the previous
/// call returned (`plugin/instances.rs::ToolInstances::give_back`): the limits hold in it, a
/// trap still reports the guest's stderr, and every call gets a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_instances_keep_the_limits_and_serve_one_call_each() {
    let env = env(Some(&hostile_manifest("cpu = \"200ms\"\n"))).await;
    let plugin = env
        .host
        .plugins()
        .into_iter()
        .find(|p| p.id() == "hostile")
        .expect("the hostile plugin");
    assert!(!plugin.has_ready_instance(), "none before the first call");
    let out = call(&env.host, "hello", serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(out.text(), "hello");
    plugin.wait_ready().await;
    assert!(plugin.has_ready_instance());
    let limit = limit_of(call(&env.host, "spin", serde_json::json!({})).await);
    assert_eq!(
        limit,
        LimitExceeded::Cpu {
            limit: Duration::from_millis(200)
        }
    );
    plugin.wait_ready().await;
    assert!(
        plugin.has_ready_instance(),
        "a limit hit discards only that instance"
    );
    match call(&env.host, "trap", serde_json::json!({})).await {
        Err(ToolCallError::Plugin(CallError::Trap { message, .. })) => assert!(
            message.contains("the hostile plugin panics on purpose"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    for _ in 0..3 {
        plugin.wait_ready().await;
        assert!(plugin.has_ready_instance());
        let out = call(&env.host, "hello", serde_json::json!({}))
            .await
            .unwrap();
        assert_eq!(out.text(), "hello");
    }
    // Whatever an instance keeps (a counter in its memory) no later call sees:
    // spaced (each from a ready instance) and back to back alike.
    for spaced in [true, true, false, false, false] {
        if spaced {
            plugin.wait_ready().await;
        }
        let out = call(&env.host, "calls", serde_json::json!({}))
            .await
            .unwrap();
        assert_eq!(
            out.text(),
            "1",
            "a fresh instance per call (spaced: {spaced})"
        );
    }
    assert_host_alive(&env.host).await;
}
