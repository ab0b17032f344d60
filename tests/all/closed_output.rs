//! A CLI command whose stdout is a closed pipe (`toolhost call … | true`) ends
//! as any failed command does (docs/cli.md#exit-codes-of-toolhost-call): exit 74, the
//! reason on stderr, no panic, and its cleanup done (what the call left
//! running is ended).

use std::process::{Command, Output, Stdio};

use crate::support::describe;

/// `toolhost ARGS` with stdout the write end of a pipe whose read end is
/// already closed (every write to it fails with `EPIPE`).
fn with_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .env_remove("TOOLHOST_LOG")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("running toolhost")
}

const CLOSED: &str = "toolhost: cannot write to stdout: Broken pipe (os error 32); the command ran to its end, its output is lost\n";

#[test]
fn a_closed_stdout_is_exit_74_with_the_reason_and_the_call_still_cleans_up() {
    let (ws, state) = crate::support::dirs();
    let policy = crate::support::allow_all_policy(state.path());
    let dirs = [
        "--workspace",
        ws.path().to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    // A command the call leaves running (moved to the background after 1 s,
    // its pid written by then): the call's cleanup ends it.
    let mut call = vec![
        "call",
        "bash",
        r#"{"command":"echo $$ > bg.pid; exec sleep 300","yield_ms":1000}"#,
        "--policy",
        &policy,
    ];
    call.extend(dirs);
    let out = with_closed_stdout(&call);
    assert_eq!(out.status.code(), Some(74), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), CLOSED);
    let pid = std::fs::read_to_string(ws.path().join("bg.pid")).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let state_field = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    assert!(
        matches!(state_field, None | Some("Z" | "X")),
        "the background command still runs: {stat}"
    );

    // Every other command that prints on stdout, the same way.
    let state_only = ["--state-dir", state.path().to_str().unwrap()];
    let mut tools = vec!["tools"];
    tools.extend(dirs);
    let mut tools_json = vec!["tools", "--json"];
    tools_json.extend(dirs);
    let mut host_sessions = vec!["host-sessions"];
    host_sessions.extend(state_only);
    let mut gc = vec!["gc"];
    gc.extend(state_only);
    let mut list = vec!["plugin", "list"];
    list.extend(state_only);
    for args in [tools, tools_json, host_sessions, gc, list] {
        let out = with_closed_stdout(&args);
        assert_eq!(out.status.code(), Some(74), "{args:?}: {}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stderr), CLOSED, "{args:?}");
    }
}
