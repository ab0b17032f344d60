//! How a session ends: its status, the reason, the exit code or signal, and signal
//! names as the WIT `kill` takes them.

use std::fmt;
use std::str::FromStr;

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use crate::{HostIoError, SessionError};
#[cfg(doc)]
use crate::{OutputCapPolicy, Sessions};

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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum EndReason {
    /// The process exited by itself.
    Exited,
    /// The timeout elapsed; the host killed the process group.
    TimedOut,
    /// Killed on request, by whom or what ([`KilledBy`]).
    Killed(KilledBy),
    /// The process never ran or could not be waited for: what failed (boxed, so an
    /// [`ExitStatus`] stays small).
    Failed(Box<HostIoError>),
}

/// Who or what ended a session that was killed ([`EndReason::Killed`]).
///
/// Its `Display` is the WIT `end-reason.killed` text, unchanged since contract 0.1.0
/// (plugins show it, e.g. the bash tool's `[killed; requested by plugin]`), and its
/// serde form (a string, as snapshots in the control API have it): the text each
/// variant's doc gives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KilledBy {
    /// The plugin that owns the session, through `kill`: `plugin`.
    Plugin,
    /// The session's tool call was cancelled (by its client or the control API):
    /// `cancelled`.
    ToolCallCancelled,
    /// Its tool call ended with the run still in the foreground
    /// ([`Sessions::end_call`]): `tool-call-ended`.
    ToolCallEnded,
    /// A client of the control socket (`kill`): `control-client`.
    ControlClient,
    /// The host shut down ([`Sessions::shutdown`]): `host-shutdown`.
    HostShutdown,
    /// The caller of [`Sessions::spawn`] went away before the start returned:
    /// `start-cancelled`.
    StartCancelled,
    /// The session's `output.log` reached its cap under [`OutputCapPolicy::Stop`]:
    /// `output-cap`.
    OutputCap,
    /// Processes of the session's tree still ran a drain grace after the shell
    /// exited, and the host ended them: `the host (2 processes were still running
    /// after the shell exited)`, with `; 3 fork(s) were refused at the session's
    /// limit of 512 processes` before the `)` when forks were refused.
    Leftovers {
        /// Processes of the tree still running (the shell gone).
        processes: usize,
        /// Forks the session's process limit refused (0: none, or no limit).
        refused_forks: u64,
        /// The session's process limit (`pids.max`), when `refused_forks > 0`.
        process_limit: u32,
    },
    /// The embedder, for a reason of its own (a benchmark, a test): `embedder`.
    Embedder,
    /// The host process of an earlier run of the host session ended while
    /// the session ran, and the restart killed what was left of it
    /// (`restore.rs`): `host-restart`.
    HostRestart,
    /// A kill an earlier run of the host session recorded, by the text it
    /// recorded (`restore.rs`): that text.
    Recorded(String),
}

impl Serialize for KilledBy {
    /// As its `Display` text.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for KilledBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            KilledBy::Plugin => "plugin",
            KilledBy::ToolCallCancelled => "cancelled",
            KilledBy::ToolCallEnded => "tool-call-ended",
            KilledBy::ControlClient => "control-client",
            KilledBy::HostShutdown => "host-shutdown",
            KilledBy::StartCancelled => "start-cancelled",
            KilledBy::OutputCap => "output-cap",
            KilledBy::Embedder => "embedder",
            KilledBy::HostRestart => "host-restart",
            KilledBy::Recorded(text) => text.as_str(),
            KilledBy::Leftovers {
                processes,
                refused_forks,
                process_limit,
            } => {
                match processes {
                    1 => f.write_str("the host (1 process was")?,
                    n => write!(f, "the host ({n} processes were")?,
                }
                f.write_str(" still running after the shell exited")?;
                if *refused_forks > 0 {
                    write!(
                        f,
                        "; {refused_forks} fork(s) were refused at the session's limit of \
                         {process_limit} processes"
                    )?;
                }
                return f.write_str(")");
            }
        };
        f.write_str(text)
    }
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The WIT `end-reason.killed` text of every reason, as plugins of contract 0.1.0
    /// and 0.2.0 have always seen it.
    #[test]
    fn killed_by_keeps_its_wit_text() {
        let cases = [
            (KilledBy::Plugin, "plugin"),
            (KilledBy::ToolCallCancelled, "cancelled"),
            (KilledBy::ToolCallEnded, "tool-call-ended"),
            (KilledBy::ControlClient, "control-client"),
            (KilledBy::HostShutdown, "host-shutdown"),
            (KilledBy::StartCancelled, "start-cancelled"),
            (KilledBy::OutputCap, "output-cap"),
            (KilledBy::Embedder, "embedder"),
            (
                KilledBy::Leftovers {
                    processes: 1,
                    refused_forks: 0,
                    process_limit: 0,
                },
                "the host (1 process was still running after the shell exited)",
            ),
            (
                KilledBy::Leftovers {
                    processes: 3,
                    refused_forks: 0,
                    process_limit: 512,
                },
                "the host (3 processes were still running after the shell exited)",
            ),
            (
                KilledBy::Leftovers {
                    processes: 0,
                    refused_forks: 7,
                    process_limit: 512,
                },
                "the host (0 processes were still running after the shell exited; 7 fork(s) \
                 were refused at the session's limit of 512 processes)",
            ),
        ];
        for (by, text) in cases {
            assert_eq!(by.to_string(), text, "{by:?}");
        }
        let exit = ExitStatus {
            code: None,
            signal: Some("SIGTERM".into()),
            reason: EndReason::Killed(KilledBy::ToolCallEnded),
        };
        assert_eq!(
            exit.to_string(),
            "ended by SIGTERM, killed by tool-call-ended"
        );
    }

    /// Snapshots reach control clients as JSON (`sessions.list`): an end reason keeps
    /// the shape it had when its text was a string.
    #[test]
    fn end_reasons_keep_their_json() {
        let json = |r: EndReason| serde_json::to_string(&r).unwrap();
        assert_eq!(json(EndReason::Exited), r#""Exited""#);
        assert_eq!(json(EndReason::TimedOut), r#""TimedOut""#);
        assert_eq!(
            json(EndReason::Killed(KilledBy::Plugin)),
            r#"{"Killed":"plugin"}"#
        );
        let failed = HostIoError::bare(crate::IoOperation::SessionTask, None);
        assert_eq!(
            json(EndReason::Failed(Box::new(failed))),
            r#"{"Failed":"the session task ended unexpectedly"}"#
        );
    }
}
