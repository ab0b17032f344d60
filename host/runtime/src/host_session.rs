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
            | HostEventKind::Detached { tool_call_id, .. } => tool_call_id.as_deref(),
        }
    }
}

/// One event as the log stores it: its seq and its JSON object exactly as
/// written to `events.jsonl` (without the newline). Serialises as that object
/// verbatim, so a replay goes out without being decoded and re-encoded; call
/// [`RecordedEvent::event`] for the typed [`HostEvent`].
#[derive(Debug, Clone)]
pub struct RecordedEvent {
    /// The event's seq (the same as in its JSON).
    pub seq: u64,
    json: Arc<RawValue>,
}

impl RecordedEvent {
    /// The JSON object, e.g. `{"seq":7,"ts_ms":…,"kind":"process_exited",…}`.
    pub fn json(&self) -> &str {
        self.json.get()
    }

    /// Decodes the typed event.
    ///
    /// Errors: the JSON is not an [`HostEvent`] (a log written by a newer toolhost).
    pub fn event(&self) -> Result<HostEvent, serde_json::Error> {
        serde_json::from_str(self.json.get())
    }
}

impl PartialEq for RecordedEvent {
    fn eq(&self, other: &RecordedEvent) -> bool {
        self.seq == other.seq && self.json.get() == other.json.get()
    }
}

impl Serialize for RecordedEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
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
}

/// The event log of one host session. Thread-safe; appends are serialised.
pub struct HostSessionLog {
    id: String,
    path: Option<PathBuf>,
    resumed_from: u64,
    inner: Mutex<Inner>,
    notify: watch::Sender<u64>,
}

struct Inner {
    file: Option<File>,
    file_len: u64,
    next_seq: u64,
    memory: VecDeque<RecordedEvent>,
    memory_limit: usize,
    /// `index[k]` = byte offset of seq `1 + k * INDEX_STRIDE` in the file.
    index: Vec<u64>,
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

    /// Opens the log of host session `id` under `<state_dir>/hosts/<id>/`,
    /// creating it when new (`id` `None`: a fresh id `hs_<12 hex digits>`).
    ///
    /// Resuming an existing id reads the whole file, checks the seqs rise by
    /// one, drops a torn last line (a crash mid-write), keeps the newest
    /// events in memory and continues at the next seq. When the previous run
    /// did not record `stopped` or `failed` last, a
    /// [`Lifecycle::Interrupted`] event is appended first.
    ///
    /// Errors: [`HostSessionLogError::InvalidId`], [`HostSessionLogError::Io`],
    /// [`HostSessionLogError::Corrupt`].
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
        let (inner, last_lifecycle) = load(&path, &mut file)?;
        let resumed_from = inner.next_seq - 1;
        let log = HostSessionLog::with_parts(id, Some(path), inner, resumed_from);
        if resumed_from > 0
            && !matches!(
                last_lifecycle,
                Some(Lifecycle::Stopped | Lifecycle::Failed | Lifecycle::Interrupted)
            )
        {
            log.append(HostEventKind::Lifecycle {
                state: Lifecycle::Interrupted,
                pid: std::process::id(),
                message: Some("the previous host process ended without recording stopped".into()),
            });
        }
        Ok(log)
    }

    fn with_parts(
        id: String,
        path: Option<PathBuf>,
        inner: Inner,
        resumed_from: u64,
    ) -> HostSessionLog {
        let (notify, _) = watch::channel(inner.next_seq - 1);
        HostSessionLog {
            id,
            path,
            resumed_from,
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
            kind,
        };
        let json: Arc<RawValue> = match serde_json::value::to_raw_value(&event) {
            Ok(json) => json.into(),
            Err(e) => {
                // Every event type serialises; this is a bug, not a runtime state.
                tracing::error!(log = %self.id, "cannot encode event {seq}: {e}");
                Arc::from(
                    RawValue::from_string(format!(
                        r#"{{"seq":{seq},"ts_ms":0,"kind":"unencodable"}}"#
                    ))
                    .expect("valid JSON"),
                )
            }
        };
        if inner.file.is_some() {
            let mut line = Vec::with_capacity(json.get().len() + 1);
            line.extend_from_slice(json.get().as_bytes());
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
        inner.memory.push_back(RecordedEvent { seq, json });
        while inner.memory.len() > inner.memory_limit {
            inner.memory.pop_front();
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
            let index = inner.index.clone();
            drop(inner);
            if let Some(path) = &self.path {
                match read_range(path, &index, from, stop, max) {
                    Ok(found) => events = found,
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
    fn empty(file: Option<File>, file_len: u64, next_seq: u64) -> Inner {
        Inner {
            file,
            file_len,
            next_seq,
            memory: VecDeque::new(),
            memory_limit: MEMORY_EVENTS,
            index: Vec::new(),
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

/// Reads an existing log: checks it, truncates a torn last line, fills memory
/// and the offset index. Returns the state and the last lifecycle state seen.
fn load(path: &Path, file: &mut File) -> Result<(Inner, Option<Lifecycle>), HostSessionLogError> {
    file.seek(SeekFrom::Start(0)).map_err(|e| io_err(path, e))?;
    let mut reader = BufReader::new(&*file);
    let mut inner = Inner::empty(None, 0, 1);
    let mut last_lifecycle = None;
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
        if let HostEventKind::Lifecycle { state, .. } = &event.kind {
            last_lifecycle = Some(*state);
        }
        offset += n as u64;
        inner.next_seq += 1;
        let text = std::str::from_utf8(buf.trim_ascii_end()).unwrap_or_default();
        let json =
            RawValue::from_string(text.to_owned()).map_err(|e| HostSessionLogError::Corrupt {
                path: path.to_path_buf(),
                line: line_no,
                message: e.to_string(),
            })?;
        inner.memory.push_back(RecordedEvent {
            seq: event.seq,
            json: json.into(),
        });
        if inner.memory.len() > MEMORY_EVENTS {
            inner.memory.pop_front();
        }
    }
    drop(reader);
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    if len != offset {
        file.set_len(offset).map_err(|e| io_err(path, e))?;
    }
    inner.file_len = offset;
    inner.file = Some(file.try_clone().map_err(|e| io_err(path, e))?);
    Ok((inner, last_lifecycle))
}

fn is_eof(reader: &mut BufReader<&File>) -> bool {
    reader.fill_buf().map(|b| b.is_empty()).unwrap_or(true)
}

/// Reads events `from..stop` (at most `max`) from the file, seeking with the index.
/// Each line is checked to be JSON but not decoded: the seq comes from its
/// position (the file was checked when opened and only this log appends to it).
fn read_range(
    path: &Path,
    index: &[u64],
    from: u64,
    stop: u64,
    max: usize,
) -> std::io::Result<Vec<RecordedEvent>> {
    let slot = (((from.max(1) - 1) / INDEX_STRIDE) as usize).min(index.len().saturating_sub(1));
    let (start_seq, start_offset) = index
        .get(slot)
        .map_or((1, 0), |&off| (1 + slot as u64 * INDEX_STRIDE, off));
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(start_offset))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut out = Vec::with_capacity(max.min((stop - from) as usize));
    let mut seq = start_seq;
    let mut line = String::new();
    while seq < stop && out.len() < max {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        if seq >= from {
            let text = line.trim_end_matches('\n');
            let json = RawValue::from_string(text.to_owned())
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            out.push(RecordedEvent {
                seq,
                json: json.into(),
            });
        }
        seq += 1;
    }
    Ok(out)
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
        f.write_all(br#"{"seq":3,"ts_ms":1,"kind":"deta"#).unwrap();
        drop(f);
        let log = HostSessionLog::open(dir.path(), Some(&id)).unwrap();
        assert_eq!(log.resumed_from(), 2);
        // The previous run never said stopped: interrupted is seq 3.
        let r = log.replay(0, 100);
        assert_eq!(r.events.len(), 3);
        assert!(matches!(
            r.events[2].event().unwrap().kind,
            HostEventKind::Lifecycle {
                state: Lifecycle::Interrupted,
                ..
            }
        ));
        assert_eq!(log.append(out(2)), 4);
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .map(|l| serde_json::from_str::<HostEvent>(l).unwrap().seq)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3, 4]);
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
}
