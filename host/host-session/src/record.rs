//! An event as the log holds it ([`RecordedEvent`]: its JSON text, sent verbatim) and
//! the answer to a replay request ([`Replay`], at most [`MAX_REPLAY_EVENTS`] events).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::event::HostEvent;

/// Most events one [`HostSessionLog::replay`](crate::HostSessionLog::replay) returns (a
/// client pages on with the cursor until `history_complete`).
pub const MAX_REPLAY_EVENTS: usize = 1000;

/// One event as the log stores it: its seq and its JSON object exactly as
/// written to `events.jsonl` (without the newline). Serialises as that object
/// verbatim, so a replay goes out without being decoded and re-encoded; call
/// [`RecordedEvent::event`] for the typed [`HostEvent`].
///
/// The text is JSON the host encoded itself, or a line of the file that
/// [`HostSessionLog::open`](crate::HostSessionLog::open) decoded when it opened the
/// log (the file is locked while the log is open and only
/// [`HostSessionLog::append`](crate::HostSessionLog::append) writes to it), so a
/// replay from the file checks only each line's framing, not its whole syntax
/// (benchmark P7 in BENCHMARKS.md).
#[derive(Debug, Clone)]
pub struct RecordedEvent {
    /// The event's seq (the same as in its JSON).
    pub seq: u64,
    /// Text holding the JSON at `range`: the event's own (appended, or loaded when
    /// the log was opened), or a piece of the file shared by the events a replay
    /// read from it (one allocation per piece, not per event).
    pub(crate) text: Arc<str>,
    /// Where in `text` the event's JSON is.
    pub(crate) range: std::ops::Range<u32>,
}

impl RecordedEvent {
    /// An event whose text is `json`, whole.
    pub(crate) fn whole(seq: u64, json: Arc<str>) -> RecordedEvent {
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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::{HostEventKind, HostSessionLog};

    /// A recorded event serialises as its JSON text, byte for byte, through every
    /// serde_json serializer the front doors use (this pins the raw-value name
    /// `RecordedEvent` relies on to the serde_json in use).
    #[test]
    fn recorded_events_serialise_verbatim() {
        let log = HostSessionLog::in_memory("hs_raw");
        log.append(HostEventKind::ToolCallStarted {
            actor: None,
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
}
