//! The host-session event log (ARCHITECTURE.md, "Host sessions").
//!
//! Every host session (one `toolhost serve` and everything its tool calls do)
//! has one append-only log. Rules:
//!
//! - seq starts at 1 and rises by exactly one per event, across restarts of
//!   the same host session (see [`HostSessionLog::open`]);
//! - every event is written to `<state-dir>/hosts/<host-session-id>/events.jsonl`
//!   (one JSON object per line, see [`HostEvent`]) before [`HostSessionLog::append`]
//!   returns, so a crash loses at most the line being written;
//! - memory keeps only the newest [`MEMORY_EVENTS`] events; older ones are
//!   read back from the file on replay;
//! - [`HostSessionLog::replay`] answers `{first_retained_seq, snapshot_seq,
//!   history_complete, events}` for any cursor; clients apply the events
//!   after their cursor exactly once (see `toolhost::attach::Follower`).
//!
//! Output bytes are inlined (as lossily decoded UTF-8) only up to
//! [`INLINE_OUTPUT_MAX`] bytes per chunk; larger chunks become
//! [`HostEventKind::PayloadOmitted`], which points into the session's
//! byte-exact `output.log`.

use std::collections::VecDeque;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::watch;

/// Events kept in memory per host session; older ones are replayed from disk.
pub const MEMORY_EVENTS: usize = 4096;

/// Most output bytes inlined in one [`HostEventKind::ProcessOutput`]; a larger
/// chunk is logged as [`HostEventKind::PayloadOmitted`]: 4 KiB.
pub const INLINE_OUTPUT_MAX: usize = 4096;

/// Most characters of a settled call's text kept in its
/// [`HostEventKind::ToolCallSettled`] event (cut on a char boundary): 16 KiB.
pub const SETTLED_TEXT_MAX: usize = 16 * 1024;

/// Most bytes one field of an event keeps (a call's arguments or structured result
/// as JSON text, a command, an error, a prompt): 64 KiB. A larger field keeps its
/// head and records the omission in place (see [`OMITTED_KEY`]), so one call can
/// add only a bounded amount to the log file and to memory.
pub const EVENT_FIELD_MAX: usize = 64 * 1024;

/// Most bytes of event JSON kept in memory per host session, all events together:
/// 32 MiB. Beyond it the oldest events leave memory (before [`MEMORY_EVENTS`] is
/// reached); they are still replayed from the file (an in-memory log loses them, and
/// replay reports it through `first_retained_seq`).
pub const MEMORY_BYTES: usize = 32 << 20;

/// The key of the object that replaces a JSON value over [`EVENT_FIELD_MAX`]:
/// `{"toolhost_omitted": {"bytes": <size of the value's JSON text>, "head": "<its
/// first bytes>"}}`. A string over the limit keeps its head followed by
/// `"\n[toolhost: N bytes omitted]"`.
pub const OMITTED_KEY: &str = "toolhost_omitted";

/// Most events one [`HostSessionLog::replay`] returns (a client pages on with the
/// cursor until `history_complete`).
pub const MAX_REPLAY_EVENTS: usize = 1000;

/// One seq in every `INDEX_STRIDE` has its byte offset in the file indexed,
/// so a replay from an old cursor seeks instead of scanning.
const INDEX_STRIDE: u64 = 256;

/// The file name of the log inside the host session's directory.
pub const EVENTS_FILE: &str = "events.jsonl";

/// One event: a line of `events.jsonl`, e.g.
/// `{"seq":7,"ts_ms":1767225600000,"kind":"process_exited","session_id":"bg_000000000001",...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostEvent {
    /// Position in the host session's log: 1, 2, 3, ... with no gaps.
    pub seq: u64,
    /// Wall-clock time it was recorded, in milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// What happened (serialised flat, tagged by `"kind"`).
    #[serde(flatten)]
    pub kind: HostEventKind,
}

/// A host lifecycle state (the `state` of [`HostEventKind::Lifecycle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// The host is serving (also recorded when a host session is resumed).
    Running,
    /// The host stopped in an orderly way.
    Stopped,
    /// The host stopped because of an error.
    Failed,
    /// The host process went away without recording `stopped` (recorded by
    /// the next `serve` that resumes the host session).
    Interrupted,
}

/// What an event records. Serialised with `"kind"` set to the snake_case
/// variant name and the fields alongside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HostEventKind {
    /// The host (re)started serving, stopped, failed, or was found interrupted.
    Lifecycle {
        /// The new state.
        state: Lifecycle,
        /// Pid of the host process recording it.
        pid: u32,
        /// Extra detail (an error, `resumed`, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A tool call began.
    ToolCallStarted {
        /// The host-assigned id (`tc_...`).
        tool_call_id: String,
        /// The tool name as front doors show it.
        tool: String,
        /// The JSON arguments.
        arguments: Value,
        /// The front door it came through (`mcp`, `cli`, `api`).
        source: String,
    },
    /// A tool call returned a result (possibly `is_error`).
    ToolCallSettled {
        /// The call.
        tool_call_id: String,
        /// The tool reported failure (MCP `isError`).
        is_error: bool,
        /// The result text (at most [`SETTLED_TEXT_MAX`] bytes; `truncated` says so).
        text: String,
        /// True when `text` was cut.
        #[serde(default)]
        truncated: bool,
        /// The structured result, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured: Option<Value>,
    },
    /// A tool call ended without a result: refused arguments, a plugin trap,
    /// or a cancellation.
    ToolCallFailed {
        /// The call.
        tool_call_id: String,
        /// Why.
        error: String,
        /// True when it was cancelled (MCP `notifications/cancelled`, the
        /// control API's `call.cancel`).
        #[serde(default)]
        cancelled: bool,
    },
    /// A process session started.
    ProcessStarted {
        /// The session (`bg_...`).
        session_id: String,
        /// The tool call running it in the foreground, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// The command line.
        command: String,
        /// Pid of its shell (also its process group id).
        pid: u32,
        /// The shell's start time in clock ticks since boot (`/proc/<pid>/stat` field
        /// 22), so a restart after a crash kills this group and never a process that
        /// got the same pid later (see `toolhost_process::kill_survivors`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_time: Option<u64>,
        /// The effective kernel sandbox it runs under (ARCHITECTURE.md, "Sandbox"), e.g.
        /// `workspace-write (landlock abi 7, network blocked, .git read-only)`.
        #[serde(default)]
        sandbox: String,
    },
    /// Output bytes of a process (at most [`INLINE_OUTPUT_MAX`] per event).
    ProcessOutput {
        /// The session.
        session_id: String,
        /// The tool call running it in the foreground, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// `stdout` or `stderr`.
        stream: String,
        /// Offset of the first byte in the session's combined `output.log`.
        offset: u64,
        /// Byte count of the chunk.
        len: u64,
        /// The bytes decoded as UTF-8 (invalid sequences, including a code
        /// point split across chunks, become U+FFFD; `output.log` is exact).
        text: String,
    },
    /// Output too large to inline; read it from `path` at `offset`, `len` bytes.
    PayloadOmitted {
        /// The session.
        session_id: String,
        /// The tool call running it in the foreground, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// `stdout` or `stderr`.
        stream: String,
        /// Offset in `output.log`.
        offset: u64,
        /// Byte count.
        len: u64,
        /// Host path of the session's `output.log`.
        path: String,
    },
    /// A process session ended.
    ProcessExited {
        /// The session.
        session_id: String,
        /// The tool call it ran for, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// `exited`, `timed_out`, `killed` or `failed`.
        status: String,
        /// The exit code, when it exited normally.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        /// The signal name, when a signal ended it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
        /// Human summary, e.g. `exited with code 3` or `ended by SIGKILL, killed by cancelled`.
        summary: String,
    },
    /// A foreground run became a background task (ARCHITECTURE.md, "The path of one tool call").
    Detached {
        /// The session.
        session_id: String,
        /// The tool call it was detached from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// The reason given.
        reason: String,
    },
    /// The permission pipeline asks an approver (step 4 of the permission pipeline, ARCHITECTURE.md, "The path of one tool call").
    PermissionRequested {
        /// Id to answer with (`perm_...`), unique in the host session.
        request_id: String,
        /// The tool call that wants to start a process.
        tool_call_id: String,
        /// The plugin asking.
        plugin: String,
        /// The tool.
        tool: String,
        /// The command line.
        command: String,
        /// The resolved working directory.
        cwd: String,
        /// The policy's prompt.
        prompt: String,
        /// The ACP option kinds an answer may use.
        options: Vec<String>,
    },
    /// Something was dropped to keep the host's memory or disk bounded, or lost in a
    /// crash: a finished process session evicted from memory before its retention
    /// window ended (`what` = `session`; its `output.log` stays on disk); the middle
    /// of a session's `output.log` past its cap (`what` = `output`, with `offset` and
    /// `len`: recorded when the cap is reached and again, final, before
    /// `process_exited`); a torn last line of this log truncated on resume (`what` =
    /// `event_line`, with the byte `offset` and `len` cut from `events.jsonl`).
    Omitted {
        /// What was dropped: `session`, `output` or `event_line`.
        what: String,
        /// Where the dropped bytes started (`output`: offset in the session's
        /// `output.log`; `event_line`: offset in `events.jsonl`), in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
        /// How many bytes were dropped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        len: Option<u64>,
        /// The session, if it was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        /// The tool call it belonged to, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// Which bound, e.g. ``plugin `x` keeps at most 64 finished sessions
        /// (max_finished_per_plugin, default 64)``.
        reason: String,
    },
    /// A permission request was answered (or withdrawn).
    PermissionResolved {
        /// The request.
        request_id: String,
        /// The ACP outcome: `allow_once`, `allow_always`, `reject_once`,
        /// `reject_always` or `cancelled`.
        outcome: String,
        /// Who answered (an approver name, `remembered`, `no-approver`, `call-ended`).
        by: String,
    },
}

impl HostEventKind {
    /// The tool call this event belongs to, if any.
    pub fn tool_call_id(&self) -> Option<&str> {
        match self {
            HostEventKind::Lifecycle { .. } | HostEventKind::PermissionResolved { .. } => None,
            HostEventKind::ToolCallStarted { tool_call_id, .. }
            | HostEventKind::ToolCallSettled { tool_call_id, .. }
            | HostEventKind::ToolCallFailed { tool_call_id, .. }
            | HostEventKind::PermissionRequested { tool_call_id, .. } => Some(tool_call_id),
            HostEventKind::ProcessStarted { tool_call_id, .. }
            | HostEventKind::ProcessOutput { tool_call_id, .. }
            | HostEventKind::PayloadOmitted { tool_call_id, .. }
            | HostEventKind::ProcessExited { tool_call_id, .. }
            | HostEventKind::Detached { tool_call_id, .. }
            | HostEventKind::Omitted { tool_call_id, .. } => tool_call_id.as_deref(),
        }
    }

    /// Cuts every field over [`EVENT_FIELD_MAX`] to its head, recording the
    /// omission in place (see [`OMITTED_KEY`]).
    fn bounded(mut self) -> HostEventKind {
        match &mut self {
            HostEventKind::ToolCallStarted { arguments, .. } => bound_value(arguments),
            HostEventKind::ToolCallSettled {
                text,
                truncated,
                structured,
                ..
            } => {
                *truncated |= bound_string(text);
                if let Some(v) = structured {
                    bound_value(v);
                }
            }
            HostEventKind::ToolCallFailed { error, .. } => {
                bound_string(error);
            }
            HostEventKind::ProcessStarted { command, .. } => {
                bound_string(command);
            }
            HostEventKind::PermissionRequested {
                command,
                cwd,
                prompt,
                ..
            } => {
                bound_string(command);
                bound_string(cwd);
                bound_string(prompt);
            }
            HostEventKind::Lifecycle {
                message: Some(m), ..
            } => {
                bound_string(m);
            }
            HostEventKind::Detached { reason, .. } | HostEventKind::Omitted { reason, .. } => {
                bound_string(reason);
            }
            _ => {}
        }
        self
    }
}

/// Cuts `s` to its first [`EVENT_FIELD_MAX`] bytes (on a char boundary) plus a note
/// of how many were omitted. True when it was cut.
fn bound_string(s: &mut String) -> bool {
    if s.len() <= EVENT_FIELD_MAX {
        return false;
    }
    let omitted = s.len() - s.floor_char_boundary(EVENT_FIELD_MAX);
    s.truncate(s.len() - omitted);
    s.push_str(&format!("\n[toolhost: {omitted} bytes omitted]"));
    s.shrink_to_fit();
    true
}

/// Replaces a value whose JSON text is over [`EVENT_FIELD_MAX`] bytes with
/// `{"toolhost_omitted": {"bytes": N, "head": "<first bytes of the JSON text>"}}`.
fn bound_value(v: &mut Value) {
    // Strings and small containers are checked without encoding the whole value.
    let text = match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => return,
        _ => serde_json::to_string(v).unwrap_or_default(),
    };
    if text.len() <= EVENT_FIELD_MAX {
        return;
    }
    let cut = text.floor_char_boundary(EVENT_FIELD_MAX);
    *v = serde_json::json!({
        OMITTED_KEY: {
            "bytes": text.len(),
            "head": &text[..cut],
        }
    });
}

/// One event as the log stores it: its seq and its JSON object exactly as
/// written to `events.jsonl` (without the newline). Serialises as that object
/// verbatim, so a replay goes out without being decoded and re-encoded; call
/// [`RecordedEvent::event`] for the typed [`HostEvent`].
///
/// The text is JSON the host encoded itself, or a line of the file that
/// [`HostSessionLog::open`] decoded when it opened the log (the file is locked
/// while the log is open and only [`HostSessionLog::append`] writes to it), so a
/// replay from the file checks only each line's framing, not its whole syntax
/// (benchmark P7, ARCHITECTURE.md "Host sessions").
#[derive(Debug, Clone)]
pub struct RecordedEvent {
    /// The event's seq (the same as in its JSON).
    pub seq: u64,
    /// Text holding the JSON at `range`: the event's own (appended, or loaded when
    /// the log was opened), or a piece of the file shared by the events a replay
    /// read from it (one allocation per piece, not per event).
    text: Arc<str>,
    range: std::ops::Range<u32>,
}

impl RecordedEvent {
    /// An event whose text is `json`, whole.
    fn whole(seq: u64, json: Arc<str>) -> RecordedEvent {
        // Events are capped far below 4 GiB (`EVENT_FIELD_MAX`, `MEMORY_BYTES`).
        let end = u32::try_from(json.len()).unwrap_or(u32::MAX);
        RecordedEvent {
            seq,
            text: json,
            range: 0..end,
        }
    }

    /// The JSON object, e.g. `{"seq":7,"ts_ms":…,"kind":"process_exited",…}`.
    pub fn json(&self) -> &str {
        &self.text[self.range.start as usize..self.range.end as usize]
    }

    /// Decodes the typed event.
    ///
    /// Errors: the JSON is not an [`HostEvent`] (a log written by a newer toolhost).
    pub fn event(&self) -> Result<HostEvent, serde_json::Error> {
        serde_json::from_str(self.json())
    }
}

/// The name under which `serde_json` serialises a [`RawValue`]: a struct of this
/// name with one field of this name holding the JSON text, which serde_json's
/// serializers (`to_writer`, `to_string`, `to_value`) take verbatim. The test
/// `recorded_events_serialise_verbatim` checks it against the serde_json in use.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Two recorded events are equal when their seqs and JSON texts are, wherever
/// the text is held.
impl PartialEq for RecordedEvent {
    fn eq(&self, other: &RecordedEvent) -> bool {
        self.seq == other.seq && self.json() == other.json()
    }
}

impl Serialize for RecordedEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // What `RawValue::serialize` does, for text that is already known to be
        // one JSON object (see the type's doc), without building a `RawValue`
        // (which re-parses the whole text).
        use serde::ser::SerializeStruct;
        let mut raw = serializer.serialize_struct(RAW_VALUE_TOKEN, 1)?;
        raw.serialize_field(RAW_VALUE_TOKEN, self.json())?;
        raw.end()
    }
}

/// The answer to a replay request (the control API's `events` result). The host
/// answers with [`RecordedEvent`]s (sent verbatim); a client decodes the same
/// JSON as `Replay<HostEvent>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay<E = RecordedEvent> {
    /// The oldest seq the log can still return (1 while the whole history is
    /// on disk).
    pub first_retained_seq: u64,
    /// The newest seq at the moment of the answer.
    pub snapshot_seq: u64,
    /// True when `events` holds every event from the cursor + 1 up to
    /// `snapshot_seq` (nothing was lost before it and nothing was cut off by
    /// [`MAX_REPLAY_EVENTS`]); otherwise ask again from the last seq received.
    pub history_complete: bool,
    /// The events after the cursor, in seq order.
    pub events: Vec<E>,
}

/// Errors opening or resuming an event log.
#[derive(Debug, thiserror::Error)]
pub enum HostSessionLogError {
    /// The host session id is not of the form `hs_` + 1-64 of `[0-9a-z_-]`.
    #[error("invalid host session id `{0}`: use hs_ followed by letters, digits, `_` or `-`")]
    InvalidId(String),
    /// The log file could not be created, read or written.
    #[error("event log {path}: {message}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The existing log is not a valid event log (bad JSON before the last
    /// line, or a gap in its seqs).
    #[error("event log {path} is corrupt at line {line}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// `--host-session` named a host session the state dir does not have.
    #[error(
        "unknown host session `{id}`: there is no {path} (toolhost host-sessions lists the \
         host sessions; omit --host-session to start a new one)"
    )]
    Unknown {
        /// The id asked for.
        id: String,
        /// The event log that would be its.
        path: PathBuf,
    },
    /// Another `toolhost serve` holds this host session's log.
    #[error(
        "host session `{id}` is in use by a running toolhost serve (its event log {path} is \
         locked); attach to it with toolhost attach {id}"
    )]
    InUse {
        /// The host session.
        id: String,
        /// Its event log.
        path: PathBuf,
    },
}

/// What [`HostSessionLog::open`] found and did when it resumed a log whose previous
/// host process had died (ARCHITECTURE.md, "Host sessions").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes of a torn last line cut from the file (0: none).
    pub torn_bytes: u64,
    /// Tool calls the log left open, now recorded as failed with `interrupted`.
    pub interrupted_calls: Vec<String>,
    /// Process sessions the log left open, now recorded as exited with status
    /// `interrupted`.
    pub interrupted_sessions: Vec<String>,
    /// Pids of the previous run's processes killed (SIGKILL) on resume.
    pub killed: Vec<u32>,
    /// Pids of them still alive when the wait ended (normally none).
    pub survived: Vec<u32>,
    /// The highest tool-call number (`tc_<hex>`) in the log (0: none); new ids
    /// continue above it.
    pub last_tool_call: u64,
}

/// The event log of one host session. Thread-safe; appends are serialised.
pub struct HostSessionLog {
    id: String,
    path: Option<PathBuf>,
    /// The file opened for reading (replays read it with `pread`, without the
    /// lock); `None` for an in-memory log.
    reader: Option<File>,
    resumed_from: u64,
    recovery: Recovery,
    inner: Mutex<Inner>,
    notify: watch::Sender<u64>,
}

struct Inner {
    file: Option<File>,
    file_len: u64,
    next_seq: u64,
    memory: VecDeque<RecordedEvent>,
    /// Bytes of JSON in `memory` (at most [`MEMORY_BYTES`], unless one event is more).
    memory_bytes: usize,
    memory_limit: usize,
    /// `index[k]` = byte offset of seq `1 + k * INDEX_STRIDE` in the file.
    index: Vec<u64>,
    /// A seq and the byte offset of its line, where the last replay from the file
    /// stopped: the next page of a client paging through the history starts
    /// there instead of at its index entry (benchmark P7).
    resume_at: (u64, u64),
    write_error: Option<String>,
}

impl fmt::Debug for HostSessionLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostSessionLog")
            .field("id", &self.id)
            .field("path", &self.path)
            .field("last_seq", &self.last_seq())
            .finish()
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Checks a host session id: `hs_` followed by 1-64 of `[0-9a-z_-]`.
pub fn validate_host_session_id(id: &str) -> Result<(), HostSessionLogError> {
    let rest = id.strip_prefix("hs_").unwrap_or("");
    let ok = !rest.is_empty()
        && rest.len() <= 64
        && rest
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'z' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(HostSessionLogError::InvalidId(id.to_string()))
    }
}

/// `<state_dir>/hosts`: where every host session's directory lives.
pub fn hosts_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("hosts")
}

impl HostSessionLog {
    /// A log kept only in memory (for the one-shot CLI and tests): the same
    /// rules, but events older than the memory window are lost
    /// (`first_retained_seq` rises).
    pub fn in_memory(id: impl Into<String>) -> HostSessionLog {
        HostSessionLog::with_parts(id.into(), None, Inner::empty(None, 0, 1), 0)
    }

    /// Resumes host session `id` (`toolhost serve --host-session ID`): like
    /// [`HostSessionLog::open`], but an id without an event log in the state dir is
    /// an error, not a new host session.
    ///
    /// Errors: [`HostSessionLogError::Unknown`], and those of [`HostSessionLog::open`].
    pub fn resume(state_dir: &Path, id: &str) -> Result<HostSessionLog, HostSessionLogError> {
        validate_host_session_id(id)?;
        let path = hosts_dir(state_dir).join(id).join(EVENTS_FILE);
        if !path.is_file() {
            return Err(HostSessionLogError::Unknown {
                id: id.to_string(),
                path,
            });
        }
        HostSessionLog::open(state_dir, Some(id))
    }

    /// Opens the log of host session `id` under `<state_dir>/hosts/<id>/`,
    /// creating it when new (`id` `None`: a fresh id `hs_<12 hex digits>`).
    ///
    /// Resuming an existing id reads the whole file, checks the seqs rise by
    /// one, cuts a torn last line (a crash mid-write; recorded as an
    /// [`HostEventKind::Omitted`] `event_line`), keeps the newest events in memory
    /// and continues at the next seq. When the previous run did not record
    /// `stopped` or `failed` last, a [`Lifecycle::Interrupted`] event is appended.
    /// Every tool call and process session the log left open is then closed: the
    /// old processes are killed ([`toolhost_process::kill_survivors`]) and
    /// each session gets a `process_exited` with status `interrupted`, each call a
    /// `tool_call_failed` whose error starts with `interrupted:` (see
    /// [`HostSessionLog::recovery`]). The log file stays locked (`flock`) while the
    /// log is open.
    ///
    /// Errors: [`HostSessionLogError::InvalidId`], [`HostSessionLogError::Io`],
    /// [`HostSessionLogError::Corrupt`], [`HostSessionLogError::InUse`].
    pub fn open(state_dir: &Path, id: Option<&str>) -> Result<HostSessionLog, HostSessionLogError> {
        let hosts = hosts_dir(state_dir);
        let id = match id {
            Some(id) => {
                validate_host_session_id(id)?;
                id.to_string()
            }
            None => fresh_id(&hosts),
        };
        let dir = hosts.join(&id);
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let path = dir.join(EVENTS_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(HostSessionLogError::InUse { id, path });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&path, e)),
        }
        let loaded = load(&path, &mut file)?;
        let resumed_from = loaded.inner.next_seq - 1;
        // `file` stays open as the replays' reader (`load` keeps a clone to append).
        let mut log =
            HostSessionLog::with_parts(id, Some((path, file)), loaded.inner, resumed_from);
        log.recover(state_dir, loaded.scan);
        Ok(log)
    }

    /// What resuming found and did (empty for a new or in-memory log).
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Records what a crash left behind (see [`HostSessionLog::open`]).
    fn recover(&mut self, state_dir: &Path, scan: Scan) {
        let pid = std::process::id();
        let mut recovery = Recovery {
            torn_bytes: scan.torn.map_or(0, |(_, len)| len),
            last_tool_call: scan.last_tool_call,
            ..Recovery::default()
        };
        if let Some(last) = &scan.last_session {
            toolhost_process::SessionId::reserve_through(last);
        }
        if let Some((offset, len)) = scan.torn {
            self.append(HostEventKind::Omitted {
                what: "event_line".into(),
                offset: Some(offset),
                len: Some(len),
                session_id: None,
                tool_call_id: None,
                reason: format!(
                    "the last line of the event log was torn ({len} bytes at byte {offset}, \
                     written when the previous host process died); it was cut, and seqs \
                     continue from the last whole event"
                ),
            });
        }
        let resumed = self.resumed_from > 0;
        let orderly = matches!(
            scan.last_lifecycle,
            Some(Lifecycle::Stopped | Lifecycle::Failed | Lifecycle::Interrupted)
        );
        let open = !scan.open_sessions.is_empty() || !scan.open_calls.is_empty();
        if !(resumed && (!orderly || open)) {
            self.recovery = recovery;
            return;
        }
        let survivors: Vec<toolhost_process::Survivor> = scan
            .open_sessions
            .iter()
            .map(|(id, s)| toolhost_process::Survivor {
                pid: s.pid,
                start_time: s.start_time,
                tmp_dir: state_dir.join("sessions").join(id).join("tmp"),
            })
            .collect();
        let killed =
            toolhost_process::kill_survivors(&survivors, std::time::Duration::from_secs(5));
        recovery.killed = killed.killed;
        recovery.survived = killed.remaining;
        if !orderly {
            let mut message =
                "the previous host process ended without recording stopped".to_string();
            if !scan.open_sessions.is_empty() || !scan.open_calls.is_empty() {
                message.push_str(&format!(
                    "; {} tool calls and {} process sessions were left open: they are \
                     recorded as interrupted, and {} processes of them were killed",
                    scan.open_calls.len(),
                    scan.open_sessions.len(),
                    recovery.killed.len()
                ));
            }
            if !recovery.survived.is_empty() {
                message.push_str(&format!(
                    "; still alive after 5 s: pids {:?}",
                    recovery.survived
                ));
            }
            self.append(HostEventKind::Lifecycle {
                state: Lifecycle::Interrupted,
                pid,
                message: Some(message),
            });
        }
        for (session_id, s) in &scan.open_sessions {
            self.append(HostEventKind::ProcessExited {
                session_id: session_id.clone(),
                tool_call_id: s.tool_call_id.clone(),
                status: "interrupted".into(),
                code: None,
                signal: None,
                summary: "interrupted: the host process ended while it ran; its processes \
                          were killed when the host session was resumed"
                    .into(),
            });
            recovery.interrupted_sessions.push(session_id.clone());
        }
        for tool_call_id in &scan.open_calls {
            self.append(HostEventKind::ToolCallFailed {
                tool_call_id: tool_call_id.clone(),
                error: "interrupted: the host process ended before the call settled".into(),
                cancelled: false,
            });
            recovery.interrupted_calls.push(tool_call_id.clone());
        }
        self.recovery = recovery;
    }

    fn with_parts(
        id: String,
        file: Option<(PathBuf, File)>,
        inner: Inner,
        resumed_from: u64,
    ) -> HostSessionLog {
        let (notify, _) = watch::channel(inner.next_seq - 1);
        let (path, reader) = file.unzip();
        HostSessionLog {
            id,
            path,
            reader,
            resumed_from,
            recovery: Recovery::default(),
            inner: Mutex::new(inner),
            notify,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The host session id (`hs_...`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The `events.jsonl` path (`None` for an in-memory log).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The last seq found on disk when the log was opened (0 for a new log).
    pub fn resumed_from(&self) -> u64 {
        self.resumed_from
    }

    /// The newest seq (0 when empty).
    pub fn last_seq(&self) -> u64 {
        self.lock().next_seq - 1
    }

    /// A receiver whose value is the newest seq; it changes on every append.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// The first write error, if writing the file ever failed (the log then
    /// keeps going in memory only).
    pub fn write_error(&self) -> Option<String> {
        self.lock().write_error.clone()
    }

    /// Appends an event and returns its seq. The line is written to the file
    /// (one `write` call) before this returns. Never fails: a write error is
    /// logged, kept in [`HostSessionLog::write_error`] and the log continues in memory.
    pub fn append(&self, kind: HostEventKind) -> u64 {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let event = HostEvent {
            seq,
            ts_ms: now_ms(),
            kind: kind.bounded(),
        };
        let json: Arc<str> = match serde_json::to_string(&event) {
            Ok(json) => json.into(),
            Err(e) => {
                // Every event type serialises; this is a bug, not a runtime state.
                tracing::error!(log = %self.id, "cannot encode event {seq}: {e}");
                format!(r#"{{"seq":{seq},"ts_ms":0,"kind":"unencodable"}}"#).into()
            }
        };
        if inner.file.is_some() {
            let mut line = Vec::with_capacity(json.len() + 1);
            line.extend_from_slice(json.as_bytes());
            line.push(b'\n');
            if (seq - 1).is_multiple_of(INDEX_STRIDE) {
                let at = inner.file_len;
                inner.index.push(at);
            }
            let written = inner.file.as_mut().map(|f| f.write_all(&line));
            match written {
                Some(Ok(())) => inner.file_len += line.len() as u64,
                Some(Err(e)) => {
                    let message = format!("writing the event log failed: {e}");
                    tracing::error!(log = %self.id, "{message}");
                    inner.write_error.get_or_insert(message);
                    // Later events cannot be found on disk any more; keep
                    // them in memory only (replay reports what is lost).
                    inner.file = None;
                }
                None => {}
            }
        }
        inner.memory_bytes += json.len();
        inner.memory.push_back(RecordedEvent::whole(seq, json));
        while inner.memory.len() > inner.memory_limit
            || (inner.memory_bytes > MEMORY_BYTES && inner.memory.len() > 1)
        {
            if let Some(old) = inner.memory.pop_front() {
                inner.memory_bytes -= old.json().len();
            }
        }
        drop(inner);
        self.notify.send_replace(seq);
        seq
    }

    /// The events with seq greater than `cursor` (at most `max`, capped at
    /// [`MAX_REPLAY_EVENTS`]), from memory or from the file.
    pub fn replay(&self, cursor: u64, max: usize) -> Replay {
        let max = max.clamp(1, MAX_REPLAY_EVENTS);
        let inner = self.lock();
        let snapshot_seq = inner.next_seq - 1;
        let memory_first = inner.memory.front().map_or(inner.next_seq, |e| e.seq);
        let on_disk = self.path.is_some() && inner.write_error.is_none();
        let first_retained_seq = if on_disk { 1 } else { memory_first };
        let mut events = Vec::new();
        let mut from = cursor + 1;
        if from < memory_first && on_disk {
            let stop = memory_first;
            let start = inner.start_of(from);
            drop(inner);
            if let Some(file) = &self.reader {
                match read_range(file, start, from, stop, max) {
                    Ok((found, end)) => {
                        events = found;
                        self.lock().resume_at = end;
                    }
                    Err(e) => tracing::error!(log = %self.id, "replaying from disk failed: {e}"),
                }
            }
            from = events.last().map_or(from, |e| e.seq + 1);
            let inner = self.lock();
            if events.len() < max && from >= memory_first {
                take_memory(&inner, from, max - events.len(), &mut events);
            }
        } else {
            take_memory(&inner, from.max(memory_first), max, &mut events);
        }
        let contiguous = events
            .first()
            .is_none_or(|e| e.seq == cursor + 1 && cursor + 1 >= first_retained_seq);
        let reaches = events
            .last()
            .map_or(cursor >= snapshot_seq, |e| e.seq >= snapshot_seq);
        Replay {
            first_retained_seq,
            snapshot_seq,
            history_complete: contiguous && reaches,
            events,
        }
    }
}

/// Feeds process-session events and permission requests into an
/// [`HostSessionLog`] (install it as [`toolhost_process::SessionsConfig::observer`]
/// and with [`crate::permissions::Permissions::set_observer`]).
#[derive(Debug, Clone)]
pub struct LogObserver {
    log: std::sync::Arc<HostSessionLog>,
}

impl LogObserver {
    /// An observer appending to `log`.
    pub fn new(log: std::sync::Arc<HostSessionLog>) -> LogObserver {
        LogObserver { log }
    }
}

impl toolhost_process::SessionObserver for LogObserver {
    fn on_event(
        &self,
        _session: &toolhost_process::SessionId,
        _event: &toolhost_process::SessionEvent,
    ) {
        // Everything is recorded by `on_session_event`, which knows more.
    }

    fn on_session_event(
        &self,
        s: &toolhost_process::ObservedSession<'_>,
        event: &toolhost_process::SessionEvent,
    ) {
        use toolhost_process::{OutputStream, SessionEventKind as K, SessionStatus};
        let session_id = s.id.to_string();
        let tool_call_id = s.tool_call_id.map(str::to_string);
        let kind = match &event.kind {
            K::Started(started) => HostEventKind::ProcessStarted {
                session_id,
                tool_call_id,
                command: s.command.to_string(),
                pid: started.pid,
                start_time: toolhost_process::process_start_time(started.pid),
                sandbox: started.sandbox.clone(),
            },
            K::Output(chunk) => {
                let stream = match chunk.stream {
                    OutputStream::Stdout => "stdout",
                    OutputStream::Stderr => "stderr",
                }
                .to_string();
                if chunk.data.len() <= INLINE_OUTPUT_MAX {
                    HostEventKind::ProcessOutput {
                        session_id,
                        tool_call_id,
                        stream,
                        offset: chunk.offset,
                        len: chunk.data.len() as u64,
                        text: String::from_utf8_lossy(&chunk.data).into_owned(),
                    }
                } else {
                    HostEventKind::PayloadOmitted {
                        session_id,
                        tool_call_id,
                        stream,
                        offset: chunk.offset,
                        len: chunk.data.len() as u64,
                        path: s.output_path.display().to_string(),
                    }
                }
            }
            K::Detached(info) => HostEventKind::Detached {
                session_id,
                tool_call_id: info.tool_call_id.clone().or(tool_call_id),
                reason: info.reason.clone(),
            },
            K::Exited(exit) => HostEventKind::ProcessExited {
                session_id,
                tool_call_id,
                status: match exit.reason.status() {
                    SessionStatus::Running => "running",
                    SessionStatus::Exited => "exited",
                    SessionStatus::TimedOut => "timed_out",
                    SessionStatus::Killed => "killed",
                    SessionStatus::Failed => "failed",
                }
                .to_string(),
                code: exit.code,
                signal: exit.signal.clone(),
                summary: exit.to_string(),
            },
            // The session's own memory trimming; the host log has its own.
            K::Omitted(_) => return,
        };
        self.log.append(kind);
    }

    fn on_session_evicted(&self, s: &toolhost_process::ObservedSession<'_>, reason: &str) {
        self.evicted(s, reason);
    }

    fn on_output_omitted(
        &self,
        s: &toolhost_process::ObservedSession<'_>,
        omission: &toolhost_process::OutputOmission,
    ) {
        self.log.append(HostEventKind::Omitted {
            what: "output".into(),
            offset: Some(omission.offset),
            len: Some(omission.len),
            session_id: Some(s.id.to_string()),
            tool_call_id: s.tool_call_id.map(str::to_string),
            reason: omission.reason.clone(),
        });
    }
}

impl LogObserver {
    /// Records that a finished session was evicted (see
    /// [`toolhost_process::SessionObserver::on_session_evicted`]).
    fn evicted(&self, s: &toolhost_process::ObservedSession<'_>, reason: &str) {
        self.log.append(HostEventKind::Omitted {
            what: "session".into(),
            offset: None,
            len: None,
            session_id: Some(s.id.to_string()),
            tool_call_id: s.tool_call_id.map(str::to_string),
            reason: reason.to_string(),
        });
    }
}

impl crate::permissions::PermissionObserver for LogObserver {
    fn requested(&self, r: &crate::permissions::ApprovalRequest) {
        self.log.append(HostEventKind::PermissionRequested {
            request_id: r.request_id.clone(),
            tool_call_id: r.tool_call_id.clone(),
            plugin: r.plugin.clone(),
            tool: r.tool.clone(),
            command: r.command.clone(),
            cwd: r.cwd.clone(),
            prompt: r.prompt.clone(),
            options: crate::permissions::APPROVAL_OPTIONS
                .iter()
                .map(|o| o.to_string())
                .collect(),
        });
    }

    fn resolved(
        &self,
        r: &crate::permissions::ApprovalRequest,
        outcome: crate::permissions::ApprovalOutcome,
        by: &str,
    ) {
        self.log.append(HostEventKind::PermissionResolved {
            request_id: r.request_id.clone(),
            outcome: outcome.as_str().to_string(),
            by: by.to_string(),
        });
    }
}

fn take_memory(inner: &Inner, from: u64, max: usize, out: &mut Vec<RecordedEvent>) {
    let first = inner.memory.front().map_or(inner.next_seq, |e| e.seq);
    let skip = from.saturating_sub(first) as usize;
    out.extend(inner.memory.iter().skip(skip).take(max).cloned());
}

impl Inner {
    /// A seq at or before `from` whose line's byte offset is known, and that
    /// offset: the index entry of `from`'s stride, or where the last replay
    /// stopped when that is nearer.
    fn start_of(&self, from: u64) -> (u64, u64) {
        let slot =
            (((from.max(1) - 1) / INDEX_STRIDE) as usize).min(self.index.len().saturating_sub(1));
        let indexed = self
            .index
            .get(slot)
            .map_or((1, 0), |&off| (1 + slot as u64 * INDEX_STRIDE, off));
        if self.resume_at.0 <= from && self.resume_at.0 > indexed.0 {
            self.resume_at
        } else {
            indexed
        }
    }

    fn empty(file: Option<File>, file_len: u64, next_seq: u64) -> Inner {
        Inner {
            file,
            file_len,
            next_seq,
            memory: VecDeque::new(),
            memory_bytes: 0,
            memory_limit: MEMORY_EVENTS,
            index: Vec::new(),
            resume_at: (1, 0),
            write_error: None,
        }
    }
}

fn io_err(path: &Path, e: std::io::Error) -> HostSessionLogError {
    HostSessionLogError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// `hs_` + 12 hex digits of the current time in ms, bumped past existing dirs.
fn fresh_id(hosts: &Path) -> String {
    let mut n = now_ms() & 0xffff_ffff_ffff;
    loop {
        let id = format!("hs_{n:012x}");
        if !hosts.join(&id).exists() {
            return id;
        }
        n += 1;
    }
}

/// A process session a log started and did not record as exited.
struct OpenSession {
    pid: u32,
    start_time: Option<u64>,
    tool_call_id: Option<String>,
}

/// What [`load`] learnt from the events on disk.
#[derive(Default)]
struct Scan {
    last_lifecycle: Option<Lifecycle>,
    /// `(byte offset, length)` of a torn last line that was cut.
    torn: Option<(u64, u64)>,
    /// Tool calls started and not settled or failed, in start order.
    open_calls: Vec<String>,
    /// Process sessions started and not exited, by id.
    open_sessions: std::collections::BTreeMap<String, OpenSession>,
    /// The highest `tc_<hex>` number seen (0: none).
    last_tool_call: u64,
    /// The highest session id seen.
    last_session: Option<toolhost_process::SessionId>,
}

impl Scan {
    fn note(&mut self, kind: &HostEventKind) {
        if let Some(n) = kind
            .tool_call_id()
            .and_then(|id| id.strip_prefix("tc_"))
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        {
            self.last_tool_call = self.last_tool_call.max(n);
        }
        match kind {
            HostEventKind::Lifecycle { state, .. } => self.last_lifecycle = Some(*state),
            HostEventKind::ToolCallStarted { tool_call_id, .. } => {
                self.open_calls.push(tool_call_id.clone());
            }
            HostEventKind::ToolCallSettled { tool_call_id, .. }
            | HostEventKind::ToolCallFailed { tool_call_id, .. } => {
                self.open_calls.retain(|c| c != tool_call_id);
            }
            HostEventKind::ProcessStarted {
                session_id,
                tool_call_id,
                pid,
                start_time,
                ..
            } => {
                if let Ok(id) = toolhost_process::SessionId::parse(session_id)
                    && self.last_session.as_ref().is_none_or(|last| id > *last)
                {
                    self.last_session = Some(id);
                }
                self.open_sessions.insert(
                    session_id.clone(),
                    OpenSession {
                        pid: *pid,
                        start_time: *start_time,
                        tool_call_id: tool_call_id.clone(),
                    },
                );
            }
            HostEventKind::ProcessExited { session_id, .. } => {
                self.open_sessions.remove(session_id);
            }
            _ => {}
        }
    }
}

/// An existing log as [`load`] read it.
struct Loaded {
    inner: Inner,
    scan: Scan,
}

/// Reads an existing log: checks it, truncates a torn last line, fills memory
/// and the offset index, and notes what was left open.
fn load(path: &Path, file: &mut File) -> Result<Loaded, HostSessionLogError> {
    file.seek(SeekFrom::Start(0)).map_err(|e| io_err(path, e))?;
    let mut reader = BufReader::new(&*file);
    let mut inner = Inner::empty(None, 0, 1);
    let mut scan = Scan::default();
    let mut offset = 0u64;
    let mut line_no = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| io_err(path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let complete = buf.ends_with(b"\n");
        let parsed = serde_json::from_slice::<HostEvent>(&buf);
        let event = match parsed {
            Ok(event) if complete => event,
            // A torn or unparsable last line: the host died mid-write. Drop it.
            _ if is_eof(&mut reader) => {
                tracing::warn!(path = %path.display(), line = line_no, "dropping a torn last line of the event log");
                scan.torn = Some((offset, n as u64));
                break;
            }
            Ok(_) => unreachable!("a line without newline is the last line"),
            Err(e) => {
                return Err(HostSessionLogError::Corrupt {
                    path: path.to_path_buf(),
                    line: line_no,
                    message: e.to_string(),
                });
            }
        };
        if event.seq != inner.next_seq {
            return Err(HostSessionLogError::Corrupt {
                path: path.to_path_buf(),
                line: line_no,
                message: format!("expected seq {}, found {}", inner.next_seq, event.seq),
            });
        }
        if (event.seq - 1).is_multiple_of(INDEX_STRIDE) {
            inner.index.push(offset);
        }
        scan.note(&event.kind);
        offset += n as u64;
        inner.next_seq += 1;
        // Decoded above, so it is one JSON object in UTF-8.
        let text = std::str::from_utf8(buf.trim_ascii()).unwrap_or_default();
        let json: Arc<str> = text.into();
        inner.memory_bytes += json.len();
        inner
            .memory
            .push_back(RecordedEvent::whole(event.seq, json));
        while inner.memory.len() > MEMORY_EVENTS
            || (inner.memory_bytes > MEMORY_BYTES && inner.memory.len() > 1)
        {
            if let Some(old) = inner.memory.pop_front() {
                inner.memory_bytes -= old.json().len();
            }
        }
    }
    drop(reader);
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    if len != offset {
        file.set_len(offset).map_err(|e| io_err(path, e))?;
    }
    inner.file_len = offset;
    inner.file = Some(file.try_clone().map_err(|e| io_err(path, e))?);
    Ok(Loaded { inner, scan })
}

fn is_eof(reader: &mut BufReader<&File>) -> bool {
    reader.fill_buf().map(|b| b.is_empty()).unwrap_or(true)
}

/// Bytes read from the file at a time by [`read_range`]: 64 KiB.
const READ_CHUNK: usize = 64 * 1024;

/// Reads events `from..stop` (at most `max`) from the file, starting at `start`
/// (a seq at or before `from` and the byte offset of its line; see
/// [`Inner::start_of`]). The seq comes from each line's position (the file was
/// checked when opened and only this log appends to it); each line is checked by
/// [`recorded_line`]. Reads with `pread` in [`READ_CHUNK`] pieces and checks each
/// piece's UTF-8 once; the events of one piece share one copy of its whole lines
/// (one allocation per piece, benchmark P7). Also returns the seq after the last
/// event read and the byte offset of its line.
fn read_range(
    file: &File,
    start: (u64, u64),
    from: u64,
    stop: u64,
    max: usize,
) -> std::io::Result<(Vec<RecordedEvent>, (u64, u64))> {
    use std::os::unix::fs::FileExt;
    let (mut seq, mut offset) = start;
    let mut out = Vec::with_capacity(max.min(stop.saturating_sub(from) as usize));
    // Bytes from `offset` on: whole lines, then the start of the next.
    let mut buf: Vec<u8> = Vec::with_capacity(2 * READ_CHUNK);
    let mut read_to = offset;
    while seq < stop && out.len() < max {
        let have = buf.len();
        buf.resize(have + READ_CHUNK, 0);
        let n = file.read_at(&mut buf[have..], read_to)?;
        buf.truncate(have + n);
        read_to += n as u64;
        let Some(last) = buf.iter().rposition(|&b| b == b'\n') else {
            if n == 0 {
                break;
            }
            continue;
        };
        let lines = std::str::from_utf8(&buf[..=last])
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        // The lines this page takes from the piece (a range of `lines`, or the
        // text of a line edited by hand, normalised by `recorded_line`), found
        // before they are copied.
        let mut taken: Vec<(u64, Result<std::ops::Range<usize>, String>)> = Vec::new();
        let mut used = 0;
        for line in lines.split_terminator('\n') {
            if seq >= stop || out.len() + taken.len() >= max {
                break;
            }
            if seq >= from {
                let json = recorded_line(line, seq)?;
                taken.push(if json.len() == line.len() {
                    (seq, Ok(used..used + line.len()))
                } else {
                    (seq, Err(json.to_owned()))
                });
            }
            used += line.len() + 1;
            seq += 1;
        }
        let ranges = || taken.iter().filter_map(|(_, r)| r.as_ref().ok());
        let first = ranges().next().map_or(0, |r| r.start);
        let end = ranges().next_back().map_or(0, |r| r.end);
        let shared: Arc<str> = lines.get(first..end).unwrap_or_default().into();
        // Pieces are READ_CHUNK bytes plus one line, far below 4 GiB.
        let at = |i: usize| u32::try_from(i - first).unwrap_or(u32::MAX);
        for (seq, line) in taken {
            out.push(match line {
                Ok(range) => RecordedEvent {
                    seq,
                    text: shared.clone(),
                    range: at(range.start)..at(range.end),
                },
                Err(json) => RecordedEvent::whole(seq, json.into()),
            });
        }
        offset += used as u64;
        buf.drain(..used);
        if n == 0 {
            break;
        }
    }
    Ok((out, (seq, offset)))
}

/// The JSON of the event with seq `seq`, from its line in the file (newline
/// removed). A line as [`HostSessionLog::append`] writes it (UTF-8, `{"seq":<seq>,`
/// first, `}` last) is taken as it is: the host encoded it, or [`load`] decoded it
/// when the log was opened. Any other line (a file edited by hand between runs,
/// which [`load`] accepted) is checked as a whole, as JSON.
///
/// Errors: [`std::io::ErrorKind::InvalidData`] when the line is not one JSON value.
fn recorded_line(text: &str, seq: u64) -> std::io::Result<&str> {
    if framed(text, seq) {
        return Ok(text);
    }
    let raw: &RawValue = serde_json::from_str(text)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(raw.get())
}

/// True when `text` starts with `{"seq":<seq>,` and ends with `}`, as every line
/// [`HostSessionLog::append`] writes does.
fn framed(text: &str, seq: u64) -> bool {
    let Some(rest) = text.strip_prefix(r#"{"seq":"#) else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest.as_bytes().get(digits) == Some(&b',')
        && rest[..digits].parse::<u64>() == Ok(seq)
        && !rest[..digits].starts_with('0')
        && text.ends_with('}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(n: u64) -> HostEventKind {
        HostEventKind::Detached {
            session_id: format!("bg_{n:012x}"),
            tool_call_id: None,
            reason: "t".into(),
        }
    }

    #[test]
    fn serialises_flat_with_kind_tag() {
        let e = HostEvent {
            seq: 1,
            ts_ms: 5,
            kind: HostEventKind::Lifecycle {
                state: Lifecycle::Running,
                pid: 9,
                message: None,
            },
        };
        let s = serde_json::to_string(&e).unwrap();
        assert_eq!(
            s,
            r#"{"seq":1,"ts_ms":5,"kind":"lifecycle","state":"running","pid":9}"#
        );
        assert_eq!(serde_json::from_str::<HostEvent>(&s).unwrap(), e);
    }

    #[test]
    fn seqs_have_no_gaps_and_replay_pages_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_test")).unwrap();
        {
            let mut inner = log.lock();
            inner.memory_limit = 10;
        }
        for n in 0..700 {
            assert_eq!(log.append(out(n)), n + 1);
        }
        // From disk (before the memory window), across index strides.
        let r = log.replay(250, 100);
        assert_eq!(r.events.len(), 100);
        assert_eq!(r.events[0].seq, 251);
        assert!(r.events.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        assert!(!r.history_complete);
        assert_eq!(r.snapshot_seq, 700);
        assert_eq!(r.first_retained_seq, 1);
        // Disk then memory in one answer.
        let r = log.replay(685, 1000);
        assert_eq!(r.events.first().unwrap().seq, 686);
        assert_eq!(r.events.last().unwrap().seq, 700);
        assert!(r.history_complete);
        // Whole history by paging.
        let mut cursor = 0;
        loop {
            let r = log.replay(cursor, 333);
            for e in &r.events {
                assert_eq!(e.seq, cursor + 1);
                cursor = e.seq;
            }
            if r.history_complete {
                break;
            }
        }
        assert_eq!(cursor, 700);
        // Up to date: empty and complete.
        let r = log.replay(700, 10);
        assert!(r.events.is_empty() && r.history_complete);
    }

    #[test]
    fn resume_continues_seq_after_interrupted_and_drops_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let id;
        {
            let log = HostSessionLog::open(dir.path(), None).unwrap();
            id = log.id().to_string();
            log.append(HostEventKind::Lifecycle {
                state: Lifecycle::Running,
                pid: 1,
                message: None,
            });
            log.append(out(1));
        }
        let path = hosts_dir(dir.path()).join(&id).join(EVENTS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        let torn = br#"{"seq":3,"ts_ms":1,"kind":"deta"#;
        f.write_all(torn).unwrap();
        drop(f);
        let torn = torn.len() as u64;
        let whole = std::fs::metadata(&path).unwrap().len() - torn;
        let log = HostSessionLog::open(dir.path(), Some(&id)).unwrap();
        assert_eq!(log.resumed_from(), 2);
        assert_eq!(log.recovery().torn_bytes, torn);
        // The torn line is noted (seq 3); the previous run never said stopped:
        // interrupted is seq 4.
        let r = log.replay(0, 100);
        assert_eq!(r.events.len(), 4);
        match r.events[2].event().unwrap().kind {
            HostEventKind::Omitted {
                what, offset, len, ..
            } => {
                assert_eq!(what, "event_line");
                assert_eq!((offset, len), (Some(whole), Some(torn)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            r.events[3].event().unwrap().kind,
            HostEventKind::Lifecycle {
                state: Lifecycle::Interrupted,
                ..
            }
        ));
        assert_eq!(log.append(out(2)), 5);
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .map(|l| serde_json::from_str::<HostEvent>(l).unwrap().seq)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn resume_reports_open_calls_and_sessions_interrupted_and_continues_call_ids() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            HostSessionLog::resume(dir.path(), "hs_doesnotexist"),
            Err(HostSessionLogError::Unknown { .. })
        ));
        let log = HostSessionLog::open(dir.path(), Some("hs_crash")).unwrap();
        // Held: a second open of the same host session is refused.
        assert!(matches!(
            HostSessionLog::open(dir.path(), Some("hs_crash")),
            Err(HostSessionLogError::InUse { .. })
        ));
        let started = |id: &str| HostEventKind::ToolCallStarted {
            tool_call_id: id.into(),
            tool: "bash".into(),
            arguments: serde_json::json!({}),
            source: "mcp".into(),
        };
        log.append(started("tc_000000000001"));
        log.append(started("tc_00000000000a"));
        log.append(HostEventKind::ToolCallSettled {
            tool_call_id: "tc_000000000001".into(),
            is_error: false,
            text: String::new(),
            truncated: false,
            structured: None,
        });
        log.append(HostEventKind::ProcessStarted {
            session_id: "bg_0000000000ff".into(),
            tool_call_id: Some("tc_00000000000a".into()),
            command: "sleep 100".into(),
            // No such process: nothing to kill.
            pid: u32::MAX - 1,
            start_time: Some(1),
            sandbox: String::new(),
        });
        drop(log);
        let log = HostSessionLog::resume(dir.path(), "hs_crash").unwrap();
        let r = log.recovery().clone();
        assert_eq!(r.interrupted_calls, ["tc_00000000000a"]);
        assert_eq!(r.interrupted_sessions, ["bg_0000000000ff"]);
        assert_eq!(r.last_tool_call, 10);
        assert!(r.killed.is_empty());
        let kinds: Vec<HostEventKind> = log
            .replay(4, 100)
            .events
            .iter()
            .map(|e| e.event().unwrap().kind)
            .collect();
        assert!(matches!(
            kinds[0],
            HostEventKind::Lifecycle {
                state: Lifecycle::Interrupted,
                ..
            }
        ));
        assert!(
            matches!(&kinds[1], HostEventKind::ProcessExited { session_id, status, .. }
                if session_id == "bg_0000000000ff" && status == "interrupted"),
            "{kinds:?}"
        );
        assert!(
            matches!(&kinds[2], HostEventKind::ToolCallFailed { tool_call_id, error, cancelled: false }
                if tool_call_id == "tc_00000000000a" && error.starts_with("interrupted:")),
            "{kinds:?}"
        );
        assert_eq!(kinds.len(), 3);
        drop(log);
        // Nothing is left open now: a second resume adds only its own events.
        let log = HostSessionLog::resume(dir.path(), "hs_crash").unwrap();
        assert_eq!(log.recovery().interrupted_calls.len(), 0);
        assert_eq!(log.last_seq(), 7);
    }

    #[test]
    fn corrupt_middle_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let d = hosts_dir(dir.path()).join("hs_x");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(EVENTS_FILE),
            "garbage\n{\"seq\":1,\"ts_ms\":1,\"kind\":\"lifecycle\",\"state\":\"running\",\"pid\":1}\n",
        )
        .unwrap();
        assert!(matches!(
            HostSessionLog::open(dir.path(), Some("hs_x")),
            Err(HostSessionLogError::Corrupt { line: 1, .. })
        ));
        assert!(matches!(
            HostSessionLog::open(dir.path(), Some("../x")),
            Err(HostSessionLogError::InvalidId(_))
        ));
    }

    #[test]
    fn in_memory_log_reports_lost_history() {
        let log = HostSessionLog::in_memory("hs_mem");
        log.lock().memory_limit = 5;
        for n in 0..12 {
            log.append(out(n));
        }
        let r = log.replay(0, 100);
        assert_eq!(r.first_retained_seq, 8);
        assert_eq!(r.events.first().unwrap().seq, 8);
        assert!(!r.history_complete, "seqs 1-7 are lost");
        let r = log.replay(7, 100);
        assert!(r.history_complete);
    }

    /// A call's huge structured result and arguments keep their head in the log,
    /// with the omission recorded in place; memory keeps at most MEMORY_BYTES.
    #[test]
    fn huge_fields_are_cut_and_the_omission_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_big")).unwrap();
        let big = "x".repeat(15 << 20);
        for n in 0..4 {
            log.append(HostEventKind::ToolCallStarted {
                tool_call_id: format!("tc_{n}"),
                tool: "t".into(),
                arguments: serde_json::json!({ "data": big }),
                source: "api".into(),
            });
            log.append(HostEventKind::ToolCallSettled {
                tool_call_id: format!("tc_{n}"),
                is_error: false,
                text: big.clone(),
                truncated: false,
                structured: Some(serde_json::json!({ "data": big })),
            });
        }
        let file_len = std::fs::metadata(log.path().unwrap()).unwrap().len();
        assert!(file_len < 8 * 4 * EVENT_FIELD_MAX as u64, "{file_len}");
        let r = log.replay(0, 100);
        assert_eq!(r.events.len(), 8);
        for e in &r.events {
            assert!(e.json().len() < 3 * EVENT_FIELD_MAX, "{}", e.json().len());
        }
        match r.events[1].event().unwrap().kind {
            HostEventKind::ToolCallSettled {
                text,
                truncated,
                structured: Some(structured),
                ..
            } => {
                assert!(truncated);
                assert!(text.ends_with(&format!(
                    "[toolhost: {} bytes omitted]",
                    big.len() - EVENT_FIELD_MAX
                )));
                let omitted = &structured[OMITTED_KEY];
                assert_eq!(omitted["bytes"], big.len() + 11);
                assert!(
                    omitted["head"]
                        .as_str()
                        .unwrap()
                        .starts_with("{\"data\":\"xxx")
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(log.lock().memory_bytes <= MEMORY_BYTES);
    }

    /// A recorded event serialises as its JSON text, byte for byte, through every
    /// serde_json serializer the front doors use (this pins the raw-value name
    /// `RecordedEvent` relies on to the serde_json in use).
    #[test]
    fn recorded_events_serialise_verbatim() {
        let log = HostSessionLog::in_memory("hs_raw");
        log.append(HostEventKind::ToolCallStarted {
            tool_call_id: "tc_1".into(),
            tool: "t".into(),
            arguments: serde_json::json!({"b": [1, 2.5, null], "a": "\u{e9}\n\"q\""}),
            source: "api".into(),
        });
        let r = log.replay(0, 10);
        let e = &r.events[0];
        assert_eq!(serde_json::to_string(e).unwrap(), e.json());
        let mut written = Vec::new();
        serde_json::to_writer(&mut written, &r).unwrap();
        let text = String::from_utf8(written).unwrap();
        assert!(
            text.contains(&format!("\"events\":[{}]", e.json())),
            "{text}"
        );
        let value = serde_json::to_value(&r).unwrap();
        assert_eq!(
            value["events"][0],
            serde_json::from_str::<Value>(e.json()).unwrap()
        );
        let back: Replay<HostEvent> = serde_json::from_value(value).unwrap();
        assert_eq!(back.events[0], e.event().unwrap());
    }

    /// Replay from the file returns exactly the JSON the log wrote; a line edited
    /// between runs (keys reordered, blanks added: still a valid event) comes back
    /// as JSON too, and a line that is not JSON is an error, not an event.
    #[test]
    fn replay_from_the_file_returns_each_line_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let written: Vec<String> = {
            let log = HostSessionLog::open(dir.path(), Some("hs_lines")).unwrap();
            for n in 0..600 {
                log.append(out(n));
            }
            log.replay(0, 1000)
                .events
                .iter()
                .map(|e| e.json().to_owned())
                .collect()
        };
        let path = hosts_dir(dir.path()).join("hs_lines").join(EVENTS_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, written);
        // Seq 300 with its keys reordered and blanks around it.
        let edited = lines[299].replacen(r#"{"seq":300,"#, r#" { "ts_ms":0, "seq":300,"#, 1);
        let edited = format!("{} ", edited.replacen(r#""ts_ms":"#, r#""x":"#, 1));
        let edited_text: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 299 {
                    format!("{edited}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&path, &edited_text).unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_lines")).unwrap();
        log.lock().memory_limit = 10;
        let start = log.lock().start_of(290);
        assert_eq!(start.0, 257);
        let file = File::open(&path).unwrap();
        let (got, end) = read_range(&file, start, 290, 310, 100).unwrap();
        assert_eq!(end.0, 310);
        let line_310 = edited_text
            .lines()
            .take(309)
            .map(|l| l.len() + 1)
            .sum::<usize>();
        assert_eq!(end.1, line_310 as u64);
        assert_eq!(got.len(), 20);
        assert_eq!(got[10].seq, 300);
        assert_eq!(got[10].json(), edited.trim());
        assert_eq!(got[9].json(), lines[298]);
        assert_eq!(got[11].json(), lines[300]);
        // A line that is neither framed as the log writes it nor JSON is refused.
        let broken: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 299 {
                    "{\"seq\":300 oops\n".to_owned()
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&path, &broken).unwrap();
        let err = read_range(&file, start, 290, 310, 100).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    }
}
