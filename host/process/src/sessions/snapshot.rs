//! What callers read back from a session: its snapshot, output ranges, kill
//! results and the engine's usage.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::sandbox::EffectiveSandbox;
#[cfg(doc)]
use crate::{
    Caller, FINISHED_OUTPUT_BYTES, OUTPUT_TAIL_MAX_BYTES, Sessions, SessionsConfig, Subscription,
};
use crate::{ExitStatus, OutputOmission, SessionId, SessionStatus};

/// Most bytes one [`Sessions::read_output`] / [`Sessions::read_new_output`] call
/// returns: 1 MiB. Larger `max_bytes` are capped to this.
pub const MAX_READ_BYTES: u32 = 1024 * 1024;

/// The [`Snapshot::sandbox`] value of an adopted session ([`Sessions::adopt`]): the
/// embedder spawned that process itself, so the host confined nothing.
pub(crate) const SANDBOX_NONE: &str = "none";

/// A session as [`Sessions::check`] and [`Sessions::list`] see it (WIT `snapshot`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// or `full-access (no confinement)`; `none` for adopted processes.
    pub sandbox: String,
    /// Host-side only (not in the WIT snapshot): for a session that exited by itself
    /// with a non-zero code under an active sandbox, the rule that most likely refused
    /// it, from [`crate::denial_hint`] applied to the output tail, e.g.
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
