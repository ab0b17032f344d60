//! A session's whole process tree is tracked: descendants that leave its process
//! group (a `setsid` grandchild) end with it on a kill, on a timeout and when the
//! shell exits with them still running, under cgroups and under the subreaper
//! fallback. Real processes throughout; every wait polls a condition with a
//! deadline. (The fork bomb, `toolhost call`'s exit and inherited descriptors are
//! tests of the binary: `tests/all/descendants.rs`.)

use std::time::Duration;

use toolhost_process::{EndReason, KilledBy, ProcessTracking, SessionStatus, StartRequest};

use crate::support::{ESCAPEE, HOST, cleanup, env_with, wait_end, wait_gone, wait_pid_file};

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

/// The command runs inside its session's cgroups from its first instruction,
/// whether it was created inside its cgroup v2 (`clone3(CLONE_INTO_CGROUP)`) or
/// moved itself there (`clone_into_cgroup = false`, what a kernel without
/// `clone3` gets), and joined the v1 `pids` cgroup of a hybrid host through
/// `tasks`: `/proc/self/cgroup` names the session's group in every hierarchy
/// the engine uses. Cost: two short commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_starts_inside_its_cgroups_born_there_or_joining() {
    for clone3 in [true, false] {
        let e = env_with(|c| c.clone_into_cgroup = clone3);
        let tracking = e.sessions.tracking().to_owned();
        if !tracking.starts_with("cgroup") {
            eprintln!("skipped: no cgroup tracking here ({tracking})");
            return;
        }
        let id = e
            .sessions
            .start(&HOST, StartRequest::new("cat /proc/self/cgroup"))
            .await
            .expect("start");
        let snap = wait_end(&e.sessions, &id).await;
        assert_eq!(snap.exit.as_ref().and_then(|x| x.code), Some(0), "{snap:?}");
        let own = format!("/toolhost-{}/{}-", std::process::id(), id.as_str());
        let lines: Vec<&str> = snap
            .output_tail
            .lines()
            .filter(|l| l.contains(&own))
            .collect();
        let v2 = lines.iter().any(|l| l.starts_with("0::"));
        let v1 = lines.iter().any(|l| l.split(':').nth(1) == Some("pids"));
        assert_eq!(
            (v2, v1),
            (
                tracking.starts_with("cgroup v2"),
                tracking.contains("cgroup v1 pids")
            ),
            "clone3 {clone3}, {tracking}: {}",
            snap.output_tail
        );
    }
}
