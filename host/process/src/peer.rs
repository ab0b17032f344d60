//! Who is on the other end of a local socket: the host's own commands must not
//! act as its clients (ARCHITECTURE.md, invariant "The host's own commands are
//! refused on the control socket").

use crate::{Caller, SessionStatus, Sessions};

/// The real user id of the host process.
pub fn current_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

impl Sessions {
    /// Why process `pid` (a socket peer, from `SO_PEERCRED`) is one of the host's
    /// own commands, or `None`. It is one when it belongs to a running session (its
    /// session id is a session's pid: sessions lead their own) or it runs with
    /// `no_new_privs` while the host does not (every confined command does,
    /// including ones that left their session).
    pub fn command_peer(&self, pid: i32) -> Option<&'static str> {
        if let Ok(sid) = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid))) {
            let ours = self
                .list(&Caller::Host)
                .into_iter()
                .any(|s| s.status == SessionStatus::Running && s.pid == Some(sid.as_raw() as u32));
            if ours {
                return Some("a command the host started");
            }
        }
        if no_new_privs(&format!("/proc/{pid}/status")) == Some(true)
            && no_new_privs("/proc/self/status") == Some(false)
        {
            return Some("a sandboxed process (no_new_privs)");
        }
        None
    }
}

/// The `NoNewPrivs` flag of a `/proc/<pid>/status` file.
fn no_new_privs(status_path: &str) -> Option<bool> {
    let status = std::fs::read_to_string(status_path).ok()?;
    let line = status.lines().find(|l| l.starts_with("NoNewPrivs:"))?;
    Some(line.split_whitespace().nth(1)? == "1")
}
