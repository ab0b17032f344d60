//! The exec sandbox end to end (ARCHITECTURE.md, "Sandbox"): real commands through the
//! `toolhost` binary and the embedded bash plugin, under the default
//! `workspace-write` sandbox, `read-only`, `full-access` and `--allow-network`.
//!
//! Every test checks what the kernel did (files that do or do not exist
//! afterwards), not only what the command printed.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

use crate::support::{allow_all_config, allow_all_policy, describe, dirs, stdout, toolhost};

/// `toolhost call bash {"command": COMMAND} EXTRA...`.
fn bash(ws: &Path, state: &Path, command: &str, extra: &[&str]) -> Output {
    let args = serde_json::json!({ "command": command }).to_string();
    // These tests are about the kernel sandbox, not the policy: allow every command.
    let policy = allow_all_policy(state);
    let mut all = vec!["call", "bash", args.as_str(), "--policy", policy.as_str()];
    all.extend_from_slice(extra);
    toolhost(ws, state, &all)
}

/// Same with `--json`: the parsed `{text, structured, is_error}`.
fn bash_json(ws: &Path, state: &Path, command: &str, extra: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(extra);
    let out = bash(ws, state, command, &all);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)))
}

fn have(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn echo_prints_exactly_hi_under_the_default_sandbox() {
    let (ws, state) = dirs();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", r#"{"command":"echo hi"}"#],
    );
    assert_eq!(out.stdout, b"hi\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", describe(&out));
}

#[test]
fn everyday_commands_still_work_under_the_default_sandbox() {
    let (ws, state) = dirs();
    let script = r#"set -e
echo discarded > /dev/null
printf 'b\na\n' | sort | head -n 1
( : > /dev/tty ) 2>/dev/null && echo have-tty || echo no-tty
f=$(mktemp)
echo in-temp > "$f"
cat "$f"
case "$f" in "$TMPDIR"/*) echo mktemp-uses-TMPDIR ;; esac
echo made > made.txt
mkdir -p sub/dir && echo nested > sub/dir/f && cat sub/dir/f
rm made.txt && echo removed"#;
    let out = bash(ws.path(), state.path(), script, &[]);
    assert_eq!(
        stdout(&out),
        "a\nno-tty\nin-temp\nmktemp-uses-TMPDIR\nnested\nremoved\n",
        "{}",
        describe(&out)
    );
    assert_eq!(out.status.code(), Some(0));
    // TMPDIR is the session's private temp dir inside the state dir.
    let v = bash_json(ws.path(), state.path(), "printf %s \"$TMPDIR\"", &[]);
    let tmpdir = v["text"].as_str().unwrap();
    let session = v["structured"]["session_id"].as_str().unwrap();
    let expected = state
        .path()
        .canonicalize()
        .unwrap()
        .join(format!("sessions/{session}/tmp"));
    assert_eq!(Path::new(tmpdir), expected, "{v}");
}

#[test]
fn python_and_git_work_under_the_default_sandbox() {
    let (ws, state) = dirs();
    if have("python3") {
        let out = bash(
            ws.path(),
            state.path(),
            "python3 -c 'import tempfile; print(6 * 7); tempfile.TemporaryFile().write(b\"x\")'",
            &[],
        );
        assert_eq!(stdout(&out), "42\n", "{}", describe(&out));
    }
    if have("git") {
        let git = |args: &[&str]| {
            let st = std::process::Command::new("git")
                .args(args)
                .current_dir(ws.path())
                .status()
                .unwrap();
            assert!(st.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(ws.path().join("tracked.txt"), "v1\n").unwrap();
        git(&["add", "tracked.txt"]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "init",
        ]);
        std::fs::write(ws.path().join("tracked.txt"), "v2\n").unwrap();
        let out = bash(
            ws.path(),
            state.path(),
            "git status --short && git log --oneline | wc -l && git diff --stat | tail -n 1",
            &[],
        );
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.contains(&" M tracked.txt") && lines.contains(&"1"),
            "{}",
            describe(&out)
        );
        assert!(text.contains("1 file changed"), "{}", describe(&out));
    }
}

#[test]
fn writes_outside_the_workspace_are_refused_unless_full_access() {
    let (ws, state) = dirs();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped");
    let command = format!("touch '{}'", target.display());

    let out = bash(ws.path(), state.path(), &command, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(!target.exists(), "the default sandbox let a write out");
    let text = stdout(&out);
    assert!(text.contains("Permission denied"), "{text}");
    // The result names the rule and the escalation.
    assert!(
        text.contains("[sandbox denial (likely): writes outside")
            && text
                .contains("workspace-write sandbox; ask the operator for --sandbox full-access]"),
        "{text}"
    );

    // The output log keeps the command's own bytes only.
    let log =
        std::fs::read_to_string(state.path().join("sessions/bg_000000000001/output.log")).unwrap();
    assert_eq!(
        log,
        format!(
            "touch: cannot touch '{}': Permission denied\n",
            target.display()
        )
    );

    // Structured content: the sandbox and the denial.
    let v = bash_json(ws.path(), state.path(), &command, &[]);
    assert_eq!(v["is_error"], true, "{v}");
    let sandbox = v["structured"]["sandbox"].as_str().unwrap();
    assert!(sandbox.starts_with("workspace-write ("), "{v}");
    assert!(
        v["structured"]["sandbox_denial"]
            .as_str()
            .unwrap()
            .contains("workspace-write sandbox"),
        "{v}"
    );

    let out = bash(
        ws.path(),
        state.path(),
        &command,
        &["--sandbox", "full-access"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(target.exists(), "full-access must not confine");
    let v = bash_json(
        ws.path(),
        state.path(),
        "true",
        &["--sandbox", "full-access"],
    );
    assert_eq!(
        v["structured"]["sandbox"], "full-access (no confinement)",
        "{v}"
    );
}

#[test]
fn cd_to_root_and_touch_is_refused_by_the_kernel() {
    let (ws, state) = dirs();
    let name = format!("toolhost-sandbox-test-{}", std::process::id());
    let out = bash(
        ws.path(),
        state.path(),
        &format!("cd / && touch {name}"),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(!Path::new("/").join(&name).exists());
    assert!(
        stdout(&out).contains("Permission denied"),
        "{}",
        describe(&out)
    );
    assert!(
        stdout(&out).contains("[sandbox denial (likely)"),
        "{}",
        describe(&out)
    );
}

#[test]
fn git_dir_is_read_only_in_workspace_write() {
    let (ws, state) = dirs();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let out = bash(
        ws.path(),
        state.path(),
        "echo '[evil]' >> .git/config; touch .git/hooks-pre-commit; touch beside-git && echo workspace-ok",
        &[],
    );
    let text = stdout(&out);
    assert!(text.contains("Read-only file system"), "{}", describe(&out));
    assert!(text.contains("workspace-ok"), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!ws.path().join(".git/hooks-pre-commit").exists());
    assert!(ws.path().join("beside-git").exists());

    // A failing write to .git names that rule.
    let out = bash(ws.path(), state.path(), "touch .git/x", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stdout(&out).contains("/.git is read-only under the workspace-write sandbox"),
        "{}",
        describe(&out)
    );
    let v = bash_json(ws.path(), state.path(), "true", &[]);
    assert!(
        v["structured"]["sandbox"]
            .as_str()
            .unwrap()
            .contains(".git read-only"),
        "{v}"
    );
}

#[test]
fn a_symlink_in_the_workspace_does_not_open_a_write_path_outside() {
    let (ws, state) = dirs();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("f"), ws.path().join("file-link")).unwrap();
    let out = bash(
        ws.path(),
        state.path(),
        "echo x > link/created; echo y > file-link; mkdir link/dir; ls link >/dev/null && echo readable",
        &[],
    );
    let text = stdout(&out);
    assert!(text.contains("Permission denied"), "{}", describe(&out));
    assert!(text.contains("readable"), "{}", describe(&out));
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "something was written through the symlink"
    );
}

/// Listens on a loopback port and answers one connection with `pong`.
fn loopback_listener() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    use std::io::Write;
                    let _ = stream.write_all(b"pong");
                    let mut sink = Vec::new();
                    let _ = stream.read_to_end(&mut sink);
                    return;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    });
    (port, handle)
}

#[test]
fn network_is_blocked_unless_allowed() {
    if !have("python3") {
        eprintln!("skipping: no python3");
        return;
    }
    let (ws, state) = dirs();
    let (port, server) = loopback_listener();
    let command = format!(
        "python3 -c 'import socket; s = socket.create_connection((\"127.0.0.1\", {port}), timeout=10); print(s.recv(4).decode())'"
    );
    let out = bash(ws.path(), state.path(), &command, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(text.contains("Operation not permitted"), "{text}");
    assert!(
        text.contains("[sandbox denial (likely): network is blocked by the sandbox")
            && text.contains("needs --allow-network]"),
        "{text}"
    );
    assert!(!text.contains("pong"), "{text}");

    let out = bash(ws.path(), state.path(), &command, &["--allow-network"]);
    assert_eq!(stdout(&out), "pong\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(0));
    server.join().unwrap();
    let v = bash_json(ws.path(), state.path(), "true", &["--allow-network"]);
    assert!(
        v["structured"]["sandbox"]
            .as_str()
            .unwrap()
            .contains("network allowed"),
        "{v}"
    );
}

#[test]
fn the_state_dir_is_not_writable_from_a_command() {
    // State dir outside the workspace: Landlock grants it nothing.
    let (ws, state) = dirs();
    let first = bash(ws.path(), state.path(), "echo first", &[]);
    assert_eq!(stdout(&first), "first\n");
    let log = state.path().join("sessions/bg_000000000001/output.log");
    // The next toolhost process reuses id bg_000000000001, so point at a copy
    // of an earlier session's directory.
    let other = state.path().join("sessions/bg_0000000000ff");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(&log, other.join("output.log")).unwrap();
    let out = bash(
        ws.path(),
        state.path(),
        &format!(
            "echo tampered >> '{}'; touch '{}'",
            other.join("output.log").display(),
            state.path().join("compiled/evil").display()
        ),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(other.join("output.log")).unwrap(),
        "first\n"
    );
    assert!(!state.path().join("compiled/evil").exists());
    assert!(stdout(&out).contains("is host state"), "{}", describe(&out));
}

#[test]
fn a_state_dir_inside_the_workspace_stays_read_only() {
    // State dir inside the workspace: bind-mounted read-only, the session's own
    // temp dir re-bound writable on top.
    let ws = tempfile::tempdir().unwrap();
    let state = ws.path().join(".toolhost-state");
    let first = bash(ws.path(), &state, "echo first", &[]);
    assert_eq!(stdout(&first), "first\n", "{}", describe(&first));
    let other = state.join("sessions/bg_0000000000ff");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("output.log"), "first\n").unwrap();
    let out = bash(
        ws.path(),
        &state,
        "echo tampered >> .toolhost-state/sessions/bg_0000000000ff/output.log; \
         touch .toolhost-state/compiled/evil; \
         echo t > \"$TMPDIR/ok\" && cat \"$TMPDIR/ok\"; touch in-workspace && echo ws-ok",
        &[],
    );
    let text = stdout(&out);
    assert!(text.contains("Read-only file system"), "{}", describe(&out));
    // stdout and stderr chunks interleave in arrival order: check lines.
    assert!(text.lines().any(|l| l == "t"), "{}", describe(&out));
    assert!(text.lines().any(|l| l == "ws-ok"), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(other.join("output.log")).unwrap(),
        "first\n"
    );
    assert!(!state.join("compiled/evil").exists());
    assert!(ws.path().join("in-workspace").exists());
}

#[test]
fn read_only_mode_refuses_workspace_writes() {
    let (ws, state) = dirs();
    let out = bash(
        ws.path(),
        state.path(),
        "cat /etc/hostname >/dev/null; echo readable; touch made",
        &["--sandbox", "read-only"],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(text.contains("readable\n"), "{text}");
    assert!(!ws.path().join("made").exists());
    assert!(
        text.contains(
            "[sandbox denial (likely): the read-only sandbox blocks all writes except /dev/null; \
             ask the operator for --sandbox workspace-write]"
        ),
        "{text}"
    );
    // The private temp dir is not writable either.
    let out = bash(
        ws.path(),
        state.path(),
        "echo x > \"$TMPDIR/f\"",
        &["--sandbox", "read-only"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[test]
fn a_failure_that_is_not_a_denial_gets_no_hint() {
    let (ws, state) = dirs();
    let out = bash(ws.path(), state.path(), "echo nope >&2; exit 4", &[]);
    let text = stdout(&out);
    assert_eq!(text, "nope\n\n[exit code 4]\n", "{}", describe(&out));
    let v = bash_json(ws.path(), state.path(), "cat missing-file", &[]);
    assert!(v["structured"].get("sandbox_denial").is_none(), "{v}");
}

#[test]
fn sandbox_flags_are_validated_and_reported() {
    let (ws, state) = dirs();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "bash", "{}", "--sandbox", "none"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("read-only, workspace-write or full-access"),
        "{}",
        describe(&out)
    );
    let out = toolhost(ws.path(), state.path(), &["tools"]);
    assert!(
        stdout(&out).contains("commands run under: workspace-write ("),
        "{}",
        describe(&out)
    );
    let out = toolhost(
        ws.path(),
        state.path(),
        &["tools", "--sandbox", "full-access"],
    );
    assert!(
        stdout(&out).contains("commands run under: full-access (no confinement)"),
        "{}",
        describe(&out)
    );
}

/// Through the library [`toolhost_runtime::Host`]: a background task refused by the
/// sandbox gets the hint when `bash_output` reports its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_denial_is_reported_by_bash_output() {
    let (ws, state) = dirs();
    let outside = tempfile::tempdir().unwrap();
    let host = toolhost_runtime::Host::new(allow_all_config(ws.path(), state.path()))
        .await
        .unwrap();
    let command = format!("touch '{}/x'", outside.path().display());
    let started = host
        .call_tool(
            "bash",
            &serde_json::json!({ "command": command, "run_in_background": true }),
        )
        .await
        .unwrap();
    assert!(!started.is_error, "{started:?}");
    assert!(!started.text.contains("sandbox denial"), "{started:?}");
    let id = started.structured.as_ref().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = host
        .call_tool(
            "bash_output",
            &serde_json::json!({ "session_id": id, "wait_ms": 10_000 }),
        )
        .await
        .unwrap();
    assert!(result.is_error, "{result:?}");
    assert!(
        result
            .text
            .contains("workspace-write sandbox; ask the operator for --sandbox full-access]"),
        "{result:?}"
    );
    assert!(!outside.path().join("x").exists());
}

/// [`toolhost_process::Sessions::start_with_policy`] can tighten the
/// operator's sandbox but never loosen it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_call_policy_only_tightens() {
    use toolhost_process::sandbox::{SandboxMode, SandboxPolicy};
    use toolhost_process::{Caller, Sessions, SessionsConfig, StartRequest};
    let (ws, state) = dirs();
    let sessions = Sessions::new(SessionsConfig::new(ws.path(), state.path())).unwrap();
    let run = |policy: SandboxPolicy, command: &'static str| {
        let sessions = sessions.clone();
        async move {
            let id = sessions
                .start_with_policy(&Caller::Host, StartRequest::new(command), &policy)
                .await
                .unwrap();
            let mut sub = sessions.subscribe(&Caller::Host, &id, 1).unwrap();
            while sessions.check(&Caller::Host, &id).unwrap().exit.is_none() {
                sub.ready().await;
                sub.next(1024);
            }
            sessions.check(&Caller::Host, &id).unwrap()
        }
    };
    // Asking for full-access under the operator's workspace-write: still confined.
    let full = SandboxPolicy {
        mode: SandboxMode::FullAccess,
        network: true,
        git_writable: true,
    };
    let snap = run(full, "touch /toolhost-never-written").await;
    assert!(snap.sandbox.starts_with("workspace-write ("), "{snap:?}");
    assert!(snap.sandbox.contains("network blocked"), "{snap:?}");
    assert_eq!(snap.exit.unwrap().code, Some(1));
    assert!(!Path::new("/toolhost-never-written").exists());
    // Asking for read-only: tightened.
    let ro = SandboxPolicy {
        mode: SandboxMode::ReadOnly,
        ..SandboxPolicy::default()
    };
    let snap = run(ro, "touch made").await;
    assert!(snap.sandbox.starts_with("read-only ("), "{snap:?}");
    assert!(
        snap.sandbox_denial
            .as_deref()
            .is_some_and(|d| d.contains("read-only sandbox")),
        "{snap:?}"
    );
    assert!(!ws.path().join("made").exists());
}
