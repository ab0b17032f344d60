//! Disk is bounded: a session's `output.log` past its cap keeps
//! exactly its head and its tail at their offsets, the omitted middle is recorded
//! (host-session event and snapshot) and reads never return it; the cap's policy
//! keeps the process running or stops it; `toolhost gc` removes finished sessions by
//! age and total size and keeps running ones.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use toolhost_process::*;
use toolhost_runtime::host_session::{HostEventKind, HostSessionLog, LogObserver};

use crate::process_support::wait_end;

const HANG: Duration = Duration::from_secs(30);
const HOST: Caller = Caller::Host;

/// Cap, head and tail of the small log these tests use, in bytes.
const CAP: u64 = 64 * 1024;
const HEAD: u64 = 16 * 1024;
const TAIL: u64 = CAP - HEAD;

struct Env {
    _ws: tempfile::TempDir,
    state: tempfile::TempDir,
    sessions: Sessions,
    log: Arc<HostSessionLog>,
}

fn env(policy: OutputCapPolicy) -> Env {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let log = Arc::new(HostSessionLog::in_memory("hs_disk"));
    let mut config = SessionsConfig::new(ws.path(), state.path());
    config.kill_grace = Duration::from_millis(500);
    config.output_log_max_bytes = CAP;
    config.output_log_head_bytes = HEAD;
    config.output_cap_policy = policy;
    config.observer = Some(Arc::new(LogObserver::new(log.clone())));
    let sessions = Sessions::new(config).unwrap();
    Env {
        _ws: ws,
        state,
        sessions,
        log,
    }
}

/// What `seq 1 N` prints: every line differs, so a misplaced byte shows.
fn seq_output(n: u32) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_log_keeps_exactly_head_and_tail_and_records_the_middle() {
    let env = env(OutputCapPolicy::Keep);
    let expected = seq_output(40_000);
    let total = expected.len() as u64;
    assert!(total > 3 * CAP, "the pattern must go well past the cap");
    let id = env
        .sessions
        .start(&HOST, StartRequest::new("seq 1 40000"))
        .await
        .unwrap();
    let snap = wait_end(&env.sessions, &id).await;
    assert_eq!(snap.status, SessionStatus::Exited);
    assert_eq!(snap.exit.as_ref().unwrap().code, Some(0));
    assert_eq!(snap.output_bytes, total);

    // The snapshot says what is omitted and that the process was kept running.
    let omitted = snap
        .output_omitted
        .clone()
        .expect("omission in the snapshot");
    assert_eq!(omitted.offset, HEAD);
    assert_eq!(omitted.len, total - HEAD - TAIL);
    assert_eq!(omitted.policy, OutputCapPolicy::Keep);
    assert!(
        omitted.reason.contains("keeps running"),
        "{}",
        omitted.reason
    );

    // The file: the head and the tail byte-exact at their offsets, the middle a hole.
    let file = std::fs::read(&snap.output_path).unwrap();
    assert_eq!(file.len() as u64, total, "offsets stay file positions");
    assert_eq!(&file[..HEAD as usize], &expected[..HEAD as usize]);
    let tail_at = (total - TAIL) as usize;
    assert_eq!(&file[tail_at..], &expected[tail_at..]);
    assert!(file[HEAD as usize..tail_at].iter().all(|&b| b == 0));
    let allocated = std::fs::metadata(&snap.output_path).unwrap().blocks() * 512;
    assert!(
        allocated <= CAP + 8 * 1024,
        "{allocated} bytes on disk for a {CAP}-byte cap"
    );

    // Reads: the head, then (from inside the omitted range) the tail with its offset.
    let head = env
        .sessions
        .read_output(&HOST, &id, 0, MAX_READ_BYTES)
        .await
        .unwrap();
    assert_eq!(
        (head.offset, head.data.as_slice()),
        (0, &expected[..HEAD as usize])
    );
    let tail = env
        .sessions
        .read_output(&HOST, &id, HEAD + 100, MAX_READ_BYTES)
        .await
        .unwrap();
    assert_eq!(tail.offset, total - TAIL);
    assert_eq!(tail.data, &expected[tail_at..]);
    assert!(tail.eof);
    // Following the output with read_new_output yields exactly head + tail.
    let mut followed = Vec::new();
    let mut offsets = Vec::new();
    loop {
        let r = env
            .sessions
            .read_new_output(&HOST, &id, 8 * 1024)
            .await
            .unwrap();
        if r.data.is_empty() {
            break;
        }
        offsets.push(r.offset);
        followed.extend_from_slice(&r.data);
    }
    assert_eq!(offsets[2], total - TAIL, "the third read jumps the gap");
    let mut kept = expected[..HEAD as usize].to_vec();
    kept.extend_from_slice(&expected[tail_at..]);
    assert_eq!(followed, kept, "nothing but the documented middle is lost");

    // The host-session log: the cap reached (once) and the final range, before exit.
    let events: Vec<HostEventKind> = env
        .log
        .replay(0, 1000)
        .events
        .iter()
        .map(|e| e.event().unwrap().kind)
        .filter(|k| {
            matches!(
                k,
                HostEventKind::Omitted { .. } | HostEventKind::ProcessExited { .. }
            )
        })
        .collect();
    assert_eq!(events.len(), 3, "{events:?}");
    let HostEventKind::Omitted {
        what, offset, len, ..
    } = &events[1]
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        (what.as_str(), *offset, *len),
        ("output", Some(HEAD), Some(total - HEAD - TAIL))
    );
    assert!(
        matches!(&events[0], HostEventKind::Omitted { what, offset: Some(HEAD), .. } if what == "output")
    );
    assert!(matches!(&events[2], HostEventKind::ProcessExited { .. }));
    // The private temp dir went with the session.
    let tmp = snap.output_path.parent().unwrap().join("tmp");
    let deadline = std::time::Instant::now() + HANG;
    while tmp.exists() {
        assert!(std::time::Instant::now() < deadline, "tmp dir kept");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(env.state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_policy_ends_a_flood_at_the_cap() {
    let env = env(OutputCapPolicy::Stop);
    let id = env
        .sessions
        .start(&HOST, StartRequest::new("yes"))
        .await
        .unwrap();
    let snap = wait_end(&env.sessions, &id).await;
    assert_eq!(snap.status, SessionStatus::Killed);
    assert_eq!(
        snap.exit.unwrap().reason,
        EndReason::Killed(KilledBy::OutputCap)
    );
    let omitted = snap.output_omitted.expect("omission");
    assert_eq!(omitted.policy, OutputCapPolicy::Stop);
    assert_eq!(omitted.offset, HEAD);
    assert_eq!(omitted.len, snap.output_bytes - HEAD - TAIL);
    let file = std::fs::read(&snap.output_path).unwrap();
    let tail_at = (snap.output_bytes - TAIL) as usize;
    assert!(file[..HEAD as usize].chunks(2).all(|c| c == b"y\n"));
    // `yes` writes whole "y\n" pairs; the tail starts at an even offset or odd.
    let tail = &file[tail_at..];
    assert_eq!(tail.len() as u64, TAIL);
    assert!(tail.iter().all(|&b| b == b'y' || b == b'\n'));
    assert_eq!(*tail.last().unwrap(), b'\n');
}

/// Writes a fake finished session (an `output.log` of `bytes` and a `tmp/`) last
/// modified `age` ago.
fn fake_session(state: &std::path::Path, id: &str, bytes: usize, age: Duration) {
    let dir = state.join("sessions").join(id);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("tmp/scratch"), vec![1u8; 8192]).unwrap();
    let log = dir.join("output.log");
    std::fs::write(&log, vec![b'x'; bytes]).unwrap();
    let when = SystemTime::now() - age;
    std::fs::File::options()
        .write(true)
        .open(&log)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_removes_old_and_oversized_finished_sessions_and_keeps_running_ones() {
    let env = env(OutputCapPolicy::Keep);
    let state = env.state.path();
    let running = env
        .sessions
        .start(&HOST, StartRequest::new("sleep 30"))
        .await
        .unwrap();
    let min = Duration::from_secs(60);
    fake_session(state, "bg_00000000a001", 100 * 1024, 48 * 60 * min); // 2 days
    fake_session(state, "bg_00000000a002", 100 * 1024, 4 * min);
    fake_session(state, "bg_00000000a003", 100 * 1024, 3 * min);
    fake_session(state, "bg_00000000a004", 100 * 1024, 2 * min);
    // Younger than the sweep's grace: never removed, even over the size.
    fake_session(state, "bg_00000000a005", 100 * 1024, Duration::ZERO);
    // A stopped host session 8 days old goes; a fresh one stays.
    for (id, age) in [("hs_old", 8 * 24 * 60 * min), ("hs_new", min * 2)] {
        let dir = state.join("hosts").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("events.jsonl"), "{}\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(dir.join("events.jsonl"))
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
    }

    // Logs of 100 KiB in 4 KiB dirs (their tmp removed first; the youngest keeps its
    // 12 KiB tmp): 330 KiB keeps the three newest once the 2-day-old one is gone.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["gc", "--json", "--max-bytes", &(330 * 1024).to_string()])
        .arg("--state-dir")
        .arg(state)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::support::describe(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["sessions_removed"],
        serde_json::json!(["bg_00000000a001", "bg_00000000a002"]),
        "{report}"
    );
    assert_eq!(report["sessions_running"], 1, "{report}");
    assert_eq!(
        report["host_sessions_removed"],
        serde_json::json!(["hs_old"])
    );
    assert_eq!(report["tmp_dirs_removed"], 4, "{report}");
    let sessions = state.join("sessions");
    let running_dir = sessions.join(running.as_str());
    assert!(running_dir.join("output.log").exists());
    assert!(
        running_dir.join("tmp").exists(),
        "a running session's tmp stays"
    );
    for gone in ["bg_00000000a001", "bg_00000000a002"] {
        assert!(!sessions.join(gone).exists(), "{gone}");
    }
    for kept in ["bg_00000000a003", "bg_00000000a004"] {
        assert!(sessions.join(kept).join("output.log").exists(), "{kept}");
        assert!(!sessions.join(kept).join("tmp").exists(), "{kept}/tmp");
    }
    assert!(
        sessions.join("bg_00000000a005/tmp").exists(),
        "within the grace"
    );
    assert!(state.join("hosts/hs_new").exists());
    assert!(!state.join("hosts/hs_old").exists());
    // Still running after the sweep.
    assert_eq!(
        env.sessions.check(&HOST, &running).unwrap().status,
        SessionStatus::Running
    );
    env.sessions
        .kill(&HOST, &running, None, KilledBy::Embedder)
        .await
        .unwrap();
}

/// The cap through the real binary: `toolhost call --output-cap 64KiB` (head a
/// quarter of the cap, 16 KiB) keeps exactly the head and the tail of a
/// command's output in its `output.log`; `--output-cap-policy stop` ends a flood
/// at the cap and says so.
#[test]
fn toolhost_call_caps_the_output_log_as_configured() {
    let (ws, state) = crate::support::dirs();
    let policy = crate::support::allow_all_policy(state.path());
    let call = |command: &str, cap_policy: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["call", "bash"])
            .arg(serde_json::json!({ "command": command }).to_string())
            .args(["--output-cap", "64KiB", "--output-cap-policy", cap_policy])
            .args(["--policy", &policy, "--json", "--workspace"])
            .arg(ws.path())
            .arg("--state-dir")
            .arg(state.path())
            .output()
            .unwrap()
    };
    let logs = || -> Vec<std::path::PathBuf> {
        let mut logs: Vec<_> = std::fs::read_dir(state.path().join("sessions"))
            .unwrap()
            .map(|e| e.unwrap().path().join("output.log"))
            .filter(|p| p.exists())
            .collect();
        logs.sort();
        logs
    };

    let out = call("seq 1 40000", "keep");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = seq_output(40_000);
    let total = expected.len();
    let file = std::fs::read(&logs()[0]).unwrap();
    assert_eq!(file.len(), total, "offsets stay file positions");
    assert_eq!(&file[..HEAD as usize], &expected[..HEAD as usize]);
    let tail_at = total - TAIL as usize;
    assert_eq!(&file[tail_at..], &expected[tail_at..]);
    assert!(file[HEAD as usize..tail_at].iter().all(|&b| b == 0));

    // `stop`: an endless flood is ended at the cap, and the result says why.
    let out = call("yes flood", "stop");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    });
    let text = result["text"].as_str().unwrap();
    assert_eq!(result["is_error"], Value::Bool(true), "{result}");
    assert!(text.contains("output-cap"), "{text}");
    // The bound is the documented one (`output.rs`, `PUNCH_STEP`: at most
    // 256 KiB over the cap on disk at any time): under load the file system
    // may still hold blocks it allocated ahead of the writer when the call
    // returns (seen: 160 KiB for this 64 KiB cap on a loaded 2-core machine).
    let flood = std::fs::metadata(&logs()[1]).unwrap();
    assert!(
        flood.blocks() * 512 <= CAP + 256 * 1024,
        "{} bytes on disk for a {CAP}-byte cap",
        flood.blocks() * 512
    );

    // A cap below 4 KiB is refused with the reason.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["call", "bash", "{}", "--output-cap", "1KiB"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("below the smallest output cap, 4KiB"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `toolhost call` exits right after its result: the call's ended session is
/// through its bookkeeping first, so its directory keeps the output log and
/// neither its `owner` link nor its private temp dir (both belong to a running
/// session only). Eight calls, as the race with the exit is lost now and then
/// (seen: 2 in 20 without the wait).
#[test]
fn toolhost_call_leaves_no_owner_link_or_temp_dir_behind() {
    let (ws, state) = crate::support::dirs();
    let policy = crate::support::allow_all_policy(state.path());
    let arguments = json!({ "command": r#"echo kept > "$TMPDIR/x" && cat "$TMPDIR/x""# });
    let arguments = arguments.to_string();
    for _ in 0..8 {
        let args = ["call", "bash", &arguments, "--policy", &policy];
        let out = crate::support::toolhost(ws.path(), state.path(), &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            crate::support::describe(&out)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "kept\n");
    }
    let dirs: Vec<_> = std::fs::read_dir(state.path().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 8, "{dirs:?}");
    for dir in dirs {
        assert_tidied(&dir);
    }
}

/// A session directory keeps its output log and neither the `owner` link nor the
/// private temp dir of a running session.
fn assert_tidied(dir: &std::path::Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !left.iter().any(|name| name == "owner" || name == "tmp"),
        "left in {}: {left:?}",
        dir.display()
    );
    assert!(left.iter().any(|name| name == "output.log"), "{left:?}");
}

/// What a `toolhost call` leaves running (a background session, a detached
/// flood) is ended when it exits and tidied like any ended session: no `owner`
/// link, no private temp dir (with the file the command put there), and the
/// log's last hole punched, so the file holds the cap plus at most two blocks.
/// (Found by a review: the runtime went with the session tasks, and all three
/// were left; always for a background session, now and then for a detached run.)
#[test]
fn toolhost_call_ends_and_tidies_what_it_left_running() {
    let (ws, state) = crate::support::dirs();
    let policy = crate::support::allow_all_policy(state.path());
    let call = |arguments: Value| {
        let arguments = arguments.to_string();
        let args = [
            "call",
            "bash",
            &arguments,
            "--policy",
            &policy,
            "--output-cap",
            "64KiB",
            "--json",
        ];
        let out = crate::support::toolhost(ws.path(), state.path(), &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            crate::support::describe(&out)
        );
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        let id = result["structured"]["session_id"].as_str().unwrap();
        let dir = state.path().join("sessions").join(id);
        assert_tidied(&dir);
        dir
    };

    call(json!({
        "command": r#"echo scratch > "$TMPDIR/f" && sleep 100"#,
        "run_in_background": true,
    }));

    let dir = call(json!({
        "command": r#"echo scratch > "$TMPDIR/f" && yes aaaaaaa"#,
        "yield_ms": 300,
    }));
    let log = std::fs::metadata(dir.join("output.log")).unwrap();
    assert!(
        log.len() > CAP,
        "the flood passed the cap: {} bytes",
        log.len()
    );
    assert!(
        log.blocks() * 512 <= CAP + 2 * log.blksize(),
        "{} bytes on disk for a {CAP}-byte cap",
        log.blocks() * 512
    );
}

/// A host leaves no owner file behind when it exits cleanly, `serve` included
/// (it leaves through `std::process::exit`, which runs no destructor).
#[test]
fn hosts_leave_no_owner_file_when_they_exit() {
    let (ws, state) = crate::support::dirs();
    let policy = crate::support::allow_all_policy(state.path());
    let call = ["call", "bash", r#"{"command":"true"}"#, "--policy", &policy];
    // `serve` reads MCP from stdin, here empty: it ends at once.
    for args in [&call[..], &["serve"][..]] {
        let out = crate::support::toolhost(ws.path(), state.path(), args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            crate::support::describe(&out)
        );
        let owners: Vec<_> = std::fs::read_dir(state.path().join("owners"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(owners, Vec::<std::ffi::OsString>::new(), "after {args:?}");
    }
}

/// A running session is kept however old its log looks, though it holds no
/// descriptor for it (it printed nothing): its directory's `owner` link leads to
/// its engine's locked owner file. A session whose owner is gone (a host that
/// crashed) is swept like any finished one, and so is the running one once it
/// has ended (its link goes with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_keeps_running_sessions_by_their_owner_and_sweeps_the_rest() {
    let env = env(OutputCapPolicy::Keep);
    let state = env.state.path();
    let running = env
        .sessions
        .start(&HOST, StartRequest::new("exec sleep 30"))
        .await
        .unwrap();
    let two_days = Duration::from_secs(2 * 24 * 60 * 60);
    let running_dir = state.join("sessions").join(running.as_str());
    let make_old = |dir: &std::path::Path| {
        std::fs::File::options()
            .write(true)
            .open(dir.join("output.log"))
            .unwrap()
            .set_modified(SystemTime::now() - two_days)
            .unwrap();
    };
    make_old(&running_dir);
    assert!(
        std::fs::symlink_metadata(running_dir.join("owner"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Left by a host that is gone: its owner file exists, unlocked.
    std::fs::write(state.join("owners/1-0"), "").unwrap();
    fake_session(state, "bg_00000000b001", 1024, two_days);
    std::os::unix::fs::symlink(
        "../../owners/1-0",
        state.join("sessions/bg_00000000b001/owner"),
    )
    .unwrap();
    // Ended with a killed host (its owner file is gone), recent enough to keep:
    // its log stays, its temp dir and its dangling link go.
    fake_session(state, "bg_00000000b002", 1024, Duration::from_secs(120));
    let killed_dir = state.join("sessions/bg_00000000b002");
    std::os::unix::fs::symlink("../../owners/2-0", killed_dir.join("owner")).unwrap();

    let report = sweep_state_dir(state, &RetentionPolicy::default(), SystemTime::now());
    assert_eq!(report.sessions_running, 1, "{report:?}");
    assert_eq!(report.sessions_removed, vec!["bg_00000000b001".to_owned()]);
    assert!(killed_dir.join("output.log").exists(), "kept by retention");
    assert!(
        !killed_dir.join("tmp").exists(),
        "an ended session's tmp goes"
    );
    assert!(
        std::fs::symlink_metadata(killed_dir.join("owner")).is_err(),
        "a gone host's link goes"
    );
    assert!(running_dir.join("output.log").exists());
    assert!(
        running_dir.join("tmp").exists(),
        "a running session's tmp stays"
    );
    // The owner file of the gone host goes once it is old too.
    std::fs::File::options()
        .write(true)
        .open(state.join("owners/1-0"))
        .unwrap()
        .set_modified(SystemTime::now() - two_days)
        .unwrap();

    env.sessions
        .kill(&HOST, &running, None, KilledBy::Embedder)
        .await
        .unwrap();
    wait_end(&env.sessions, &running).await;
    let deadline = std::time::Instant::now() + HANG;
    while std::fs::symlink_metadata(running_dir.join("owner")).is_ok() {
        assert!(std::time::Instant::now() < deadline, "the owner link stays");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    make_old(&running_dir);
    let report = sweep_state_dir(state, &RetentionPolicy::default(), SystemTime::now());
    assert_eq!(report.sessions_running, 0, "{report:?}");
    assert_eq!(report.sessions_removed, vec![running.to_string()]);
    assert!(
        !state.join("owners/1-0").exists(),
        "a gone host's owner file is swept"
    );
    let own: Vec<_> = std::fs::read_dir(state.join("owners"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(own.len(), 1, "the live engine's owner file stays");
}

/// The sweep finds a running session's owner by name in its own state dir, so a
/// `sessions/` directory reached through a symlink still keeps it, `tmp/` and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_session_is_kept_when_sessions_is_a_symlink() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), state.path().join("sessions")).unwrap();
    let sessions = Sessions::new(SessionsConfig::new(ws.path(), state.path())).unwrap();
    let running = sessions
        .start(&HOST, StartRequest::new("exec sleep 30"))
        .await
        .unwrap();
    let dir = elsewhere.path().join(running.as_str());
    std::fs::File::options()
        .write(true)
        .open(dir.join("output.log"))
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(2 * 24 * 60 * 60))
        .unwrap();
    let report = sweep_state_dir(state.path(), &RetentionPolicy::default(), SystemTime::now());
    assert_eq!(report.sessions_running, 1, "{report:?}");
    assert!(report.sessions_removed.is_empty(), "{report:?}");
    assert_eq!(report.tmp_dirs_removed, 0, "{report:?}");
    assert!(dir.join("tmp").exists());
    sessions
        .kill(&HOST, &running, None, KilledBy::Embedder)
        .await
        .unwrap();
}
