//! The errors of session calls, and what a failed host operation carries.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

#[cfg(doc)]
use crate::EndReason;
use crate::{ExitStatus, SessionId};

/// Errors of session calls (WIT `session-error`). Messages say what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum SessionError {
    /// No session with this id is visible to the caller (or the id is malformed).
    #[error(
        "unknown session `{0}`: no such session is visible to you (ids look like bg_000000000001; finished sessions are kept only for the retention window; use list to see yours)"
    )]
    UnknownSession(String),
    /// The session has already ended; here is how.
    #[error("the session has already ended ({0}); its output stays readable with read_output")]
    SessionExited(ExitStatus),
    /// The permission pipeline refused (not produced by this module).
    #[error("denied: {0}")]
    Denied(String),
    /// The request is malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A host limit was hit.
    #[error("resource limit: {0}")]
    ResourceLimit(String),
    /// An operation on the host failed: which, on what, and the OS error's kind. The
    /// WIT `session-error.io` text is its `Display` (without the `host I/O error: `
    /// prefix).
    #[error("host I/O error: {0}")]
    Io(HostIoError),
}

/// A host operation that failed ([`SessionError::Io`], [`EndReason::Failed`]): what the
/// host was doing, the file it worked on, and the OS error.
///
/// Its `Display` is the message for people, the WIT `session-error.io` and
/// `end-reason.failed` text and its serde form (a string), e.g. `cannot create the output log in
/// /state/sessions/bg_00000000002a: No space left on device (os error 28)`. Code that
/// must tell failures apart matches [`HostIoError::operation`] and
/// [`HostIoError::kind`], never the text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostIoError {
    /// What the host was doing.
    pub operation: IoOperation,
    /// The file or directory it worked on, when there was one (for
    /// [`IoOperation::StartProcess`], the shell; for [`IoOperation::ResolveCwd`], the
    /// cwd as the request gave it).
    pub path: Option<PathBuf>,
    /// The OS error's kind; `None` when the failure was no OS error (a task that
    /// died, a sandbox that could not be built).
    pub kind: Option<std::io::ErrorKind>,
    /// The underlying error's message, when there was one.
    pub cause: Option<String>,
}

/// What the host was doing when a [`HostIoError`] happened. Each variant's doc gives
/// the start of the error's text; `: CAUSE` follows when there is a cause.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IoOperation {
    /// `cannot create PATH` (the engine's `<state>/sessions`).
    CreateSessionsDir,
    /// `cannot resolve the state dir PATH`.
    ResolveStateDir,
    /// `cannot create an owner file in PATH` (`<state>/owners`).
    CreateOwnerFile,
    /// Starting the engine's spawner thread: the cause alone.
    StartSpawner,
    /// A failure an earlier run of the host session recorded (`restore.rs`):
    /// the cause alone, as recorded.
    Recorded,
    /// Handing a start to the spawner thread: the cause alone.
    Spawner,
    /// `cannot set up the sandbox`.
    PrepareSandbox,
    /// `cannot create the output log in PATH` (the session's directory).
    CreateOutputLog,
    /// `cannot create the session's cgroup (TRACKING)`.
    CreateCgroup {
        /// How the engine tracks process trees ([`Sessions::tracking`](crate::Sessions::tracking)).
        tracking: String,
    },
    /// `` could not start `PATH` `` (the shell), with ` under the sandbox SANDBOX` when
    /// it was to run confined.
    StartProcess {
        /// The sandbox's one-line summary, when the command was to run confined.
        sandbox: Option<String>,
    },
    /// `the start task failed` (the task that runs a start ended abnormally).
    StartTask,
    /// `cannot watch the started process`.
    WatchProcess,
    /// `cannot adopt the child's pipes`.
    AdoptPipes,
    /// `` cannot resolve cwd `PATH` `` (reading back the opened cwd's real path).
    ResolveCwd,
    /// `waiting for the process failed`.
    WaitProcess,
    /// `the session task ended unexpectedly`.
    SessionTask,
    /// `reading the output log failed`.
    ReadOutputLog,
    /// `the output log PATH is shorter than expected`.
    OutputLogShort,
    /// `writing PATH failed at byte AT` (the session's `output.log`; it is
    /// incomplete from there).
    WriteOutputLog {
        /// Log offset of the first byte that was not written.
        at: u64,
    },
    /// Writing a session's stdin: `session ID closed its stdin (broken pipe)` or
    /// `writing to the stdin of session ID failed: CAUSE`, then ` after WRITTEN
    /// byte(s) were written; DROPPED queued byte(s) were dropped`.
    WriteStdin {
        /// The session.
        session: SessionId,
        /// Bytes written to its stdin before the failure.
        written: u64,
        /// Queued bytes dropped with the pipe.
        dropped: usize,
    },
}

impl HostIoError {
    /// `operation` on `path` failed with the OS error `e`.
    pub(crate) fn os(operation: IoOperation, path: Option<&Path>, e: &std::io::Error) -> Self {
        HostIoError {
            operation,
            path: path.map(Path::to_path_buf),
            kind: Some(e.kind()),
            cause: Some(e.to_string()),
        }
    }

    /// `operation` on `path` failed for a reason that is no OS error.
    pub(crate) fn other(
        operation: IoOperation,
        path: Option<&Path>,
        cause: impl fmt::Display,
    ) -> Self {
        HostIoError {
            operation,
            path: path.map(Path::to_path_buf),
            kind: None,
            cause: Some(cause.to_string()),
        }
    }

    /// `operation` on `path` failed, with no cause to give.
    pub(crate) fn bare(operation: IoOperation, path: Option<&Path>) -> Self {
        HostIoError {
            operation,
            path: path.map(Path::to_path_buf),
            kind: None,
            cause: None,
        }
    }
}

impl std::error::Error for HostIoError {}

impl Serialize for HostIoError {
    /// As its `Display` text (the form snapshots have always had in JSON).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for HostIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use IoOperation as Op;
        let path = self.path.as_deref().unwrap_or(Path::new("")).display();
        let cause = self.cause.as_deref();
        match &self.operation {
            Op::StartSpawner | Op::Spawner | Op::Recorded => {
                return f.write_str(cause.unwrap_or_default());
            }
            Op::WriteStdin {
                session,
                written,
                dropped,
            } => {
                match (self.kind, cause) {
                    (Some(std::io::ErrorKind::BrokenPipe), _) => {
                        write!(f, "session {session} closed its stdin (broken pipe)")?
                    }
                    (_, cause) => write!(
                        f,
                        "writing to the stdin of session {session} failed: {}",
                        cause.unwrap_or_default()
                    )?,
                }
                return write!(
                    f,
                    " after {written} byte(s) were written; {dropped} queued byte(s) were dropped"
                );
            }
            Op::CreateSessionsDir => write!(f, "cannot create {path}")?,
            Op::ResolveStateDir => write!(f, "cannot resolve the state dir {path}")?,
            Op::CreateOwnerFile => write!(f, "cannot create an owner file in {path}")?,
            Op::PrepareSandbox => f.write_str("cannot set up the sandbox")?,
            Op::CreateOutputLog => write!(f, "cannot create the output log in {path}")?,
            Op::CreateCgroup { tracking } => {
                write!(f, "cannot create the session's cgroup ({tracking})")?
            }
            Op::StartProcess { sandbox } => {
                write!(f, "could not start `{path}`")?;
                if let Some(sandbox) = sandbox {
                    write!(f, " under the sandbox {sandbox}")?;
                }
            }
            Op::StartTask => f.write_str("the start task failed")?,
            Op::WatchProcess => f.write_str("cannot watch the started process")?,
            Op::AdoptPipes => f.write_str("cannot adopt the child's pipes")?,
            Op::ResolveCwd => write!(f, "cannot resolve cwd `{path}`")?,
            Op::WaitProcess => f.write_str("waiting for the process failed")?,
            Op::SessionTask => f.write_str("the session task ended unexpectedly")?,
            Op::ReadOutputLog => f.write_str("reading the output log failed")?,
            Op::OutputLogShort => write!(f, "the output log {path} is shorter than expected")?,
            Op::WriteOutputLog { at } => write!(f, "writing {path} failed at byte {at}")?,
        }
        match cause {
            Some(cause) => write!(f, ": {cause}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts people and plugins have always been given (WIT `session-error.io`,
    /// `end-reason.failed`), one per operation.
    #[test]
    fn host_io_errors_keep_their_text() {
        use IoOperation as Op;
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let full_text = full.to_string();
        let dir = Path::new("/state/sessions/bg_00000000002a");
        let os = |op, path| HostIoError::os(op, path, &full).to_string();
        let cases = [
            (
                os(Op::CreateSessionsDir, Some(Path::new("/state/sessions"))),
                "cannot create /state/sessions: ",
            ),
            (
                os(Op::ResolveStateDir, Some(Path::new("/state"))),
                "cannot resolve the state dir /state: ",
            ),
            (
                os(Op::CreateOwnerFile, Some(Path::new("/state/owners"))),
                "cannot create an owner file in /state/owners: ",
            ),
            (os(Op::StartSpawner, None), ""),
            (
                HostIoError::other(Op::Spawner, None, "the spawner thread has stopped").to_string(),
                "the spawner thread has stopped",
            ),
            (
                HostIoError::other(Op::PrepareSandbox, None, "sandbox: boom").to_string(),
                "cannot set up the sandbox: sandbox: boom",
            ),
            (
                os(Op::CreateOutputLog, Some(dir)),
                "cannot create the output log in /state/sessions/bg_00000000002a: ",
            ),
            (
                os(
                    Op::CreateCgroup {
                        tracking: "cgroup v2".into(),
                    },
                    None,
                ),
                "cannot create the session's cgroup (cgroup v2): ",
            ),
            (
                os(
                    Op::StartProcess { sandbox: None },
                    Some(Path::new("/bin/sh")),
                ),
                "could not start `/bin/sh`: ",
            ),
            (
                os(
                    Op::StartProcess {
                        sandbox: Some("workspace-write (network blocked)".into()),
                    },
                    Some(Path::new("/bin/sh")),
                ),
                "could not start `/bin/sh` under the sandbox workspace-write (network blocked): ",
            ),
            (
                HostIoError::other(Op::StartTask, None, "task 7 panicked").to_string(),
                "the start task failed: task 7 panicked",
            ),
            (
                os(Op::WatchProcess, None),
                "cannot watch the started process: ",
            ),
            (os(Op::AdoptPipes, None), "cannot adopt the child's pipes: "),
            (
                os(Op::ResolveCwd, Some(Path::new("sub/dir"))),
                "cannot resolve cwd `sub/dir`: ",
            ),
            (
                os(Op::WaitProcess, None),
                "waiting for the process failed: ",
            ),
            (
                HostIoError::bare(Op::SessionTask, None).to_string(),
                "the session task ended unexpectedly",
            ),
            (
                os(Op::ReadOutputLog, None),
                "reading the output log failed: ",
            ),
            (
                HostIoError::bare(Op::OutputLogShort, Some(&dir.join("output.log"))).to_string(),
                "the output log /state/sessions/bg_00000000002a/output.log is shorter than expected",
            ),
            (
                os(
                    Op::WriteOutputLog { at: 4096 },
                    Some(&dir.join("output.log")),
                ),
                "writing /state/sessions/bg_00000000002a/output.log failed at byte 4096: ",
            ),
        ];
        for (got, start) in cases {
            let expected = if start.ends_with(": ") || start.is_empty() {
                format!("{start}{full_text}")
            } else {
                start.to_owned()
            };
            assert_eq!(got, expected);
        }
        let session = SessionId::parse("bg_00000000002a").unwrap();
        let stdin = |e: std::io::Error| {
            let op = Op::WriteStdin {
                session: session.clone(),
                written: 10,
                dropped: 5,
            };
            HostIoError::os(op, None, &e).to_string()
        };
        assert_eq!(
            stdin(std::io::ErrorKind::BrokenPipe.into()),
            "session bg_00000000002a closed its stdin (broken pipe) after 10 byte(s) were \
             written; 5 queued byte(s) were dropped"
        );
        assert_eq!(
            stdin(std::io::Error::from_raw_os_error(libc::EIO)),
            format!(
                "writing to the stdin of session bg_00000000002a failed: {} after 10 byte(s) \
                 were written; 5 queued byte(s) were dropped",
                std::io::Error::from_raw_os_error(libc::EIO)
            )
        );
    }
}
