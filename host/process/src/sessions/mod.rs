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

mod caller;
mod config;
mod engine;
mod error;
mod event;
mod exits;
mod id;
mod ledger;
mod manage;
mod observer;
mod output;
mod proc_scan;
mod process;
mod request;
pub mod retention;
mod session;
mod shell;
mod snapshot;
mod start;
mod status;
mod subscription;
pub mod survivors;
mod tree;

pub use nix::sys::signal::Signal;

pub use caller::Caller;
pub use config::{
    DEFAULT_DRAIN_GRACE, DEFAULT_KILL_GRACE, DEFAULT_MAX_FINISHED_BYTES,
    DEFAULT_MAX_FINISHED_BYTES_PER_PLUGIN, DEFAULT_MAX_FINISHED_PER_PLUGIN,
    DEFAULT_MAX_FINISHED_SESSIONS, DEFAULT_MAX_PROCESSES_PER_SESSION, DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_PLUGIN, DEFAULT_OUTPUT_LOG_HEAD_BYTES, DEFAULT_OUTPUT_LOG_MAX_BYTES,
    DEFAULT_OUTPUT_LOGS_MAX_BYTES, DEFAULT_OUTPUT_MEMORY_BYTES, DEFAULT_RESERVED_SESSIONS,
    DEFAULT_RETENTION, SessionsConfig,
};
pub use engine::{FINISHED_EVENTS_MAX, FINISHED_OUTPUT_BYTES, Sessions};
pub use error::{HostIoError, IoOperation, SessionError};
pub use event::{
    DetachInfo, OmittedRange, OutputChunk, OutputStream, SessionEvent, SessionEventKind,
    StartedInfo, detach_marker,
};
pub use id::SessionId;
pub use observer::{ObservedSession, SessionObserver};
pub use output::{
    MAX_EVENTS_IN_MEMORY, OUTPUT_TAIL_MAX_BYTES, OutputCapPolicy, OutputOmission,
    ceil_char_boundary, floor_char_boundary, tail_str, truncate_str,
};
pub use process::{
    ENV_ALLOWLIST, INLINE_COMMAND_MAX, NON_INTERACTIVE_ENV, SCRIPT_FD, group_members,
};
pub use request::{
    MAX_COMMAND_BYTES, MAX_CWD_BYTES, MAX_ENV_BYTES, MAX_ENV_VARS, MAX_SHELL_BYTES,
    MAX_STDIN_BYTES, MAX_TIMEOUT, OutputStreams, ResolvedStart, StartRequest, StdinMode,
};
pub use shell::{BASH_CANDIDATES, DEFAULT_SHELL, Shell, ShellKind, ShellRequest};
pub use snapshot::{
    KillInfo, MAX_EVENTS_PER_NEXT, MAX_READ_BYTES, OutputRange, SANDBOX_NONE, SessionUsage,
    Snapshot,
};
pub use status::{EndReason, ExitStatus, KilledBy, SessionStatus, parse_signal};
pub use subscription::Subscription;
pub use tree::{ProcessTracking, remove_own_cgroups};
