//! The `toolhost` binary end to end: real commands through the embedded,
//! sandboxed bash plugin, checked by stdout bytes and exit codes.

use std::path::Path;
use std::process::{Command, Output};

/// Runs the built `toolhost` binary with `args`, in a fresh workspace and
/// state dir unless the caller passes its own.
pub fn toolhost(workspace: &Path, state: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .arg("--workspace")
        .arg(workspace)
        .arg("--state-dir")
        .arg(state)
        .env_remove("TOOLHOST_LOG")
        .output()
        .expect("running toolhost")
}

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

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
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", r#"{"command":"echo before; exit 3"}"#],
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
