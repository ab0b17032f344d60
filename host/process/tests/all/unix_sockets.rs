//! Sandboxed commands cannot reach pathname UNIX sockets (an ssh-agent,
//! `/var/run/docker.sock`, D-Bus) unless the sandbox grants them
//! ([`SandboxPolicy::unix_sockets`]); the network grant does not include them.
//! (That the operator and the manifest must both grant them is tested through the
//! runtime and the binary: `tests/all/unix_sockets.rs`.)
//!
//! Each test binds real listeners (one in a temp dir outside the workspace, one
//! inside it), runs a real command that connects, and checks what the listener
//! saw, not only what the command printed: nothing accepted without the grant (a
//! non-blocking `accept` is `WouldBlock`), the byte delivered with it.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toolhost_process::{SandboxMode, SandboxPolicy, Sessions, SessionsConfig, StartRequest};

use crate::support::{HOST, connect_command, dirs, listen, received, seccomp_or_skip};

struct Run {
    exit: Option<i32>,
    output: String,
    sandbox: String,
    denial: Option<String>,
}

/// Runs `command` in `ws` to its end under a fresh engine with `policy`.
async fn run(ws: &Path, state: &Path, policy: &SandboxPolicy, command: &str) -> Run {
    let mut config = SessionsConfig::new(ws, state);
    config.sandbox = policy.clone();
    let sessions = Sessions::new(config).expect("Sessions::new");
    let id = sessions
        .start(&HOST, StartRequest::new(command))
        .await
        .expect("start");
    let exit = tokio::time::timeout(Duration::from_secs(20), sessions.wait(&HOST, &id))
        .await
        .expect("the command ended in time")
        .expect("wait");
    let range = sessions
        .read_output(&HOST, &id, 0, 1 << 20)
        .await
        .expect("read_output");
    let snap = sessions.check(&HOST, &id).expect("check");
    Run {
        exit: exit.code,
        output: String::from_utf8_lossy(&range.data).into_owned(),
        sandbox: snap.sandbox,
        denial: snap.sandbox_denial,
    }
}

fn policy(mode: SandboxMode, unix_sockets: bool) -> SandboxPolicy {
    SandboxPolicy {
        mode,
        unix_sockets,
        ..SandboxPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_reaches_no_unix_socket_unless_granted() {
    if !seccomp_or_skip() {
        return;
    }
    let (ws, state) = dirs();
    let elsewhere = tempfile::tempdir().unwrap();
    let outside: PathBuf = elsewhere.path().join("agent.sock");
    let inside: PathBuf = ws.path().join("app.sock");
    let (outside_l, inside_l) = (listen(&outside), listen(&inside));

    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        for (path, listener) in [(&outside, &outside_l), (&inside, &inside_l)] {
            let r = run(
                ws.path(),
                state.path(),
                &policy(mode, false),
                &connect_command(path),
            )
            .await;
            let label = format!("{mode}, {}", path.display());
            assert_eq!(r.exit, Some(1), "{label}: {}", r.output);
            assert!(
                r.output
                    .contains("PermissionError: [Errno 1] Operation not permitted"),
                "{label}: {}",
                r.output
            );
            assert!(!received(listener), "{label}: the listener accepted");
            assert!(r.sandbox.contains("unix sockets blocked"), "{}", r.sandbox);
            let denial = r.denial.unwrap_or_default();
            assert!(denial.contains("--allow-unix-sockets"), "{label}: {denial}");

            // Granted: connected, and the byte arrives.
            let r = run(
                ws.path(),
                state.path(),
                &policy(mode, true),
                &connect_command(path),
            )
            .await;
            assert_eq!(r.exit, Some(0), "{label}, granted: {}", r.output);
            assert!(received(listener), "{label}, granted: nothing arrived");
            assert!(r.sandbox.contains("unix sockets allowed"), "{}", r.sandbox);
        }
    }
    // Full-access confines nothing.
    for (path, listener) in [(&outside, &outside_l), (&inside, &inside_l)] {
        let r = run(
            ws.path(),
            state.path(),
            &policy(SandboxMode::FullAccess, false),
            &connect_command(path),
        )
        .await;
        assert_eq!(r.exit, Some(0), "full-access: {}", r.output);
        assert!(received(listener), "full-access: nothing arrived");
        assert_eq!(r.sandbox, "full-access (no confinement)");
    }
}

/// The network grant is a separate one: it does not open UNIX sockets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_grant_does_not_include_unix_sockets() {
    if !seccomp_or_skip() {
        return;
    }
    let (ws, state) = dirs();
    let elsewhere = tempfile::tempdir().unwrap();
    let sock = elsewhere.path().join("docker.sock");
    let listener = listen(&sock);
    let network = SandboxPolicy {
        network: true,
        ..SandboxPolicy::default()
    };
    let r = run(ws.path(), state.path(), &network, &connect_command(&sock)).await;
    assert_eq!(r.exit, Some(1), "{}", r.output);
    assert!(!received(&listener));
    assert!(
        r.sandbox.contains("network allowed") && r.sandbox.contains("unix sockets blocked"),
        "{}",
        r.sandbox
    );
    // With the network granted the refused socket can only be a UNIX one.
    let denial = r.denial.unwrap_or_default();
    assert!(
        denial.contains("UNIX sockets are blocked") && denial.contains("--allow-unix-sockets"),
        "{denial}"
    );
}

/// Connected `socketpair`s (the IPC of shells, ssh, Python's `socketpair()` and
/// `multiprocessing.Pipe()`) keep working; a datagram pair, which could later be
/// pointed at any pathname datagram socket (`/dev/log`, journald), does not; and
/// what glibc reaches through sockets falls back to files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connected_socketpairs_work_but_datagram_ones_do_not() {
    if !seccomp_or_skip() {
        return;
    }
    let (ws, state) = dirs();
    let elsewhere = tempfile::tempdir().unwrap();
    let log = elsewhere.path().join("log.sock");
    let dgram = UnixDatagram::bind(&log).unwrap();
    dgram.set_nonblocking(true).unwrap();
    let ww = SandboxPolicy::default();

    let pairs = "python3 -c 'import socket, multiprocessing\n\
         for t in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):\n    \
             a, b = socket.socketpair(socket.AF_UNIX, t); a.sendall(b\"x\"); assert b.recv(1) == b\"x\"\n\
         r, w = multiprocessing.Pipe(); w.send(1); assert r.recv() == 1\n\
         print(\"pairs ok\")'";
    let r = run(ws.path(), state.path(), &ww, pairs).await;
    assert_eq!((r.exit, r.output.as_str()), (Some(0), "pairs ok\n"));

    let datagram = format!(
        "python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b\"x\", \"{}\")'",
        log.display()
    );
    let r = run(ws.path(), state.path(), &ww, &datagram).await;
    assert_eq!(r.exit, Some(1), "{}", r.output);
    assert!(r.output.contains("Operation not permitted"), "{}", r.output);
    let mut buf = [0u8; 8];
    assert_eq!(
        dgram.recv(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a datagram reached {}",
        log.display()
    );
    // Granted, the same datagram arrives.
    let r = run(
        ws.path(),
        state.path(),
        &policy(SandboxMode::WorkspaceWrite, true),
        &datagram,
    )
    .await;
    assert_eq!(r.exit, Some(0), "{}", r.output);
    assert_eq!(dgram.recv(&mut buf).unwrap(), 1);

    // Name lookups skip nscd / nss-systemd and read /etc/passwd.
    let r = run(
        ws.path(),
        state.path(),
        &ww,
        "getent passwd root | cut -d: -f1; id -u",
    )
    .await;
    assert_eq!(r.exit, Some(0), "{}", r.output);
    assert!(r.output.starts_with("root\n"), "{}", r.output);
}
