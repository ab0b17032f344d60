//! Issue 17 items 1-3: a session's whole process tree is tracked (descendants that
//! leave its process group included), a fork bomb is bounded and reported, and
//! only the standard streams reach a command. Real processes throughout; every
//! wait polls a condition with a deadline.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use toolhost_process::*;

use crate::support::{allow_all_policy, describe, dirs, stdout};

const HANG: Duration = Duration::from_secs(20);
const HOST: Caller = Caller::Host;

/// True once `pid` no longer runs: no `/proc/PID`, or a zombie (an orphan that
/// died waits there for whoever is pid 1 to reap it).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .is_some_and(|i| stat[i + 1..].trim_start().starts_with('Z')),
    }
}

/// Polls (bounded by [`HANG`]) until `pid` is gone.
fn wait_gone(pid: u32) -> bool {
    let deadline = Instant::now() + HANG;
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Polls (bounded) until `path` holds a pid, and returns it.
fn wait_pid_file(path: &Path) -> u32 {
    let deadline = Instant::now() + HANG;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs `pid` if it survived (so a failing test leaves nothing behind).
fn cleanup(pid: u32) {
    if !gone(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

struct Env {
    ws: tempfile::TempDir,
    _state: tempfile::TempDir,
    sessions: Sessions,
}

fn env_with(tweak: impl FnOnce(&mut SessionsConfig)) -> Env {
    let (ws, state) = dirs();
    let mut config = SessionsConfig::new(ws.path(), state.path());
    config.kill_grace = Duration::from_millis(500);
    tweak(&mut config);
    let sessions = Sessions::new(config).expect("Sessions::new");
    Env {
        ws,
        _state: state,
        sessions,
    }
}

async fn wait_end(s: &Sessions, id: &SessionId) -> Snapshot {
    let deadline = Instant::now() + HANG;
    loop {
        let snap = s.check(&HOST, id).expect("check");
        if snap.exit.is_some() {
            return snap;
        }
        assert!(Instant::now() < deadline, "session did not end: {snap:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A grandchild that leaves the shell's session and group, writing its pid first.
const ESCAPEE: &str = "setsid sh -c 'echo $$ > escapee.pid; exec sleep 300' &";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_child_is_ended_after_the_shell_exits() {
    let e = env_with(|_| {});
    let id = e
        .sessions
        .start(
            &HOST,
            StartRequest::new("sleep 30 & echo $! > bg.pid; echo started"),
        )
        .await
        .expect("start");
    let snap = wait_end(&e.sessions, &id).await;
    let pid = wait_pid_file(&e.ws.path().join("bg.pid"));
    let survived = !wait_gone(pid);
    cleanup(pid);
    assert!(!survived, "`sleep 30 &` outlived its session: {snap:?}");
    // Not a plain exit 0: the shell's code, and who ended the rest.
    let exit = snap.exit.expect("exit");
    assert_eq!(exit.code, Some(0), "{exit:?}");
    assert_eq!(snap.status, SessionStatus::Killed, "{exit:?}");
    match &exit.reason {
        EndReason::Killed(by @ KilledBy::Leftovers { processes: 1, .. }) => assert!(
            by.to_string()
                .contains("1 process was still running after the shell exited"),
            "{by}"
        ),
        other => panic!("expected a kill of the leftovers, got {other:?}"),
    }
    // The snapshot says how the tree is tracked.
    assert_eq!(snap.tracking, e.sessions.tracking());
    assert!(!snap.tracking.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_without_leftovers_still_exits_plainly() {
    let e = env_with(|_| {});
    let id = e
        .sessions
        .start(&HOST, StartRequest::new("(sleep 0.01) & wait; echo done"))
        .await
        .expect("start");
    let snap = wait_end(&e.sessions, &id).await;
    assert_eq!(snap.status, SessionStatus::Exited, "{snap:?}");
    assert_eq!(snap.exit.unwrap().code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_grandchild_dies_when_its_session_is_killed() {
    let e = env_with(|_| {});
    let cmd = format!("{ESCAPEE} sleep 300");
    let id = e
        .sessions
        .start(&HOST, StartRequest::new(cmd))
        .await
        .expect("start");
    let pid = wait_pid_file(&e.ws.path().join("escapee.pid"));
    e.sessions
        .kill(&HOST, &id, None, KilledBy::Embedder)
        .await
        .expect("kill");
    let survived = !wait_gone(pid);
    cleanup(pid);
    assert!(!survived, "a setsid grandchild escaped the kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_grandchild_dies_on_timeout() {
    let e = env_with(|_| {});
    let mut req = StartRequest::new(format!(
        "{ESCAPEE} while [ ! -s escapee.pid ]; do sleep 0.01; done; sleep 300"
    ));
    req.timeout = Some(Duration::from_millis(1500));
    let id = e.sessions.start(&HOST, req).await.expect("start");
    let pid = wait_pid_file(&e.ws.path().join("escapee.pid"));
    let snap = wait_end(&e.sessions, &id).await;
    let survived = !wait_gone(pid);
    cleanup(pid);
    assert_eq!(snap.status, SessionStatus::TimedOut, "{snap:?}");
    assert!(!survived, "a setsid grandchild escaped the timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subreaper_fallback_also_ends_a_setsid_grandchild() {
    // What a host without a writable cgroup gets (this makes the test process a
    // child subreaper; nothing else in it depends on that).
    let e = env_with(|c| c.process_tracking = ProcessTracking::Subreaper);
    assert!(
        e.sessions
            .tracking()
            .starts_with("subreaper and /proc scan"),
        "{}",
        e.sessions.tracking()
    );
    // The escapee's parent exits at once: it is reparented to the host.
    let cmd =
        r#"sh -c "setsid sh -c 'echo \$\$ > escapee.pid; exec sleep 300' & exit 0"; sleep 300"#;
    let id = e
        .sessions
        .start(&HOST, StartRequest::new(cmd))
        .await
        .expect("start");
    let pid = wait_pid_file(&e.ws.path().join("escapee.pid"));
    e.sessions
        .kill(&HOST, &id, None, KilledBy::Embedder)
        .await
        .expect("kill");
    let survived = !wait_gone(pid);
    cleanup(pid);
    assert!(!survived, "a reparented setsid grandchild escaped the kill");
    let snap = e.sessions.check(&HOST, &id).unwrap();
    assert!(snap.tracking.starts_with("subreaper"), "{snap:?}");
}

/// Runs `toolhost call bash ARGS` over `ws` with an allow-all policy.
fn call(ws: &Path, state: &Path, args: &str) -> std::process::Output {
    let policy = allow_all_policy(&state.join("policy"));
    crate::support::toolhost(ws, state, &["call", "bash", args, "--policy", &policy])
}

#[test]
fn a_setsid_grandchild_dies_when_toolhost_call_ends() {
    let (ws, state) = dirs();
    // The run is moved to the background after 1 s, so the call returns while it
    // runs; `toolhost call` then ends its sessions on the way out.
    let cmd = format!("{ESCAPEE} sleep 300");
    let args = serde_json::json!({"command": cmd, "yield_ms": 1000}).to_string();
    let out = call(ws.path(), state.path(), &args);
    let pid = wait_pid_file(&ws.path().join("escapee.pid"));
    let survived = !wait_gone(pid);
    cleanup(pid);
    assert!(
        !survived,
        "a setsid grandchild outlived toolhost: {}",
        describe(&out)
    );
}

/// Live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            !gone(pid)
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

#[test]
fn a_fork_bomb_is_bounded_reported_and_the_host_keeps_working() {
    let (ws, state) = dirs();
    // Only where a per-session process limit holds: without a pids controller an
    // unbounded bomb could take the test machine down, so it is not run.
    let policy = allow_all_policy(&state.path().join("policy"));
    let tools = crate::support::toolhost(ws.path(), state.path(), &["tools", "--policy", &policy]);
    let tracking = stdout(&tools)
        .lines()
        .find_map(|l| l.strip_prefix("process tracking: ").map(str::to_owned))
        .unwrap_or_default();
    if !tracking.contains("at most") {
        eprintln!("skipped: no per-session process limit here ({tracking})");
        return;
    }
    let marker = format!("forkbomb-{}", std::process::id());
    let cmd = format!("b(){{ b|b& }}; b # {marker}");
    let args = serde_json::json!({"command": cmd, "timeout_ms": 5000}).to_string();
    let t0 = Instant::now();
    let out = call(ws.path(), state.path(), &args);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        text.contains("still running after the shell exited")
            || text.contains("timed out after 5000 ms"),
        "{}",
        describe(&out)
    );
    assert!(!text.contains("[exit code 0]"), "{}", describe(&out));
    assert!(t0.elapsed() < HANG, "took {:?}", t0.elapsed());
    // Every process of the bomb is gone.
    let deadline = Instant::now() + HANG;
    let mut left = processes_with(&marker);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_with(&marker);
    }
    for &pid in &left {
        cleanup(pid);
    }
    assert!(left.is_empty(), "{} bomb processes survived", left.len());
    // And the next command runs.
    let out = call(ws.path(), state.path(), r#"{"command":"echo after"}"#);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out).trim(), "after");
}

#[test]
fn an_inherited_descriptor_does_not_reach_commands() {
    let (ws, state) = dirs();
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("outside.txt");
    std::fs::write(&file, "").unwrap();
    let policy = allow_all_policy(&state.path().join("policy"));
    // The launcher leaves fd 9 open (no close-on-exec) on a file outside the
    // workspace, then runs toolhost.
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"exec 9>>"$1"; shift; exec "$@""#)
        .arg("bash")
        .arg(&file)
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .args(["call", "bash", r#"{"command":"echo x >&9 && echo wrote"}"#])
        .args(["--policy", &policy, "--workspace"])
        .arg(ws.path())
        .arg("--state-dir")
        .arg(state.path())
        .env_remove("TOOLHOST_LOG")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(!text.contains("wrote"), "{}", describe(&out));
    assert!(text.contains("Bad file descriptor"), "{}", describe(&out));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"",
        "the command wrote through fd 9"
    );
}
