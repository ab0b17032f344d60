//! Issue 17 item 8: sandboxed commands cannot reach pathname UNIX sockets (an
//! ssh-agent, `/var/run/docker.sock`, D-Bus) unless both the operator
//! (`--allow-unix-sockets`) and the plugin's manifest (`unix_sockets = true`) grant
//! them (ARCHITECTURE.md, "Sandbox").
//!
//! Each test binds real listeners (one in a temp dir outside the workspace, one
//! inside it), runs a real command that connects, and checks what the listener
//! saw, not only what the command printed: nothing accepted without the grant (a
//! non-blocking `accept` is `WouldBlock`), the byte delivered with it.

use std::io::Read;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use toolhost_process::{
    Caller, SandboxMode, SandboxPolicy, Sessions, SessionsConfig, StartRequest, probe_kernel,
};
use toolhost_runtime::manifest::Manifest;

use crate::support::{allow_all_policy, describe, dirs, stdout, toolhost};

const HOST: Caller = Caller::Host;

/// A python3 one-liner that connects to the UNIX socket at `path` and sends `x`.
fn connect_command(path: &Path) -> String {
    format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); s.send(b\"x\")'",
        path.display()
    )
}

/// A listener at `path`, non-blocking, so that [`received`] never waits.
fn listen(path: &Path) -> UnixListener {
    let l = UnixListener::bind(path).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

/// Whether `listener` has a pending connection that carried `x`; `false` when it
/// has none (`WouldBlock`).
fn received(listener: &UnixListener) -> bool {
    match listener.accept() {
        Ok((mut s, _)) => {
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 1];
            s.read_exact(&mut buf).is_ok() && &buf == b"x"
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

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

/// Skips (with a note) where seccomp is missing: then the block is a documented
/// warning, not enforced.
fn seccomp_or_skip() -> bool {
    if !probe_kernel().seccomp {
        eprintln!("SKIP: no seccomp on this kernel");
        return false;
    }
    true
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

/// The real binary: `--allow-unix-sockets` is the operator's half of the grant
/// (the built-in bash plugin's manifest asks for it), the summary line says which
/// holds, and the denial names the flag.
#[test]
fn toolhost_call_needs_allow_unix_sockets() {
    if !seccomp_or_skip() {
        return;
    }
    let (ws, state) = dirs();
    let elsewhere = tempfile::tempdir().unwrap();
    let sock = elsewhere.path().join("agent.sock");
    let listener = listen(&sock);
    let policy = allow_all_policy(state.path());
    let bash = |extra: &[&str]| {
        let args = serde_json::json!({ "command": connect_command(&sock) }).to_string();
        let mut all = vec!["call", "bash", args.as_str(), "--policy", policy.as_str()];
        all.extend_from_slice(extra);
        toolhost(ws.path(), state.path(), &all)
    };

    let out = bash(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(text.contains("Operation not permitted"), "{text}");
    assert!(
        text.contains("[sandbox denial (likely): ") && text.contains("--allow-unix-sockets"),
        "{text}"
    );
    assert!(!received(&listener));
    // The network grant alone does not open it.
    let out = bash(&["--allow-network"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(!received(&listener));

    let out = bash(&["--allow-unix-sockets"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(received(&listener), "{}", describe(&out));

    let out = bash(&["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["structured"]["sandbox"]
            .as_str()
            .unwrap()
            .contains("unix sockets blocked"),
        "{v}"
    );
    let out = bash(&["--json", "--allow-unix-sockets"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["structured"]["sandbox"]
            .as_str()
            .unwrap()
            .contains("unix sockets allowed"),
        "{v}"
    );
    assert!(received(&listener));
}

/// Both must agree: a manifest that does not ask for UNIX sockets keeps them
/// blocked under `--allow-unix-sockets`, and one that asks gets them only with it.
#[test]
fn the_manifest_and_the_operator_must_both_grant_unix_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let parse = |extra: &str| {
        let text = format!("id = \"p\"\ncontract = \"0.1.0\"\n{extra}");
        Manifest::parse(&text, Path::new("p.toml"), dir.path(), &|_| None).unwrap()
    };
    let operator = |unix_sockets| SandboxPolicy {
        unix_sockets,
        ..SandboxPolicy::default()
    };
    let silent = parse("");
    assert!(!silent.unix_sockets);
    assert_eq!(silent.to_json()["unix_sockets"], false);
    let asks = parse("unix_sockets = true\n");
    assert!(asks.unix_sockets);
    assert_eq!(asks.to_json()["unix_sockets"], true);
    for (manifest, op, want) in [
        (&silent, true, false),
        (&asks, false, false),
        (&asks, true, true),
    ] {
        let combined = manifest.sandbox_policy().stricter(&operator(op));
        assert_eq!(combined.unix_sockets, want, "{combined:?}");
    }
    // The network grant never implies it.
    let network_only = parse("network = true\n");
    let combined = network_only.sandbox_policy().stricter(&SandboxPolicy {
        network: true,
        unix_sockets: true,
        ..SandboxPolicy::default()
    });
    assert!(combined.network && !combined.unix_sockets, "{combined:?}");
    assert!(Manifest::builtin_bash().unix_sockets);
}
