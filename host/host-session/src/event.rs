//! The events of a host-session log ([`HostEvent`], [`HostEventKind`]) and the bounds
//! on them: how much output one event inlines ([`INLINE_OUTPUT_MAX`]), how much of a
//! settled call's text it keeps ([`SETTLED_TEXT_MAX`]) and how large any one field
//! may be ([`EVENT_FIELD_MAX`], cut in place as [`OMITTED_KEY`] records).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// The key of the object that replaces a JSON value over [`EVENT_FIELD_MAX`]:
/// `{"toolhost_omitted": {"bytes": <size of the value's JSON text>, "head": "<its
/// first bytes>"}}`. A string over the limit keeps its head followed by
/// `"\n[toolhost: N bytes omitted]"`.
pub const OMITTED_KEY: &str = "toolhost_omitted";

/// How many lowercase hex digits follow `tc_` in a tool call id the host
/// mints ([`tool_call_id`]): 48 bits, more calls than one host session makes.
pub const TOOL_CALL_ID_DIGITS: usize = 12;

/// The tool call id of call number `n`: `tc_` then `n` in
/// [`TOOL_CALL_ID_DIGITS`] lowercase hex digits (`tc_00000000002a` for 42).
pub fn tool_call_id(n: u64) -> String {
    format!("tc_{n:0width$x}", width = TOOL_CALL_ID_DIGITS)
}

/// The number of a tool call id of the form [`tool_call_id`] writes, `None` for
/// any other text. A log can hold other ids (edited by hand, or written by
/// another program): they are not numbered, so a resumed host never continues
/// from one (`tc_ffffffffffffffff` would overflow the counter or wrap it back
/// onto ids already in the log) and never mints one (its ids have exactly
/// [`TOOL_CALL_ID_DIGITS`] digits).
pub fn tool_call_number(id: &str) -> Option<u64> {
    let hex = id.strip_prefix("tc_")?;
    if hex.len() != TOOL_CALL_ID_DIGITS
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Hex digits of a permission request id [`permission_request_id`] writes: 12.
pub const PERMISSION_REQUEST_ID_DIGITS: usize = 12;

/// The id of the `n`th permission request of a host session: `perm_` and
/// [`PERMISSION_REQUEST_ID_DIGITS`] hex digits, e.g. `perm_00000000000a`.
pub fn permission_request_id(n: u64) -> String {
    format!("perm_{n:0width$x}", width = PERMISSION_REQUEST_ID_DIGITS)
}

/// The number of a permission request id of the form [`permission_request_id`]
/// writes, `None` for any other text (never continued from, as
/// [`tool_call_number`]).
pub fn permission_request_number(id: &str) -> Option<u64> {
    let hex = id.strip_prefix("perm_")?;
    if hex.len() != PERMISSION_REQUEST_ID_DIGITS
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

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

/// Who is behind an event (docs/event-log.md#who): the identity (a
/// bearer token's name, `stdio`, `anonymous`, `local`), the door it came
/// through, the peer's address on HTTP, the MCP client's own name and
/// version, and the plugin. Every string a client sent is escaped and cut
/// as names echoed are (at most 128 bytes and a length).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The identity's name.
    pub identity: String,
    /// The door: `http`, `stdio`, `cli`, `api`.
    pub transport: String,
    /// The TCP peer (`127.0.0.1:50312`), on HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The MCP client's `clientInfo` (from `initialize`, or a 2026-07-28
    /// request's `_meta` `io.modelcontextprotocol/clientInfo`), if it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientInfo>,
    /// The plugin whose tool or process it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
}

/// An MCP client's name and version, as it gave them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    /// `clientInfo.name`.
    pub name: String,
    /// `clientInfo.version`.
    #[serde(default)]
    pub version: String,
}

/// A host lifecycle state (the `state` of [`HostEventKind::Lifecycle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// The host is serving (also recorded when a host session is resumed).
    Running,
    /// A stop began: the host refuses new work and lets calls in progress
    /// finish, up to its drain timeout (recorded again when it cancels the
    /// calls still running); `stopped` follows. Logs written before it
    /// existed never hold it.
    Draining,
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
        /// Who: the identity, door, peer, client and plugin behind it
        /// (`None` in logs written before toolhost recorded it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<Actor>,
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
        /// The effective kernel sandbox it runs under (the one-line summary of
        /// [`toolhost_process::EffectiveSandbox`]), e.g.
        /// `workspace-write (landlock abi 7, network blocked, .git read-only)`.
        #[serde(default)]
        sandbox: String,
        /// Who: the identity, door, peer, client and plugin behind it
        /// (`None` in logs written before toolhost recorded it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<Actor>,
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
    /// A foreground run became a background task ([`toolhost_process::Sessions::detach`]).
    Detached {
        /// The session.
        session_id: String,
        /// The tool call it was detached from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// The reason given.
        reason: String,
    },
    /// The permission pipeline asks an approver (the approver step of toolhost-runtime's
    /// `Permissions::check_start`).
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
        /// The program the kernel will execute for the command's first word
        /// (its resolved path, or `` `WORD` (not found) ``); absent when the
        /// first word is no plain program word.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        program: Option<String>,
        /// Who: the identity, door, peer, client and plugin behind it
        /// (`None` in logs written before toolhost recorded it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<Actor>,
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
        /// Who answered (an approver name, `remembered`, `no-approver`,
        /// `call-ended`, `call-timeout`).
        by: String,
        /// For `by` = `remembered`: the request whose `allow_always` or
        /// `reject_always` answer settled this one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remembered_from: Option<String>,
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
    pub(crate) fn bounded(mut self) -> HostEventKind {
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

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small event for tests that need many: a `detached` of session `n`.
    pub(crate) fn detached(n: u64) -> HostEventKind {
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
}
