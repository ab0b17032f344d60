//! The `toolhost` binary end to end: real commands through the embedded,
//! sandboxed bash plugin, checked by stdout bytes and exit codes.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{allow_all_policy, dirs, stdout, toolhost};

#[test]
fn call_bash_echo_prints_output_and_exits_zero() {
    let (ws, state) = dirs();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", r#"{"command":"echo hello"}"#],
    );
    assert_eq!(
        stdout(&out),
        "hello\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn failing_command_prints_output_and_exit_code_and_exits_nonzero() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "bash",
            r#"{"command":"echo before; exit 3"}"#,
            "--policy",
            &policy,
        ],
    );
    let text = stdout(&out);
    assert!(text.starts_with("before\n"), "stdout: {text:?}");
    assert!(text.contains("exit code 3"), "stdout: {text:?}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn command_runs_in_the_workspace() {
    let (ws, state) = dirs();
    std::fs::write(ws.path().join("marker.txt"), "in the workspace\n").unwrap();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", r#"{"command":"cat marker.txt"}"#],
    );
    assert_eq!(stdout(&out), "in the workspace\n");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn unknown_tool_and_bad_json_are_usage_errors() {
    let (ws, state) = dirs();
    let out = toolhost(ws.path(), state.path(), &["call", "no_such_tool", "{}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown tool `no_such_tool`"));
    let out = toolhost(ws.path(), state.path(), &["call", "bash", "{not json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid JSON"));
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", r#"{"command": 5}"#],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid arguments for `bash`"));
}

#[test]
fn help_explains_itself() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("WebAssembly component host"), "{text}");
    assert!(text.contains("call"), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["call", "--help"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("toolhost call bash"), "{text}");
    assert!(text.contains("--workspace"), "{text}");
}

#[test]
fn second_start_loads_plugins_from_the_compiled_cache() {
    let (ws, state) = dirs();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", r#"{"command":"true"}"#],
    );
    assert_eq!(out.status.code(), Some(0));
    let compiled: Vec<_> = std::fs::read_dir(state.path().join("compiled"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        compiled.iter().filter(|n| n.ends_with(".cwasm")).count(),
        2,
        "{compiled:?}"
    );
}

/// A policy that denies `touch` and allows everything else.
const DENY_TOUCH: &str = "default = \"allow\"\ndeny = [\"touch *\"]\n";

#[test]
fn a_denied_command_leaves_no_trace_whatever_it_hides_behind() {
    let (ws, state) = dirs();
    let policy = state.path().join("policy.toml");
    std::fs::write(&policy, DENY_TOUCH).unwrap();
    let policy = policy.to_str().unwrap();
    for command in [
        "touch x",
        "echo a && touch x",
        "echo a; touch x",
        "echo a || touch x",
        "echo a | touch x",
        "echo $(touch x)",
        "echo `touch x`",
        "cat <(touch x)",
        "(touch x)",
        "{ touch x; }",
        "bash -c 'touch x'",
        "eval 'touch x'",
        "FOO=1 touch x",
        "env touch x",
        "timeout 5 touch x",
        "'to'uch x",
        "t\\ouch x",
        "echo a\ntouch x",
        "echo a & touch x",
        "xargs touch x",
    ] {
        let args = serde_json::json!({ "command": command }).to_string();
        let out = toolhost(
            ws.path(),
            state.path(),
            &["call", "bash", &args, "--policy", policy],
        );
        let text = stdout(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{command:?} was not refused: {text}"
        );
        assert!(text.contains("denied"), "{command:?}: {text}");
        assert!(
            !ws.path().join("x").exists(),
            "{command:?} created the file"
        );
    }
    // The same policy lets harmless commands through.
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "bash",
            r#"{"command":"echo fine"}"#,
            "--policy",
            policy,
        ],
    );
    assert_eq!(stdout(&out), "fine\n");
}

#[test]
fn without_an_approver_an_ask_is_denied_with_how_to_allow_it() {
    let (ws, state) = dirs();
    // The built-in default policy asks before `touch`; stdin is not a TTY here.
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", r#"{"command":"touch y"}"#],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("no approver is available"), "{text}");
    assert!(text.contains("--policy"), "{text}");
    assert!(!ws.path().join("y").exists());
    // Read-only commands of the default policy run unasked.
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", r#"{"command":"ls -a"}"#],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn a_malformed_policy_file_is_refused_at_start_with_its_line() {
    let (ws, state) = dirs();
    let policy = state.path().join("policy.toml");
    std::fs::write(
        &policy,
        "default = \"allow\"\nallow = [\"ls\"]\nfrobnicate = true\n",
    )
    .unwrap();
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "bash",
            r#"{"command":"true"}"#,
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("frobnicate"), "{err}");
}

/// Runs `toolhost call` under a pseudo-terminal (util-linux `script`), types
/// `early` at once (before any prompt can be on screen), then `answer` once
/// the permission prompt is drawn.
fn call_on_a_tty(
    ws: &Path,
    state: &Path,
    command: &str,
    early: &str,
    answer: &str,
) -> (Output, String) {
    call_on_a_tty_with(
        ws,
        state,
        serde_json::json!({ "command": command }),
        early,
        answer,
    )
}

/// [`call_on_a_tty`] with the bash tool's whole `args`.
fn call_on_a_tty_with(
    ws: &Path,
    state: &Path,
    args: serde_json::Value,
    early: &str,
    answer: &str,
) -> (Output, String) {
    use std::io::{Read, Write};
    let args = args.to_string();
    let inner = format!(
        "{} call bash '{}' --workspace {} --state-dir {}",
        env!("CARGO_BIN_EXE_toolhost"),
        args,
        ws.display(),
        state.display()
    );
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &inner, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("util-linux script");
    let mut keys = child.stdin.take().unwrap();
    keys.write_all(early.as_bytes()).unwrap();
    keys.flush().unwrap();
    let mut screen = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&seen)
        .replace('\r', "")
        .contains("[4] reject always\n> ")
    {
        let n = screen.read(&mut chunk).unwrap();
        assert!(n > 0, "no prompt: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&chunk[..n]);
    }
    keys.write_all(answer.as_bytes()).unwrap();
    keys.flush().unwrap();
    screen.read_to_end(&mut seen).unwrap();
    drop(keys);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&seen).replace('\r', "");
    (out, text)
}

#[test]
fn a_person_at_the_terminal_approves_or_rejects_an_ask() {
    let (ws, state) = dirs();
    let (out, text) = call_on_a_tty(ws.path(), state.path(), "touch approved", "", "1\n");
    assert!(text.contains("[1] allow once"), "{text}");
    assert!(
        text.contains("toolhost permission request #1: plugin `bash`, tool `bash`"),
        "{text}"
    );
    assert!(text.contains("\n  command: touch approved\n"), "{text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(ws.path().join("approved").exists(), "{text}");

    let (out, text) = call_on_a_tty(ws.path(), state.path(), "touch rejected", "", "3\n");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("reject_once"), "{text}");
    assert!(!ws.path().join("rejected").exists());
}

/// A key pressed before the prompt existed never answers it: `1` (allow
/// once) typed at once is discarded when the prompt is drawn, and the answer
/// typed after it, `3` (reject once), is the one taken.
#[test]
fn input_typed_before_the_terminal_prompt_is_discarded() {
    let (ws, state) = dirs();
    let (out, text) = call_on_a_tty(ws.path(), state.path(), "touch early", "1\n", "3\n");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("rejected by tty (reject_once)"), "{text}");
    assert!(!ws.path().join("early").exists(), "{text}");
}

/// A question nobody answers ends with its call's `timeout_ms`: the prompt
/// stops waiting, says it was withdrawn, and nothing runs.
#[test]
fn the_terminal_prompt_is_withdrawn_when_its_call_times_out() {
    let (ws, state) = dirs();
    let args = serde_json::json!({"command": "touch late", "timeout_ms": 500});
    let (out, text) = call_on_a_tty_with(ws.path(), state.path(), args, "", "");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("permission request #1 withdrawn: its call ended"),
        "{text}"
    );
    assert!(
        text.contains("not answered within the command's timeout (500 ms) and was withdrawn"),
        "{text}"
    );
    assert!(!ws.path().join("late").exists(), "{text}");
}

/// A `toolhost call` started as a background job of an interactive shell
/// (its own process group, not the terminal's foreground one), with `stty
/// tostop` set, is never stopped by job control (SIGTTIN, SIGTTOU): the TTY
/// approver does not ask, says why, rejects, and nothing runs; the job ends by
/// itself, exit 1.
#[test]
fn a_call_in_a_background_job_never_stops_and_says_it_cannot_ask() {
    use std::io::Read;
    let (ws, state) = dirs();
    let job = state.path().join("job.sh");
    std::fs::write(
        &job,
        "set -m\nstty tostop\n\
         \"$TOOLHOST\" call bash '{\"command\":\"touch from-background\"}' \
         --workspace \"$WS\" --state-dir \"$STATE\" &\n\
         wait $!\necho \"job exited $?\"\n",
    )
    .unwrap();
    let mut child = Command::new("script")
        .args([
            "-q",
            "-e",
            "-c",
            &format!("bash {}", job.display()),
            "/dev/null",
        ])
        .env("TOOLHOST", env!("CARGO_BIN_EXE_toolhost"))
        .env("WS", ws.path())
        .env("STATE", state.path())
        .env_remove("TOOLHOST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("util-linux script");
    // Nothing is typed: stdin stays open (and unused) until the job is over.
    let keys = child.stdin.take().unwrap();
    let mut screen = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let _ = screen.read_to_end(&mut seen);
        let _ = tx.send(seen);
    });
    let seen = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(seen) => seen,
        Err(_) => {
            let _ = child.kill();
            panic!("the background job did not end in 60 s: job control stopped the host");
        }
    };
    drop(keys);
    let _ = child.wait();
    let text = String::from_utf8_lossy(&seen).replace('\r', "");
    assert!(text.contains("job exited 1\n"), "{text}");
    assert!(
        text.contains(
            "toolhost runs in a background job of its terminal (not in the terminal's \
             foreground process group), where reading an answer would stop it. Permission \
             request #1 was rejected and nothing ran."
        ),
        "{text}"
    );
    assert!(!text.contains("[1] allow once"), "asked anyway: {text}");
    assert!(!ws.path().join("from-background").exists(), "{text}");
}

#[test]
fn a_restarted_host_never_reuses_a_session_id_or_its_log() {
    let (ws, state) = dirs();
    for word in ["one", "two"] {
        let args = serde_json::json!({ "command": format!("echo {word}") }).to_string();
        let out = toolhost(ws.path(), state.path(), &["call", "bash", &args]);
        assert_eq!(out.status.code(), Some(0));
    }
    let mut logs: Vec<(String, String)> = std::fs::read_dir(state.path().join("sessions"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let log = std::fs::read_to_string(e.path().join("output.log")).unwrap();
            (e.file_name().into_string().unwrap(), log)
        })
        .collect();
    logs.sort();
    assert_eq!(
        logs,
        vec![
            ("bg_000000000001".to_string(), "one\n".to_string()),
            ("bg_000000000002".to_string(), "two\n".to_string())
        ]
    );
}

/// Processes whose session id is `sid` (from /proc).
fn session_members(sid: u32) -> Vec<u32> {
    toolhost_process::group_members(sid)
}

#[test]
fn a_terminated_toolhost_takes_its_commands_down_with_it() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args([
            "call",
            "bash",
            r#"{"command":"echo $$ > pid; sleep 300; echo never"}"#,
        ])
        .args(["--policy", &policy, "--workspace"])
        .arg(ws.path())
        .arg("--state-dir")
        .arg(state.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = ws.path().join("pid");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let shell: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!session_members(shell).is_empty());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    // Every process of the command's session is gone (the sleep included).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !session_members(shell).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "survivors: {:?}",
            session_members(shell)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A `serve` that cannot start (a `--plugin` that is not WebAssembly, an HTTP
/// address already bound) prints why, exits 2, and leaves a host session whose
/// only lifecycle event is `failed` with that reason: none claims it served.
#[test]
fn a_serve_that_cannot_start_records_failed_with_the_reason_never_running() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = listener.local_addr().unwrap().to_string();
    let plugins = tempfile::tempdir().unwrap();
    let bad = plugins.path().join("bad.wasm");
    std::fs::write(&bad, "not a component").unwrap();
    let bad = bad.to_str().unwrap().to_string();
    for (args, what) in [
        (vec!["serve", "--plugin", &bad], "the host could not start"),
        (
            vec!["serve", "--http", &taken],
            "the HTTP listener could not start",
        ),
    ] {
        let (ws, state) = dirs();
        let out = toolhost(ws.path(), state.path(), &args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            crate::support::describe(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("toolhost: "))
            .unwrap_or_else(|| panic!("{args:?}: no reason on stderr: {stderr}"));
        let events = toolhost_test_support::host_log::events(state.path()).unwrap();
        let lifecycle: Vec<(&str, &str)> = events
            .iter()
            .filter(|e| e["kind"] == "lifecycle")
            .map(|e| (e["state"].as_str().unwrap(), e["message"].as_str().unwrap()))
            .collect();
        assert_eq!(
            lifecycle,
            [("failed", format!("{what}: {reason}").as_str())],
            "{args:?}"
        );
        let listed = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["host-sessions", "--json", "--state-dir"])
            .arg(state.path())
            .output()
            .unwrap();
        let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
        assert_eq!(listed[0]["host_session"]["state"], "failed", "{listed}");
    }
}

/// `call --json` prints a JSON result when the host fails the call (the
/// plugin traps, it hits a limit): `is_error`, the reason as the text, and
/// which failure. The plugin's first use compiles it, which stderr says.
#[test]
fn call_json_prints_a_result_when_the_plugin_traps() {
    let dir = crate::runtime_support::hostile_dir(None);
    let (ws, state) = dirs();
    let plugin = dir.path().join("hostile.wasm");
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "trap",
            "{}",
            "--json",
            "--plugin",
            plugin.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        crate::support::describe(&out)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = result["text"].as_str().unwrap();
    assert!(reason.starts_with("plugin `hostile` trapped: "), "{result}");
    assert_eq!(
        result,
        serde_json::json!({
            "text": reason,
            "structured": null,
            "is_error": true,
            "failure": {"kind": "trap", "reason": reason},
        })
    );
    // Its first use compiled it, and said so on stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "toolhost: compiling plugin `hostile` for this machine (its first use; Python and \
             JS plugins take 15-20 s; later starts load it from the cache)...\n"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("toolhost: compiled plugin `hostile` in "),
        "{stderr}"
    );
    // A limit: the same shape, naming which limit; the plugin now comes from
    // the cache, without a word about compiling.
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "recurse",
            "{}",
            "--json",
            "--plugin",
            plugin.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        crate::support::describe(&out)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = result["text"].as_str().unwrap();
    assert!(reason.contains("stack limit"), "{result}");
    assert_eq!(
        result,
        serde_json::json!({
            "text": reason,
            "structured": null,
            "is_error": true,
            "failure": {"kind": "limit", "reason": reason},
        })
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("compil"), "{stderr}");
}
