//! Real-process tests of the session engine ([`Sessions`]): starts and their hard
//! rules, output and events, stdin, kills and timeouts, quotas, retention, the
//! host's shell, and a per-call sandbox that only tightens the operator's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use toolhost_process::*;

use crate::support::{HOST, dirs, env, env_with, wait_end};

const HANG: Duration = Duration::from_secs(20);

async fn start(s: &Sessions, req: StartRequest) -> SessionId {
    s.start(&HOST, req).await.expect("start")
}

async fn run(s: &Sessions, command: &str) -> (Snapshot, Vec<u8>) {
    let id = start(s, StartRequest::new(command)).await;
    let snap = wait_end(s, &id).await;
    (snap, all_output(s, &id).await)
}

/// Follows a session's events until it ends; returns every event.
async fn events_until_end(s: &Sessions, id: &SessionId) -> Vec<SessionEvent> {
    let mut sub = s.subscribe(&HOST, id, 1).expect("subscribe");
    let mut events = Vec::new();
    tokio::time::timeout(HANG, async {
        while !sub.finished() {
            sub.ready().await;
            events.extend(sub.next(256));
        }
    })
    .await
    .expect("session did not end in time");
    events
}

async fn all_output(s: &Sessions, id: &SessionId) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let r = s
            .read_output(&HOST, id, out.len() as u64, MAX_READ_BYTES)
            .await
            .expect("read_output");
        out.extend_from_slice(&r.data);
        if r.data.is_empty() {
            return out;
        }
    }
}

/// Polls /proc (bounded) until no live process of group `sid` remains.
async fn group_gone(sid: u32) -> bool {
    let deadline = Instant::now() + HANG;
    while Instant::now() < deadline {
        if group_members(sid).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Waits (bounded) until the group has `n` live processes.
async fn group_has(sid: u32, n: usize) {
    let deadline = Instant::now() + HANG;
    while group_members(sid).len() < n {
        assert!(
            Instant::now() < deadline,
            "group {sid} never reached {n} processes"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn kill_leftovers(sid: u32) {
    for pid in group_members(sid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

fn invalid(r: Result<SessionId, SessionError>) -> String {
    match r {
        Err(SessionError::InvalidRequest(m)) => m,
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

fn assert_seqs_contiguous(events: &[SessionEvent]) {
    let mut expected = 1;
    for e in events {
        assert_eq!(e.seq, expected, "events: {events:?}");
        expected = match &e.kind {
            SessionEventKind::Omitted(r) => {
                assert_eq!(r.first_seq, e.seq);
                r.last_seq + 1
            }
            _ => e.seq + 1,
        };
    }
    assert!(matches!(
        events.first().map(|e| &e.kind),
        Some(SessionEventKind::Started(_))
    ));
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(SessionEventKind::Exited(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_output_and_events() {
    let e = env();
    // Separate streams, as an embedder may ask (the default is one merged pipe).
    let mut request = StartRequest::new("echo out; echo err >&2; exit 3");
    request.streams = OutputStreams::Separate;
    let id = start(&e.sessions, request).await;
    assert!(id.starts_with("bg_") && id.len() == 15);
    let events = events_until_end(&e.sessions, &id).await;
    assert_seqs_contiguous(&events);
    let snap = e.sessions.check(&HOST, &id).unwrap();
    assert_eq!(snap.status, SessionStatus::Exited);
    assert_eq!(
        snap.exit,
        Some(ExitStatus {
            code: Some(3),
            signal: None,
            reason: EndReason::Exited
        })
    );
    assert_eq!(snap.output_bytes, 8);
    assert_eq!(snap.last_seq, events.last().unwrap().seq);
    assert!(snap.detached && snap.tool_call_id.is_none());
    // The engine's default is the real sandbox: workspace-write, network blocked.
    assert!(
        snap.sandbox.starts_with("workspace-write (") && snap.sandbox.contains("network blocked"),
        "{}",
        snap.sandbox
    );
    assert_eq!(snap.sandbox_denial, None);
    match &events[0].kind {
        SessionEventKind::Started(info) => {
            assert_eq!(Some(info.pid), snap.pid);
            assert_eq!(info.sandbox, snap.sandbox);
        }
        other => panic!("first event is not Started: {other:?}"),
    }
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    for ev in &events {
        if let SessionEventKind::Output(c) = &ev.kind {
            match c.stream {
                OutputStream::Stdout => stdout.extend_from_slice(&c.data),
                OutputStream::Stderr => stderr.extend_from_slice(&c.data),
            }
        }
    }
    assert_eq!(stdout, b"out\n");
    assert_eq!(stderr, b"err\n");
    // The default: one pipe, every byte in write order, reported as stdout.
    let merged_id = start(
        &e.sessions,
        StartRequest::new("echo out; echo err >&2; echo out2"),
    )
    .await;
    let merged: Vec<u8> = events_until_end(&e.sessions, &merged_id)
        .await
        .iter()
        .filter_map(|ev| match &ev.kind {
            SessionEventKind::Output(c) => {
                assert_eq!(c.stream, OutputStream::Stdout);
                Some(c.data.to_vec())
            }
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(merged, b"out\nerr\nout2\n");
    let log = std::fs::read(&snap.output_path).unwrap();
    assert_eq!(log.len(), 8);
    assert_eq!(snap.output_tail.len(), 8);
    assert_eq!(all_output(&e.sessions, &id).await, log);
    assert!(
        snap.output_path
            .ends_with(format!("sessions/{id}/output.log"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_is_built_from_the_allowlist() {
    // SAFETY: set once before any child is spawned by this test; the variable is only
    // read by this test's assertions.
    unsafe { std::env::set_var("TOOLHOST_TEST_SECRET", "hunter2") };
    let e = env_with(|c| c.extra_env = vec![("OPERATOR_VAR".into(), "op".into())]);
    let mut req = StartRequest::new("env");
    req.env = vec![("REQ_VAR".into(), "a=b c".into())];
    let id = start(&e.sessions, req).await;
    wait_end(&e.sessions, &id).await;
    let out = String::from_utf8(all_output(&e.sessions, &id).await).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert!(!out.contains("TOOLHOST_TEST_SECRET"), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
    assert!(lines.contains(&"TERM=dumb"), "{out}");
    assert!(lines.contains(&"OPERATOR_VAR=op"), "{out}");
    assert!(lines.contains(&"REQ_VAR=a=b c"), "{out}");
    assert!(lines.iter().any(|l| l.starts_with("PATH=")), "{out}");
    for name in out
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
    {
        let allowed = ENV_ALLOWLIST.contains(&name)
            || NON_INTERACTIVE_ENV.iter().any(|(n, _, _)| *n == name)
            || name.starts_with("LC_")
            || [
                "TERM",
                "OPERATOR_VAR",
                "REQ_VAR",
                "PWD",
                "SHLVL",
                "_",
                "OLDPWD",
            ]
            .contains(&name);
        assert!(allowed, "unexpected variable {name} in child env");
    }
    for bad in ["", "A=B", "NUL\0"] {
        let mut req = StartRequest::new("true");
        req.env = vec![(bad.into(), "x".into())];
        invalid(e.sessions.start(&HOST, req).await);
    }
    let mut req = StartRequest::new("true");
    req.env = vec![("OK".into(), "nul\0".into())];
    invalid(e.sessions.start(&HOST, req).await);
    assert!(
        e.sessions.list(&HOST).len() == 1,
        "rejected requests created nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_must_resolve_inside_the_workspace() {
    let e = env();
    let ws = e.sessions.workspace().to_path_buf();
    std::fs::create_dir_all(ws.join("sub/dir")).unwrap();
    std::fs::write(ws.join("file"), b"x").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("escape")).unwrap();
    std::os::unix::fs::symlink(ws.join("sub"), ws.join("inside_link")).unwrap();

    for (cwd, expect) in [
        ("sub/dir", ws.join("sub/dir")),
        (ws.join("sub").to_str().unwrap(), ws.join("sub")),
        ("inside_link", ws.join("sub")),
        ("sub/dir/..", ws.join("sub")),
    ] {
        let mut req = StartRequest::new("pwd -P");
        req.cwd = Some(cwd.to_owned());
        let id = start(&e.sessions, req).await;
        wait_end(&e.sessions, &id).await;
        let out = all_output(&e.sessions, &id).await;
        assert_eq!(
            String::from_utf8(out).unwrap().trim_end(),
            expect.to_str().unwrap()
        );
    }
    let refused = [
        ("/", "outside the workspace"),
        ("..", "outside the workspace"),
        ("sub/../../..", "outside the workspace"),
        ("escape", "outside the workspace"),
        ("/nonexistent-toolhost-dir", "outside the workspace"),
        ("missing", "does not exist"),
        ("file", "not a directory"),
        ("nul\0", "NUL"),
    ];
    for (cwd, text) in refused {
        let mut req = StartRequest::new("pwd");
        req.cwd = Some(cwd.to_owned());
        let msg = invalid(e.sessions.start(&HOST, req).await);
        assert!(msg.contains(text), "cwd {cwd:?}: {msg}");
    }
    assert_eq!(e.sessions.list(&HOST).len(), 4);
    drop(e.ws);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_command_and_timeout_validation() {
    let e = env();
    let ws = e.sessions.workspace().to_path_buf();
    let not_exec = ws.join("not_exec");
    std::fs::write(&not_exec, b"#!/bin/sh\n").unwrap();
    let shells = [
        ("sh".to_owned(), "absolute"),
        ("/nonexistent/sh".to_owned(), "does not exist"),
        (ws.to_str().unwrap().to_owned(), "not a regular file"),
        (not_exec.to_str().unwrap().to_owned(), "not executable"),
    ];
    for (shell, text) in shells {
        let mut req = StartRequest::new("true");
        req.shell = ShellRequest::Path(shell.clone());
        let msg = invalid(e.sessions.start(&HOST, req).await);
        assert!(msg.contains(text), "{shell}: {msg}");
    }
    invalid(
        e.sessions
            .start(&HOST, StartRequest::new("echo a\0b"))
            .await,
    );
    for t in [
        Duration::ZERO,
        MAX_TIMEOUT + Duration::from_millis(1),
        Duration::MAX,
    ] {
        let mut req = StartRequest::new("true");
        req.timeout = Some(t);
        invalid(e.sessions.start(&HOST, req).await);
    }
    assert!(e.sessions.list(&HOST).is_empty());

    let mut req = StartRequest::new("echo \"$BASH_VERSION\" | cut -c1");
    req.shell = ShellRequest::Path("/bin/bash".into());
    let id = start(&e.sessions, req).await;
    wait_end(&e.sessions, &id).await;
    let out = all_output(&e.sessions, &id).await;
    assert!(out[0].is_ascii_digit(), "{out:?}");
}

/// The host's shell is found once, when the engine starts: the first bash of
/// `BASH_CANDIDATES`, else `/bin/sh`. A start that asks for it runs under it and says
/// which kind it got; `/bin/sh` and named paths keep their per-start check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_shell_is_resolved_once_and_typed() {
    let e = env();
    let shell = e.sessions.shell().clone();
    let bash = BASH_CANDIDATES.iter().find(|c| {
        std::fs::metadata(c).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        })
    });
    match bash {
        Some(bash) => {
            assert_eq!(shell.path, std::path::Path::new(bash));
            assert_eq!(shell.kind, ShellKind::Bash);
        }
        None => {
            assert_eq!(shell.path, std::path::Path::new(DEFAULT_SHELL));
            assert_eq!(shell.kind, ShellKind::Sh);
        }
    }
    let policy = e.sessions.sandbox_policy().clone();
    let resolve = |shell: ShellRequest| {
        let req = StartRequest {
            shell,
            ..StartRequest::new("true")
        };
        e.sessions.resolve(req, &policy).expect("resolve")
    };
    let host = resolve(ShellRequest::Host);
    assert_eq!((&host.shell, host.shell_kind), (&shell.path, shell.kind));
    let default = resolve(ShellRequest::Default);
    assert_eq!(default.shell, std::path::Path::new("/bin/sh"));
    assert_eq!(default.shell_kind, ShellKind::Sh);
    if let Some(bash) = bash {
        let named = resolve(ShellRequest::Path((*bash).to_owned()));
        assert_eq!(named.shell_kind, ShellKind::Bash);
        // The command runs under it: bash sets BASH_VERSION.
        let req = StartRequest {
            shell: ShellRequest::Host,
            ..StartRequest::new("echo \"${BASH_VERSION:+bash}\"")
        };
        let id = start(&e.sessions, req).await;
        wait_end(&e.sessions, &id).await;
        assert_eq!(all_output(&e.sessions, &id).await, b"bash\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_leads_its_own_session_and_group() {
    let e = env();
    let (snap, out) = run(&e.sessions, "cat /proc/$$/stat").await;
    let text = String::from_utf8(out).unwrap();
    let fields: Vec<&str> = text[text.rfind(')').unwrap() + 2..].split(' ').collect();
    let pid = snap.pid.unwrap().to_string();
    assert_eq!(fields[2], pid, "pgrp");
    assert_eq!(fields[3], pid, "session");
    let host_sid = nix::unistd::getsid(None).unwrap().as_raw().to_string();
    assert_ne!(fields[3], host_sid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_has_pdeathsig_sigkill() {
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("python3 missing: cannot read PR_GET_PDEATHSIG; skipped");
        return;
    }
    let e = env();
    // `exec` keeps the pid (and its parent-death signal); 2 = PR_GET_PDEATHSIG.
    let (snap, out) = run(
        &e.sessions,
        "exec python3 -c 'import ctypes; s = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(s)); print(s.value)'",
    )
    .await;
    assert_eq!(snap.exit.unwrap().code, Some(0));
    assert_eq!(String::from_utf8(out).unwrap(), "9\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_engine_kills_running_groups() {
    let e = env();
    let id = start(&e.sessions, StartRequest::new("sleep 1000 & sleep 1000")).await;
    let pid = e.sessions.check(&HOST, &id).unwrap().pid.unwrap();
    group_has(pid, 3).await;
    drop(e.sessions);
    assert!(group_gone(pid).await, "processes survived the engine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grandchild_holding_the_pipe_does_not_block_the_end() {
    let e = env();
    let t0 = Instant::now();
    let (snap, out) = run(&e.sessions, "sleep 30 & echo started").await;
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(out, b"started\n");
    assert_eq!(snap.exit.unwrap().code, Some(0));
    kill_leftovers(snap.pid.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_wakes_subscriber_without_waiting_for_the_drain_grace() {
    let e = env_with(|c| c.drain_grace = Duration::from_secs(30));
    let t0 = Instant::now();
    let (snap, _) = run(&e.sessions, "echo hi").await;
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(snap.status, SessionStatus::Exited);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_whole_group() {
    let e = env();
    let mut req = StartRequest::new("sleep 1000 & sleep 1000 & echo up; wait");
    req.timeout = Some(Duration::from_millis(300));
    let id = start(&e.sessions, req).await;
    let snap = wait_end(&e.sessions, &id).await;
    let exit = snap.exit.unwrap();
    assert_eq!(exit.reason, EndReason::TimedOut);
    assert_eq!(snap.status, SessionStatus::TimedOut);
    assert_eq!(exit.code, None);
    assert_eq!(exit.signal.as_deref(), Some("SIGTERM"));
    assert!(
        group_gone(snap.pid.unwrap()).await,
        "group survived the timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_flood_still_times_out() {
    let e = env();
    let mut req = StartRequest::new("yes");
    req.timeout = Some(Duration::from_millis(500));
    let t0 = Instant::now();
    let id = start(&e.sessions, req).await;
    let snap = wait_end(&e.sessions, &id).await;
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(snap.status, SessionStatus::TimedOut);
    assert!(snap.output_bytes > 0 && snap.truncated);
    let log_len = std::fs::metadata(&snap.output_path).unwrap().len();
    assert_eq!(log_len, snap.output_bytes);
    assert!(group_gone(snap.pid.unwrap()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_terminates_group_and_counts_processes() {
    let e = env();
    let id = start(
        &e.sessions,
        StartRequest::new("sleep 1000 & sleep 1000 & wait"),
    )
    .await;
    let pid = e.sessions.check(&HOST, &id).unwrap().pid.unwrap();
    group_has(pid, 3).await;
    let info = e
        .sessions
        .kill(&HOST, &id, None, KilledBy::Plugin)
        .await
        .unwrap();
    assert_eq!(info.signalled, 3);
    let snap = wait_end(&e.sessions, &id).await;
    assert_eq!(snap.status, SessionStatus::Killed);
    let exit = snap.exit.unwrap();
    assert_eq!(exit.reason, EndReason::Killed(KilledBy::Plugin));
    assert_eq!(exit.code, None);
    assert!(group_gone(pid).await);
    let again = e.sessions.kill(&HOST, &id, None, KilledBy::Plugin).await;
    assert!(
        matches!(again, Err(SessionError::SessionExited(_))),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_sends_sigterm_to_processes_in_other_groups_of_the_session() {
    // `set -m` puts the background job in its own process group: killpg of the
    // session's leader group does not reach it, the /proc scan must.
    let e = env();
    let id = start(
        &e.sessions,
        StartRequest::new(
            "set -m; sh -c 'trap \"echo term > got_term; exit 0\" TERM; echo ready; \
             while :; do sleep 0.05; done' & wait",
        ),
    )
    .await;
    let started = Instant::now();
    while !e
        .sessions
        .check(&HOST, &id)
        .unwrap()
        .output_tail
        .contains("ready")
    {
        assert!(started.elapsed() < HANG, "the job never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sid = e.sessions.check(&HOST, &id).unwrap().pid.unwrap();
    e.sessions
        .kill(&HOST, &id, None, KilledBy::Plugin)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(e.ws.path().join("got_term")).unwrap(),
        "term\n",
        "the job in its own group got SIGTERM and ran its trap"
    );
    assert!(group_gone(sid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_escalates_to_sigkill_when_term_is_ignored() {
    let e = env_with(|c| c.kill_grace = Duration::from_millis(200));
    let id = start(
        &e.sessions,
        StartRequest::new("trap '' TERM; sleep 1000 & echo ready; wait"),
    )
    .await;
    let pid = e.sessions.check(&HOST, &id).unwrap().pid.unwrap();
    group_has(pid, 2).await;
    e.sessions
        .kill(&HOST, &id, None, KilledBy::ControlClient)
        .await
        .unwrap();
    let snap = wait_end(&e.sessions, &id).await;
    let exit = snap.exit.unwrap();
    assert_eq!(exit.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(exit.code, None);
    assert!(group_gone(pid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_reports_the_signal_not_code_zero() {
    let e = env();
    let id = start(&e.sessions, StartRequest::new("sleep 1000; true")).await;
    let pid = e.sessions.check(&HOST, &id).unwrap().pid.unwrap();
    group_has(pid, 2).await;
    let info = e
        .sessions
        .kill(&HOST, &id, Some(Signal::SIGKILL), KilledBy::Plugin)
        .await
        .unwrap();
    assert!(info.signalled >= 1);
    let snap = wait_end(&e.sessions, &id).await;
    let exit = snap.exit.unwrap();
    assert_eq!(exit.code, None);
    assert_eq!(exit.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(exit.reason, EndReason::Killed(KilledBy::Plugin));
    assert!(group_gone(pid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_stdin_gives_eof_at_once() {
    let e = env();
    let (snap, out) = run(&e.sessions, "cat").await;
    assert_eq!(snap.exit.unwrap().code, Some(0));
    assert!(out.is_empty());
    let (snap, _) = run(&e.sessions, "read x").await;
    assert_eq!(snap.exit.unwrap().code, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_bytes_and_open_pipe_round_trip() {
    let e = env();
    let mut req = StartRequest::new("cat");
    req.stdin = StdinMode::Bytes(b"abc\0\xff\n".to_vec());
    let id = start(&e.sessions, req).await;
    wait_end(&e.sessions, &id).await;
    assert_eq!(all_output(&e.sessions, &id).await, b"abc\0\xff\n");

    let mut req = StartRequest::new("cat; echo done");
    req.stdin = StdinMode::Open;
    let id = start(&e.sessions, req).await;
    e.sessions.write_stdin(&HOST, &id, b"hello ").await.unwrap();
    e.sessions
        .write_stdin(&HOST, &id, b"world\n")
        .await
        .unwrap();
    e.sessions.close_stdin(&HOST, &id).await.unwrap();
    e.sessions.close_stdin(&HOST, &id).await.unwrap();
    let snap = wait_end(&e.sessions, &id).await;
    assert_eq!(snap.exit.as_ref().unwrap().code, Some(0));
    assert_eq!(all_output(&e.sessions, &id).await, b"hello world\ndone\n");
    let r = e.sessions.write_stdin(&HOST, &id, b"late").await;
    assert_eq!(r, Err(SessionError::SessionExited(snap.exit.unwrap())));

    let id = start(&e.sessions, StartRequest::new("sleep 1000")).await;
    let r = e.sessions.write_stdin(&HOST, &id, b"x").await;
    assert!(matches!(r, Err(SessionError::InvalidRequest(_))), "{r:?}");
    e.sessions
        .kill(&HOST, &id, None, KilledBy::Embedder)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_multibyte_character_is_decoded_whole() {
    let e = env();
    let (snap, out) = run(&e.sessions, r"printf '\342\202'; sleep 0.1; printf '\254'").await;
    assert_eq!(out, "€".as_bytes());
    assert_eq!(snap.output_tail, "€");
    assert!(!snap.truncated);
    let (snap, out) = run(&e.sessions, r"printf 'a\377b'").await;
    assert_eq!(out, b"a\xffb");
    assert_eq!(snap.output_tail, "a\u{fffd}b");
    let (snap, _) = run(&e.sessions, r"printf 'x\342\202'").await;
    assert_eq!(snap.output_tail, "x\u{fffd}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_tail_is_bounded_and_cut_on_a_char_boundary() {
    let e = env();
    // 3-byte chars; 20000 of them is 60000 bytes, far over the 16 KiB tail.
    let (snap, out) = run(
        &e.sessions,
        "i=0; while [ $i -lt 20000 ]; do printf '€'; i=$((i+1)); done",
    )
    .await;
    assert_eq!(out.len(), 60000);
    assert!(snap.truncated);
    assert!(snap.output_tail.len() <= OUTPUT_TAIL_MAX_BYTES);
    assert!(snap.output_tail.len() > OUTPUT_TAIL_MAX_BYTES - 3);
    assert!(snap.output_tail.chars().all(|c| c == '€'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_unknown_ids_and_retention() {
    let e = env_with(|c| c.retention = Duration::from_millis(200));
    let (snap, _) = run(&e.sessions, "echo bye; exit 7").await;
    let id = snap.id.clone();
    let tomb = e.sessions.check(&HOST, &id).unwrap();
    assert_eq!(tomb.exit.as_ref().unwrap().code, Some(7));
    assert_eq!(tomb.output_tail, "bye\n");
    assert_eq!(tomb.last_seq, snap.last_seq);
    let exited = Err(SessionError::SessionExited(tomb.exit.clone().unwrap()));
    assert_eq!(e.sessions.write_stdin(&HOST, &id, b"x").await, exited);
    assert_eq!(e.sessions.close_stdin(&HOST, &id).await, exited);
    assert_eq!(e.sessions.detach(&HOST, &id, "r").map(|_| ()), exited);
    for bad in [
        "",
        "bg_",
        "bg_zzzzzzzzzzzz",
        "BG_000000000001",
        "bg_0000000000001",
        "bg_ffffffffffff",
    ] {
        assert_eq!(
            e.sessions.check(&HOST, bad),
            Err(SessionError::UnknownSession(bad.to_owned()))
        );
        assert!(matches!(
            e.sessions.kill(&HOST, bad, None, KilledBy::Embedder).await,
            Err(SessionError::UnknownSession(_))
        ));
        assert!(matches!(
            e.sessions.read_output(&HOST, bad, 0, 10).await,
            Err(SessionError::UnknownSession(_))
        ));
        assert!(matches!(
            e.sessions.subscribe(&HOST, bad, 1),
            Err(SessionError::UnknownSession(_))
        ));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        e.sessions.check(&HOST, &id),
        Err(SessionError::UnknownSession(id.to_string()))
    );
    assert!(e.sessions.list(&HOST).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_private_to_the_plugin_that_started_them() {
    let e = env();
    let a = Caller::Plugin("a".into());
    let b = Caller::Plugin("b".into());
    let id = e
        .sessions
        .start(&a, StartRequest::new("echo mine"))
        .await
        .unwrap();
    wait_end(&e.sessions, &id).await;
    assert!(e.sessions.check(&a, &id).is_ok());
    assert_eq!(
        e.sessions.check(&b, &id),
        Err(SessionError::UnknownSession(id.to_string()))
    );
    assert!(matches!(
        e.sessions.read_output(&b, &id, 0, 10).await,
        Err(SessionError::UnknownSession(_))
    ));
    assert_eq!(e.sessions.list(&a).len(), 1);
    assert!(e.sessions.list(&b).is_empty());
    assert_eq!(e.sessions.list(&HOST).len(), 1);
    let host_id = start(&e.sessions, StartRequest::new("true")).await;
    assert!(matches!(
        e.sessions.check(&a, &host_id),
        Err(SessionError::UnknownSession(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_replay_and_respect_from_seq() {
    let e = env();
    let (snap, _) = run(&e.sessions, "echo a; echo b >&2; echo c").await;
    let mut sub = e.sessions.subscribe(&HOST, &snap.id, 1).unwrap();
    tokio::time::timeout(HANG, sub.ready()).await.unwrap();
    let all = sub.next(1000);
    assert_seqs_contiguous(&all);
    assert_eq!(all.len() as u64, snap.last_seq);
    assert!(sub.finished());
    assert!(sub.next(10).is_empty());
    tokio::time::timeout(HANG, sub.ready()).await.unwrap();

    let mut tail = e
        .sessions
        .subscribe(&HOST, &snap.id, snap.last_seq)
        .unwrap();
    let only = tail.next(10);
    assert_eq!(only.len(), 1);
    assert!(matches!(only[0].kind, SessionEventKind::Exited(_)));
    let mut paged = e.sessions.subscribe(&HOST, &snap.id, 0).unwrap();
    assert_eq!(paged.next(2).len(), 2);
    assert_eq!(paged.cursor(), 3);
    assert_eq!(paged.next(1000), all[2..].to_vec());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_events_stay_bounded_with_omitted_ranges() {
    let e = env_with(|c| c.output_memory_bytes = 64 * 1024);
    let (snap, out) = run(&e.sessions, "head -c 2000000 /dev/urandom").await;
    assert_eq!(out.len(), 2_000_000);
    let mut sub = e.sessions.subscribe(&HOST, &snap.id, 1).unwrap();
    let events = sub.next(usize::MAX);
    assert_seqs_contiguous(&events);
    let held: usize = events
        .iter()
        .map(|e| match &e.kind {
            SessionEventKind::Output(c) => c.data.len(),
            _ => 0,
        })
        .sum();
    assert!(held <= 128 * 1024, "held {held} bytes of events");
    // Omitted offsets point at the bytes the range stood for; outputs are contiguous.
    let mut next_offset = 0u64;
    for ev in &events {
        match &ev.kind {
            SessionEventKind::Omitted(r) => assert_eq!(r.offset, next_offset),
            SessionEventKind::Output(c) => {
                assert!(c.offset >= next_offset);
                assert_eq!(
                    &out[c.offset as usize..c.offset as usize + c.data.len()],
                    &c.data[..]
                );
                next_offset = c.offset + c.data.len() as u64;
                continue;
            }
            _ => continue,
        }
        // After an omitted range the next output starts further on.
        next_offset = u64::MAX;
        let next_out = events
            .iter()
            .skip_while(|x| x.seq <= ev.seq)
            .find_map(|x| match &x.kind {
                SessionEventKind::Output(c) => Some(c.offset),
                _ => None,
            });
        next_offset = next_out.unwrap_or(next_offset);
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(e.kind, SessionEventKind::Omitted(_)))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_keeps_the_process_running() {
    let e = env();
    let mut req = StartRequest::new("echo first; read x; echo second");
    req.tool_call_id = Some("call-1".into());
    req.stdin = StdinMode::Open;
    let id = start(&e.sessions, req).await;
    assert!(e.sessions.is_running("call-1"));
    let pid = e.sessions.check(&HOST, &id).unwrap().pid;
    assert_eq!(e.sessions.pid("call-1"), pid);
    assert_eq!(
        e.sessions.running_calls(),
        vec![("call-1".to_owned(), id.clone())]
    );
    assert!(!e.sessions.check(&HOST, &id).unwrap().detached);

    let mut sub = e.sessions.subscribe(&HOST, &id, 1).unwrap();
    let waiter = tokio::spawn(async move {
        let mut seen = Vec::new();
        loop {
            sub.ready().await;
            let batch = sub.next(256);
            let detached = batch
                .iter()
                .any(|e| matches!(e.kind, SessionEventKind::Detached(_)));
            seen.extend(batch);
            if detached || sub.finished() {
                return seen;
            }
        }
    });
    // Wait for the first line so the detach happens mid-run.
    let deadline = Instant::now() + HANG;
    while e.sessions.check(&HOST, &id).unwrap().output_bytes < 6 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let info = e.sessions.detach_call("call-1", "user asked").unwrap();
    assert_eq!(info.id, id);
    assert_eq!(info.output_bytes, 6);
    assert_eq!(info.tool_call_id.as_deref(), Some("call-1"));
    let seen = tokio::time::timeout(HANG, waiter).await.unwrap().unwrap();
    let last = seen.last().unwrap();
    assert_eq!(last.kind, SessionEventKind::Detached(info.clone()));
    assert!(!e.sessions.is_running("call-1"));
    assert!(e.sessions.running_calls().is_empty());
    assert!(matches!(
        e.sessions.detach_call("call-1", "again"),
        Err(SessionError::InvalidRequest(_))
    ));
    let snap = e.sessions.check(&HOST, &id).unwrap();
    assert!(snap.detached && snap.status == SessionStatus::Running);
    assert_eq!(e.sessions.end_call("call-1").await, 0);

    e.sessions.write_stdin(&HOST, &id, b"go\n").await.unwrap();
    let snap = wait_end(&e.sessions, &id).await;
    assert_eq!(snap.exit.unwrap().code, Some(0));
    assert_eq!(all_output(&e.sessions, &id).await, b"first\nsecond\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_call_kills_only_undetached_runs() {
    let e = env();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut req = StartRequest::new("sleep 1000");
        req.tool_call_id = Some("call-2".into());
        ids.push(start(&e.sessions, req).await);
    }
    e.sessions.detach(&HOST, &ids[0], "keep").unwrap();
    assert_eq!(e.sessions.end_call("call-2").await, 1);
    let killed = wait_end(&e.sessions, &ids[1]).await;
    assert_eq!(
        killed.exit.unwrap().reason,
        EndReason::Killed(KilledBy::ToolCallEnded)
    );
    assert_eq!(
        e.sessions.check(&HOST, &ids[0]).unwrap().status,
        SessionStatus::Running
    );
    e.sessions.shutdown().await;
    let snap = e.sessions.check(&HOST, &ids[0]).unwrap();
    assert_eq!(
        snap.exit.unwrap().reason,
        EndReason::Killed(KilledBy::HostShutdown)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_output_caps_and_cursor() {
    let e = env_with(|c| c.output_memory_bytes = 4096);
    let (snap, _) = run(&e.sessions, "seq 1 300000").await;
    let expected: Vec<u8> = (1..=300000)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect();
    assert_eq!(snap.output_bytes, expected.len() as u64);
    let first = e
        .sessions
        .read_output(&HOST, &snap.id, 0, u32::MAX)
        .await
        .unwrap();
    assert_eq!(first.data.len(), MAX_READ_BYTES as usize);
    assert!(!first.eof);
    let mid = e
        .sessions
        .read_output(&HOST, &snap.id, 10_000, 7)
        .await
        .unwrap();
    assert_eq!(mid.data, &expected[10_000..10_007]);
    let end = e
        .sessions
        .read_output(&HOST, &snap.id, expected.len() as u64 - 5, 100)
        .await
        .unwrap();
    assert!(end.eof);
    assert_eq!(end.data, &expected[expected.len() - 5..]);
    let past = e
        .sessions
        .read_output(&HOST, &snap.id, expected.len() as u64 + 1, 1)
        .await;
    assert!(matches!(past, Err(SessionError::InvalidRequest(_))));

    let mut got = Vec::new();
    loop {
        let r = e
            .sessions
            .read_new_output(&HOST, &snap.id, 300_000)
            .await
            .unwrap();
        assert_eq!(r.offset, got.len() as u64);
        assert_eq!(r.total_bytes, expected.len() as u64);
        got.extend_from_slice(&r.data);
        if r.eof {
            break;
        }
    }
    assert_eq!(got, expected);
    let r = e
        .sessions
        .read_new_output(&HOST, &snap.id, 10)
        .await
        .unwrap();
    assert!(r.data.is_empty() && r.eof);
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gib_of_output_keeps_memory_flat_and_log_exact() {
    let e = env();
    let before = vm_hwm_kib();
    let t0 = Instant::now();
    let id = start(
        &e.sessions,
        StartRequest::new("head -c 1073741824 /dev/zero"),
    )
    .await;
    let mut sub = e.sessions.subscribe(&HOST, &id, 1).unwrap();
    tokio::time::timeout(Duration::from_secs(120), async {
        while !sub.finished() {
            sub.ready().await;
            sub.next(256);
        }
    })
    .await
    .expect("flood did not finish");
    let snap = e.sessions.check(&HOST, &id).unwrap();
    let after = vm_hwm_kib();
    eprintln!("1 GiB in {:?}; VmHWM {before} -> {after} KiB", t0.elapsed());
    assert_eq!(snap.exit.unwrap().code, Some(0));
    assert_eq!(snap.output_bytes, 1 << 30);
    assert!(
        after.saturating_sub(before) < 64 * 1024,
        "VmHWM grew {before} -> {after} KiB"
    );
    let mut file = std::fs::File::open(&snap.output_path).unwrap();
    assert_eq!(file.metadata().unwrap().len(), 1 << 30);
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = std::io::Read::read(&mut file, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        assert!(
            buf[..n].iter().all(|&b| b == 0),
            "non-zero byte near {total}"
        );
        total += n as u64;
    }
    assert_eq!(total, 1 << 30);
    drop(file);
    std::fs::remove_file(&snap.output_path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopted_child_is_managed_like_any_session() {
    let e = env();
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.args(["-c", "echo adopted; echo oops >&2; exit 4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().unwrap();
    let id = e
        .sessions
        .adopt(&HOST, child, "adopted-cmd".into(), None)
        .unwrap();
    let snap = wait_end(&e.sessions, &id).await;
    assert_eq!(snap.command, "adopted-cmd");
    assert_eq!(snap.exit.unwrap().code, Some(4));
    let out = all_output(&e.sessions, &id).await;
    assert_eq!(out.len(), 13);
    assert!(out.starts_with(b"adopted\n") || out.starts_with(b"oops\n"));

    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.args(["-c", "sleep 1000 & wait"]).process_group(0);
    let child = cmd.spawn().unwrap();
    let id = e
        .sessions
        .adopt(&HOST, child, "sleeper".into(), Some("call-9".into()))
        .unwrap();
    assert!(e.sessions.is_running("call-9"));
    let pid = e.sessions.check(&HOST, &id).unwrap().pid.unwrap();
    group_has(pid, 2).await;
    let info = e
        .sessions
        .kill(&HOST, &id, None, KilledBy::Plugin)
        .await
        .unwrap();
    assert_eq!(info.signalled, 2);
    let snap = wait_end(&e.sessions, &id).await;
    assert_eq!(snap.status, SessionStatus::Killed);
    assert!(group_gone(pid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_sessions_is_enforced() {
    let e = env_with(|c| c.max_sessions = 1);
    let id = start(&e.sessions, StartRequest::new("sleep 1000")).await;
    let r = e.sessions.start(&HOST, StartRequest::new("true")).await;
    // The text names the limit and its default, as it always has.
    match r {
        Err(SessionError::ResourceLimit(m)) => assert_eq!(
            m,
            "1 sessions are running on this host, its limit (max_sessions = 1, default 64); \
             wait for one to end or kill one"
        ),
        other => panic!("{other:?}"),
    }
    e.sessions
        .kill(&HOST, &id, None, KilledBy::Embedder)
        .await
        .unwrap();
    let id = start(&e.sessions, StartRequest::new("true")).await;
    wait_end(&e.sessions, &id).await;
}

#[derive(Default)]
struct Recorder(Mutex<Vec<(SessionId, SessionEvent)>>);

impl SessionObserver for Recorder {
    fn on_event(&self, session: &SessionId, event: &SessionEvent) {
        self.0
            .lock()
            .unwrap()
            .push((session.clone(), event.clone()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_sees_every_event_in_order() {
    let recorder = Arc::new(Recorder::default());
    let obs = recorder.clone();
    let e = env_with(move |c| c.observer = Some(obs));
    let id = start(&e.sessions, StartRequest::new("echo one; echo two")).await;
    let events = events_until_end(&e.sessions, &id).await;
    let seen: Vec<SessionEvent> = recorder
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(s, _)| *s == id)
        .map(|(_, e)| e.clone())
        .collect();
    assert_eq!(seen, events);
}

#[test]
fn ids_signals_and_errors() {
    assert!(SessionId::parse("bg_00000000002a").is_ok());
    assert!("bg_00000000002A".parse::<SessionId>().is_err());
    assert_eq!(parse_signal("SIGINT").unwrap(), Signal::SIGINT);
    assert_eq!(parse_signal("term").unwrap(), Signal::SIGTERM);
    assert_eq!(parse_signal("9").unwrap(), Signal::SIGKILL);
    assert!(matches!(
        parse_signal("SIGNOPE"),
        Err(SessionError::InvalidRequest(_))
    ));
    let e = SessionError::SessionExited(ExitStatus {
        code: None,
        signal: Some("SIGKILL".into()),
        reason: EndReason::Killed(KilledBy::Plugin),
    });
    assert_eq!(
        e.to_string(),
        "the session has already ended (ended by SIGKILL, killed by plugin); its output stays readable with read_output"
    );
}

#[test]
fn new_requires_a_runtime_and_a_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let r = Sessions::new(SessionsConfig::new(dir.path(), dir.path()));
    assert!(matches!(r, Err(SessionError::InvalidRequest(_))));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _g = rt.enter();
    let r = Sessions::new(SessionsConfig::new(dir.path().join("missing"), dir.path()));
    assert!(matches!(r, Err(SessionError::InvalidRequest(_))));
    let mut config = SessionsConfig::new(dir.path(), dir.path());
    config.extra_env = vec![("A=B".into(), "x".into())];
    assert!(matches!(
        Sessions::new(config),
        Err(SessionError::InvalidRequest(_))
    ));
}

/// The host's open descriptors that refer to the mount namespace `ns`
/// (`mnt:[inode]`, as `readlink /proc/self/ns/mnt` prints it in the command).
fn fds_on(ns: &str) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == ns))
        .count()
}

/// A foreground run's private mount namespace is held by the host while the run
/// goes on (so the kernel tears it down after the exit is reported, not in the
/// dying process), and let go once it has ended; a background run's is never held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_runs_mount_namespace_is_held_until_it_has_ended() {
    let e = env();
    for (call, held) in [(Some("call-ns"), 1), (None, 0)] {
        let mut req = StartRequest::new("readlink /proc/self/ns/mnt; exec sleep 30");
        req.tool_call_id = call.map(str::to_owned);
        let id = start(&e.sessions, req).await;
        let deadline = Instant::now() + HANG;
        let ns = loop {
            let out = all_output(&e.sessions, &id).await;
            if out.ends_with(b"\n") {
                break String::from_utf8(out).unwrap().trim().to_owned();
            }
            assert!(Instant::now() < deadline, "no output from {id}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert!(ns.starts_with("mnt:["), "{ns}");
        assert_ne!(
            std::fs::read_link("/proc/self/ns/mnt").unwrap().to_str(),
            Some(ns.as_str()),
            "the command runs in a mount namespace of its own"
        );
        assert_eq!(fds_on(&ns), held, "{call:?} while running");
        e.sessions
            .kill(&HOST, &id, None, KilledBy::Embedder)
            .await
            .unwrap();
        let snap = wait_end(&e.sessions, &id).await;
        assert_eq!(snap.status, SessionStatus::Killed);
        // Let go right after the exit is reported (the session's bookkeeping).
        while fds_on(&ns) != 0 {
            assert!(Instant::now() < deadline, "{ns} still held after the end");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// [`toolhost_process::Sessions::start_with_policy`] can tighten the
/// operator's sandbox but never loosen it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_call_policy_only_tightens() {
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
        unix_sockets: true,
        git_writable: true,
    };
    let snap = run(full, "touch /toolhost-never-written").await;
    assert!(snap.sandbox.starts_with("workspace-write ("), "{snap:?}");
    assert!(snap.sandbox.contains("network blocked"), "{snap:?}");
    assert_eq!(snap.exit.unwrap().code, Some(1));
    assert!(!std::path::Path::new("/toolhost-never-written").exists());
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

/// Sessions of an earlier run of the host session come back ended and stay
/// with their owners (`Sessions::restore`): a plugin's call for `alice` sees
/// only hers, `admin` and the host see all, another plugin none; the output
/// is what the log holds, a kill says it had ended, and a session the
/// earlier run left running reads as killed by the host's restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restored_sessions_are_ended_and_keep_their_owners() {
    let e = env();
    let dir = e.state.path().join("sessions").join("bg_0000000000a1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("output.log"), "started\n").unwrap();
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let restored = |id: &str, identity: &str, end: Option<RecordedEnd>| RestoredSession {
        id: id.into(),
        command: format!("command of {identity}"),
        tool_call_id: None,
        plugin: Some("bash".into()),
        identity: Some(identity.into()),
        pid: 4_000_000,
        sandbox: "workspace-write (recorded)".into(),
        started_ms: now_ms - 5_000,
        ended_ms: end.as_ref().map(|_| now_ms - 2_000),
        end,
        detached: true,
        output_omitted: None,
    };
    let exited = RecordedEnd {
        status: "exited".into(),
        code: Some(0),
        signal: None,
        summary: "exited with code 0".into(),
    };
    e.sessions.restore(vec![
        restored("bg_0000000000a1", "alice", None),
        restored("bg_0000000000a2", "bob", Some(exited)),
    ]);
    let caller = |name: &str, admin| Caller::PluginFor {
        plugin: "bash".into(),
        principal: Principal {
            name: name.into(),
            admin,
        },
        tool_call_id: "tc_000000000001".into(),
    };
    let ids = |c: &Caller| -> Vec<String> {
        e.sessions
            .list(c)
            .into_iter()
            .map(|s| s.id.as_str().to_owned())
            .collect()
    };
    assert_eq!(ids(&caller("alice", false)), ["bg_0000000000a1"]);
    assert_eq!(ids(&caller("bob", false)), ["bg_0000000000a2"]);
    assert_eq!(ids(&caller("carol", true)).len(), 2);
    assert_eq!(ids(&HOST).len(), 2);
    assert!(ids(&Caller::Plugin("other".into())).is_empty());
    let alice = caller("alice", false);
    let snap = e.sessions.check(&alice, "bg_0000000000a1").unwrap();
    assert_eq!(snap.status, SessionStatus::Killed);
    assert_eq!(
        snap.exit.as_ref().unwrap().reason,
        EndReason::Killed(KilledBy::HostRestart)
    );
    assert_eq!(
        (snap.command.as_str(), snap.output_bytes, snap.detached),
        ("command of alice", 8, true)
    );
    assert_eq!(snap.sandbox, "workspace-write (recorded)");
    assert!((5_000..60_000).contains(&snap.elapsed_ms), "{snap:?}");
    let bob = e.sessions.check(&HOST, "bg_0000000000a2").unwrap();
    assert_eq!((bob.status, bob.elapsed_ms), (SessionStatus::Exited, 3_000));
    assert_eq!(bob.output_bytes, 0);
    let r = e
        .sessions
        .read_new_output(&alice, "bg_0000000000a1", MAX_READ_BYTES)
        .await
        .unwrap();
    assert_eq!((r.offset, r.data.as_slice()), (0, &b"started\n"[..]));
    assert!(matches!(
        e.sessions
            .kill(&alice, "bg_0000000000a1", None, KilledBy::Plugin)
            .await,
        Err(SessionError::SessionExited(_))
    ));
    assert!(matches!(
        e.sessions.check(&caller("bob", false), "bg_0000000000a1"),
        Err(SessionError::UnknownSession(_))
    ));
}
