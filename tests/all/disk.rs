//! Disk is bounded, through the real binary: `toolhost gc` removes finished
//! sessions by age and total size and keeps running ones; `toolhost call`
//! caps its output log as configured and leaves no owner link, temp dir or
//! running command behind. The caps and the sweep themselves are tested with
//! the runtime (`host/runtime/tests/all/disk.rs`).

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use toolhost_process::{KilledBy, OutputCapPolicy, SessionStatus, StartRequest};

use crate::process_support::HOST;
use crate::runtime_support::{CAP, HEAD, TAIL, capped_env, fake_session, seq_output};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_removes_old_and_oversized_finished_sessions_and_keeps_running_ones() {
    let env = capped_env(OutputCapPolicy::Keep);
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
