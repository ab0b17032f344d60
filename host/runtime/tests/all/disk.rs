//! Disk is bounded: a session's `output.log` past its cap keeps
//! exactly its head and its tail at their offsets, the omitted middle is recorded
//! (host-session event and snapshot) and reads never return it; the cap's policy
//! keeps the process running or stops it; the retention sweep keeps running
//! sessions by their owner and removes the rest by age. `toolhost gc` and the
//! binary's own caps are tested through the binary (`tests/all/disk.rs`).

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime};

use toolhost_process::*;
use toolhost_runtime::HostEventKind;

use crate::process_support::{HANG, HOST, wait_end};
use crate::support::{CAP, HEAD, TAIL, capped_env, fake_session, seq_output};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_log_keeps_exactly_head_and_tail_and_records_the_middle() {
    let env = capped_env(OutputCapPolicy::Keep);
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
    // Following the output with read_new_output yields exactly head + tail, and
    // passes the omitted middle with one empty read at the cursor (its start).
    let mut followed = Vec::new();
    let mut offsets = Vec::new();
    let mut passed = Vec::new();
    loop {
        let r = env
            .sessions
            .read_new_output(&HOST, &id, 8 * 1024)
            .await
            .unwrap();
        if r.data.is_empty() && r.offset == r.total_bytes {
            break;
        }
        if r.data.is_empty() {
            assert!(!r.eof);
            passed.push(r.offset);
            continue;
        }
        offsets.push(r.offset);
        followed.extend_from_slice(&r.data);
    }
    assert_eq!(passed, [HEAD], "one empty read where the middle starts");
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
    let env = capped_env(OutputCapPolicy::Stop);
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

/// A running session is kept however old its log looks, though it holds no
/// descriptor for it (it printed nothing): its directory's `owner` link leads to
/// its engine's locked owner file. A session whose owner is gone (a host that
/// crashed) is swept like any finished one, and so is the running one once it
/// has ended (its link goes with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_keeps_running_sessions_by_their_owner_and_sweeps_the_rest() {
    let env = capped_env(OutputCapPolicy::Keep);
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
