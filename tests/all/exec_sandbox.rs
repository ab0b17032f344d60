//! The exec sandbox end to end (docs/sandbox.md): real commands through the
//! `toolhost` binary and the embedded bash plugin, under the default
//! `workspace-write` sandbox, `read-only`, `full-access` and `--allow-network`.
//!
//! Every test checks what the kernel did (files that do or do not exist
//! afterwards), not only what the command printed.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

use crate::support::{allow_all_policy, describe, dirs, stdout, toolhost};

/// What a write outside the writable roots fails with: `EROFS` where the sandbox can
/// mount `/` read-only (checked before Landlock's `EACCES`), else `EACCES`.
fn outside_refusal() -> &'static str {
    if toolhost_process::probe_kernel().read_only_root {
        "Read-only file system"
    } else {
        "Permission denied"
    }
}

/// `toolhost call bash {"command": COMMAND} EXTRA...`.
pub(crate) fn bash(ws: &Path, state: &Path, command: &str, extra: &[&str]) -> Output {
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
    assert!(text.contains(outside_refusal()), "{text}");
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
            "touch: cannot touch '{}': {}\n",
            target.display(),
            outside_refusal()
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
        stdout(&out).contains(outside_refusal()),
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
    assert!(text.contains(outside_refusal()), "{}", describe(&out));
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
    // State dir outside the workspace: hidden (an empty read-only tmpfs over it), and
    // Landlock grants it nothing.
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
    assert!(
        stdout(&out).contains("No such file or directory"),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_state_dir_inside_the_workspace_stays_read_only() {
    // State dir inside the workspace: hidden under an empty read-only tmpfs, the
    // session's own temp dir bound back in, writable.
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
    assert!(
        text.contains("No such file or directory"),
        "{}",
        describe(&out)
    );
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
    // The private temp dir stays writable (see
    // `every_mode_has_a_writable_private_tmpdir`).
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

// ------------------------------------------------ ordinary programs, `.git`, hints

/// Python's `multiprocessing` locks are POSIX semaphores in `/dev/shm`.
#[test]
fn python_multiprocessing_locks_work_under_the_default_sandbox() {
    if !have("python3") {
        eprintln!("skipping: no python3");
        return;
    }
    let (ws, state) = dirs();
    let out = bash(
        ws.path(),
        state.path(),
        "python3 -c 'import multiprocessing as m; l=m.Lock(); l.acquire(); print(\"ok\")'",
        &[],
    );
    assert_eq!(out.stdout, b"ok\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn ptys_work_under_the_default_and_read_only_sandboxes() {
    let (ws, state) = dirs();
    for extra in [&[][..], &["--sandbox", "read-only"][..]] {
        if have("python3") {
            let out = bash(
                ws.path(),
                state.path(),
                "python3 -c 'import os,pty; m,s=os.openpty(); print(\"pty ok\")'",
                extra,
            );
            assert_eq!(out.stdout, b"pty ok\n", "{extra:?}: {}", describe(&out));
            assert_eq!(out.status.code(), Some(0));
        }
        if have("script") {
            let out = bash(
                ws.path(),
                state.path(),
                "script -qc true /dev/null && echo script-ok",
                extra,
            );
            assert_eq!(out.stdout, b"script-ok\n", "{extra:?}: {}", describe(&out));
            assert_eq!(out.status.code(), Some(0));
        }
    }
}

/// Each command gets its own `/dev/shm`: the host's is neither visible nor written, and
/// what one command leaves there is gone for the next.
#[test]
fn dev_shm_is_private_to_each_command() {
    let (ws, state) = dirs();
    let name = format!("toolhost-shm-test-{}", std::process::id());
    let host_shm = Path::new("/dev/shm");
    if !host_shm.is_dir() {
        eprintln!("skipping: no /dev/shm");
        return;
    }
    let host_file = host_shm.join(format!("{name}-host"));
    std::fs::write(&host_file, "host\n").unwrap();
    let out = bash(
        ws.path(),
        state.path(),
        &format!(
            "echo one > /dev/shm/{name} && cat /dev/shm/{name} && \
             if test -e /dev/shm/{name}-host; then echo sees-host; else echo host-hidden; fi"
        ),
        &[],
    );
    let _ = std::fs::remove_file(&host_file);
    assert_eq!(out.stdout, b"one\nhost-hidden\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !host_shm.join(&name).exists(),
        "the command wrote the host's /dev/shm"
    );
    let out = bash(
        ws.path(),
        state.path(),
        &format!("test -e /dev/shm/{name} && echo still-there || echo gone"),
        &[],
    );
    assert_eq!(out.stdout, b"gone\n", "{}", describe(&out));
    // Bounded: a command cannot fill the host's memory through /dev/shm.
    let out = bash(
        ws.path(),
        state.path(),
        "head -c 300M /dev/zero > /dev/shm/big; echo status $?; rm -f /dev/shm/big",
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("No space left on device"),
        "{}",
        describe(&out)
    );
    assert!(text.contains("status 1"), "{}", describe(&out));
}

#[test]
fn every_mode_has_a_writable_private_tmpdir() {
    let (ws, state) = dirs();
    for mode in ["read-only", "workspace-write", "full-access"] {
        let out = bash(
            ws.path(),
            state.path(),
            "echo x > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" && f=$(mktemp) && echo y > \"$f\" && cat \"$f\"",
            &["--sandbox", mode],
        );
        assert_eq!(out.stdout, b"x\ny\n", "{mode}: {}", describe(&out));
        assert_eq!(out.status.code(), Some(0), "{mode}");
    }
    // In read-only, a workspace write still fails, and the hint does not blame host state.
    let out = bash(
        ws.path(),
        state.path(),
        "echo x > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" && touch made",
        &["--sandbox", "read-only"],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(text.starts_with("x\n"), "{text}");
    assert!(!ws.path().join("made").exists());
    assert!(!text.contains("host state"), "{text}");
    assert!(
        text.contains("ask the operator for --sandbox workspace-write]"),
        "{text}"
    );
}

#[test]
fn a_dangling_git_symlink_does_not_stop_commands() {
    let (ws, state) = dirs();
    std::os::unix::fs::symlink("missing-git-dir", ws.path().join(".git")).unwrap();
    let out = bash(ws.path(), state.path(), "echo hi", &[]);
    assert_eq!(out.stdout, b"hi\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(0));
    // The rest of the workspace is writable as usual.
    let out = bash(ws.path(), state.path(), "touch beside && echo ok", &[]);
    assert_eq!(out.stdout, b"ok\n", "{}", describe(&out));
    assert!(ws.path().join("beside").exists());
}

#[test]
fn a_git_file_stays_read_only_and_commands_start() {
    let (ws, state) = dirs();
    // A worktree/submodule-style `.git` file naming its git dir.
    std::fs::create_dir(ws.path().join("real-git")).unwrap();
    std::fs::write(ws.path().join("real-git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(ws.path().join(".git"), "gitdir: ./real-git\n").unwrap();
    let out = bash(ws.path(), state.path(), "echo hi", &[]);
    assert_eq!(out.stdout, b"hi\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(0));

    let out = bash(ws.path(), state.path(), "echo evil >> .git", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stdout(&out).contains("--allow-git-writes"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".git")).unwrap(),
        "gitdir: ./real-git\n"
    );
    // The git dir it names is protected too.
    let out = bash(ws.path(), state.path(), "touch real-git/x", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(!ws.path().join("real-git/x").exists());
}

#[test]
fn a_git_dir_named_by_a_git_file_cannot_be_swapped_through_its_parent() {
    let (ws, state) = dirs();
    std::fs::create_dir_all(ws.path().join("sub/realgit/hooks")).unwrap();
    std::fs::write(ws.path().join(".git"), "gitdir: sub/realgit\n").unwrap();
    // Renaming the parent away and planting a git dir (with a hook) in its place.
    let out = bash(
        ws.path(),
        state.path(),
        "mv sub sub2 && mkdir -p sub/realgit/hooks && echo evil > sub/realgit/hooks/pre-commit",
        &[],
    );
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!ws.path().join("sub2").exists());
    assert!(!ws.path().join("sub/realgit/hooks/pre-commit").exists());
}

#[test]
fn a_git_that_cannot_be_protected_is_not_reported_read_only() {
    for link in [".", "gitdir"] {
        let (ws, state) = dirs();
        std::fs::create_dir(ws.path().join("gitdir")).unwrap();
        std::os::unix::fs::symlink(link, ws.path().join(".git")).unwrap();
        let v = bash_json(ws.path(), state.path(), "echo hi", &[]);
        let sandbox = v["structured"]["sandbox"].as_str().unwrap();
        assert!(sandbox.starts_with("workspace-write"), "{v}");
        assert!(!sandbox.contains(".git read-only"), "{link}: {v}");
    }
}

#[test]
fn a_git_symlink_to_a_directory_protects_the_target() {
    let (ws, state) = dirs();
    std::fs::create_dir(ws.path().join("gitdir")).unwrap();
    std::fs::write(ws.path().join("gitdir/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::os::unix::fs::symlink("gitdir", ws.path().join(".git")).unwrap();
    let out = bash(ws.path(), state.path(), "echo hi", &[]);
    assert_eq!(out.stdout, b"hi\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(0));
    for command in ["touch .git/x", "touch gitdir/y", "echo evil > .git/HEAD"] {
        let out = bash(ws.path(), state.path(), command, &[]);
        assert_eq!(out.status.code(), Some(1), "{command}: {}", describe(&out));
        assert!(
            stdout(&out).contains("Read-only file system"),
            "{command}: {}",
            describe(&out)
        );
    }
    assert!(!ws.path().join("gitdir/x").exists());
    assert!(!ws.path().join("gitdir/y").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("gitdir/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
}

#[test]
fn a_git_write_hint_names_allow_git_writes_which_grants_it() {
    let (ws, state) = dirs();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    let out = bash(ws.path(), state.path(), "touch .git/x", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stdout(&out).contains(
            "/.git is read-only under the workspace-write sandbox; ask the operator to grant \
             .git writes with --allow-git-writes]"
        ),
        "{}",
        describe(&out)
    );
    assert!(!ws.path().join(".git/x").exists());
    let v = bash_json(ws.path(), state.path(), "touch .git/x", &[]);
    assert!(
        v["structured"]["sandbox_denial"]
            .as_str()
            .is_some_and(|d| d.contains("--allow-git-writes")),
        "{v}"
    );

    let out = bash(
        ws.path(),
        state.path(),
        "touch .git/x && echo wrote",
        &["--allow-git-writes"],
    );
    assert_eq!(out.stdout, b"wrote\n", "{}", describe(&out));
    assert_eq!(out.status.code(), Some(0));
    assert!(ws.path().join(".git/x").exists());
    let v = bash_json(ws.path(), state.path(), "true", &["--allow-git-writes"]);
    assert!(
        v["structured"]["sandbox"]
            .as_str()
            .is_some_and(|s| s.contains(".git writable")),
        "{v}"
    );
    // The state dir stays read-only with the flag.
    let out = bash(
        ws.path(),
        state.path(),
        &format!("touch '{}/evil'", state.path().display()),
        &["--allow-git-writes"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(!state.path().join("evil").exists());
}

/// `toolhost call bash` with a policy that also allows running `./run.sh` (a program
/// inside the workspace needs an allow rule naming its path).
fn bash_run_sh(ws: &Path, state: &Path, command: &str, extra: &[&str]) -> Output {
    std::fs::create_dir_all(state).unwrap();
    let policy = state.join("allow-run-sh.toml");
    std::fs::write(&policy, "default = \"allow\"\nallow = [\"./run.sh\"]\n").unwrap();
    let args = serde_json::json!({ "command": command }).to_string();
    let mut all = vec![
        "call",
        "bash",
        args.as_str(),
        "--policy",
        policy.to_str().unwrap(),
    ];
    all.extend_from_slice(extra);
    toolhost(ws, state, &all)
}

#[test]
fn a_non_executable_script_gets_exit_126_and_no_sandbox_hint() {
    let (ws, state) = dirs();
    let command = "printf 'echo hi' > run.sh && ./run.sh";
    for mode in ["workspace-write", "read-only", "full-access"] {
        if mode == "read-only" {
            // run.sh exists from the first round; read-only cannot write it.
            assert!(ws.path().join("run.sh").exists());
        }
        let command = if mode == "read-only" {
            "./run.sh"
        } else {
            command
        };
        let out = bash_run_sh(ws.path(), state.path(), command, &["--sandbox", mode]);
        let text = stdout(&out);
        assert!(
            text.contains("Permission denied"),
            "{mode}: {}",
            describe(&out)
        );
        assert!(
            text.ends_with("[exit code 126]\n"),
            "{mode}: {}",
            describe(&out)
        );
        assert!(
            !text.contains("sandbox denial"),
            "{mode}: {}",
            describe(&out)
        );

        let out = bash_run_sh(
            ws.path(),
            state.path(),
            command,
            &["--json", "--sandbox", mode],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
        assert_eq!(v["structured"]["exit_code"], 126, "{mode}: {v}");
        assert!(
            v["structured"].get("sandbox_denial").is_none(),
            "{mode}: {v}"
        );
    }
    // The same refusal with another exit code: still not the sandbox (the path is one the
    // sandbox lets the command write, and exec is never refused).
    let out = bash_run_sh(ws.path(), state.path(), "./run.sh; exit 3", &[]);
    let text = stdout(&out);
    assert!(text.ends_with("[exit code 3]\n"), "{}", describe(&out));
    assert!(!text.contains("sandbox denial"), "{}", describe(&out));
}
