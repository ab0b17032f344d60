//! What the process crate's integration tests share: a fresh engine over fresh
//! directories, waits with a deadline (never a sleep that hopes), process checks
//! through `/proc`, and a UNIX listener that says whether a command reached it.
//!
//! The binary's suite (`tests/all`, a test of `host/toolhost`) includes this file as
//! its `process_support` module for the same needs, so no helper is written twice.
//! Not every module of either suite uses every helper.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

use toolhost_process::{
    Caller, SessionId, Sessions, SessionsConfig, Signal, Snapshot, probe_kernel,
};

/// The longest any wait in these tests lasts before it fails the test.
pub const HANG: Duration = Duration::from_secs(30);

/// The caller the tests use: the host, which sees every session.
pub const HOST: Caller = Caller::Host;

/// A fresh (workspace, state dir) pair, removed when dropped.
pub fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

/// An engine over fresh directories, which it keeps alive.
pub struct Env {
    /// The workspace.
    pub ws: tempfile::TempDir,
    /// The state dir.
    pub state: tempfile::TempDir,
    /// The engine.
    pub sessions: Sessions,
}

/// An engine with the default configuration but a 500 ms kill grace, changed by
/// `tweak`. Must be called inside a tokio runtime.
pub fn env_with(tweak: impl FnOnce(&mut SessionsConfig)) -> Env {
    let (ws, state) = dirs();
    let mut config = SessionsConfig::new(ws.path(), state.path());
    config.kill_grace = Duration::from_millis(500);
    tweak(&mut config);
    let sessions = Sessions::new(config).expect("Sessions::new");
    Env {
        ws,
        state,
        sessions,
    }
}

/// [`env_with`] with nothing changed.
pub fn env() -> Env {
    env_with(|_| {})
}

/// Waits (event-driven, bounded by [`HANG`]) for session `id` to end, discarding its
/// events, and returns its final snapshot.
pub async fn wait_end(s: &Sessions, id: &SessionId) -> Snapshot {
    let mut sub = s.subscribe(&HOST, id, 1).expect("subscribe");
    tokio::time::timeout(HANG, async {
        while !sub.finished() {
            sub.ready().await;
            sub.next(256);
        }
    })
    .await
    .expect("session did not end in time");
    s.check(&HOST, id).expect("check")
}

/// A grandchild that leaves the shell's session and group, writing its pid to
/// `escapee.pid` in the cwd first.
pub const ESCAPEE: &str = "setsid sh -c 'echo $$ > escapee.pid; exec sleep 300' &";

/// True once `pid` no longer runs: no `/proc/PID`, or a zombie (an orphan that died
/// waits there for whoever is pid 1 to reap it).
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .is_some_and(|i| stat[i + 1..].trim_start().starts_with('Z')),
    }
}

/// Polls (bounded by [`HANG`]) until `pid` is gone; false if it never went.
pub fn wait_gone(pid: u32) -> bool {
    let deadline = Instant::now() + HANG;
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Polls (bounded by [`HANG`]) until `path` holds a pid, and returns it.
pub fn wait_pid_file(path: &Path) -> u32 {
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
pub fn cleanup(pid: u32) {
    if !gone(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

/// A python3 one-liner that connects to the UNIX socket at `path` and sends `x`.
pub fn connect_command(path: &Path) -> String {
    format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); s.send(b\"x\")'",
        path.display()
    )
}

/// A listener at `path`, non-blocking, so that [`received`] never waits.
pub fn listen(path: &Path) -> UnixListener {
    let l = UnixListener::bind(path).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

/// Whether `listener` has a pending connection that carried `x`; `false` when it has
/// none (`WouldBlock`).
pub fn received(listener: &UnixListener) -> bool {
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

/// False (with a note) where seccomp is missing: there the UNIX-socket block is a
/// documented warning, not enforced, so its tests skip.
pub fn seccomp_or_skip() -> bool {
    if !probe_kernel().seccomp {
        eprintln!("SKIP: no seccomp on this kernel");
        return false;
    }
    true
}
