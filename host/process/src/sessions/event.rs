//! A session's event stream: seq-numbered events, output chunks and detaches.

use serde::{Deserialize, Serialize};

use crate::{ExitStatus, SessionId};
#[cfg(doc)]
use crate::{Sessions, Snapshot};

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

/// Something that happened to a session (WIT `session-event`). Seqs start at 1 per
/// session and rise by exactly one (an [`SessionEventKind::Omitted`] stands for its range).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionEvent {
    /// The seq (for `Omitted`, its `first_seq`).
    pub seq: u64,
    /// Milliseconds since the session started.
    pub at_ms: u64,
    /// What happened.
    pub kind: SessionEventKind,
}

/// The kinds of session events (WIT `event-kind`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
