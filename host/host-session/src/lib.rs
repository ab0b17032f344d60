//! The host-session event log: the events of one host session (one `toolhost
//! serve` and everything its tool calls do), kept in one append-only log. No
//! wasmtime; the runtime feeds it (its `LogObserver` turns process and permission
//! events into [`HostEventKind`]s) and the front doors replay it. Rules:
//!
//! - seq starts at 1 and rises by exactly one per event, across restarts of
//!   the same host session (see [`HostSessionLog::open`]);
//! - every event is written to `<state-dir>/hosts/<host-session-id>/events.jsonl`
//!   (one JSON object per line, see [`HostEvent`]) before [`HostSessionLog::append`]
//!   returns, so a crash loses at most the line being written; process output
//!   ([`HostSessionLog::append_output`]) waits up to [`OUTPUT_WINDOW`] for more
//!   of the same session first; a write that fails (a full disk) is retried
//!   with the next append, so the file keeps every seq in order;
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
//!
//! Its modules are private; the `pub use` list below is the crate's API, grouped
//! by the module that owns each item:
//!
//! - `event`: the event types and the bounds on their fields;
//! - `record`: an event as the log holds it (its JSON text) and a replay's answer;
//! - `store`: [`HostSessionLog`], the file store: open, resume, append, replay;
//! - `coalesce`: a session's small output chunks waiting to become one event;
//! - `memory`: the newest events in memory and the file's offset index;
//! - `load`: an existing file read back and checked when it is opened;
//! - `recovery`: what a crashed host left open, closed on resume;
//! - `read`: a replay's events read back from the file;
//! - `error`: [`HostSessionLogError`].
//!
//! Format, event kinds and restart as an operator sees them:
//! docs/event-log.md.

mod coalesce;
mod error;
mod event;
mod load;
mod memory;
mod read;
mod record;
mod recovery;
mod store;

// The events and the bounds on them.
pub use event::{
    Actor, ClientInfo, EVENT_FIELD_MAX, HostEvent, HostEventKind, INLINE_OUTPUT_MAX, Lifecycle,
    OMITTED_KEY, PERMISSION_REQUEST_ID_DIGITS, SETTLED_TEXT_MAX, TOOL_CALL_ID_DIGITS, now_ms,
    permission_request_id, permission_request_number, tool_call_id, tool_call_number,
};

// An event as recorded, and a replay's answer.
pub use record::{MAX_REPLAY_EVENTS, RecordedEvent, Replay};

// Output coalesced into few events.
pub use coalesce::{OUTPUT_WINDOW, OutputChunk};

// The file store: where it lives, and what opening it found.
pub use error::HostSessionLogError;
pub use load::MAX_LINE_BYTES;
pub use memory::{MEMORY_BYTES, MEMORY_EVENTS};
pub use recovery::{EARLIER_SESSIONS_MAX, REJECTED_FILE, Recovery};
pub use store::{EVENTS_FILE, HostSessionLog, hosts_dir, validate_host_session_id};
