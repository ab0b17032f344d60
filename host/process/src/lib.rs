//! OS processes for toolhost: spawning without `fork`, the kernel sandbox, and
//! process sessions (a command the host runs for a plugin, with output capture,
//! an event backlog, subscriptions, timeouts and kills of the whole process
//! group). ARCHITECTURE.md maps the crate and names the invariants it keeps.
//!
//! This crate has no wasmtime in it, and all of the host's `unsafe` and libc
//! calls live here. Everything it needs is passed in through
//! [`SessionsConfig`]: it reads no globals.
//!
//! Terms: a *process session* (here just "session", id `bg_…`) is one
//! command and its process group. It is not a *host session* (the event log of
//! one `toolhost serve` run, in `toolhost-runtime`).
//!
//! The modules are private; what this file re-exports is the crate's API.

mod fd_flags;
mod fd_limit;
mod peer;
mod private_fs;
mod sandbox;
mod sessions;
mod spawn;
mod terminal;

// The session engine, its configuration and its defaults, and who calls it.
pub use sessions::caller::{Caller, Principal};
pub use sessions::config::{DEFAULT_MAX_SESSIONS, DEFAULT_OUTPUT_LOG_MAX_BYTES, SessionsConfig};
pub use sessions::engine::{FINISHED_OUTPUT_BYTES, Sessions};
pub use sessions::observer::{ObservedSession, SessionObserver};
pub use sessions::output::OutputCapPolicy;
pub use sessions::tree::{ProcessTracking, TrackingMechanism};

// Starting a command: the request, its limits, its shell and its environment.
pub use sessions::process::{ENV_ALLOWLIST, NON_INTERACTIVE_ENV};
pub use sessions::program::{Program, clean_path, dropped_entries};
pub use sessions::request::{
    MAX_COMMAND_BYTES, MAX_CWD_BYTES, MAX_ENV_BYTES, MAX_ENV_VARS, MAX_SHELL_BYTES,
    MAX_STDIN_BYTES, MAX_TIMEOUT, OutputStreams, ResolvedStart, StartRequest, StdinMode,
};
pub use sessions::shell::{BASH_CANDIDATES, DEFAULT_SHELL, Shell, ShellKind, ShellRequest};

// What a session records and what callers read back.
pub use sessions::event::{
    DetachInfo, OmittedRange, OutputChunk, OutputStream, SessionEvent, SessionEventKind,
    StartedInfo,
};
pub use sessions::id::SessionId;
pub use sessions::output::{OUTPUT_TAIL_MAX_BYTES, OutputOmission};
pub use sessions::snapshot::{KillInfo, MAX_READ_BYTES, OutputRange, SessionUsage, Snapshot};
pub use sessions::subscription::Subscription;

// How a session ends, signals, and the errors of session calls.
pub use nix::sys::signal::Signal;
pub use sessions::error::{HostIoError, IoOperation, SessionError};
pub use sessions::status::{EndReason, ExitStatus, KilledBy, SessionStatus, parse_signal};

// The kernel sandbox.
pub use sandbox::{
    Confinement, DEFAULT_HOME_DENIED, DEFAULT_ORIGIN, DEFAULT_SYSTEM_DENIED, DeniedRead,
    DirReplaced, EffectiveSandbox, GitTargets, HeldDir, KernelSupport, SandboxError, SandboxMode,
    SandboxPaths, SandboxPolicy, default_read_denied, denial_hint, git_targets, probe_kernel,
};

// What the host leaves on disk: the retention sweep of a state dir.
pub use sessions::retention::{
    FINISHED_SESSION_MAX_AGE, FINISHED_SESSIONS_MAX_BYTES, HOST_SESSION_MAX_AGE,
    HOST_SESSIONS_MAX_BYTES, RetentionPolicy, SWEEP_INTERVAL, SweepReport, sweep_state_dir,
};

// Processes a host that died left running (found again from its event log).
pub use sessions::survivors::{Survivor, SurvivorReport, kill_survivors, process_start_time};
// The ended sessions of an earlier run of a host session, known again.
pub use sessions::restore::{RecordedEnd, RestoredSession};

// The host process itself: descriptors, limits, identity, process groups, cgroups.
pub use fd_flags::{O_NOFOLLOW, set_nonblocking};
pub use fd_limit::{FdLimit, raise_fd_limit};
pub use peer::{TcpClient, current_uid, tcp_client};
pub use terminal::{
    InputWait, Withdraw, discard_typed_input, ignore_terminal_stops, in_terminal_foreground,
    input_wait,
};

// What the host creates in its state dir: private to the host user.
pub use private_fs::{
    PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, create_private_dir, create_private_dir_all,
    create_private_file, make_private, prepare_private_dir, private_open_options,
    tighten_private_dir, write_private_file,
};
pub use sessions::process::group_members;
pub use sessions::tree::remove_own_cgroups;
