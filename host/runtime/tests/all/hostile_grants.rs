//! A grant means exactly what it says, checked with
//! the hostile plugin's `exec` tool (`tests/plugins/hostile`):
//!
//! - a pattern grant (`exec = ["sleep *"]`) judges the whole request: the
//!   environment names (only a safe default set and `exec_env`) and the values
//!   of the safe ones (no `LC_ALL=/path`), the shell (`/bin/sh` and
//!   `exec_shells`) and stdin (only for commands `exec_stdin` grants, never
//!   for a shell or interpreter);
//! - the policy plugin sees the environment names and the shell, and asks
//!   about names that make the shell or loader run code even under `**`;
//! - a start's tool-call id is the call's own or none, never another call's;
//! - UNIX sockets need the manifest's grant and the operator's both
//!   (docs/sandbox.md#unix-sockets).
//!
//! Each refusal is asserted word for word where it matters, together with its
//! real outcome: no session was started and no marker file was written.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use toolhost_process::{Caller, SandboxPolicy};
use toolhost_runtime::Manifest;
use toolhost_runtime::{Host, HostConfig, ToolResult};
use toolhost_test_fixtures::HOSTILE;

use crate::support::{ALLOW_ALL, dirs, use_cache};

/// A host with the hostile plugin (manifest `manifest`) and `policy` rules
/// (empty: the built-in default policy), plus the dirs to keep.
struct Env {
    host: Host,
    _dirs: [tempfile::TempDir; 3],
}

impl Env {
    fn ws(&self) -> &Path {
        &self.host.config().sessions.workspace
    }

    /// Sessions the host has, any owner.
    fn sessions(&self) -> usize {
        self.host.sessions().list(&Caller::Host).len()
    }
}

async fn env(exec: &str, policy: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), HOSTILE).unwrap();
    std::fs::write(
        dir.path().join("hostile.toml"),
        format!("id = \"hostile\"\ncontract = \"0.1.0\"\n{exec}"),
    )
    .unwrap();
    let (ws, state) = dirs();
    use_cache(state.path());
    let mut config = HostConfig::new(ws.path().to_path_buf(), state.path().to_path_buf());
    config.plugins = vec![dir.path().join("hostile.wasm")];
    config.policy_rules = policy.to_string();
    let host = Host::new(config)
        .await
        .expect("host with the hostile plugin");
    Env {
        host,
        _dirs: [dir, ws, state],
    }
}

async fn exec(env: &Env, args: serde_json::Value) -> ToolResult {
    env.host
        .call_tool("exec", args)
        .await
        .expect("the exec tool answers")
}

/// The session id in an `ok: "bg_…"` answer.
fn started(out: &ToolResult) -> String {
    assert!(!out.is_error, "{}", out.text());
    let text = out.text();
    let id = text
        .strip_prefix("ok: \"")
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or_else(|| panic!("not a session id: {}", out.text()));
    assert!(id.starts_with("bg_"), "{id}");
    id.to_string()
}

/// Asserts a `denied` answer holding every one of `parts`.
fn assert_denied(out: &ToolResult, parts: &[&str]) {
    assert!(out.is_error, "{}", out.text());
    assert!(
        out.text().starts_with("err: SessionError::Denied("),
        "{}",
        out.text()
    );
    for p in parts {
        assert!(out.text().contains(p), "{p:?} not in {}", out.text());
    }
}

/// A script that writes `marker` when run, and the marker's path.
fn marker_script(ws: &Path, name: &str) -> (PathBuf, PathBuf) {
    let marker = ws.join(format!("{name}.marker"));
    let script = ws.join(format!("{name}.sh"));
    std::fs::write(&script, format!("touch {}\n", marker.display())).unwrap();
    (script, marker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_names_outside_the_allowlist_are_denied_by_the_manifest() {
    let env = env("exec = [\"sleep *\"]\n", ALLOW_ALL).await;
    let ws = env.ws().to_path_buf();
    let (script, marker) = marker_script(&ws, "pwned");
    // A `sleep` earlier on PATH that writes the marker.
    std::fs::create_dir(ws.join("bin")).unwrap();
    let fake = ws.join("bin/sleep");
    std::fs::write(&fake, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = script.display().to_string();
    let touch = format!("() {{ touch {}; }}", marker.display());
    let cases: &[(&str, String)] = &[
        ("BASH_ENV", script.clone()),
        ("ENV", script.clone()),
        ("LD_PRELOAD", ws.join("evil.so").display().to_string()),
        ("LD_LIBRARY_PATH", ws.display().to_string()),
        (
            "PATH",
            format!("{}:/usr/bin:/bin", ws.join("bin").display()),
        ),
        ("IFS", "e".into()),
        ("PS4", format!("$(touch {})", marker.display())),
        ("SHELLOPTS", "xtrace".into()),
        ("BASHOPTS", "extdebug".into()),
        ("PROMPT_COMMAND", format!("touch {}", marker.display())),
        ("GLOBIGNORE", "*".into()),
        ("CDPATH", ws.display().to_string()),
        ("HOME", ws.display().to_string()),
        ("PAGER", script.clone()),
        ("GIT_SSH_COMMAND", script.clone()),
    ];
    for (name, value) in cases {
        let out = exec(
            &env,
            serde_json::json!({"command": "sleep 0", "env": [[name, value]]}),
        )
        .await;
        assert_denied(
            &out,
            &[
                "denied by manifest",
                &format!("environment variable `{name}`"),
                &format!("grant it with `exec_env = [\\\"{name}\\\"]`"),
            ],
        );
    }
    // An exported bash function named like the granted program: no `exec_env`
    // entry can even name it.
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "env": [["BASH_FUNC_sleep%%", touch]]}),
    )
    .await;
    assert_denied(
        &out,
        &[
            "denied by manifest",
            "`BASH_FUNC_sleep%%`",
            "no `exec_env` entry can name it",
        ],
    );
    // One bad name among safe ones is enough.
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "env": [["LANG", "C"], ["BASH_ENV", script]]}),
    )
    .await;
    assert_denied(&out, &["`BASH_ENV`"]);
    // Nothing was started, so nothing could write the marker.
    assert_eq!(env.sessions(), 0);
    assert!(!marker.exists());
    // The safe default set passes.
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "env": [["LANG", "C"], ["LC_ALL", "C"], ["TZ", "UTC"], ["NO_COLOR", "1"]]}),
    )
    .await;
    started(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_env_grant_lets_exactly_those_names_through() {
    let env = env(
        "exec = [\"printenv *\"]\nexec_env = [\"HOSTILE_*\", \"EXTRA\"]\n",
        ALLOW_ALL,
    )
    .await;
    let out = exec(
        &env,
        serde_json::json!({
            "command": "printenv HOSTILE_MODE EXTRA LANG",
            "env": [["HOSTILE_MODE", "granted-value"], ["EXTRA", "x"], ["LANG", "C"]],
            "tool_call_id": null,
        }),
    )
    .await;
    let id = started(&out);
    let exit = env.host.sessions().wait(&Caller::Host, &id).await.unwrap();
    assert_eq!(exit.code, Some(0), "{exit:?}");
    let snap = env.host.sessions().check(&Caller::Host, &id).unwrap();
    assert_eq!(snap.output_tail, "granted-value\nx\nC\n");
    let out = exec(
        &env,
        serde_json::json!({"command": "printenv", "env": [["EXTRA2", "x"]]}),
    )
    .await;
    assert_denied(&out, &["`EXTRA2`", "exec_env = [\\\"EXTRA2\\\"]"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_the_manifest_does_not_grant_is_denied() {
    let env = env("exec = [\"sleep *\"]\n", ALLOW_ALL).await;
    for shell in ["/bin/bash", "/usr/bin/env"] {
        let out = exec(
            &env,
            serde_json::json!({"command": "sleep 0", "shell": shell}),
        )
        .await;
        assert_denied(
            &out,
            &[
                "denied by manifest",
                &format!("does not grant the shell `{shell}`"),
                &format!("exec_shells = [\\\"{shell}\\\"]"),
            ],
        );
    }
    assert_eq!(env.sessions(), 0);
    // Granted, bash runs the command; bash's environment hooks stay closed.
    let env = env_with_bash().await;
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "shell": "/bin/bash"}),
    )
    .await;
    started(&out);
    let (script, marker) = marker_script(env.ws(), "bash-env");
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "shell": "/bin/bash",
            "env": [["BASH_ENV", script.display().to_string()]]}),
    )
    .await;
    assert_denied(&out, &["`BASH_ENV`"]);
    assert_eq!(env.sessions(), 1);
    assert!(!marker.exists());
}

async fn env_with_bash() -> Env {
    env(
        "exec = [\"sleep *\"]\nexec_shells = [\"/bin/bash\"]\n",
        ALLOW_ALL,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_fed_to_a_shell_is_denied_under_a_pattern_grant() {
    let env = env(
        "exec = [\"sh\", \"python3\", \"cat\"]\nexec_stdin = [\"cat\"]\n",
        ALLOW_ALL,
    )
    .await;
    let marker = env.ws().join("stdin.marker");
    let script = format!("touch {}\n", marker.display());
    for (command, stdin) in [
        ("sh", serde_json::json!({"stdin": script})),
        ("sh", serde_json::json!({"stdin_open": true})),
        ("python3", serde_json::json!({"stdin": "open('x','w')"})),
    ] {
        let mut args = stdin;
        args["command"] = command.into();
        let out = exec(&env, args).await;
        assert_denied(
            &out,
            &[
                "denied by manifest",
                &format!("feeds stdin to `{command}`"),
                "no `exec_stdin` entry grants this",
            ],
        );
    }
    assert_eq!(env.sessions(), 0);
    assert!(!marker.exists());
    // Data for a program `exec_stdin` grants is fine, and so is `sh` with
    // stdin closed (what the grant's text says).
    let out = exec(
        &env,
        serde_json::json!({"command": "cat", "stdin": "data", "tool_call_id": null}),
    )
    .await;
    let id = started(&out);
    env.host.sessions().wait(&Caller::Host, &id).await.unwrap();
    let snap = env.host.sessions().check(&Caller::Host, &id).unwrap();
    assert_eq!(snap.output_tail, "data");
    let out = exec(&env, serde_json::json!({"command": "sh"})).await;
    started(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_judges_env_names_and_the_shell_even_under_everything() {
    // `**` passes the manifest step with any env and shell; the default
    // policy allows `sleep *`, but not with these.
    let env = env("exec = [\"**\"]\n", "").await;
    let (script, marker) = marker_script(env.ws(), "policy");
    let script = script.display().to_string();
    for (name, value) in [
        ("BASH_ENV", script.as_str()),
        ("LD_PRELOAD", "/nonexistent.so"),
        ("BASH_FUNC_sleep%%", "() { touch x; }"),
        ("PATH", "/tmp"),
    ] {
        let out = exec(
            &env,
            serde_json::json!({"command": "sleep 0", "shell": "/bin/bash", "env": [[name, value]]}),
        )
        .await;
        assert_denied(
            &out,
            &[
                "no approver is available",
                &format!("the request sets the environment variable `{name}`"),
                "run other code",
            ],
        );
    }
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "shell": "/usr/bin/env"}),
    )
    .await;
    assert_denied(
        &out,
        &[
            "no approver is available",
            "runs under `/usr/bin/env`, not a shell the policy knows",
        ],
    );
    assert_eq!(env.sessions(), 0);
    assert!(!marker.exists());
    // The same command under bash with no env runs (the built-in bash path).
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "shell": "/bin/bash", "env": [["LANG", "C"]]}),
    )
    .await;
    started(&out);
    // An allow-all policy still asks about code-running names.
    let env = self::env("exec = [\"**\"]\n", ALLOW_ALL).await;
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "env": [["LD_PRELOAD", "/x.so"]]}),
    )
    .await;
    assert_denied(&out, &["no approver is available", "`LD_PRELOAD`"]);
    let out = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "env": [["MY_TOOL_MODE", "x"]]}),
    )
    .await;
    started(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_id_is_the_calls_own_or_none() {
    let env = env("exec = [\"sleep *\"]\n", ALLOW_ALL).await;
    // Another call in progress: the built-in bash tool running `sleep 30`.
    let bash_args = serde_json::json!({"command": "sleep 30"});
    let bash = env.host.call_tool("bash", bash_args);
    let attack = async {
        let deadline = Instant::now() + Duration::from_secs(20);
        let victim = loop {
            let running = env.host.running_calls();
            let sessions = env.host.sessions().list(&Caller::Host);
            if let (Some(call), false) = (running.first(), sessions.is_empty()) {
                break call.tool_call_id.clone();
            }
            assert!(Instant::now() < deadline, "the bash call never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let out = exec(
            &env,
            serde_json::json!({"command": "sleep 0", "tool_call_id": victim}),
        )
        .await;
        let sessions = env.host.sessions().list(&Caller::Host);
        assert!(env.host.cancel_call(&victim));
        (victim, out, sessions)
    };
    let (bash, (victim, forged, sessions)) = tokio::join!(bash, attack);
    assert!(bash.is_err(), "the bash call was cancelled: {bash:?}");
    assert!(forged.is_error, "{}", forged.text());
    assert!(
        forged
            .text()
            .starts_with("err: SessionError::InvalidRequest(")
            && forged
                .text()
                .contains(&format!("tool-call-id `{victim}` is not this call's id")),
        "{}",
        forged.text()
    );
    // Only the bash call's own process is attributed to it.
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    for forged_id in ["tc_000000000999", ""] {
        let out = exec(
            &env,
            serde_json::json!({"command": "sleep 0", "tool_call_id": forged_id}),
        )
        .await;
        assert!(
            out.text().starts_with("err: SessionError::InvalidRequest("),
            "{}",
            out.text()
        );
    }
    assert_eq!(env.sessions(), 1);
    // Its own id (the tool passes `call.tool_call_id` when none is given) and
    // none (a background session) are accepted.
    let own = exec(&env, serde_json::json!({"command": "sleep 0"})).await;
    let own = started(&own);
    let snap = env.host.sessions().check(&Caller::Host, &own).unwrap();
    assert!(
        snap.tool_call_id
            .as_deref()
            .is_some_and(|id| id.starts_with("tc_") && id != victim),
        "{snap:?}"
    );
    let bg = exec(
        &env,
        serde_json::json!({"command": "sleep 0", "tool_call_id": null}),
    )
    .await;
    let bg = started(&bg);
    let snap = env.host.sessions().check(&Caller::Host, &bg).unwrap();
    assert_eq!(snap.tool_call_id, None);
}

/// The old stdin rule was a list of programs that run stdin; these ran code
/// under plain pattern grants anyway. Now stdin needs `exec_stdin`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_needs_an_exec_stdin_grant_under_a_pattern_grant() {
    let env = env(
        "exec = [\"make test *\", \"awk *\", \"rbash\", \"wc -l\", \"printenv *\"]\n\
         exec_stdin = [\"wc -l\"]\n",
        ALLOW_ALL,
    )
    .await;
    let marker = env.ws().join("stdin.marker");
    let makefile = format!("test:\n\ttouch {}\n", marker.display());
    let awk = format!("BEGIN {{ system(\"touch {}\") }}\n", marker.display());
    let touch = format!("touch {}\n", marker.display());
    for (command, stdin) in [
        ("make test -f -", serde_json::json!({"stdin": makefile})),
        ("make test -f -", serde_json::json!({"stdin_open": true})),
        ("awk -f /dev//stdin", serde_json::json!({"stdin": awk})),
        ("awk -f/dev/stdin", serde_json::json!({"stdin": awk})),
        ("awk -f /proc/self/fd//0", serde_json::json!({"stdin": awk})),
        ("awk -f /dev/fd/./0", serde_json::json!({"stdin": awk})),
        (
            "awk -f /proc/thread-self/fd/0",
            serde_json::json!({"stdin": awk}),
        ),
        ("rbash", serde_json::json!({"stdin": touch})),
        ("make test", serde_json::json!({"stdin": makefile})),
    ] {
        let mut args = stdin;
        args["command"] = command.into();
        args["tool_call_id"] = serde_json::Value::Null;
        let out = exec(&env, args).await;
        assert_denied(&out, &["denied by manifest", "exec_stdin"]);
    }
    // A program that does not run stdin still needs the grant, and the
    // refusal says which entry to add.
    let out = exec(
        &env,
        serde_json::json!({"command": "awk -F: -f prog.awk", "stdin": "a:b\n"}),
    )
    .await;
    assert_denied(
        &out,
        &[
            "does not let this command read stdin",
            "exec_stdin = [\\\"awk -F: -f prog.awk\\\"]",
        ],
    );
    assert_eq!(env.sessions(), 0);
    assert!(!marker.exists());
    // `exec_stdin = ["wc -l"]`: `wc -l` reads what it is fed.
    let out = exec(
        &env,
        serde_json::json!({"command": "wc -l", "stdin": "a\nb\nc\n", "tool_call_id": null}),
    )
    .await;
    let id = started(&out);
    let exit = env.host.sessions().wait(&Caller::Host, &id).await.unwrap();
    assert_eq!(exit.code, Some(0), "{exit:?}");
    let snap = env.host.sessions().check(&Caller::Host, &id).unwrap();
    assert_eq!(snap.output_tail.trim(), "3");
    assert!(!marker.exists());
}

/// The safe default names keep plain values only: glibc loads a locale from
/// an absolute path, and `TZ=/path` parses a file the plugin wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safe_env_names_keep_plain_values_only() {
    let env = env("exec = [\"printenv *\"]\n", ALLOW_ALL).await;
    for (name, value) in [
        ("LC_ALL", "/tmp/x"),
        ("LANG", "/x"),
        ("LC_CTYPE", "../../tmp/x"),
        ("TZ", "/tmp/zone"),
        ("TZ", ":/tmp/zone"),
        ("COLUMNS", "80; id"),
    ] {
        let out = exec(
            &env,
            serde_json::json!({"command": "printenv", "env": [[name, value]]}),
        )
        .await;
        assert_denied(
            &out,
            &[
                "denied by manifest",
                &format!("value of the environment variable `{name}`"),
                &format!("exec_env = [\\\"{name}\\\"]"),
            ],
        );
    }
    assert_eq!(env.sessions(), 0);
    let out = exec(
        &env,
        serde_json::json!({
            "command": "printenv LC_ALL TZ",
            "env": [["LC_ALL", "C.UTF-8"], ["TZ", "America/New_York"]],
            "tool_call_id": null,
        }),
    )
    .await;
    let id = started(&out);
    let exit = env.host.sessions().wait(&Caller::Host, &id).await.unwrap();
    assert_eq!(exit.code, Some(0), "{exit:?}");
    let snap = env.host.sessions().check(&Caller::Host, &id).unwrap();
    assert_eq!(snap.output_tail, "C.UTF-8\nAmerica/New_York\n");
    // A name `exec_env` grants keeps any value: the operator chose it.
    let env = self::env(
        "exec = [\"printenv *\"]\nexec_env = [\"LC_ALL\"]\n",
        ALLOW_ALL,
    )
    .await;
    let out = exec(
        &env,
        serde_json::json!({"command": "printenv LC_ALL", "env": [["LC_ALL", "/tmp/x"]], "tool_call_id": null}),
    )
    .await;
    let id = started(&out);
    env.host.sessions().wait(&Caller::Host, &id).await.unwrap();
    let snap = env.host.sessions().check(&Caller::Host, &id).unwrap();
    assert_eq!(snap.output_tail, "/tmp/x\n");
}

/// Both must agree: a manifest that does not ask for UNIX sockets keeps them
/// blocked under `--allow-unix-sockets`, and one that asks gets them only with it.
#[test]
fn the_manifest_and_the_operator_must_both_grant_unix_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let parse = |extra: &str| {
        let text = format!("id = \"p\"\ncontract = \"0.1.0\"\n{extra}");
        Manifest::parse(&text, Path::new("p.toml"), dir.path(), &|_| None).unwrap()
    };
    let operator = |unix_sockets| SandboxPolicy {
        unix_sockets,
        ..SandboxPolicy::default()
    };
    let silent = parse("");
    assert!(!silent.unix_sockets);
    assert_eq!(silent.to_json()["unix_sockets"], false);
    let asks = parse("unix_sockets = true\n");
    assert!(asks.unix_sockets);
    assert_eq!(asks.to_json()["unix_sockets"], true);
    for (manifest, op, want) in [
        (&silent, true, false),
        (&asks, false, false),
        (&asks, true, true),
    ] {
        let combined = manifest.sandbox_policy().stricter(&operator(op));
        assert_eq!(combined.unix_sockets, want, "{combined:?}");
    }
    // The network grant never implies it.
    let network_only = parse("network = true\n");
    let combined = network_only.sandbox_policy().stricter(&SandboxPolicy {
        network: true,
        unix_sockets: true,
        ..SandboxPolicy::default()
    });
    assert!(combined.network && !combined.unix_sockets, "{combined:?}");
    assert!(toolhost_runtime::bash_manifest().unix_sockets);
}
