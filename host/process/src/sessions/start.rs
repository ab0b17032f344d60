//! Starting sessions: resolving a request against the host's hard rules, spawning
//! it, and adopting a process the embedder spawned.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::unix::pipe;

use super::engine::{Launched, Prepared, register, spawner_error};
use super::ledger::Slot;
use super::request::check_sizes;
use super::session::{self, Session, SessionInit};
use super::shell::resolve_shell;
use super::{output, process, program, retention};
use crate::sandbox::SandboxPolicy;
use crate::{
    Caller, HostIoError, IoOperation, MAX_TIMEOUT, OutputStreams, Program, ResolvedStart,
    SessionError, SessionId, Sessions, ShellKind, ShellRequest, StartRequest, StdinMode,
};
#[cfg(doc)]
use crate::{
    KilledBy, MAX_COMMAND_BYTES, MAX_CWD_BYTES, MAX_ENV_BYTES, MAX_ENV_VARS, MAX_SHELL_BYTES,
    MAX_STDIN_BYTES, SessionEventKind, SessionsConfig, Snapshot,
};

impl Sessions {
    /// Starts `SHELL -c COMMAND` under the operator's sandbox
    /// ([`SessionsConfig::sandbox`]) and returns its id once the process runs:
    /// [`Sessions::resolve`] then [`Sessions::spawn`], with no permission check in
    /// between (embedders that need one use the two steps, as the runtime's
    /// `sessions.start` does with `Permissions::check_start` between them).
    ///
    /// Errors: as [`Sessions::resolve`] and [`Sessions::spawn`]. Nothing is created on error.
    pub async fn start(
        &self,
        caller: &Caller,
        req: StartRequest,
    ) -> Result<SessionId, SessionError> {
        let operator = self.inner.config.sandbox.clone();
        let resolved = self.resolve(req, &operator)?;
        self.spawn(caller, resolved).await
    }

    /// Like [`Sessions::start`], with a second sandbox policy (e.g. from the calling
    /// plugin's manifest) combined with the operator's by [`SandboxPolicy::stricter`]:
    /// it can only tighten the sandbox, never loosen it.
    ///
    /// Errors: as [`Sessions::start`].
    pub async fn start_with_policy(
        &self,
        caller: &Caller,
        req: StartRequest,
        policy: &SandboxPolicy,
    ) -> Result<SessionId, SessionError> {
        let resolved = self.resolve(req, policy)?;
        self.spawn(caller, resolved).await
    }

    /// Checks a start request against the host's hard rules and resolves it, without
    /// starting anything: sizes within [`MAX_COMMAND_BYTES`], [`MAX_ENV_VARS`],
    /// [`MAX_ENV_BYTES`], [`MAX_STDIN_BYTES`], [`MAX_CWD_BYTES`] and
    /// [`MAX_SHELL_BYTES`] (checked first, in constant time), no NUL in the command, a timeout in (0, 24 h], valid env
    /// names, a shell that resolves ([`ShellRequest`]: `/bin/sh` or a named path must be
    /// an absolute executable file, checked here; the host's shell was resolved when the
    /// engine started), and a cwd that
    /// resolves (symlinks included) inside the workspace, opened here so the child
    /// `fchdir`s to the very directory that was checked, and, unless the sandbox is
    /// `full-access`, not inside the hidden state dir. `policy` (e.g. from the
    /// calling plugin's manifest) is combined with the operator's sandbox by
    /// [`SandboxPolicy::stricter`]. What a permission check should judge is in the
    /// returned [`ResolvedStart`].
    ///
    /// Errors: [`SessionError::InvalidRequest`] naming the broken rule.
    pub fn resolve(
        &self,
        req: StartRequest,
        policy: &SandboxPolicy,
    ) -> Result<ResolvedStart, SessionError> {
        let inner = &self.inner;
        check_sizes(&req)?;
        if req.command.contains('\0') {
            return Err(SessionError::InvalidRequest(
                "the command contains a NUL byte".into(),
            ));
        }
        if let Some(t) = req.timeout {
            if t.is_zero() {
                return Err(SessionError::InvalidRequest(
                    "timeout must be greater than zero (omit it for no timeout)".into(),
                ));
            }
            if t > MAX_TIMEOUT {
                return Err(SessionError::InvalidRequest(format!(
                    "timeout of {} ms exceeds the maximum of 24 hours ({} ms)",
                    t.as_millis(),
                    MAX_TIMEOUT.as_millis()
                )));
            }
        }
        for (k, v) in &req.env {
            process::validate_env_pair(k, v)?;
        }
        program::check_request_path(&req.env)?;
        let (shell, shell_kind) = match &req.shell {
            ShellRequest::Default => (resolve_shell(None)?, ShellKind::Sh),
            ShellRequest::Path(path) => {
                let shell = resolve_shell(Some(path))?;
                let kind = ShellKind::of(&shell);
                (shell, kind)
            }
            ShellRequest::Host => (inner.shell.path.clone(), inner.shell.kind),
        };
        let (cwd_fd, cwd) = process::open_cwd(&inner.workspace, req.cwd.as_deref())?;
        let sandbox = inner.config.sandbox.stricter(policy);
        // The state dir is hidden from confined commands; a cwd inside it would keep
        // them a way in beneath the cover (the child `fchdir`s before the sandbox).
        if sandbox.mode != crate::sandbox::SandboxMode::FullAccess
            && cwd.starts_with(&inner.state_dir)
            && !inner.workspace.starts_with(&inner.state_dir)
        {
            return Err(SessionError::InvalidRequest(format!(
                "cwd `{}` is inside the host's state dir `{}`, which sandboxed commands cannot \
                 see; use a directory of the workspace outside it",
                cwd.display(),
                inner.state_dir.display()
            )));
        }
        let path = program::command_path(&inner.config.extra_env, &req.env);
        let program = Program::of(&req.command, &cwd, &path);
        Ok(ResolvedStart {
            shell,
            shell_kind,
            program,
            cwd,
            cwd_fd,
            sandbox,
            request: req,
        })
    }

    /// Starts a request [`Sessions::resolve`] checked, under its sandbox, and returns
    /// its id once the process runs.
    ///
    /// The session gets a private temp dir `<state_dir>/sessions/<id>/tmp` (`TMPDIR`
    /// points there) and the state dir is protected; the sandbox is prepared in the
    /// host and installed in the child right before `exec`. Its one-line summary is in
    /// [`Snapshot::sandbox`] and [`SessionEventKind::Started`].
    ///
    /// Cancel-safe: the start runs to its end in a task of its own (the file and
    /// sandbox work on the blocking pool), and when the caller has gone away by then
    /// (e.g. a plugin call cancelled by its wall-time limit) the new session is ended
    /// at once, its whole group, with reason [`KilledBy::StartCancelled`]; no process is
    /// left behind.
    ///
    /// Errors: [`SessionError::ResourceLimit`] (`max_sessions` running, or the calling
    /// plugin's quota, named in the text), [`SessionError::Io`] (log, sandbox or
    /// spawn failure). Nothing is created on error.
    pub async fn spawn(
        &self,
        caller: &Caller,
        resolved: ResolvedStart,
    ) -> Result<SessionId, SessionError> {
        let slot = self.inner.reserve(caller)?;
        let this = self.clone();
        let caller = caller.clone();
        let task = self
            .inner
            .handle
            .spawn(async move { this.spawn_owned(caller, slot, resolved).await });
        match task.await {
            Ok(Ok(mut launched)) => Ok(launched.keep()),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(SessionError::Io(HostIoError::other(
                IoOperation::StartTask,
                None,
                e,
            ))),
        }
    }

    /// The body of [`Sessions::spawn`], in a task that is never cancelled with the
    /// caller; the [`Launched`] it returns ends the session unless the caller keeps it.
    async fn spawn_owned(
        self,
        caller: Caller,
        slot: Slot,
        resolved: ResolvedStart,
    ) -> Result<Launched, SessionError> {
        let inner = self.inner.clone();
        let ResolvedStart {
            shell,
            cwd_fd,
            sandbox,
            request: mut req,
            ..
        } = resolved;
        let stdin = std::mem::take(&mut req.stdin);
        let (stdin_setup, stdin_bytes, stdin_open) = match stdin {
            StdinMode::Closed => (process::StdinSetup::Null, None, false),
            StdinMode::Bytes(b) => (process::StdinSetup::Piped, Some(b), false),
            StdinMode::Open => (process::StdinSetup::Piped, None, true),
        };
        let command = std::mem::take(&mut req.command);
        let request_env = std::mem::take(&mut req.env);
        let merge_stderr = req.streams == OutputStreams::Merged;
        let foreground = req.tool_call_id.is_some();
        // What the sandbox reads in the workspace (the `.git` shape and config) is read
        // here, on the blocking pool with a deadline, never on the spawner thread that
        // starts every command (`sandbox::workspace_read`).
        let git_targets = inner.git_targets(&sandbox).await?;
        // Files, the sandbox and the command's memfd: blocking work, off the
        // workers, on the spawner thread that then starts the child.
        let prep = inner.clone();
        let (prepared, started) = inner
            .spawner
            .prepare_and_start(move || {
                prep.prepare_launch(
                    &shell,
                    command,
                    &request_env,
                    cwd_fd,
                    sandbox,
                    git_targets,
                    stdin_setup,
                    merge_stderr,
                    foreground,
                )
            })
            .await
            .map_err(|e| spawner_error(IoOperation::Spawner, e))??;
        let Prepared {
            id,
            output_path,
            session_dir,
            effective,
            tree,
            command,
            shell,
        } = prepared;
        let started = match started {
            Ok(started) => started,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&session_dir);
                let operation = IoOperation::StartProcess {
                    sandbox: effective.is_confined().then(|| effective.to_string()),
                };
                return Err(SessionError::Io(HostIoError::os(
                    operation,
                    Some(&shell),
                    &e,
                )));
            }
        };
        let pid = started.pid;
        // A tool call waits for a foreground run's exit: its pidfd wakes the
        // session with one hand-off less than the ring (`exits.rs`).
        let ring = inner.exits.as_ref().filter(|_| !foreground);
        let (child, stdout, stderr, stdin) = match register(started, ring) {
            Ok(parts) => parts,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&session_dir);
                return Err(SessionError::Io(HostIoError::os(
                    IoOperation::WatchProcess,
                    None,
                    &e,
                )));
            }
        };
        let session = Session::new(SessionInit {
            id,
            owner: caller.owner(),
            principal: caller.principal().cloned(),
            started_by: caller.tool_call(),
            command,
            tool_call_id: req.tool_call_id,
            output_path,
            pid,
            group: true,
            stdin,
            stdin_open,
            memory_bytes: inner.config.output_memory_bytes,
            observer: inner.config.observer.clone(),
            sandbox: Some(effective),
            tree: Some(tree),
            tracking: inner.tracking.clone(),
        });
        if let Some(bytes) = stdin_bytes {
            session::feed_stdin(&session, bytes, &inner.handle);
        }
        self.launch(
            session.clone(),
            child,
            Some(stdout),
            stderr,
            req.timeout,
            slot,
        );
        Ok(Launched {
            session: Some(session),
            timing: inner.timing(),
            handle: inner.handle.clone(),
        })
    }

    /// Registers a session and starts its task, which holds `slot` until the session
    /// ends and then counts it among the finished sessions ([`Inner::retire`]).
    #[allow(clippy::too_many_arguments)] // Two call sites; each is a distinct part.
    fn launch(
        &self,
        session: Arc<Session>,
        child: process::ChildProcess,
        stdout: Option<pipe::Receiver>,
        stderr: Option<pipe::Receiver>,
        timeout: Option<Duration>,
        slot: Slot,
    ) {
        let inner = &self.inner;
        inner
            .registry()
            .sessions
            .insert(session.id.clone(), session.clone());
        let weak = Arc::downgrade(inner);
        inner.unretired.send_modify(|n| *n += 1);
        let retire = Box::new(move |session: &Arc<Session>| {
            // The private temp dir goes with the session (`retention::session_ended`);
            // the session counts as retired once it has gone.
            let tidied = weak.clone();
            retention::session_ended(&session.output_path, move || {
                if let Some(inner) = tidied.upgrade() {
                    inner.unretired.send_modify(|n| *n = n.saturating_sub(1));
                }
            });
            if let Some(inner) = weak.upgrade() {
                inner.retire(session);
            }
        });
        let caps = output::LogCaps {
            max_bytes: inner.config.output_log_max_bytes,
            head_bytes: inner.config.output_log_head_bytes,
            pressed_tail_bytes: inner.config.output_log_head_bytes,
            policy: inner.config.output_cap_policy,
        };
        let log =
            output::OutputLog::new(session.output_path.clone(), caps, inner.log_budget.clone());
        inner.handle.spawn(session::run(
            session,
            child,
            stdout,
            stderr,
            Some(log),
            timeout,
            inner.timing(),
            slot,
            retire,
        ));
    }

    /// Takes over a process the embedder spawned and manages it like any
    /// session: piped stdout/stderr are captured, a piped stdin becomes an open stdin
    /// ([`Sessions::write_stdin`]), no timeout. A child that leads its own process
    /// group/session is signalled as a group; otherwise only the child itself. The host
    /// did not spawn it, so it is not confined: its snapshot's sandbox is
    /// `none`.
    ///
    /// Errors: [`SessionError::InvalidRequest`] if the child was already waited for;
    /// [`SessionError::ResourceLimit`]; [`SessionError::Io`] for the log.
    pub fn adopt(
        &self,
        caller: &Caller,
        mut child: tokio::process::Child,
        command: String,
        tool_call_id: Option<String>,
    ) -> Result<SessionId, SessionError> {
        let inner = &self.inner;
        let pid = child.id().ok_or_else(|| {
            SessionError::InvalidRequest(
                "the child has already been waited for; there is nothing to adopt".into(),
            )
        })?;
        let slot = inner.reserve(caller)?;
        let (id, output_path) = inner.create_log()?;
        let io = |e: std::io::Error| {
            SessionError::Io(HostIoError::os(IoOperation::AdoptPipes, None, &e))
        };
        let stdin = (child.stdin.take())
            .map(|p| p.into_owned_fd().and_then(pipe::Sender::from_owned_fd))
            .transpose()
            .map_err(io)?;
        let receiver = |fd: std::io::Result<std::os::fd::OwnedFd>| {
            fd.and_then(|fd| {
                process::raise_pipe_size(&fd);
                pipe::Receiver::from_owned_fd(fd)
            })
        };
        let stdout = (child.stdout.take())
            .map(|p| receiver(p.into_owned_fd()))
            .transpose()
            .map_err(io)?;
        let stderr = (child.stderr.take())
            .map(|p| receiver(p.into_owned_fd()))
            .transpose()
            .map_err(io)?;
        let stdin_open = stdin.is_some();
        let session = Session::new(SessionInit {
            id: id.clone(),
            owner: caller.owner(),
            principal: caller.principal().cloned(),
            started_by: caller.tool_call(),
            command,
            tool_call_id,
            output_path,
            pid,
            group: process::leads_group(pid),
            stdin,
            stdin_open,
            memory_bytes: inner.config.output_memory_bytes,
            observer: inner.config.observer.clone(),
            sandbox: None,
            tree: None,
            tracking: "process group only (adopted)".to_owned(),
        });
        let child = process::ChildProcess::Adopted(child);
        self.launch(session, child, stdout, stderr, None, slot);
        Ok(id)
    }
}
