//! How a session ends: its status, the reason, the exit code or signal, and signal
//! names as the WIT `kill` takes them.

use std::fmt;
use std::str::FromStr;

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::SessionError;

/// The state a session is in (WIT `session-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SessionStatus {
    /// Still running (or draining its output after the direct child exited).
    Running,
    /// Exited on its own (with a code, or by a signal from elsewhere).
    Exited,
    /// The host killed the group because the timeout elapsed.
    TimedOut,
    /// The group was killed on request.
    Killed,
    /// The process could not be run or waited for.
    Failed,
}

/// Why a session ended (WIT `end-reason`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EndReason {
    /// The process exited by itself.
    Exited,
    /// The timeout elapsed; the host killed the process group.
    TimedOut,
    /// Killed on request; the text says by whom (`plugin`, `tool-call-ended`,
    /// `host-shutdown`, ...).
    Killed(String),
    /// The process never ran or could not be waited for; the text says why.
    Failed(String),
}

impl EndReason {
    /// The status a session that ended for this reason has.
    pub fn status(&self) -> SessionStatus {
        match self {
            EndReason::Exited => SessionStatus::Exited,
            EndReason::TimedOut => SessionStatus::TimedOut,
            EndReason::Killed(_) => SessionStatus::Killed,
            EndReason::Failed(_) => SessionStatus::Failed,
        }
    }
}

/// How a process ended (WIT `exit-status`). A signalled process has `code: None`,
/// never `Some(0)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExitStatus {
    /// The exit code (0-255) when the process exited normally.
    pub code: Option<i32>,
    /// The signal name (e.g. `"SIGKILL"`) when a signal ended the process.
    pub signal: Option<String>,
    /// Why the session ended.
    pub reason: EndReason,
}

impl ExitStatus {
    pub(crate) fn from_std(status: std::process::ExitStatus, reason: EndReason) -> ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        ExitStatus {
            code: status.code(),
            signal: status.signal().map(signal_name),
            reason,
        }
    }
}

/// `SIGKILL` for 9, `SIG<n>` for numbers nix does not name (real-time signals).
fn signal_name(n: i32) -> String {
    Signal::try_from(n).map_or_else(|_| format!("SIG{n}"), |s| s.as_str().to_owned())
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.code, &self.signal) {
            (Some(code), _) => write!(f, "exited with code {code}")?,
            (None, Some(signal)) => write!(f, "ended by {signal}")?,
            (None, None) => write!(f, "no exit status")?,
        }
        match &self.reason {
            EndReason::Exited => Ok(()),
            EndReason::TimedOut => write!(f, " after its timeout elapsed"),
            EndReason::Killed(by) => write!(f, ", killed by {by}"),
            EndReason::Failed(why) => write!(f, ", failed: {why}"),
        }
    }
}

/// Parses a signal name as the WIT `kill` takes it: `SIGTERM`, `TERM` or `term`
/// (any case, with or without the `SIG` prefix), or a number such as `9`.
///
/// Errors: [`SessionError::InvalidRequest`] for anything else.
pub fn parse_signal(name: &str) -> Result<Signal, SessionError> {
    let trimmed = name.trim();
    if let Ok(n) = trimmed.parse::<i32>() {
        return Signal::try_from(n)
            .map_err(|_| SessionError::InvalidRequest(format!("unknown signal number {n}")));
    }
    let upper = trimmed.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    Signal::from_str(&full).map_err(|_| {
        SessionError::InvalidRequest(format!(
            "unknown signal `{name}`; use a name such as SIGTERM, SIGINT or SIGKILL"
        ))
    })
}
