//! What a caller asks to start ([`StartRequest`]), the sizes it may have, and what
//! [`Sessions::resolve`](crate::Sessions::resolve) makes of it ([`ResolvedStart`]).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sandbox::SandboxPolicy;
#[cfg(doc)]
use crate::{OutputStream, Sessions};
use crate::{Program, SessionError, ShellKind, ShellRequest};

/// Longest timeout a [`StartRequest`] may ask for: 24 hours.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// Most bytes of command text a [`StartRequest`] may carry: 1 MiB (1 048 576 bytes).
/// Checked first by [`Sessions::resolve`], so no later step (exec grants, the policy,
/// the approval prompt, the logs) ever works on more; a longer script belongs in a file.
pub const MAX_COMMAND_BYTES: usize = 1 << 20;

/// Most environment pairs a [`StartRequest`] may add: 256.
pub const MAX_ENV_VARS: usize = 256;

/// Most bytes of environment (names plus values, all pairs together) a
/// [`StartRequest`] may add: 256 KiB (262 144 bytes).
pub const MAX_ENV_BYTES: usize = 256 << 10;

/// Most bytes of [`StdinMode::Bytes`] one start may pass: 8 MiB (8 388 608 bytes),
/// the same as [`Sessions::STDIN_QUEUE_MAX_BYTES`]. They are queued like
/// [`Sessions::write_stdin`] bytes: each 64 KiB piece is freed once written, and what is
/// left when the session ends is dropped.
pub const MAX_STDIN_BYTES: usize = 8 << 20;

/// Most bytes of a [`StartRequest::cwd`]: 4096 (Linux `PATH_MAX`).
pub const MAX_CWD_BYTES: usize = 4096;

/// Most bytes of a [`StartRequest::shell`] path: 4096 (Linux `PATH_MAX`).
pub const MAX_SHELL_BYTES: usize = 4096;

/// What the process gets on its standard input (WIT `stdin-mode`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StdinMode {
    /// `/dev/null`: every read returns end-of-file at once. The default.
    #[default]
    Closed,
    /// These bytes (written by a task), then end-of-file.
    Bytes(Vec<u8>),
    /// A pipe kept open for [`Sessions::write_stdin`] until [`Sessions::close_stdin`],
    /// a kill, or the end of the process.
    Open,
}

/// A request to start a process (WIT `start-request`). `Default` gives an empty
/// command with every option at its default; see [`StartRequest::new`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRequest {
    /// The command line, run as `SHELL -c COMMAND`. Must not contain NUL.
    pub command: String,
    /// Working directory, relative to the workspace root or absolute; after symlinks
    /// are resolved it must lie inside the workspace. `None`: the workspace root.
    pub cwd: Option<String>,
    /// Extra `(name, value)` pairs on top of the allowlisted environment. Names must be
    /// non-empty without `=` or NUL; values without NUL.
    pub env: Vec<(String, String)>,
    /// Standard input. Default: [`StdinMode::Closed`].
    pub stdin: StdinMode,
    /// Kill the whole group (SIGTERM, grace, SIGKILL) after this long. `None`: never.
    /// Zero and more than [`MAX_TIMEOUT`] (24 h) are refused. WIT: milliseconds.
    pub timeout: Option<Duration>,
    /// The shell the command runs under. Default: [`ShellRequest::Default`]
    /// (`/bin/sh`).
    pub shell: ShellRequest,
    /// The tool call this run belongs to (a foreground run); `None`: a background
    /// session from the start.
    pub tool_call_id: Option<String>,
    /// Whether stderr shares stdout's pipe. Default: [`OutputStreams::Merged`].
    #[serde(default)]
    pub streams: OutputStreams,
}

/// How a command's stdout and stderr reach the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputStreams {
    /// One pipe for both (fd 2 is a duplicate of fd 1), as a terminal gives: the
    /// bytes arrive, and `output.log` holds them, in exactly the order the command
    /// wrote them; every chunk is reported as [`OutputStream::Stdout`]. The default.
    #[default]
    Merged,
    /// Two pipes, reported as [`OutputStream::Stdout`] and [`OutputStream::Stderr`]
    /// chunks. What a command writes to one and then the other can arrive in either
    /// order, and `output.log` interleaves them in arrival order.
    Separate,
}

impl StartRequest {
    /// A request for `command` with every other field at its default.
    pub fn new(command: impl Into<String>) -> Self {
        StartRequest {
            command: command.into(),
            ..StartRequest::default()
        }
    }
}

/// A [`StartRequest`] that passed the host's hard rules ([`Sessions::resolve`]): what
/// a permission check judges and what [`Sessions::spawn`] starts. The cwd is held open.
#[derive(Debug)]
pub struct ResolvedStart {
    /// The shell that runs the command (absolute, executable).
    pub shell: PathBuf,
    /// What kind of shell [`ResolvedStart::shell`] is ([`ShellKind::of`] its path).
    pub shell_kind: ShellKind,
    /// The working directory's real path (symlinks resolved, inside the workspace).
    pub cwd: PathBuf,
    /// The program the command's first word names, found as the shell will find
    /// it from [`ResolvedStart::cwd`] on the `PATH` the command runs with
    /// ([`Program::of`]); `None` when the first word is not a plain program word
    /// of a simple command (a builtin, an assignment, an expansion).
    pub program: Option<Program>,
    /// The sandbox the command runs under: the operator's, tightened by the caller's.
    pub sandbox: SandboxPolicy,
    /// The request as given (its `cwd` and `shell` are what the caller wrote).
    pub request: StartRequest,
    pub(super) cwd_fd: std::os::fd::OwnedFd,
}

/// The sizes [`Sessions::resolve`] allows, checked before anything else.
///
/// Errors: [`SessionError::InvalidRequest`] naming the limit and its value.
pub(super) fn check_sizes(req: &StartRequest) -> Result<(), SessionError> {
    let over = |what: &str, len: usize, name: &str, max: usize, hint: &str| {
        SessionError::InvalidRequest(format!(
            "{what} is {len} bytes, over the limit {name} ({max} bytes){hint}"
        ))
    };
    if req.command.len() > MAX_COMMAND_BYTES {
        return Err(over(
            "the command",
            req.command.len(),
            "MAX_COMMAND_BYTES",
            MAX_COMMAND_BYTES,
            "; write a long script to a file in the workspace and run that file",
        ));
    }
    if req.env.len() > MAX_ENV_VARS {
        return Err(SessionError::InvalidRequest(format!(
            "the request sets {} environment variables, over the limit MAX_ENV_VARS ({MAX_ENV_VARS})",
            req.env.len()
        )));
    }
    let env_bytes: usize = req.env.iter().map(|(k, v)| k.len() + v.len()).sum();
    if env_bytes > MAX_ENV_BYTES {
        return Err(over(
            "the environment",
            env_bytes,
            "MAX_ENV_BYTES",
            MAX_ENV_BYTES,
            "",
        ));
    }
    if let StdinMode::Bytes(b) = &req.stdin
        && b.len() > MAX_STDIN_BYTES
    {
        return Err(over(
            "stdin",
            b.len(),
            "MAX_STDIN_BYTES",
            MAX_STDIN_BYTES,
            "; start with stdin `open` and write it in parts with write_stdin",
        ));
    }
    if let Some(cwd) = &req.cwd
        && cwd.len() > MAX_CWD_BYTES
    {
        return Err(over(
            "the cwd",
            cwd.len(),
            "MAX_CWD_BYTES",
            MAX_CWD_BYTES,
            "",
        ));
    }
    if let ShellRequest::Path(shell) = &req.shell
        && shell.len() > MAX_SHELL_BYTES
    {
        return Err(over(
            "the shell path",
            shell.len(),
            "MAX_SHELL_BYTES",
            MAX_SHELL_BYTES,
            "",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_requests_are_refused_naming_the_limit() {
        let refusal = |req: StartRequest| match check_sizes(&req) {
            Err(SessionError::InvalidRequest(m)) => m,
            other => panic!("{other:?}"),
        };
        let m = refusal(StartRequest::new("x".repeat(MAX_COMMAND_BYTES + 1)));
        assert!(
            m.contains("MAX_COMMAND_BYTES") && m.contains("1048576"),
            "{m}"
        );
        let m = refusal(StartRequest {
            stdin: StdinMode::Bytes(vec![0; MAX_STDIN_BYTES + 1]),
            ..StartRequest::new("cat")
        });
        assert!(m.contains("MAX_STDIN_BYTES"), "{m}");
        let m = refusal(StartRequest {
            env: vec![("A".into(), String::new()); MAX_ENV_VARS + 1],
            ..StartRequest::new("true")
        });
        assert!(m.contains("MAX_ENV_VARS"), "{m}");
        let m = refusal(StartRequest {
            env: vec![("A".into(), "v".repeat(MAX_ENV_BYTES))],
            ..StartRequest::new("true")
        });
        assert!(m.contains("MAX_ENV_BYTES"), "{m}");
        let m = refusal(StartRequest {
            cwd: Some("d".repeat(MAX_CWD_BYTES + 1)),
            ..StartRequest::new("true")
        });
        assert!(m.contains("MAX_CWD_BYTES"), "{m}");
        let m = refusal(StartRequest {
            shell: ShellRequest::Path("/".repeat(MAX_SHELL_BYTES + 1)),
            ..StartRequest::new("true")
        });
        assert!(m.contains("MAX_SHELL_BYTES"), "{m}");
        assert!(check_sizes(&StartRequest::new("x".repeat(MAX_COMMAND_BYTES))).is_ok());
    }
}
