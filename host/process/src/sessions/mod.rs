//! Process sessions: real OS processes the host runs on behalf of plugins (ARCHITECTURE.md, "Crates").
//!
//! [`Sessions`] starts `SHELL -c COMMAND` in its own session and process group with an
//! allowlisted environment, a working directory inside the workspace and stdin closed
//! unless asked for, confined by the kernel sandbox ([`crate::sandbox`];
//! [`SessionsConfig::sandbox`], default `workspace-write` with the network blocked) with
//! a private `TMPDIR`; captures stdout and stderr byte-exact (interleaved in arrival
//! order) to `<state_dir>/sessions/<id>/output.log` while keeping memory bounded;
//! ends a run on the direct child's exit (draining the pipes for a bounded grace);
//! kills whole process groups (SIGTERM, grace, SIGKILL) on timeout, `kill`, the end of
//! a tool call or host shutdown; and records a seq-numbered event stream per session
//! that [`Subscription`]s follow without polling.
//!
//! The types mirror `wit/v0.1.0/sessions.wit` (`interface sessions`) so the wasm
//! binding is a field-by-field conversion.
//!
//! Runtime requirements: [`Sessions::new`] must be called inside a tokio runtime with
//! IO and time enabled (a multi-thread runtime is recommended); every session runs as a
//! task on that runtime, and children are forked by one dedicated thread that lives as
//! long as the [`Sessions`]. Dropping the last clone SIGKILLs every running session's
//! process group (call [`Sessions::shutdown`] for an orderly SIGTERM first); if the host
//! dies outright, `PR_SET_PDEATHSIG` SIGKILLs the shells (not their background children).

mod exits;
mod output;
mod proc_scan;
mod process;
pub mod retention;
mod session;
mod subscription;
pub mod survivors;
mod tree;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::net::unix::pipe;

use crate::sandbox::{EffectiveSandbox, SandboxPaths, SandboxPolicy};

pub use nix::sys::signal::Signal;
pub use output::{
    MAX_EVENTS_IN_MEMORY, OUTPUT_TAIL_MAX_BYTES, OutputCapPolicy, OutputOmission,
    ceil_char_boundary, floor_char_boundary, tail_str, truncate_str,
};
pub use process::{
    BASH_CANDIDATES, ENV_ALLOWLIST, INLINE_COMMAND_MAX, NON_INTERACTIVE_ENV, SCRIPT_FD, find_bash,
    group_members,
};
pub use subscription::Subscription;
pub use tree::{DEFAULT_MAX_PROCESSES_PER_SESSION, ProcessTracking, remove_own_cgroups};

use session::{Session, SessionInit, Timing};

/// Most bytes one [`Sessions::read_output`] / [`Sessions::read_new_output`] call
/// returns: 1 MiB. Larger `max_bytes` are capped to this.
pub const MAX_READ_BYTES: u32 = 1024 * 1024;

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

/// How long [`Sessions::shutdown`] waits, after the last session ended, for the
/// ended sessions' bookkeeping: 1 s (it takes well under 1 ms a session).
const SETTLE_MAX: Duration = Duration::from_secs(1);

/// Output bytes a finished session keeps in its event backlog: 64 KiB. Older output
/// events are folded into [`SessionEventKind::Omitted`] when the session ends (their
/// bytes stay readable with [`Sessions::read_output`]).
pub const FINISHED_OUTPUT_BYTES: usize = 64 << 10;

/// Events a finished session keeps in memory: 256 (older output events are folded as
/// for [`FINISHED_OUTPUT_BYTES`]).
pub const FINISHED_EVENTS_MAX: usize = 256;

/// Most events the WIT `subscription.next` returns per call (the Rust
/// [`Subscription::next`] takes its own `max`).
pub const MAX_EVENTS_PER_NEXT: usize = 256;

/// The [`Snapshot::sandbox`] value of an adopted session ([`Sessions::adopt`]): the
/// embedder spawned that process itself, so the host confined nothing.
pub const SANDBOX_NONE: &str = "none";

/// The text appended to a foreground call's output when its run is detached
/// (ARCHITECTURE.md, "The path of one tool call"): exactly `"\n\n[Detached to background task {task_id}: {reason}]"`.
pub fn detach_marker(task_id: &SessionId, reason: &str) -> String {
    format!("\n\n[Detached to background task {task_id}: {reason}]")
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

/// Receives every [`SessionEvent`] of every session, in seq order per session (the
/// host-wide event log hooks in here).
///
/// Called synchronously while the session's state is locked: it must return quickly
/// and must not call back into [`Sessions`] (send the event over a channel instead).
pub trait SessionObserver: Send + Sync + 'static {
    /// One event of session `session`.
    fn on_event(&self, session: &SessionId, event: &SessionEvent);

    /// One event, with what the session is (its command, tool call and log
    /// path). The default forwards to [`SessionObserver::on_event`].
    fn on_session_event(&self, session: &ObservedSession<'_>, event: &SessionEvent) {
        self.on_event(session.id, event);
    }

    /// A finished session was evicted from memory before its retention window ended,
    /// because a bound on finished sessions was reached; `reason` names the bound, e.g.
    /// ``plugin `x` keeps at most 64 finished sessions (max_finished_per_plugin, default 64)``.
    /// Its `output.log` stays on disk. Called without any lock held. Default: nothing.
    fn on_session_evicted(&self, session: &ObservedSession<'_>, reason: &str) {
        let _ = (session, reason);
    }

    /// The session's `output.log` reached its cap and omits `omission` (see
    /// [`SessionsConfig::output_log_max_bytes`]): called once when the cap is first
    /// reached and once more, with the final range, right before the session's
    /// `Exited` event. Called under the session's lock, like `on_session_event`.
    /// Default: nothing.
    fn on_output_omitted(&self, session: &ObservedSession<'_>, omission: &OutputOmission) {
        let _ = (session, omission);
    }
}

/// What a [`Sessions`] engine holds for a caller ([`Sessions::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionUsage {
    /// Sessions running or starting.
    pub running: usize,
    /// Finished sessions kept in memory (within retention and the finished bounds).
    pub finished: usize,
    /// Bytes those finished sessions keep in memory: their kept output events (at most
    /// [`FINISHED_OUTPUT_BYTES`] each), tail text, command and bookkeeping.
    pub finished_bytes: usize,
    /// Finished sessions evicted so far because a bound was reached (host-wide for
    /// [`Caller::Host`], else the plugin's own).
    pub evicted: u64,
}

/// What a [`SessionObserver`] is told about the session an event belongs to.
#[derive(Debug, Clone, Copy)]
pub struct ObservedSession<'a> {
    /// The session id.
    pub id: &'a SessionId,
    /// The command line.
    pub command: &'a str,
    /// The tool call it runs (or ran) for in the foreground, if any.
    pub tool_call_id: Option<&'a str>,
    /// Host path of its byte-exact combined `output.log`.
    pub output_path: &'a std::path::Path,
}

/// Configuration of a [`Sessions`] engine. [`SessionsConfig::new`] fills the defaults.
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
    /// output bytes held in a session's event backlog. Default: 1 MiB (1 048 576).
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
    /// return [`SessionError::ResourceLimit`]. Default: 64.
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
    /// oldest finished ones are evicted. Default: 64 MiB (67 108 864 bytes).
    pub max_finished_bytes: usize,
    /// Most bytes one plugin's finished sessions keep in memory. Default: 16 MiB
    /// (16 777 216 bytes).
    pub max_finished_bytes_per_plugin: usize,
    /// Most bytes one session's `output.log` keeps on disk. Past it the log keeps its
    /// first [`SessionsConfig::output_log_head_bytes`] and its newest bytes at their
    /// offsets and drops the middle ([`OutputOmission`], in [`Snapshot::output_omitted`]
    /// and reported to the observer). Default: 64 MiB (67 108 864 bytes).
    pub output_log_max_bytes: u64,
    /// Bytes of the head a capped `output.log` keeps (the start of the output, where
    /// a build's or test run's first error usually is). Default: 1 MiB (1 048 576).
    pub output_log_head_bytes: u64,
    /// Most bytes the `output.log`s of the running sessions keep on disk together;
    /// while they exceed it, each running session past its head keeps only
    /// [`SessionsConfig::output_log_head_bytes`] of tail. Finished logs are bounded by
    /// [`retention`] instead. Default: 1 GiB (1 073 741 824 bytes).
    pub output_logs_max_bytes: u64,
    /// What a session whose log reaches its cap gets. Default: [`OutputCapPolicy::Keep`].
    pub output_cap_policy: OutputCapPolicy,
    /// Receives every event of every session (see [`SessionObserver`]). Default: none.
    pub observer: Option<Arc<dyn SessionObserver>>,
    /// The operator's kernel sandbox for every started command (ARCHITECTURE.md, "Sandbox"; the
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
    /// The soft `RLIMIT_NOFILE` every command starts with, e.g. the limit the host
    /// was started with before [`raise_fd_limit`](crate::raise_fd_limit) raised its
    /// own (some programs loop up to their soft limit). `None`: the host's current
    /// soft limit. Default: `None`.
    pub child_nofile: Option<u64>,
    /// Most processes (tasks) one session's tree may hold at once: the `pids.max` of
    /// its cgroup, so a fork bomb fails its forks instead of exhausting the host
    /// (README, "Process tracking"). Holds for root too; needs a `pids` controller the
    /// host can use (cgroup v2, or v1 on hybrid systems); without one there is no
    /// limit, and [`Sessions::tracking`] says so. 0: no limit. Default:
    /// [`DEFAULT_MAX_PROCESSES_PER_SESSION`] (512).
    pub max_processes_per_session: u32,
    /// How each session's whole process tree is tracked, so that kills, timeouts and
    /// the host's exit reach descendants that left the shell's process group
    /// ([`ProcessTracking`]). Default: [`ProcessTracking::Auto`] (a cgroup per session
    /// where the host can create one, else `PR_SET_CHILD_SUBREAPER` and `/proc` scans).
    pub process_tracking: ProcessTracking,
}

impl SessionsConfig {
    /// A configuration with the documented defaults.
    pub fn new(workspace: impl Into<PathBuf>, state_dir: impl Into<PathBuf>) -> Self {
        SessionsConfig {
            workspace: workspace.into(),
            state_dir: state_dir.into(),
            extra_env: Vec::new(),
            output_memory_bytes: 1024 * 1024,
            drain_grace: Duration::from_millis(100),
            kill_grace: Duration::from_secs(2),
            retention: Duration::from_secs(60 * 60),
            max_sessions: 64,
            max_sessions_per_plugin: 16,
            reserved_sessions: 8,
            builtin_plugins: Vec::new(),
            max_finished_sessions: 256,
            max_finished_per_plugin: 64,
            max_finished_bytes: 64 << 20,
            max_finished_bytes_per_plugin: 16 << 20,
            output_log_max_bytes: 64 << 20,
            output_log_head_bytes: 1 << 20,
            output_logs_max_bytes: 1 << 30,
            output_cap_policy: OutputCapPolicy::Keep,
            observer: None,
            sandbox: SandboxPolicy::default(),
            child_nofile: None,
            max_processes_per_session: DEFAULT_MAX_PROCESSES_PER_SESSION,
            process_tracking: ProcessTracking::Auto,
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
            .field("child_nofile", &self.child_nofile)
            .field("max_processes_per_session", &self.max_processes_per_session)
            .field("process_tracking", &self.process_tracking)
            .finish()
    }
}

/// Who is calling: the host (sees every session) or a plugin (sees only the sessions
/// it started; another plugin's id answers [`SessionError::UnknownSession`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The host itself (front doors, control clients, the embedder).
    Host,
    /// A plugin, by its name.
    Plugin(Arc<str>),
}

impl Caller {
    fn owner(&self) -> Option<Arc<str>> {
        match self {
            Caller::Host => None,
            Caller::Plugin(name) => Some(name.clone()),
        }
    }

    fn sees(&self, session: &Session) -> bool {
        match self {
            Caller::Host => true,
            Caller::Plugin(name) => session.owner.as_deref() == Some(&**name),
        }
    }
}

/// A session id: `bg_` followed by 12 lowercase hex digits (e.g. `bg_00000000002a`),
/// from a process-wide counter; an id whose log directory already exists in the
/// state dir is skipped, so ids are unique per state dir across host restarts.
/// Ids sort in creation order. Derefs to `&str`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl SessionId {
    fn next() -> SessionId {
        let n = NEXT_ID.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff_ffff;
        SessionId(format!("bg_{n:012x}"))
    }

    /// Makes every id this process allocates from now on greater than `id` (a
    /// resumed host-session log names sessions whose directories a sweep may have
    /// removed; their ids must not come back).
    pub fn reserve_through(id: &SessionId) {
        if let Ok(n) = u64::from_str_radix(&id.0[3..], 16) {
            NEXT_ID.fetch_max(n + 1, Ordering::Relaxed);
        }
    }

    /// Validates an incoming id. Errors: [`SessionError::UnknownSession`] (with the
    /// given text) when it is not `bg_` + 12 lowercase hex digits.
    pub fn parse(s: &str) -> Result<SessionId, SessionError> {
        let valid = s.len() == 15
            && s.starts_with("bg_")
            && s.bytes()
                .skip(3)
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if valid {
            Ok(SessionId(s.to_owned()))
        } else {
            Err(SessionError::UnknownSession(s.to_owned()))
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for SessionId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SessionId {
    type Err = SessionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SessionId::parse(s)
    }
}

impl TryFrom<String> for SessionId {
    type Error = SessionError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        SessionId::parse(&s)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

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
    /// Absolute path of an executable shell. `None`: `/bin/sh`.
    pub shell: Option<String>,
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
    /// The working directory's real path (symlinks resolved, inside the workspace).
    pub cwd: PathBuf,
    /// The sandbox the command runs under: the operator's, tightened by the caller's.
    pub sandbox: SandboxPolicy,
    /// The request as given (its `cwd` and `shell` are what the caller wrote).
    pub request: StartRequest,
    cwd_fd: std::os::fd::OwnedFd,
}

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
    fn from_std(status: std::process::ExitStatus, reason: EndReason) -> ExitStatus {
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

/// Which output stream a chunk came from (WIT `output-stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OutputStream {
    /// Standard output.
    Stdout = 0,
    /// Standard error.
    Stderr = 1,
}

/// Bytes a process wrote (WIT `output-chunk`). `offset` is the position of the first
/// byte in the combined log (stdout and stderr interleaved as they arrived).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OutputChunk {
    /// The stream the bytes came from.
    pub stream: OutputStream,
    /// Log offset of `data[0]`, in bytes.
    pub offset: u64,
    /// The raw bytes (at most 64 KiB per chunk). Shared, not copied, between the
    /// session's event backlog, its in-memory tail and every subscriber.
    pub data: bytes::Bytes,
}

/// A session as [`Sessions::check`] and [`Sessions::list`] see it (WIT `snapshot`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The session id.
    pub id: SessionId,
    /// The command line as given to `start` (or `adopt`).
    pub command: String,
    /// Current status.
    pub status: SessionStatus,
    /// Set once the session has ended.
    pub exit: Option<ExitStatus>,
    /// Pid of the shell (also its session and process group id for started sessions).
    pub pid: Option<u32>,
    /// Milliseconds from start to now, or to the end if it ended.
    pub elapsed_ms: u64,
    /// The last output (at most [`OUTPUT_TAIL_MAX_BYTES`] = 16 KiB), decoded as UTF-8
    /// per stream with invalid sequences as U+FFFD, cut on a char boundary.
    pub output_tail: String,
    /// Total bytes of output so far (stdout plus stderr).
    pub output_bytes: u64,
    /// True when `output_tail` does not hold all of the output.
    pub truncated: bool,
    /// Seq of the last event recorded (0 if none).
    pub last_seq: u64,
    /// True once detached into a background task, or started in the background.
    pub detached: bool,
    /// The tool call the session runs (or ran) for.
    pub tool_call_id: Option<String>,
    /// Host path of the byte-exact combined output log.
    pub output_path: PathBuf,
    /// The kernel sandbox the process runs under: the [`EffectiveSandbox`] one-line
    /// summary, e.g. `workspace-write (landlock abi 7, network blocked, .git read-only)`
    /// or `full-access (no confinement)`; [`SANDBOX_NONE`] for adopted processes.
    pub sandbox: String,
    /// Host-side only (not in the WIT snapshot): for a session that exited by itself
    /// with a non-zero code under an active sandbox, the rule that most likely refused
    /// it, from [`crate::sandbox::denial_hint`] applied to the output tail, e.g.
    /// `sandbox denial (likely): writes outside /ws and /state/sessions/bg_…/tmp are
    /// blocked by the workspace-write sandbox; ask the operator for --sandbox
    /// full-access`. `None` while running, on success, for kills and timeouts, under
    /// full-access, or when the output shows no sign of a denial. The output itself is
    /// never altered.
    pub sandbox_denial: Option<String>,
    /// Host-side only (not in the WIT snapshot): the bytes `output.log` omits because
    /// it reached its cap, and whether the process was kept running or stopped
    /// ([`SessionsConfig::output_log_max_bytes`]). `None` below the cap.
    pub output_omitted: Option<OutputOmission>,
    /// Host-side only (the WIT snapshot has no field for it): how the session's whole
    /// process tree is tracked and bounded, e.g. `cgroup v2, at most 512 processes
    /// (cgroup v1 pids.max)` or `subreaper and /proc scan, no process limit (...)`
    /// ([`Sessions::tracking`]); `process group only (adopted)` for adopted processes.
    pub tracking: String,
}

/// Something that happened to a session (WIT `session-event`). Seqs start at 1 per
/// session and rise by exactly one (an [`SessionEventKind::Omitted`] stands for its range).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// The seq (for `Omitted`, its `first_seq`).
    pub seq: u64,
    /// Milliseconds since the session started.
    pub at_ms: u64,
    /// What happened.
    pub kind: SessionEventKind,
}

/// The kinds of session events (WIT `event-kind`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionEventKind {
    /// The process started (pid and sandbox). Always seq 1. The WIT `started(u32)`
    /// carries only the pid.
    Started(StartedInfo),
    /// Output bytes.
    Output(OutputChunk),
    /// The session became a background task.
    Detached(DetachInfo),
    /// The process ended. Always the last event.
    Exited(ExitStatus),
    /// Output events dropped from memory; their bytes stay readable with
    /// [`Sessions::read_output`] from `offset`.
    Omitted(OmittedRange),
}

/// What [`SessionEventKind::Started`] records. Host-side it carries more than the WIT
/// `started(u32)` event, whose conversion keeps only `pid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartedInfo {
    /// Pid of the shell (its session and process group id for started sessions).
    pub pid: u32,
    /// The sandbox it runs under, as in [`Snapshot::sandbox`].
    pub sandbox: String,
}

/// A run of events dropped from memory (WIT `omitted-range`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OmittedRange {
    /// First seq of the range (inclusive).
    pub first_seq: u64,
    /// Last seq of the range (inclusive).
    pub last_seq: u64,
    /// Log offset of the first omitted output byte.
    pub offset: u64,
}

/// What `detach` did (WIT `detach-info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetachInfo {
    /// The session detached.
    pub id: SessionId,
    /// The reason given.
    pub reason: String,
    /// Bytes of output captured up to the moment of detaching.
    pub output_bytes: u64,
    /// The tool call it was detached from, if any.
    pub tool_call_id: Option<String>,
}

/// What `kill` did (WIT `kill-info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillInfo {
    /// How many distinct processes of the session's group were signalled.
    pub signalled: u32,
}

/// Bytes read from a session's output (WIT `output-range`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRange {
    /// Log offset of `data[0]`.
    pub offset: u64,
    /// The bytes (at most [`MAX_READ_BYTES`]).
    pub data: Vec<u8>,
    /// Total bytes of output so far.
    pub total_bytes: u64,
    /// True when the session has ended and `offset + data.len()` is the end.
    pub eof: bool,
}

/// Errors of session calls (WIT `session-error`). Messages say what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
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
    /// An I/O error on the host.
    #[error("host I/O error: {0}")]
    Io(String),
}

/// The session engine. Cheap to clone (an `Arc` inside); all clones share sessions.
#[derive(Clone)]
pub struct Sessions {
    inner: Arc<Inner>,
}

struct Inner {
    config: SessionsConfig,
    workspace: PathBuf,
    sessions_dir: PathBuf,
    /// The canonical state dir (protected from every confined command).
    state_dir: PathBuf,
    /// The operator's sandbox as prepared when the engine started.
    sandbox: EffectiveSandbox,
    /// Sandbox warnings already logged (each distinct one is logged once).
    warned: Mutex<std::collections::HashSet<String>>,
    spawner: process::Spawner,
    /// Where background sessions' exits are waited for without a descriptor each
    /// (`exits.rs`); `None` where the kernel lacks it (they keep their pidfd).
    exits: Option<Arc<exits::ExitRing>>,
    /// What tells the retention sweep that this engine's sessions are running
    /// (`<state>/owners/…`, `retention.rs`).
    owner_lock: retention::OwnerLock,
    /// Session tasks launched and not yet through their bookkeeping (retired);
    /// [`Sessions::shutdown`] waits on it.
    unretired: tokio::sync::watch::Sender<usize>,
    /// How sessions' process trees are tracked (a cgroup per session, or scans).
    tracker: tree::Tracker,
    /// `tracker.describe()`, as snapshots show it.
    tracking: String,
    handle: tokio::runtime::Handle,
    /// Bytes the running sessions' output logs keep on disk, against
    /// `output_logs_max_bytes`.
    log_budget: Arc<output::LogBudget>,
    registry: Mutex<Registry>,
    /// Running-session counts (started + starting + adopted), per plugin too. A leaf
    /// lock: taken under the registry's or a session's lock, never the other way.
    ledger: Arc<Mutex<Ledger>>,
}

#[derive(Default)]
struct Registry {
    sessions: BTreeMap<SessionId, Arc<Session>>,
    /// When tombstones were last purged (a purge walks every session, so it runs at
    /// most once per [`PURGE_INTERVAL`]; lookups skip expired ones meanwhile).
    purged_at: Option<Instant>,
    /// Finished sessions in the order they ended, oldest first.
    finished: std::collections::VecDeque<Finished>,
    /// Sum of `finished[..].bytes`.
    finished_bytes: usize,
    /// Finished sessions evicted by a bound, in all and per plugin.
    evicted: u64,
    evicted_by: std::collections::HashMap<Arc<str>, u64>,
}

/// A finished session as the bounds on finished sessions count it.
struct Finished {
    id: SessionId,
    owner: Option<Arc<str>>,
    bytes: usize,
}

/// Sessions running or starting: in all, those of callers that may not use the
/// reserved slots, and per plugin.
#[derive(Default)]
struct Ledger {
    active: usize,
    unprivileged: usize,
    per_plugin: std::collections::HashMap<Arc<str>, usize>,
}

fn lock_ledger(ledger: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|e| e.into_inner())
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

/// A reserved running-session slot: counted from [`Inner::reserve`] until dropped,
/// which is when its session ended (the session task holds it) or its start failed.
pub(crate) struct Slot {
    ledger: Arc<Mutex<Ledger>>,
    owner: Option<Arc<str>>,
    privileged: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut ledger = lock_ledger(&self.ledger);
        ledger.active = ledger.active.saturating_sub(1);
        if !self.privileged {
            ledger.unprivileged = ledger.unprivileged.saturating_sub(1);
            if let Some(owner) = &self.owner
                && let Some(n) = ledger.per_plugin.get_mut(owner)
            {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    ledger.per_plugin.remove(owner);
                }
            }
        }
    }
}

impl Inner {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn timing(&self) -> Timing {
        Timing {
            drain_grace: self.config.drain_grace,
            kill_grace: self.config.kill_grace,
        }
    }

    /// True for a tombstone older than the retention window.
    fn expired(&self, session: &Session, now: Instant) -> bool {
        session
            .lock()
            .ended_at
            .is_some_and(|end| now.saturating_duration_since(end) > self.config.retention)
    }

    /// Drops tombstones older than the retention window; walks the registry at most
    /// once per [`PURGE_INTERVAL`] (callers skip expired sessions themselves).
    fn purge(&self, reg: &mut Registry) {
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

    /// True for callers that are exempt from the per-plugin quotas and may use the
    /// reserved slots: the host and the built-in plugins.
    fn privileged(&self, caller: &Caller) -> bool {
        match caller {
            Caller::Host => true,
            Caller::Plugin(name) => self.config.builtin_plugins.iter().any(|b| b == name),
        }
    }

    /// Reserves a running-session slot for `caller`, checking the host's
    /// `max_sessions`, the third-party share of it (`max_sessions - reserved_sessions`)
    /// and the caller's own quota (`max_sessions_per_plugin`).
    ///
    /// Errors: [`SessionError::ResourceLimit`] naming the quota that is full and its
    /// default.
    fn reserve(&self, caller: &Caller) -> Result<Slot, SessionError> {
        self.purge(&mut self.registry());
        let privileged = self.privileged(caller);
        let config = &self.config;
        let mut ledger = lock_ledger(&self.ledger);
        if ledger.active >= config.max_sessions {
            return Err(SessionError::ResourceLimit(format!(
                "{} sessions are running on this host, its limit (max_sessions = {}, default 64); \
                 wait for one to end or kill one",
                ledger.active, config.max_sessions
            )));
        }
        if !privileged {
            let reserved = config.reserved_sessions.min(config.max_sessions / 2);
            let share = config.max_sessions - reserved;
            if ledger.unprivileged >= share {
                return Err(SessionError::ResourceLimit(format!(
                    "third-party plugins have {} running sessions, their share of the host \
                     (max_sessions - reserved_sessions = {share}, default 64 - 8); wait for one \
                     to end or kill one",
                    ledger.unprivileged
                )));
            }
            if let Caller::Plugin(name) = caller {
                let mine = ledger.per_plugin.get(name).copied().unwrap_or(0);
                if mine >= config.max_sessions_per_plugin {
                    return Err(SessionError::ResourceLimit(format!(
                        "plugin `{name}` has {mine} running sessions, its quota \
                         (per-plugin max_sessions_per_plugin = {}, default 16); wait for one \
                         to end or kill one",
                        config.max_sessions_per_plugin
                    )));
                }
                *ledger.per_plugin.entry(name.clone()).or_default() += 1;
            }
            ledger.unprivileged += 1;
        }
        ledger.active += 1;
        Ok(Slot {
            ledger: self.ledger.clone(),
            owner: caller.owner(),
            privileged,
        })
    }

    /// A session ended: count it among the finished ones and evict the oldest
    /// finished sessions beyond the bounds (per plugin first, then host-wide), telling
    /// the observer about each.
    fn retire(&self, session: &Arc<Session>) {
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
                             (max_finished_per_plugin, default 64)",
                            config.max_finished_per_plugin
                        )
                    } else if bytes > config.max_finished_bytes_per_plugin && count > 1 {
                        format!(
                            "plugin `{owner}`'s finished sessions keep at most {} bytes in memory \
                             (max_finished_bytes_per_plugin, default 16 MiB)",
                            config.max_finished_bytes_per_plugin
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
                         default 256)",
                        config.max_finished_sessions
                    )
                } else if reg.finished_bytes > config.max_finished_bytes && reg.finished.len() > 1 {
                    format!(
                        "finished sessions keep at most {} bytes in memory on this host \
                         (max_finished_bytes, default 64 MiB)",
                        config.max_finished_bytes
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

    fn lookup(&self, caller: &Caller, id: &str) -> Result<Arc<Session>, SessionError> {
        let id = SessionId::parse(id)?;
        let mut reg = self.registry();
        self.purge(&mut reg);
        reg.sessions
            .get(&id)
            .filter(|s| caller.sees(s) && !self.expired(s, Instant::now()))
            .cloned()
            .ok_or_else(|| SessionError::UnknownSession(id.0.clone()))
    }

    /// Allocates a fresh session id and creates `<state_dir>/sessions/<id>/output.log`.
    ///
    /// The directory is created with `mkdir` (not `mkdir -p`): an id whose
    /// directory already exists (left by an earlier host process using the
    /// same state dir, or a concurrent one) is skipped, so ids and logs are
    /// never reused.
    fn create_log(&self) -> Result<(SessionId, PathBuf), SessionError> {
        loop {
            let id = SessionId::next();
            let dir = self.sessions_dir.join(id.as_str());
            let io = |e: std::io::Error| {
                SessionError::Io(format!(
                    "cannot create the output log in {}: {e}",
                    dir.display()
                ))
            };
            match std::fs::create_dir(&dir) {
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
                std::fs::File::create(&path).map(|_| path)
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
    /// dir and the hidden state dir (ARCHITECTURE.md, "Sandbox": no confined command
    /// reads or writes it; its own temp dir is bound back in).
    fn sandbox_paths(&self, private_tmp: PathBuf) -> SandboxPaths {
        SandboxPaths {
            workspace: self.workspace.clone(),
            private_tmp,
            protected: Vec::new(),
            hidden: vec![self.state_dir.clone()],
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
    fn prepare_launch(
        &self,
        shell: &std::path::Path,
        command: String,
        request_env: &[(String, String)],
        cwd_fd: std::os::fd::OwnedFd,
        sandbox: SandboxPolicy,
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
            .prepare(&self.sandbox_paths(private_tmp.clone()))
            .map_err(|e| fail(SessionError::Io(format!("cannot set up the sandbox: {e}"))))?;
        self.log_sandbox_warnings(confinement.effective());
        let env = process::build_env(&private_tmp, &self.config.extra_env, request_env);
        let effective = Arc::new(confinement.effective().clone());
        let tree = self
            .tracker
            .create(id.as_str(), &private_tmp)
            .map_err(|e| {
                fail(SessionError::Io(format!(
                    "cannot create the session's cgroup ({}): {e}",
                    self.tracking
                )))
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
            fail(SessionError::Io(format!(
                "could not start `{}`: {e}",
                shell.display()
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
    fn select(&self, filter: impl Fn(&Session) -> bool) -> Vec<Arc<Session>> {
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
struct Prepared {
    id: SessionId,
    output_path: PathBuf,
    session_dir: PathBuf,
    effective: Arc<EffectiveSandbox>,
    tree: Arc<tree::Tree>,
    command: String,
    shell: PathBuf,
}

/// A session [`Sessions::spawn_owned`] started, on its way to the caller. Unless the
/// caller [keeps](Launched::keep) it, dropping it (the caller went away: its start was
/// cancelled) ends the session's whole group, with reason `Killed("start-cancelled")`.
struct Launched {
    session: Option<Arc<Session>>,
    timing: Timing,
    handle: tokio::runtime::Handle,
}

impl Launched {
    /// The caller takes the session: it is no longer ended on drop.
    fn keep(&mut self) -> SessionId {
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
            let reason = EndReason::Killed("start-cancelled".to_owned());
            session::terminate(&session, reason, None, timing).await;
        });
    }
}

/// The sizes [`Sessions::resolve`] allows, checked before anything else.
///
/// Errors: [`SessionError::InvalidRequest`] naming the limit and its value.
fn check_sizes(req: &StartRequest) -> Result<(), SessionError> {
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
    if let Some(shell) = &req.shell
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

/// Registers a started child's pipes with the current tokio runtime, and its exit
/// with `ring` when given (a background session's: no descriptor per child,
/// `exits.rs`), else through its pidfd. On error the child's whole group has been
/// killed and the child will be reaped.
#[allow(clippy::type_complexity)]
fn register(
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

fn is_foreground_run(session: &Session, tool_call_id: &str) -> bool {
    if session.tool_call_id.as_deref() != Some(tool_call_id) {
        return false;
    }
    let st = session.lock();
    st.exit.is_none() && !st.detached
}

fn io_error(e: std::io::Error) -> SessionError {
    SessionError::Io(e.to_string())
}

impl Sessions {
    /// Creates the engine: canonicalises the workspace, creates
    /// `<state_dir>/sessions`, validates `extra_env`, prepares the operator's sandbox
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
        let sessions_dir = config.state_dir.join("sessions");
        std::fs::create_dir_all(&sessions_dir).map_err(|e| {
            SessionError::Io(format!("cannot create {}: {e}", sessions_dir.display()))
        })?;
        let state_dir = std::fs::canonicalize(&config.state_dir).map_err(|e| {
            SessionError::Io(format!(
                "cannot resolve the state dir {}: {e}",
                config.state_dir.display()
            ))
        })?;
        // Prepared once up front (with the sessions dir standing in for the per-session
        // temp dirs) to fail early, to report, and to log the warnings once.
        let sandbox = config
            .sandbox
            .prepare(&SandboxPaths {
                workspace: workspace.clone(),
                private_tmp: sessions_dir.clone(),
                protected: Vec::new(),
                hidden: vec![state_dir.clone()],
            })
            .map_err(|e| SessionError::Io(format!("cannot set up the sandbox: {e}")))?
            .effective()
            .clone();
        if sandbox.is_confined() {
            tracing::info!("sandbox for started commands: {sandbox}");
        } else {
            tracing::info!("sandbox for started commands: {sandbox}: commands are NOT confined");
        }
        let spawner = process::Spawner::start().map_err(io_error)?;
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
            SessionError::Io(format!(
                "cannot create an owner file in {}: {e}",
                state_dir.join("owners").display()
            ))
        })?;
        let tracker =
            tree::Tracker::detect(config.process_tracking, config.max_processes_per_session);
        let tracking = tracker.describe();
        let log_budget = Arc::new(output::LogBudget::new(config.output_logs_max_bytes));
        let inner = Inner {
            log_budget,
            config,
            workspace,
            sessions_dir,
            state_dir,
            sandbox,
            warned: Mutex::default(),
            spawner,
            exits,
            owner_lock,
            unretired: tokio::sync::watch::Sender::new(0),
            tracker,
            tracking,
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
    /// cgroups), the process limit, and why it is weaker when it is (README, "Process
    /// tracking").
    pub fn tracking(&self) -> &str {
        &self.inner.tracking
    }

    /// The operator's sandbox policy ([`SessionsConfig::sandbox`]).
    pub fn sandbox_policy(&self) -> &SandboxPolicy {
        &self.inner.config.sandbox
    }

    /// The canonical workspace root.
    pub fn workspace(&self) -> &std::path::Path {
        &self.inner.workspace
    }

    /// Starts `SHELL -c COMMAND` under the operator's sandbox
    /// ([`SessionsConfig::sandbox`]) and returns its id once the process runs:
    /// [`Sessions::resolve`] then [`Sessions::spawn`], with no permission check in
    /// between (embedders that need one use the two steps; see ARCHITECTURE.md,
    /// "The path of one tool call").
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
    /// names, an absolute executable shell (`None`: `/bin/sh`), and a cwd that
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
        let shell = process::resolve_shell(req.shell.as_deref())?;
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
        Ok(ResolvedStart {
            shell,
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
    /// at once, its whole group, with reason `Killed("start-cancelled")`; no process is
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
        let owner = caller.owner();
        let task = self
            .inner
            .handle
            .spawn(async move { this.spawn_owned(owner, slot, resolved).await });
        match task.await {
            Ok(Ok(mut launched)) => Ok(launched.keep()),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(SessionError::Io(format!("the start task failed: {e}"))),
        }
    }

    /// The body of [`Sessions::spawn`], in a task that is never cancelled with the
    /// caller; the [`Launched`] it returns ends the session unless the caller keeps it.
    async fn spawn_owned(
        self,
        owner: Option<Arc<str>>,
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
                    stdin_setup,
                    merge_stderr,
                    foreground,
                )
            })
            .await
            .map_err(io_error)??;
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
                let under = if effective.is_confined() {
                    format!(" under the sandbox {effective}")
                } else {
                    String::new()
                };
                return Err(SessionError::Io(format!(
                    "could not start `{}`{under}: {e}",
                    shell.display()
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
                return Err(SessionError::Io(format!(
                    "cannot watch the started process: {e}"
                )));
            }
        };
        let session = Session::new(SessionInit {
            id,
            owner,
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
            // The private temp dir goes with the session (retention, README "Disk");
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

    /// Takes over a process the embedder spawned (ARCHITECTURE.md, "Crates") and manages it like any
    /// session: piped stdout/stderr are captured, a piped stdin becomes an open stdin
    /// ([`Sessions::write_stdin`]), no timeout. A child that leads its own process
    /// group/session is signalled as a group; otherwise only the child itself. The host
    /// did not spawn it, so it is not confined: its snapshot's sandbox is
    /// [`SANDBOX_NONE`].
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
        let io =
            |e: std::io::Error| SessionError::Io(format!("cannot adopt the child's pipes: {e}"));
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

    /// The current state of a session (running or a tombstone within retention).
    ///
    /// Errors: [`SessionError::UnknownSession`] for malformed, unknown, expired or
    /// other plugins' ids.
    pub fn check(&self, caller: &Caller, id: &str) -> Result<Snapshot, SessionError> {
        Ok(self.inner.lookup(caller, id)?.snapshot())
    }

    /// Waits for session `id` to end (its `Exited` event is recorded) and returns how
    /// it ended. Returns at once for a finished session. Cancel-safe; holds no
    /// subscription, so no output is copied to the waiter.
    ///
    /// Errors: [`SessionError::UnknownSession`] (never started, purged, or another
    /// plugin's).
    pub async fn wait(&self, caller: &Caller, id: &str) -> Result<ExitStatus, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        session.ended().await;
        let exit = session.lock().exit.clone();
        exit.ok_or_else(|| SessionError::Io("the session task ended unexpectedly".into()))
    }

    /// Snapshots of the caller's sessions, running and finished (within retention),
    /// oldest first.
    pub fn list(&self, caller: &Caller) -> Vec<Snapshot> {
        self.inner
            .select(|s| caller.sees(s))
            .iter()
            .map(|s| s.snapshot())
            .collect()
    }

    /// What the engine holds for `caller`: its running and finished sessions and the
    /// bytes the finished ones keep in memory ([`Caller::Host`]: everything). Finished
    /// sessions are bounded by [`SessionsConfig::max_finished_sessions`],
    /// [`SessionsConfig::max_finished_per_plugin`],
    /// [`SessionsConfig::max_finished_bytes`] and
    /// [`SessionsConfig::max_finished_bytes_per_plugin`].
    pub fn usage(&self, caller: &Caller) -> SessionUsage {
        let inner = &self.inner;
        let mut reg = inner.registry();
        inner.purge(&mut reg);
        let mine = |owner: &Option<Arc<str>>| match caller {
            Caller::Host => true,
            Caller::Plugin(name) => owner.as_deref() == Some(&**name),
        };
        let (finished, finished_bytes) = reg
            .finished
            .iter()
            .filter(|f| mine(&f.owner))
            .fold((0, 0), |(n, b), f| (n + 1, b + f.bytes));
        let evicted = match caller {
            Caller::Host => reg.evicted,
            Caller::Plugin(name) => reg.evicted_by.get(name).copied().unwrap_or(0),
        };
        drop(reg);
        let ledger = lock_ledger(&inner.ledger);
        let running = match caller {
            Caller::Host => ledger.active,
            Caller::Plugin(name) if inner.privileged(caller) => {
                drop(ledger);
                return SessionUsage {
                    running: self
                        .inner
                        .select(|s| s.owner.as_deref() == Some(&**name) && s.lock().exit.is_none())
                        .len(),
                    finished,
                    finished_bytes,
                    evicted,
                };
            }
            Caller::Plugin(name) => ledger.per_plugin.get(name).copied().unwrap_or(0),
        };
        SessionUsage {
            running,
            finished,
            finished_bytes,
            evicted,
        }
    }

    /// Subscribes to the events with seq `>= from_seq` (0 and 1 both mean all). A
    /// finished session's events are available at once. Dropping the subscription
    /// unsubscribes.
    ///
    /// Errors: [`SessionError::UnknownSession`].
    pub fn subscribe(
        &self,
        caller: &Caller,
        id: &str,
        from_seq: u64,
    ) -> Result<Subscription, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        Ok(Subscription::new(session, from_seq.max(1)))
    }

    /// Turns a foreground run into a background task: records a `Detached` event (so
    /// a waiting subscriber wakes) and the process keeps running. Detaching a session
    /// that is already detached (or was started in the background) returns its info
    /// again without a new event.
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::SessionExited`] once it ended.
    pub fn detach(
        &self,
        caller: &Caller,
        id: &str,
        reason: &str,
    ) -> Result<DetachInfo, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        Self::detach_session(&session, reason)
    }

    fn detach_session(session: &Session, reason: &str) -> Result<DetachInfo, SessionError> {
        let mut st = session.lock();
        if let Some(exit) = &st.exit {
            return Err(SessionError::SessionExited(exit.clone()));
        }
        let info = session.detach_info(&st, reason);
        if !st.detached {
            st.detached = true;
            session.push_event(&mut st, SessionEventKind::Detached(info.clone()));
        }
        Ok(info)
    }

    /// Detaches every running, not yet detached run of tool call `tool_call_id` (host
    /// only) and returns the info of the newest.
    ///
    /// Errors: [`SessionError::InvalidRequest`] when the call has no such run.
    pub fn detach_call(
        &self,
        tool_call_id: &str,
        reason: &str,
    ) -> Result<DetachInfo, SessionError> {
        let runs = self.inner.select(|s| is_foreground_run(s, tool_call_id));
        let mut last = None;
        for session in runs {
            if let Ok(info) = Self::detach_session(&session, reason) {
                last = Some(info);
            }
        }
        last.ok_or_else(|| {
            SessionError::InvalidRequest(format!(
                "tool call `{tool_call_id}` has no running foreground process to detach"
            ))
        })
    }

    /// Most bytes a session's stdin queue holds that the process has not read yet
    /// ([`Sessions::write_stdin`]): 8 MiB.
    pub const STDIN_QUEUE_MAX_BYTES: usize = 8 << 20;

    /// Hands `data` to the stdin pipe of a session started with [`StdinMode::Open`]
    /// (or adopted with a piped stdin) and returns at once, never waiting for the
    /// process to read: what the pipe takes now is written, the rest waits in the
    /// session's stdin queue and a task writes it in order as the process reads. At
    /// most [`Sessions::STDIN_QUEUE_MAX_BYTES`] may wait; a write that would go past
    /// that is refused whole. The session's end (exit, timeout, kill) drops the queue.
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::SessionExited`] once it
    /// ended; [`SessionError::InvalidRequest`] if stdin is not open or was closed;
    /// [`SessionError::ResourceLimit`] when the queue is full (the text says how much
    /// is queued); [`SessionError::Io`] once the process closed its end (the text says
    /// how many bytes were written and how many queued ones were dropped).
    pub async fn write_stdin(
        &self,
        caller: &Caller,
        id: &str,
        data: &[u8],
    ) -> Result<(), SessionError> {
        let session = self.inner.lookup(caller, id)?;
        let exited =
            |session: &Session| session.lock().exit.clone().map(SessionError::SessionExited);
        if let Some(e) = exited(&session) {
            return Err(e);
        }
        if !session.stdin_open {
            return Err(SessionError::InvalidRequest(format!(
                "stdin of session {id} is not open; start it with stdin mode `open` to write to it"
            )));
        }
        let result = session::write_stdin(
            &session,
            data,
            Self::STDIN_QUEUE_MAX_BYTES,
            &self.inner.handle,
        );
        match (result, exited(&session)) {
            (Err(_), Some(e)) => Err(e),
            (result, _) => result,
        }
    }

    /// Closes the stdin pipe (the process reads end-of-file) once the bytes queued by
    /// [`Sessions::write_stdin`] are written; returns at once. Closing twice is fine.
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::SessionExited`];
    /// [`SessionError::InvalidRequest`] if stdin was never open.
    pub async fn close_stdin(&self, caller: &Caller, id: &str) -> Result<(), SessionError> {
        let session = self.inner.lookup(caller, id)?;
        if let Some(exit) = session.lock().exit.clone() {
            return Err(SessionError::SessionExited(exit));
        }
        if !session.stdin_open {
            return Err(SessionError::InvalidRequest(format!(
                "stdin of session {id} is not open (it was started with stdin closed or bytes)"
            )));
        }
        session::close_stdin(&session);
        Ok(())
    }

    /// Signals every process of the session's group. `None`: SIGTERM, up to
    /// `kill_grace`, then SIGKILL to whatever is left, and returns once the session has
    /// ended (bounded). `Some(sig)`: sends `sig` once and returns. `by` is recorded as
    /// [`EndReason::Killed`] (for signals that terminate by default).
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::SessionExited`].
    pub async fn kill(
        &self,
        caller: &Caller,
        id: &str,
        signal: Option<Signal>,
        by: &str,
    ) -> Result<KillInfo, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        if let Some(exit) = session.lock().exit.clone() {
            return Err(SessionError::SessionExited(exit));
        }
        let signalled = session::terminate(
            &session,
            EndReason::Killed(by.to_owned()),
            signal,
            self.inner.timing(),
        )
        .await;
        Ok(KillInfo { signalled })
    }

    /// Reads up to `max_bytes` (capped at [`MAX_READ_BYTES`]) of the combined output
    /// from log offset `offset`: from memory when the range is in the kept head or tail,
    /// otherwise from the log file.
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::InvalidRequest`] when
    /// `offset` is past the output so far; [`SessionError::Io`] if the log cannot be read.
    pub async fn read_output(
        &self,
        caller: &Caller,
        id: &str,
        offset: u64,
        max_bytes: u32,
    ) -> Result<OutputRange, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        read_range(&session, offset, max_bytes).await
    }

    /// Like [`Sessions::read_output`] from the session's read cursor (initially 0),
    /// then moves the cursor past the bytes returned. The cursor is per session,
    /// shared by all callers that can see it.
    pub async fn read_new_output(
        &self,
        caller: &Caller,
        id: &str,
        max_bytes: u32,
    ) -> Result<OutputRange, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        let mut cursor = session.read_cursor.lock().await;
        let range = read_range(&session, *cursor, max_bytes).await?;
        *cursor = range.offset + range.data.len() as u64;
        Ok(range)
    }

    /// True while tool call `tool_call_id` has a foreground run that is running and not
    /// detached.
    pub fn is_running(&self, tool_call_id: &str) -> bool {
        !self
            .inner
            .select(|s| is_foreground_run(s, tool_call_id))
            .is_empty()
    }

    /// Pid of the oldest running, undetached foreground run of `tool_call_id`.
    pub fn pid(&self, tool_call_id: &str) -> Option<u32> {
        self.inner
            .select(|s| is_foreground_run(s, tool_call_id))
            .first()
            .map(|s| s.pid)
    }

    /// `(tool_call_id, session id)` of every running, undetached foreground run,
    /// oldest first.
    pub fn running_calls(&self) -> Vec<(String, SessionId)> {
        self.inner
            .select(|s| {
                s.tool_call_id
                    .as_deref()
                    .is_some_and(|c| is_foreground_run(s, c))
            })
            .iter()
            .filter_map(|s| Some((s.tool_call_id.clone()?, s.id.clone())))
            .collect()
    }

    /// A tool call ended: terminates (SIGTERM, grace, SIGKILL) its foreground runs that
    /// were not detached, reason `Killed("tool-call-ended")`. Returns how many runs.
    pub async fn end_call(&self, tool_call_id: &str) -> usize {
        let runs = self.inner.select(|s| is_foreground_run(s, tool_call_id));
        self.terminate_all(runs, "tool-call-ended").await
    }

    /// Terminates every running session, reason `Killed("host-shutdown")`, waits
    /// (bounded by the grace periods) for them to end, then at most
    /// [`SETTLE_MAX`] more for every ended session's bookkeeping (its log's last
    /// hole punch, its retirement, its `owner` link and its private temp dir):
    /// for a host about to exit, so it leaves nothing of a session but its output
    /// log (session tasks and blocking-pool work not yet started die with the
    /// runtime). The engine's owner file goes last (`retention::OwnerLock`).
    pub async fn shutdown(&self) {
        let running = self.inner.select(|s| s.lock().exit.is_none());
        self.terminate_all(running, "host-shutdown").await;
        let mut unretired = self.inner.unretired.subscribe();
        let settled = async {
            loop {
                // A session that would not die (its count stays) does not hold
                // this up past its own bound.
                let running = self.inner.select(|s| s.lock().exit.is_none()).len();
                if *unretired.borrow_and_update() <= running {
                    return;
                }
                if unretired.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(SETTLE_MAX, settled).await;
        self.inner.owner_lock.release();
    }

    async fn terminate_all(&self, sessions: Vec<Arc<Session>>, by: &str) -> usize {
        let count = sessions.len();
        let timing = self.inner.timing();
        let mut set = tokio::task::JoinSet::new();
        for session in sessions {
            let by = by.to_owned();
            set.spawn_on(
                async move { session::terminate(&session, EndReason::Killed(by), None, timing).await },
                &self.inner.handle,
            );
        }
        while set.join_next().await.is_some() {}
        count
    }
}

async fn read_range(
    session: &Arc<Session>,
    offset: u64,
    max_bytes: u32,
) -> Result<OutputRange, SessionError> {
    let max = max_bytes.min(MAX_READ_BYTES) as u64;
    let (total, ended, memory, log_error, offset, len) = {
        let st = session.lock();
        let total = st.output.total();
        if offset > total {
            return Err(SessionError::InvalidRequest(format!(
                "offset {offset} is past the end of the output ({total} bytes so far)"
            )));
        }
        // A start in the middle output.log omitted (its cap) moves to the kept tail.
        let (offset, end) = st.output.readable(offset, max);
        let len = (end - offset) as usize;
        (
            total,
            st.exit.is_some(),
            st.output.read(offset, len),
            st.log_error.clone(),
            offset,
            len,
        )
    };
    let data = match memory {
        Some(data) => data,
        None if len == 0 => Vec::new(),
        None => {
            let path = session.output_path.clone();
            let data = tokio::task::spawn_blocking(move || read_at(&path, offset, len))
                .await
                .map_err(|e| SessionError::Io(format!("reading the output log failed: {e}")))?
                .map_err(|e| SessionError::Io(format!("reading the output log failed: {e}")))?;
            if data.len() < len {
                return Err(SessionError::Io(log_error.unwrap_or_else(|| {
                    format!(
                        "the output log {} is shorter than expected",
                        session.output_path.display()
                    )
                })));
            }
            data
        }
    };
    Ok(OutputRange {
        offset,
        eof: ended && offset + data.len() as u64 == total,
        data,
        total_bytes: total,
    })
}

fn read_at(path: &std::path::Path, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        let n = file.read_at(&mut buf[filled..], offset + filled as u64)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    buf.truncate(filled);
    Ok(buf)
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
            shell: Some("/".repeat(MAX_SHELL_BYTES + 1)),
            ..StartRequest::new("true")
        });
        assert!(m.contains("MAX_SHELL_BYTES"), "{m}");
        assert!(check_sizes(&StartRequest::new("x".repeat(MAX_COMMAND_BYTES))).is_ok());
    }
}
