//! The configuration of a [`Sessions`](crate::Sessions) engine and its defaults.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[cfg(doc)]
use crate::sandbox::SandboxPaths;
use crate::sandbox::{DeniedRead, SandboxPolicy};
use crate::{OutputCapPolicy, ProcessTracking, SessionObserver};
#[cfg(doc)]
use crate::{OutputOmission, SessionError, SessionUsage, Sessions, Snapshot};

/// Default of [`SessionsConfig::output_memory_bytes`]: 1 MiB (1 048 576 bytes).
pub(crate) const DEFAULT_OUTPUT_MEMORY_BYTES: usize = 1 << 20;
/// Default of [`SessionsConfig::drain_grace`]: 100 ms.
pub(crate) const DEFAULT_DRAIN_GRACE: Duration = Duration::from_millis(100);
/// Default of [`SessionsConfig::kill_grace`]: 2 s.
pub(crate) const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);
/// Default of [`SessionsConfig::retention`]: 1 hour.
pub(crate) const DEFAULT_RETENTION: Duration = Duration::from_secs(60 * 60);
/// Default of [`SessionsConfig::max_sessions`]: 64 (the `--max-sessions` flag's too).
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Default of [`SessionsConfig::max_sessions_per_plugin`]: 16.
pub(crate) const DEFAULT_MAX_SESSIONS_PER_PLUGIN: usize = 16;
/// Default of [`SessionsConfig::reserved_sessions`]: 8.
pub(crate) const DEFAULT_RESERVED_SESSIONS: usize = 8;
/// Default of [`SessionsConfig::max_finished_sessions`]: 256.
pub(crate) const DEFAULT_MAX_FINISHED_SESSIONS: usize = 256;
/// Default of [`SessionsConfig::max_finished_per_plugin`]: 64.
pub(crate) const DEFAULT_MAX_FINISHED_PER_PLUGIN: usize = 64;
/// Default of [`SessionsConfig::max_finished_bytes`]: 64 MiB (67 108 864 bytes).
pub(crate) const DEFAULT_MAX_FINISHED_BYTES: usize = 64 << 20;
/// Default of [`SessionsConfig::max_finished_bytes_per_plugin`]: 16 MiB (16 777 216
/// bytes).
pub(crate) const DEFAULT_MAX_FINISHED_BYTES_PER_PLUGIN: usize = 16 << 20;
/// Default of [`SessionsConfig::output_log_max_bytes`]: 64 MiB (67 108 864 bytes; the
/// `--output-cap` flag's too).
pub const DEFAULT_OUTPUT_LOG_MAX_BYTES: u64 = 64 << 20;
/// Default of [`SessionsConfig::output_log_head_bytes`]: 1 MiB (1 048 576 bytes).
pub(crate) const DEFAULT_OUTPUT_LOG_HEAD_BYTES: u64 = 1 << 20;
/// Default of [`SessionsConfig::output_logs_max_bytes`]: 1 GiB (1 073 741 824 bytes).
pub(crate) const DEFAULT_OUTPUT_LOGS_MAX_BYTES: u64 = 1 << 30;
/// Default of [`SessionsConfig::max_processes_per_session`]: 512 processes (and
/// threads: the `pids` controller counts tasks) in one session's tree at once.
pub(crate) const DEFAULT_MAX_PROCESSES_PER_SESSION: u32 = 512;

/// Configuration of a [`Sessions`] engine. [`SessionsConfig::new`] fills the defaults
/// and lists them.
#[derive(Clone)]
pub struct SessionsConfig {
    /// The workspace root. Canonicalised by [`Sessions::new`]; every session's cwd must
    /// resolve (symlinks included) inside it. Must exist.
    pub workspace: PathBuf,
    /// Host state directory; each session's combined output goes to
    /// `<state_dir>/sessions/<id>/output.log`. Created if missing.
    pub state_dir: PathBuf,
    /// Operator-configured `(name, value)` pairs added to every child's allowlisted
    /// environment (before the request's own pairs). Default: none.
    pub extra_env: Vec<(String, String)>,
    /// Bytes of raw output kept in memory per running session, split evenly between
    /// the head and the tail (the rest is only in the log file); also the budget for
    /// output bytes held in a session's event backlog. Default: 1 MiB.
    pub output_memory_bytes: usize,
    /// After the direct child exits, how long to keep reading its pipes for output a
    /// grandchild may still write; ends early when both pipes reach EOF. Default: 100 ms.
    pub drain_grace: Duration,
    /// Terminate sequence: time between SIGTERM and SIGKILL. Default: 2 s.
    pub kill_grace: Duration,
    /// How long finished sessions stay queryable (tombstones), measured from their end.
    /// Expired ones are purged lazily on the next call. Default: 1 hour.
    pub retention: Duration,
    /// Most sessions running at once (started + adopted); past it `start` and `adopt`
    /// return [`SessionError::ResourceLimit`]. Default: [`DEFAULT_MAX_SESSIONS`] (64).
    pub max_sessions: usize,
    /// Most sessions one plugin may have running (or starting) at once; past it its
    /// `start` returns [`SessionError::ResourceLimit`] naming this quota. The host and
    /// [`SessionsConfig::builtin_plugins`] are exempt. Default: 16.
    pub max_sessions_per_plugin: usize,
    /// Slots of `max_sessions` that only the host and [`SessionsConfig::builtin_plugins`]
    /// may use, so the built-in tools still start while third-party plugins together
    /// fill theirs (at most half of `max_sessions`). Default: 8.
    pub reserved_sessions: usize,
    /// Plugins exempt from the per-plugin quotas that may use the reserved slots (the
    /// host passes its built-in `bash`). Default: none.
    pub builtin_plugins: Vec<Arc<str>>,
    /// Most finished sessions (tombstones) kept, all callers together; beyond it the
    /// oldest finished one is evicted (and reported to the observer). Default: 256.
    pub max_finished_sessions: usize,
    /// Most finished sessions kept per plugin (evicting its oldest). Default: 64.
    pub max_finished_per_plugin: usize,
    /// Most bytes all finished sessions keep in memory together (their kept output
    /// events, tail text and command; see [`SessionUsage::finished_bytes`]); beyond it the
    /// oldest finished ones are evicted. Default: 64 MiB.
    pub max_finished_bytes: usize,
    /// Most bytes one plugin's finished sessions keep in memory. Default: 16 MiB.
    pub max_finished_bytes_per_plugin: usize,
    /// Most bytes one session's `output.log` keeps on disk. Past it the log keeps its
    /// first [`SessionsConfig::output_log_head_bytes`] and its newest bytes at their
    /// offsets and drops the middle ([`OutputOmission`], in [`Snapshot::output_omitted`]
    /// and reported to the observer). Default: [`DEFAULT_OUTPUT_LOG_MAX_BYTES`] (64 MiB).
    pub output_log_max_bytes: u64,
    /// Bytes of the head a capped `output.log` keeps (the start of the output, where
    /// a build's or test run's first error usually is). Default: 1 MiB.
    pub output_log_head_bytes: u64,
    /// Most bytes the `output.log`s of the running sessions keep on disk together;
    /// while they exceed it, each running session past its head keeps only
    /// [`SessionsConfig::output_log_head_bytes`] of tail. Finished logs are bounded by
    /// [`retention`](SessionsConfig::retention) instead. Default: 1 GiB.
    pub output_logs_max_bytes: u64,
    /// What a session whose log reaches its cap gets. Default: [`OutputCapPolicy::Keep`].
    pub output_cap_policy: OutputCapPolicy,
    /// Receives every event of every session (see [`SessionObserver`]). Default: none.
    pub observer: Option<Arc<dyn SessionObserver>>,
    /// The operator's kernel sandbox for every started command (docs/sandbox.md#modes; the
    /// `--sandbox` / `--allow-network` flags). Default: [`SandboxPolicy::default`], i.e.
    /// `workspace-write`, network blocked, `.git` read-only. `full-access` (no
    /// confinement) is only ever used when set here explicitly. A per-call policy
    /// ([`Sessions::start_with_policy`]) can only tighten it.
    ///
    /// Each started session gets a private temp dir `<state_dir>/sessions/<id>/tmp`
    /// (created and writable in every mode, read-only included; `TMPDIR` points there), and
    /// `state_dir` itself is hidden: no confined command can read or write other sessions'
    /// logs and temp dirs, the event logs, the control socket or the compiled-plugin
    /// cache, even when the state dir lies inside the workspace or under `/tmp`
    /// ([`SandboxPaths::hidden`]); its own temp dir is bound back in. Under
    /// `full-access` nothing is hidden.
    pub sandbox: SandboxPolicy,
    /// Paths no confined command may read, whatever the per-call policy
    /// ([`SandboxPaths::read_denied`]: the host's own secrets, the built-in defaults of
    /// [`default_read_denied`](crate::default_read_denied), the operator's rules). Each
    /// existing one is masked in every confined command's mount namespace (`EACCES`);
    /// the engine keeps the empty mode-`0000` file the masks of files are bound from at
    /// `<state_dir>/sandbox/mask`. Default: none.
    pub read_denied: Vec<DeniedRead>,
    /// The soft `RLIMIT_NOFILE` every command starts with, e.g. the limit the host
    /// was started with before [`raise_fd_limit`](crate::raise_fd_limit) raised its
    /// own (some programs loop up to their soft limit). `None`: the host's current
    /// soft limit. Default: `None`.
    pub child_nofile: Option<u64>,
    /// Most processes (tasks) one session's tree may hold at once: the `pids.max` of
    /// its cgroup, so a fork bomb fails its forks instead of exhausting the host
    /// (docs/processes.md#process-tracking). Holds for root too; needs a `pids` controller the
    /// host can use (cgroup v2, or v1 on hybrid systems); without one there is no
    /// limit, and [`Sessions::tracking`] says so. 0: no limit. Default: 512.
    pub max_processes_per_session: u32,
    /// How each session's whole process tree is tracked, so that kills, timeouts and
    /// the host's exit reach descendants that left the shell's process group
    /// ([`ProcessTracking`]). Default: [`ProcessTracking::Auto`] (a cgroup per session
    /// where the host can create one, else `PR_SET_CHILD_SUBREAPER` and `/proc` scans).
    pub process_tracking: ProcessTracking,
    /// Create each command inside its cgroup v2 (`clone3(CLONE_INTO_CGROUP)`, Linux
    /// 5.7) instead of having it move itself there, which after an idle spell waits
    /// for an RCU grace period (`crate::spawn`'s module docs). Where `clone3` is
    /// missing the engine finds out at the first start and
    /// falls back by itself; `false` forces that fallback (tests). Default: `true`.
    pub clone_into_cgroup: bool,
}

impl SessionsConfig {
    /// A configuration for `workspace` and `state_dir` with every other field at its
    /// default (each written once, in a `DEFAULT_…` constant of this module):
    ///
    /// - no `extra_env`, no `builtin_plugins`, no `observer`, `child_nofile` `None`
    ///   (the host's own soft limit);
    /// - output: 1 MiB in memory per session; each `output.log` capped at
    ///   [`DEFAULT_OUTPUT_LOG_MAX_BYTES`] (64 MiB) keeping a 1 MiB head, 1 GiB for the
    ///   running sessions' logs together, [`OutputCapPolicy::Keep`];
    /// - timing: a 100 ms drain grace, a 2 s kill grace, 1 hour of retention;
    /// - running sessions: [`DEFAULT_MAX_SESSIONS`] (64) on the host, 16 per plugin, 8
    ///   reserved for the host and the built-in plugins;
    /// - finished sessions: 256 on the host and 64 per plugin, 64 MiB and 16 MiB of
    ///   memory;
    /// - confinement: [`SandboxPolicy::default`] (`workspace-write`, network blocked,
    ///   `.git` read-only), no `read_denied`, [`ProcessTracking::Auto`], at most 512
    ///   processes per session, children created inside their cgroup where `clone3`
    ///   allows.
    pub fn new(workspace: impl Into<PathBuf>, state_dir: impl Into<PathBuf>) -> Self {
        SessionsConfig {
            workspace: workspace.into(),
            state_dir: state_dir.into(),
            extra_env: Vec::new(),
            output_memory_bytes: DEFAULT_OUTPUT_MEMORY_BYTES,
            drain_grace: DEFAULT_DRAIN_GRACE,
            kill_grace: DEFAULT_KILL_GRACE,
            retention: DEFAULT_RETENTION,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_plugin: DEFAULT_MAX_SESSIONS_PER_PLUGIN,
            reserved_sessions: DEFAULT_RESERVED_SESSIONS,
            builtin_plugins: Vec::new(),
            max_finished_sessions: DEFAULT_MAX_FINISHED_SESSIONS,
            max_finished_per_plugin: DEFAULT_MAX_FINISHED_PER_PLUGIN,
            max_finished_bytes: DEFAULT_MAX_FINISHED_BYTES,
            max_finished_bytes_per_plugin: DEFAULT_MAX_FINISHED_BYTES_PER_PLUGIN,
            output_log_max_bytes: DEFAULT_OUTPUT_LOG_MAX_BYTES,
            output_log_head_bytes: DEFAULT_OUTPUT_LOG_HEAD_BYTES,
            output_logs_max_bytes: DEFAULT_OUTPUT_LOGS_MAX_BYTES,
            output_cap_policy: OutputCapPolicy::Keep,
            observer: None,
            sandbox: SandboxPolicy::default(),
            read_denied: Vec::new(),
            child_nofile: None,
            max_processes_per_session: DEFAULT_MAX_PROCESSES_PER_SESSION,
            process_tracking: ProcessTracking::Auto,
            clone_into_cgroup: true,
        }
    }
}

impl fmt::Debug for SessionsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionsConfig")
            .field("workspace", &self.workspace)
            .field("state_dir", &self.state_dir)
            .field("extra_env", &self.extra_env)
            .field("output_memory_bytes", &self.output_memory_bytes)
            .field("drain_grace", &self.drain_grace)
            .field("kill_grace", &self.kill_grace)
            .field("retention", &self.retention)
            .field("max_sessions", &self.max_sessions)
            .field("max_sessions_per_plugin", &self.max_sessions_per_plugin)
            .field("reserved_sessions", &self.reserved_sessions)
            .field("builtin_plugins", &self.builtin_plugins)
            .field("max_finished_sessions", &self.max_finished_sessions)
            .field("max_finished_per_plugin", &self.max_finished_per_plugin)
            .field("max_finished_bytes", &self.max_finished_bytes)
            .field(
                "max_finished_bytes_per_plugin",
                &self.max_finished_bytes_per_plugin,
            )
            .field("output_log_max_bytes", &self.output_log_max_bytes)
            .field("output_log_head_bytes", &self.output_log_head_bytes)
            .field("output_logs_max_bytes", &self.output_logs_max_bytes)
            .field("output_cap_policy", &self.output_cap_policy)
            .field("observer", &self.observer.is_some())
            .field("sandbox", &self.sandbox)
            .field("read_denied", &self.read_denied)
            .field("child_nofile", &self.child_nofile)
            .field("max_processes_per_session", &self.max_processes_per_session)
            .field("process_tracking", &self.process_tracking)
            .field("clone_into_cgroup", &self.clone_into_cgroup)
            .finish()
    }
}
