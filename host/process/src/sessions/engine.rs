//! The engine behind [`Sessions`]: the registry of sessions, finished-session
//! bounds, log creation and the blocking half of a start.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::net::unix::pipe;

use super::config::{
    DEFAULT_MAX_FINISHED_BYTES, DEFAULT_MAX_FINISHED_BYTES_PER_PLUGIN,
    DEFAULT_MAX_FINISHED_PER_PLUGIN, DEFAULT_MAX_FINISHED_SESSIONS,
};
use super::ledger::Ledger;
use super::session::{self, Session, Timing};
use super::{exits, output, proc_scan, process, retention, tree};
use crate::sandbox::{EffectiveSandbox, SandboxPaths, SandboxPolicy};
use crate::{
    BASH_CANDIDATES, Caller, EndReason, HostIoError, IoOperation, KilledBy, SessionError,
    SessionId, SessionsConfig, Shell,
};
#[cfg(doc)]
use crate::{DEFAULT_SHELL, SessionEventKind, ShellRequest, Snapshot};

/// Output bytes a finished session keeps in its event backlog: 64 KiB. Older output
/// events are folded into [`SessionEventKind::Omitted`] when the session ends (their
/// bytes stay readable with [`Sessions::read_output`]).
pub const FINISHED_OUTPUT_BYTES: usize = 64 << 10;

/// Events a finished session keeps in memory: 256 (older output events are folded as
/// for [`FINISHED_OUTPUT_BYTES`]).
pub(crate) const FINISHED_EVENTS_MAX: usize = 256;

/// The session engine. Cheap to clone (an `Arc` inside); all clones share sessions.
///
/// It starts `SHELL -c COMMAND` in its own session and process group with an
/// allowlisted environment, a working directory inside the workspace and stdin closed
/// unless asked for, confined by the kernel sandbox ([`SandboxPolicy`];
/// [`SessionsConfig::sandbox`], default `workspace-write` with the network blocked) with
/// a private `TMPDIR`; captures stdout and stderr byte-exact (interleaved in arrival
/// order) to `<state_dir>/sessions/<id>/output.log` while keeping memory bounded;
/// ends a run on the direct child's exit (draining the pipes for a bounded grace);
/// kills whole process groups (SIGTERM, grace, SIGKILL) on timeout, `kill`, the end of
/// a tool call or host shutdown; and records a seq-numbered event stream per session
/// that [`Subscription`](crate::Subscription)s follow without polling.
///
/// The types mirror `wit/v0.1.0/sessions.wit` (`interface sessions`) so the wasm
/// binding is a field-by-field conversion.
///
/// Runtime requirements: [`Sessions::new`] must be called inside a tokio runtime with
/// IO and time enabled (a multi-thread runtime is recommended); every session runs as a
/// task on that runtime, and children are forked by one dedicated thread that lives as
/// long as the [`Sessions`]. Dropping the last clone SIGKILLs every running session's
/// process group (call [`Sessions::shutdown`] for an orderly SIGTERM first); if the host
/// dies outright, `PR_SET_PDEATHSIG` SIGKILLs the shells (not their background children).
#[derive(Clone)]
pub struct Sessions {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) config: SessionsConfig,
    pub(super) workspace: PathBuf,
    pub(super) sessions_dir: PathBuf,
    /// The canonical state dir (protected from every confined command).
    pub(super) state_dir: PathBuf,
    /// The operator's sandbox as prepared when the engine started.
    pub(super) sandbox: EffectiveSandbox,
    /// `<state_dir>/sandbox/mask`, the file denied files are masked with (`None` when
    /// it could not be made).
    pub(super) mask_file: Option<PathBuf>,
    /// Sandbox warnings already logged (each distinct one is logged once).
    pub(super) warned: Mutex<std::collections::HashSet<String>>,
    pub(super) spawner: process::Spawner,
    /// Where background sessions' exits are waited for without a descriptor each
    /// (`exits.rs`); `None` where the kernel lacks it (they keep their pidfd).
    pub(super) exits: Option<Arc<exits::ExitRing>>,
    /// What tells the retention sweep that this engine's sessions are running
    /// (`<state>/owners/…`, `retention.rs`).
    pub(super) owner_lock: retention::OwnerLock,
    /// Session tasks launched and not yet through their bookkeeping (retired);
    /// [`Sessions::shutdown`] waits on it.
    pub(super) unretired: tokio::sync::watch::Sender<usize>,
    /// How sessions' process trees are tracked (a cgroup per session, or scans).
    pub(super) tracker: tree::Tracker,
    /// `tracker.describe()`, as snapshots show it.
    pub(super) tracking: String,
    /// The host's shell, found once when the engine started ([`ShellRequest::Host`]).
    pub(super) shell: Shell,
    pub(super) handle: tokio::runtime::Handle,
    /// Bytes the running sessions' output logs keep on disk, against
    /// `output_logs_max_bytes`.
    pub(super) log_budget: Arc<output::LogBudget>,
    pub(super) registry: Mutex<Registry>,
    /// Running-session counts (started + starting + adopted), per plugin too. A leaf
    /// lock: taken under the registry's or a session's lock, never the other way.
    pub(super) ledger: Arc<Mutex<Ledger>>,
}

#[derive(Default)]
pub(super) struct Registry {
    pub(super) sessions: BTreeMap<SessionId, Arc<Session>>,
    /// When tombstones were last purged (a purge walks every session, so it runs at
    /// most once per [`PURGE_INTERVAL`]; lookups skip expired ones meanwhile).
    pub(super) purged_at: Option<Instant>,
    /// Finished sessions in the order they ended, oldest first.
    pub(super) finished: std::collections::VecDeque<Finished>,
    /// Sum of `finished[..].bytes`.
    pub(super) finished_bytes: usize,
    /// Finished sessions evicted by a bound, in all and per plugin.
    pub(super) evicted: u64,
    pub(super) evicted_by: std::collections::HashMap<Arc<str>, u64>,
}

/// A finished session as the bounds on finished sessions count it.
pub(super) struct Finished {
    pub(super) id: SessionId,
    pub(super) owner: Option<Arc<str>>,
    pub(super) bytes: usize,
}

impl Registry {
    /// Removes the finished session at `index` of `finished` (and from `sessions`),
    /// counting it as evicted.
    fn evict(&mut self, index: usize) -> Option<Arc<Session>> {
        let f = self.finished.remove(index)?;
        self.finished_bytes = self.finished_bytes.saturating_sub(f.bytes);
        self.evicted += 1;
        if let Some(owner) = &f.owner {
            *self.evicted_by.entry(owner.clone()).or_default() += 1;
        }
        self.sessions.remove(&f.id)
    }
}

/// Least time between two walks of the registry for expired tombstones.
const PURGE_INTERVAL: Duration = Duration::from_millis(500);

impl Drop for Inner {
    /// The last clone of [`Sessions`] went away: SIGKILL every running session's
    /// process group (the shells would also get `PR_SET_PDEATHSIG` when the spawner
    /// thread ends, but their background children would not).
    fn drop(&mut self) {
        let reg = self.registry.get_mut().unwrap_or_else(|e| e.into_inner());
        // One scan for all of them (each group's other-group members included).
        let table = proc_scan::proc_table(Instant::now());
        for session in reg.sessions.values() {
            let running = {
                let st = session.lock();
                st.exit.is_none() && (session.group || !st.child_exited)
            };
            if running {
                if let Some(tree) = &session.tree {
                    tree.kill(Some(&table));
                }
                let mut seen = std::collections::HashSet::new();
                process::signal_processes(
                    session.pid,
                    session.group,
                    Signal::SIGKILL,
                    &mut seen,
                    Some(&table),
                );
            }
        }
    }
}

impl Inner {
    pub(super) fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn timing(&self) -> Timing {
        Timing {
            drain_grace: self.config.drain_grace,
            kill_grace: self.config.kill_grace,
        }
    }

    /// True for a tombstone older than the retention window.
    pub(super) fn expired(&self, session: &Session, now: Instant) -> bool {
        session
            .lock()
            .ended_at
            .is_some_and(|end| now.saturating_duration_since(end) > self.config.retention)
    }

    /// Drops tombstones older than the retention window; walks the registry at most
    /// once per [`PURGE_INTERVAL`] (callers skip expired sessions themselves).
    pub(super) fn purge(&self, reg: &mut Registry) {
        let now = Instant::now();
        if reg
            .purged_at
            .is_some_and(|at| now.saturating_duration_since(at) < PURGE_INTERVAL)
        {
            return;
        }
        reg.purged_at = Some(now);
        reg.sessions.retain(|_, s| !self.expired(s, now));
        let Registry {
            sessions,
            finished,
            finished_bytes,
            ..
        } = reg;
        finished.retain(|f| {
            let keep = sessions.contains_key(&f.id);
            if !keep {
                *finished_bytes = finished_bytes.saturating_sub(f.bytes);
            }
            keep
        });
    }

    /// A session ended: count it among the finished ones and evict the oldest
    /// finished sessions beyond the bounds (per plugin first, then host-wide), telling
    /// the observer about each.
    pub(super) fn retire(&self, session: &Arc<Session>) {
        let bytes = session.retained_bytes();
        let config = &self.config;
        let mut evicted: Vec<(Arc<Session>, String)> = Vec::new();
        {
            let mut reg = self.registry();
            if !reg.sessions.contains_key(&session.id) {
                return;
            }
            reg.finished.push_back(Finished {
                id: session.id.clone(),
                owner: session.owner.clone(),
                bytes,
            });
            reg.finished_bytes += bytes;
            if let Some(owner) = session.owner.clone() {
                loop {
                    let (count, bytes) = reg
                        .finished
                        .iter()
                        .filter(|f| f.owner.as_ref() == Some(&owner))
                        .fold((0usize, 0usize), |(n, b), f| (n + 1, b + f.bytes));
                    let reason = if count > config.max_finished_per_plugin {
                        format!(
                            "plugin `{owner}` keeps at most {} finished sessions \
                             (max_finished_per_plugin, default {DEFAULT_MAX_FINISHED_PER_PLUGIN})",
                            config.max_finished_per_plugin
                        )
                    } else if bytes > config.max_finished_bytes_per_plugin && count > 1 {
                        format!(
                            "plugin `{owner}`'s finished sessions keep at most {} bytes in memory \
                             (max_finished_bytes_per_plugin, default {} MiB)",
                            config.max_finished_bytes_per_plugin,
                            DEFAULT_MAX_FINISHED_BYTES_PER_PLUGIN >> 20
                        )
                    } else {
                        break;
                    };
                    let Some(index) = reg
                        .finished
                        .iter()
                        .position(|f| f.owner.as_ref() == Some(&owner))
                    else {
                        break;
                    };
                    if let Some(s) = reg.evict(index) {
                        evicted.push((s, reason));
                    }
                }
            }
            loop {
                let reason = if reg.finished.len() > config.max_finished_sessions {
                    format!(
                        "the host keeps at most {} finished sessions (max_finished_sessions, \
                         default {DEFAULT_MAX_FINISHED_SESSIONS})",
                        config.max_finished_sessions
                    )
                } else if reg.finished_bytes > config.max_finished_bytes && reg.finished.len() > 1 {
                    format!(
                        "finished sessions keep at most {} bytes in memory on this host \
                         (max_finished_bytes, default {} MiB)",
                        config.max_finished_bytes,
                        DEFAULT_MAX_FINISHED_BYTES >> 20
                    )
                } else {
                    break;
                };
                match reg.evict(0) {
                    Some(s) => evicted.push((s, reason)),
                    None => break,
                }
            }
        }
        for (s, reason) in evicted {
            tracing::info!(session = %s.id, "finished session evicted from memory: {reason}");
            if let Some(observer) = &config.observer {
                observer.on_session_evicted(&s.observed(), &reason);
            }
        }
    }

    pub(super) fn lookup(&self, caller: &Caller, id: &str) -> Result<Arc<Session>, SessionError> {
        let id = SessionId::parse(id)?;
        let mut reg = self.registry();
        self.purge(&mut reg);
        reg.sessions
            .get(&id)
            .filter(|s| caller.sees(s) && !self.expired(s, Instant::now()))
            .cloned()
            .ok_or_else(|| SessionError::UnknownSession(id.as_str().to_owned()))
    }

    /// Allocates a fresh session id and creates `<state_dir>/sessions/<id>/output.log`.
    ///
    /// The directory is created with `mkdir` (not `mkdir -p`): an id whose
    /// directory already exists (left by an earlier host process using the
    /// same state dir, or a concurrent one) is skipped, so ids and logs are
    /// never reused.
    pub(super) fn create_log(&self) -> Result<(SessionId, PathBuf), SessionError> {
        loop {
            let id = SessionId::next();
            let dir = self.sessions_dir.join(id.as_str());
            let io = |e: std::io::Error| {
                SessionError::Io(HostIoError::os(
                    IoOperation::CreateOutputLog,
                    Some(&dir),
                    &e,
                ))
            };
            match crate::private_fs::create_private_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(e)),
            }
            // Running, for the retention sweep: one lock for all of this engine's
            // sessions, no descriptor per session (`retention.rs`).
            let created = self.owner_lock.mark(&dir).and_then(|()| {
                let path = dir.join("output.log");
                // Created empty here, opened again on the first output
                // (`output::OutputLog`).
                crate::private_fs::create_private_file(&path).map(|_| path)
            });
            return match created {
                Ok(path) => Ok((id, path)),
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    Err(io(e))
                }
            };
        }
    }

    /// The paths a session's sandbox is built around: the workspace, its private temp
    /// dir and the hidden state dir (ARCHITECTURE.md, invariant "Confined commands can
    /// neither read nor write the state dir (other sessions' logs and temp dirs, event
    /// logs, the control socket, the compiled cache); their own `TMPDIR` works").
    fn sandbox_paths(
        &self,
        private_tmp: PathBuf,
        git_targets: Option<crate::sandbox::GitTargets>,
    ) -> SandboxPaths {
        SandboxPaths {
            workspace: self.workspace.clone(),
            private_tmp,
            protected: Vec::new(),
            hidden: vec![self.state_dir.clone()],
            read_denied: self.config.read_denied.clone(),
            mask_file: self.mask_file.clone(),
            git_targets,
        }
    }

    /// The workspace's `.git` targets for a start under `sandbox`, inspected on the
    /// blocking pool within [`GIT_INSPECT_DEADLINE`] (`sandbox::workspace_read`); `None`
    /// when the sandbox keeps no `.git` read-only.
    ///
    /// Errors: [`SessionError::Io`] when the inspection does not finish in time (a
    /// workspace on a filesystem that hangs): the start fails closed rather than run
    /// with `.git` unprotected.
    pub(super) async fn git_targets(
        &self,
        sandbox: &SandboxPolicy,
    ) -> Result<Option<crate::sandbox::GitTargets>, SessionError> {
        if sandbox.mode != crate::sandbox::SandboxMode::WorkspaceWrite || sandbox.git_writable {
            return Ok(None);
        }
        let workspace = self.workspace.clone();
        let task = self
            .handle
            .spawn_blocking(move || crate::sandbox::workspace_read::git_targets(&workspace));
        let failed = |cause: String| {
            SessionError::Io(HostIoError::other(
                IoOperation::PrepareSandbox,
                Some(&self.workspace),
                cause,
            ))
        };
        match tokio::time::timeout(GIT_INSPECT_DEADLINE, task).await {
            Ok(Ok(found)) => Ok(Some(found)),
            Ok(Err(e)) => Err(failed(format!("inspecting the workspace's .git: {e}"))),
            Err(_) => Err(failed(format!(
                "the workspace's .git could not be inspected within {} s; the command was \
                 not started",
                GIT_INSPECT_DEADLINE.as_secs()
            ))),
        }
    }

    /// Logs (at `warn`) the sandbox warnings not logged before by this engine.
    fn log_sandbox_warnings(&self, effective: &EffectiveSandbox) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        for w in &effective.warnings {
            if warned.insert(w.clone()) {
                tracing::warn!("sandbox weaker than requested: {w}");
            }
        }
    }

    /// The blocking half of a start: creates the session's log and temp dir, prepares
    /// its sandbox and builds the [`process::Launch`] (a long command's memfd included),
    /// for the spawner, beside what the session is built from. On error nothing is
    /// left behind.
    #[allow(clippy::too_many_arguments)] // One call site; each is a distinct part.
    pub(super) fn prepare_launch(
        &self,
        shell: &std::path::Path,
        command: String,
        request_env: &[(String, String)],
        cwd_fd: std::os::fd::OwnedFd,
        sandbox: SandboxPolicy,
        git_targets: Option<crate::sandbox::GitTargets>,
        stdin: process::StdinSetup,
        merge_stderr: bool,
        foreground: bool,
    ) -> Result<(Prepared, process::Launch), SessionError> {
        let (id, output_path) = self.create_log()?;
        let session_dir = output_path.parent().unwrap_or(&output_path).to_path_buf();
        let private_tmp = session_dir.join("tmp");
        let fail = |e: SessionError| {
            let _ = std::fs::remove_dir_all(&session_dir);
            e
        };
        let confinement = sandbox
            .prepare(&self.sandbox_paths(private_tmp.clone(), git_targets))
            .map_err(|e| {
                fail(SessionError::Io(HostIoError::other(
                    IoOperation::PrepareSandbox,
                    None,
                    e,
                )))
            })?;
        self.log_sandbox_warnings(confinement.effective());
        let env = process::build_env(&private_tmp, &self.config.extra_env, request_env);
        let effective = Arc::new(confinement.effective().clone());
        let tree = self
            .tracker
            .create(id.as_str(), &private_tmp)
            .map_err(|e| {
                let operation = IoOperation::CreateCgroup {
                    tracking: self.tracking.clone(),
                };
                fail(SessionError::Io(HostIoError::os(operation, None, &e)))
            })?;
        let tree = Arc::new(tree);
        let launch = process::Launch::new(
            shell,
            &command,
            env,
            cwd_fd,
            stdin,
            confinement,
            process::ChildStreams {
                nofile: self.config.child_nofile.unwrap_or(0),
                merge_stderr,
                tree: Some(tree.clone()),
                // A tool call waits for a foreground run's exit: its mount
                // namespace goes after the exit is reported.
                hold_mount_ns: foreground,
            },
        )
        .map_err(|e| {
            let operation = IoOperation::StartProcess { sandbox: None };
            fail(SessionError::Io(HostIoError::os(
                operation,
                Some(shell),
                &e,
            )))
        })?;
        let prepared = Prepared {
            id,
            output_path,
            session_dir,
            effective,
            tree,
            command,
            shell: shell.to_path_buf(),
        };
        Ok((prepared, launch))
    }

    /// Sessions matching `filter`, oldest first.
    pub(super) fn select(&self, filter: impl Fn(&Session) -> bool) -> Vec<Arc<Session>> {
        let mut reg = self.registry();
        self.purge(&mut reg);
        let now = Instant::now();
        reg.sessions
            .values()
            .filter(|s| filter(s) && !self.expired(s, now))
            .cloned()
            .collect()
    }
}

/// What [`Inner::prepare_launch`] made ready besides the launch: what the session
/// is built from.
pub(super) struct Prepared {
    pub(super) id: SessionId,
    pub(super) output_path: PathBuf,
    pub(super) session_dir: PathBuf,
    pub(super) effective: Arc<EffectiveSandbox>,
    pub(super) tree: Arc<tree::Tree>,
    pub(super) command: String,
    pub(super) shell: PathBuf,
}

/// A session [`Sessions::spawn_owned`] started, on its way to the caller. Unless the
/// caller [keeps](Launched::keep) it, dropping it (the caller went away: its start was
/// cancelled) ends the session's whole group, with reason [`KilledBy::StartCancelled`].
pub(super) struct Launched {
    pub(super) session: Option<Arc<Session>>,
    pub(super) timing: Timing,
    pub(super) handle: tokio::runtime::Handle,
}

impl Launched {
    /// The caller takes the session: it is no longer ended on drop.
    pub(super) fn keep(&mut self) -> SessionId {
        self.session
            .take()
            .map(|s| s.id.clone())
            .expect("a Launched is kept once")
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        tracing::info!(session = %session.id, "the start was cancelled; ending its process group");
        let timing = self.timing;
        self.handle.spawn(async move {
            let reason = EndReason::Killed(KilledBy::StartCancelled);
            session::terminate(&session, reason, None, timing).await;
        });
    }
}

/// Registers a started child's pipes with the current tokio runtime, and its exit
/// with `ring` when given (a background session's: no descriptor per child,
/// `exits.rs`), else through its pidfd. On error the child's whole group has been
/// killed and the child will be reaped.
#[allow(clippy::type_complexity)]
pub(super) fn register(
    started: process::Started,
    ring: Option<&Arc<exits::ExitRing>>,
) -> std::io::Result<(
    process::ChildProcess,
    pipe::Receiver,
    Option<pipe::Receiver>,
    Option<pipe::Sender>,
)> {
    let process::Started {
        pid,
        pidfd,
        stdin,
        stdout,
        stderr,
        mount_ns,
        guard,
    } = started;
    // Until the pipes are registered too, an error drops `guard`, which kills the
    // whole group and reaps the child.
    let registered = (|| {
        let stdout = pipe::Receiver::from_owned_fd(stdout)?;
        let stderr = stderr.map(pipe::Receiver::from_owned_fd).transpose()?;
        let stdin = stdin.map(pipe::Sender::from_owned_fd).transpose()?;
        let child = process::ChildProcess::spawned(pid, pidfd, mount_ns, ring)?;
        Ok((child, stdout, stderr, stdin))
    })();
    if registered.is_ok() {
        guard.disarm();
    }
    registered
}

pub(super) fn is_foreground_run(session: &Session, tool_call_id: &str) -> bool {
    if session.tool_call_id.as_deref() != Some(tool_call_id) {
        return false;
    }
    let st = session.lock();
    st.exit.is_none() && !st.detached
}

/// `<state_dir>/sandbox/mask`: an empty regular file of mode `0000` (made so if it is
/// not), what denied files are masked with (`SandboxPaths::mask_file`). `None`, with
/// the reason at `warn`, when it cannot be made.
fn mask_file(state_dir: &std::path::Path) -> Option<PathBuf> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = state_dir.join("sandbox");
    let path = dir.join("mask");
    let made = crate::private_fs::create_private_dir_all(&dir).and_then(|()| {
        let meta = std::fs::symlink_metadata(&path);
        let fit = meta.as_ref().is_ok_and(|m| m.is_file() && m.len() == 0);
        if meta.is_ok() && !fit {
            std::fs::remove_file(&path)?;
        }
        // An empty file left by an earlier start is kept as it is: opening it
        // again for writing fails for a host that is not root (mode `0000`).
        if !fit {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .mode(0o000)
                .open(&path)?;
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000))
    });
    match made {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!("{}: {e}; denied files cannot be masked", path.display());
            None
        }
    }
}

/// How long a start waits for the workspace's `.git` to be inspected
/// ([`Inner::git_targets`]): 2 s.
pub(super) const GIT_INSPECT_DEADLINE: Duration = Duration::from_secs(2);

/// A failure of the spawner thread (`operation`: starting it, or handing it a start).
pub(super) fn spawner_error(operation: IoOperation, e: std::io::Error) -> SessionError {
    SessionError::Io(HostIoError::os(operation, None, &e))
}

impl Sessions {
    /// Creates the engine: canonicalises the workspace, creates
    /// `<state_dir>/sessions`, validates `extra_env`, warns once about empty or
    /// relative `PATH` entries (dropped from every command's `PATH`), prepares the operator's sandbox
    /// once (probing the kernel; every way the kernel makes it weaker than asked is
    /// logged once with `tracing::warn!`, see [`Sessions::sandbox`]) and starts the
    /// spawner thread.
    ///
    /// Must be called within a tokio runtime (IO and time drivers enabled).
    /// Errors: [`SessionError::InvalidRequest`] for a missing workspace, a bad
    /// `extra_env` pair or no runtime; [`SessionError::Io`] if the state dir or thread
    /// cannot be created or the sandbox cannot be built
    /// ([`crate::sandbox::SandboxError`]).
    pub fn new(config: SessionsConfig) -> Result<Sessions, SessionError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            SessionError::InvalidRequest(
                "Sessions::new must be called inside a tokio runtime".into(),
            )
        })?;
        let workspace = std::fs::canonicalize(&config.workspace).map_err(|e| {
            SessionError::InvalidRequest(format!(
                "workspace {} cannot be resolved: {e}",
                config.workspace.display()
            ))
        })?;
        if !workspace.is_dir() {
            return Err(SessionError::InvalidRequest(format!(
                "workspace {} is not a directory",
                workspace.display()
            )));
        }
        for (k, v) in &config.extra_env {
            process::validate_env_pair(k, v)?;
        }
        let base_path = super::program::command_path(&config.extra_env, &[]);
        let given_path = config
            .extra_env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        if let Some(given) = given_path {
            let dropped = super::program::dropped_entries(&given);
            if !dropped.is_empty() {
                tracing::warn!(
                    "PATH for started commands: dropped the empty or relative entries {dropped:?} \
                     (the shell would search the working directory for programs); commands get \
                     PATH={}",
                    base_path.to_string_lossy()
                );
            }
        }
        let sessions_dir = config.state_dir.join("sessions");
        crate::private_fs::prepare_private_dir(&sessions_dir).map_err(|e| {
            SessionError::Io(HostIoError::os(
                IoOperation::CreateSessionsDir,
                Some(&sessions_dir),
                &e,
            ))
        })?;
        let state_dir = std::fs::canonicalize(&config.state_dir).map_err(|e| {
            SessionError::Io(HostIoError::os(
                IoOperation::ResolveStateDir,
                Some(&config.state_dir),
                &e,
            ))
        })?;
        // Prepared once up front (with the sessions dir standing in for the per-session
        // temp dirs) to fail early, to report, and to log the warnings once.
        let mask_file = mask_file(&state_dir);
        let sandbox = config
            .sandbox
            .prepare(&SandboxPaths {
                workspace: workspace.clone(),
                private_tmp: sessions_dir.clone(),
                protected: Vec::new(),
                hidden: vec![state_dir.clone()],
                read_denied: config.read_denied.clone(),
                mask_file: mask_file.clone(),
                git_targets: None,
            })
            .map_err(|e| {
                SessionError::Io(HostIoError::other(IoOperation::PrepareSandbox, None, e))
            })?
            .effective()
            .clone();
        if sandbox.is_confined() {
            tracing::info!("sandbox for started commands: {sandbox}");
        } else {
            tracing::info!("sandbox for started commands: {sandbox}: commands are NOT confined");
        }
        let spawner =
            process::Spawner::start().map_err(|e| spawner_error(IoOperation::StartSpawner, e))?;
        let exits = match exits::ExitRing::new(&handle) {
            Ok(ring) => Some(ring),
            Err(e) => {
                tracing::debug!(
                    "background sessions are waited for through a pidfd each (io_uring \
                     waitid: {e})"
                );
                None
            }
        };
        let owner_lock = retention::OwnerLock::acquire(&state_dir).map_err(|e| {
            SessionError::Io(HostIoError::os(
                IoOperation::CreateOwnerFile,
                Some(&state_dir.join("owners")),
                &e,
            ))
        })?;
        let tracker = tree::Tracker::detect(
            config.process_tracking,
            config.max_processes_per_session,
            config.clone_into_cgroup,
        );
        let tracking = tracker.describe();
        let shell = Shell::find(&BASH_CANDIDATES);
        let log_budget = Arc::new(output::LogBudget::new(config.output_logs_max_bytes));
        let inner = Inner {
            log_budget,
            config,
            workspace,
            sessions_dir,
            state_dir,
            sandbox,
            mask_file,
            warned: Mutex::default(),
            spawner,
            exits,
            owner_lock,
            unretired: tokio::sync::watch::Sender::new(0),
            tracker,
            tracking,
            shell,
            handle,
            registry: Mutex::new(Registry::default()),
            ledger: Arc::default(),
        };
        inner.log_sandbox_warnings(&inner.sandbox);
        Ok(Sessions {
            inner: Arc::new(inner),
        })
    }

    /// The operator's sandbox as prepared when the engine started: what every started
    /// command gets unless a per-call policy tightens it. Its `writable` list names
    /// `<state_dir>/sessions` where each session has its own `<id>/tmp`.
    pub fn sandbox(&self) -> &EffectiveSandbox {
        &self.inner.sandbox
    }

    /// How every started session's whole process tree is tracked and bounded, one
    /// line (as [`Snapshot::tracking`] shows it): the mechanism (`cgroup v2`, `cgroup
    /// v1 pids`, or `subreaper and /proc scan` where the host cannot create
    /// cgroups), the process limit, and why it is weaker when it is
    /// (docs/processes.md#process-tracking).
    pub fn tracking(&self) -> &str {
        &self.inner.tracking
    }

    /// The mechanism behind [`Sessions::tracking`]: cgroup v2, cgroup v1 `pids`,
    /// or the subreaper where the host cannot create cgroups.
    pub fn tracking_mechanism(&self) -> super::tree::TrackingMechanism {
        self.inner.tracker.mechanism()
    }

    /// Every process in the cgroups of this host's commands (none under the
    /// subreaper): what `peer.rs` checks a socket's holder against, beside
    /// the host's descendants.
    pub(crate) fn cgroup_members(&self) -> Vec<u32> {
        self.inner.tracker.members()
    }

    /// The operator's sandbox policy ([`SessionsConfig::sandbox`]).
    pub fn sandbox_policy(&self) -> &SandboxPolicy {
        &self.inner.config.sandbox
    }

    /// The canonical workspace root.
    pub fn workspace(&self) -> &std::path::Path {
        &self.inner.workspace
    }

    /// The host's shell, what a [`ShellRequest::Host`] start runs under: the first of
    /// [`BASH_CANDIDATES`] that is an executable file, else `/bin/sh`
    /// ([`DEFAULT_SHELL`]), resolved once when the engine started. Its
    /// [`kind`](Shell::kind) tells a plugin which shell its commands got.
    pub fn shell(&self) -> &Shell {
        &self.inner.shell
    }
}
