//! The binary ends what its sessions left: a `setsid` grandchild dies when
//! `toolhost call` ends, a fork bomb is bounded and reported and the host keeps
//! working, and only the standard streams reach a command. (How the engine tracks
//! a process tree is tested with the process crate, `host/process/tests/all`.)

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process_support::{ESCAPEE, cleanup, gone, wait_gone, wait_pid_file};
use crate::support::{allow_all_policy, describe, dirs, stdout};

/// How long the fork bomb may take to be ended, and its processes to go.
const HANG: Duration = Duration::from_secs(20);

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

/// The children of `pid` (from every process's `/proc/<pid>/stat`), with
/// their state letter (`Z` for a zombie).
fn children_of(pid: u32) -> Vec<(u32, char)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
            let state = rest.next()?.chars().next()?;
            let ppid: u32 = rest.next()?.parse().ok()?;
            (ppid == pid).then_some((child, state))
        })
        .collect()
}

/// Under the subreaper (`--process-tracking subreaper`: no cgroups, what a host
/// without a writable cgroup gets), the orphans commands leave are reparented
/// to the host; once they exit (or are ended with their run), the host reaps
/// them: after 30 calls that each leave one, the host has no child left,
/// zombie or not.
#[tokio::test]
async fn the_subreaper_host_reaps_every_orphan_it_adopts() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(&state.path().join("policy"));
    let tools = crate::support::toolhost(
        ws.path(),
        state.path(),
        &[
            "tools",
            "--policy",
            &policy,
            "--process-tracking",
            "subreaper",
        ],
    );
    assert!(
        stdout(&tools).contains("\nprocess tracking: subreaper and /proc scan"),
        "{}",
        describe(&tools)
    );
    let mut serve = crate::support::serve(ws.path(), state.path());
    serve.args(["--policy", &policy, "--process-tracking", "subreaper"]);
    let client = toolhost_test_support::StdioClient::spawn(serve).unwrap();
    client.initialize("2025-06-18").await.unwrap();
    let host = client.pid().unwrap();
    const CALLS: usize = 30;
    for i in 0..CALLS {
        let result = client
            .call_tool(
                "bash",
                serde_json::json!({"command": "sh -c 'sleep 0.1 & exit 0'"}),
            )
            .await
            .unwrap();
        // The shell exits 0; the orphan it leaves is ended with the run.
        assert_eq!(
            result["structuredContent"]["exit_code"], 0,
            "call {i}: {result}"
        );
    }
    // The orphans sleep 0.1 s after their call; each exit is a SIGCHLD the host
    // answers by reaping. Wait (bounded) until the host has no child at all.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut children = children_of(host);
    while !children.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        children = children_of(host);
    }
    let zombies = children.iter().filter(|(_, s)| *s == 'Z').count();
    assert_eq!(
        (zombies, children.len()),
        (0, 0),
        "children of the host after {CALLS} calls: {children:?}"
    );
    client.close().await.unwrap();
}
