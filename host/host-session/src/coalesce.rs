//! Output coalescing: a process that writes one byte at a time must cost the
//! log in proportion to its bytes, not its writes. [`OutputChunk`]s given to
//! [`HostSessionLog::append_output`](crate::HostSessionLog::append_output) wait
//! in a [`Pending`] batch per session for at most [`OUTPUT_WINDOW`], and the
//! following chunks of the same session, stream and call that continue it
//! join it, up to [`INLINE_OUTPUT_MAX`] bytes; the batch becomes one
//! `process_output` event (offset, length and bytes exactly those of its
//! chunks, in order) when it is full, when its window ends, when a chunk
//! cannot join it, or before any other event is appended, so every event
//! still follows the output written before it.

use std::time::{Duration, Instant};

use crate::event::{HostEventKind, INLINE_OUTPUT_MAX};

/// How long output waits for more of the same session before it is
/// recorded: 20 ms, well under what a person following `attach` notices,
/// and long enough that a loop of one-byte writes lands in few events.
pub const OUTPUT_WINDOW: Duration = Duration::from_millis(20);

/// Most sessions with output waiting at once (64); one more records the
/// oldest batch first.
pub(crate) const MAX_PENDING: usize = 64;

/// A chunk of a process session's output, as the log is given it (at most
/// [`INLINE_OUTPUT_MAX`] bytes; a larger one is recorded alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    /// The session (`bg_...`).
    pub session_id: String,
    /// The tool call running it in the foreground, if any.
    pub tool_call_id: Option<String>,
    /// `stdout` or `stderr`.
    pub stream: String,
    /// Offset of the first byte in the session's combined `output.log`.
    pub offset: u64,
    /// The bytes.
    pub data: Vec<u8>,
}

/// A batch of output waiting to be recorded.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) chunk: OutputChunk,
    /// When its first chunk came: it is recorded by `opened + OUTPUT_WINDOW`.
    pub(crate) opened: Instant,
}

impl Pending {
    pub(crate) fn new(chunk: OutputChunk, now: Instant) -> Pending {
        Pending { chunk, opened: now }
    }

    /// Whether `next` continues this batch and fits in it.
    pub(crate) fn takes(&self, next: &OutputChunk) -> bool {
        let c = &self.chunk;
        c.session_id == next.session_id
            && c.stream == next.stream
            && c.tool_call_id == next.tool_call_id
            && c.offset + c.data.len() as u64 == next.offset
            && c.data.len() + next.data.len() <= INLINE_OUTPUT_MAX
    }

    pub(crate) fn due(&self) -> Instant {
        self.opened + OUTPUT_WINDOW
    }

    /// The batch as the event it becomes.
    pub(crate) fn into_event(self) -> HostEventKind {
        let c = self.chunk;
        HostEventKind::ProcessOutput {
            len: c.data.len() as u64,
            text: String::from_utf8_lossy(&c.data).into_owned(),
            session_id: c.session_id,
            tool_call_id: c.tool_call_id,
            stream: c.stream,
            offset: c.offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostSessionLog;
    use crate::event::tests::detached;

    fn chunk(session: &str, stream: &str, offset: u64, data: &[u8]) -> OutputChunk {
        OutputChunk {
            session_id: session.into(),
            tool_call_id: Some("tc_1".into()),
            stream: stream.into(),
            offset,
            data: data.to_vec(),
        }
    }

    /// The output events of `log`, as (session, stream, offset, text).
    fn outputs(log: &HostSessionLog) -> Vec<(String, String, u64, String)> {
        let r = log.replay(0, 100_000);
        assert!(r.events.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        r.events
            .iter()
            .filter_map(|e| match e.event().unwrap().kind {
                HostEventKind::ProcessOutput {
                    session_id,
                    stream,
                    offset,
                    len,
                    text,
                    ..
                } => {
                    assert_eq!(len as usize, text.len());
                    Some((session_id, stream, offset, text))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn ten_thousand_one_byte_writes_cost_the_log_about_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_tiny")).unwrap();
        let start = std::fs::metadata(log.path().unwrap()).unwrap().len();
        let n = 10_000u64;
        for i in 0..n {
            let byte = [b'a' + (i % 26) as u8];
            log.append_output(chunk("bg_1", "stdout", i, &byte));
        }
        log.flush_output();
        let size = std::fs::metadata(log.path().unwrap()).unwrap().len() - start;
        assert!(
            size <= n + 1024,
            "{size} bytes of log for {n} bytes of output"
        );
        let out = outputs(&log);
        assert_eq!(out.len(), n.div_ceil(INLINE_OUTPUT_MAX as u64) as usize);
        let mut at = 0;
        let mut text = String::new();
        for (_, _, offset, t) in &out {
            assert_eq!(*offset, at);
            at += t.len() as u64;
            text.push_str(t);
        }
        let expected: String = (0..n).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        assert_eq!(text, expected);
    }

    /// Sessions and streams interleaved: each session's bytes stay exact and
    /// in order, a stream change ends a batch, and an event of another kind
    /// comes after all the output before it.
    #[test]
    fn batches_keep_each_sessions_bytes_and_every_events_order() {
        let log = HostSessionLog::in_memory("hs_mix");
        assert_eq!(
            log.append_output(chunk("bg_a", "stdout", 0, b"a1")),
            Some(OUTPUT_WINDOW)
        );
        assert_eq!(log.append_output(chunk("bg_b", "stdout", 0, b"b1")), None);
        log.append_output(chunk("bg_a", "stdout", 2, b"a2"));
        log.append_output(chunk("bg_b", "stdout", 2, b"b2"));
        // A change of stream, and a gap in the offsets, each start a batch.
        log.append_output(chunk("bg_a", "stderr", 4, b"E"));
        log.append_output(chunk("bg_a", "stderr", 9, b"F"));
        assert_eq!(
            log.last_seq(),
            2,
            "the first batch of bg_a and the stderr one"
        );
        let seq = log.append(detached(7));
        assert_eq!(seq, 5, "the waiting batches come first");
        assert_eq!(
            outputs(&log),
            [
                ("bg_a".into(), "stdout".into(), 0, "a1a2".into()),
                ("bg_a".into(), "stderr".into(), 4, "E".into()),
                ("bg_b".into(), "stdout".into(), 0, "b1b2".into()),
                ("bg_a".into(), "stderr".into(), 9, "F".into()),
            ]
        );
        // A chunk that fills a batch is recorded at once; a big one alone.
        log.append_output(chunk("bg_c", "stdout", 0, &[b'c'; INLINE_OUTPUT_MAX - 1]));
        log.append_output(chunk("bg_c", "stdout", 4095, b"d"));
        assert_eq!(log.last_seq(), 6);
        log.append_output(chunk(
            "bg_c",
            "stdout",
            4096,
            &[b'e'; INLINE_OUTPUT_MAX + 1],
        ));
        assert_eq!(log.last_seq(), 7);
    }

    #[test]
    fn a_batch_is_recorded_when_its_window_ends_and_when_the_log_goes() {
        let dir = tempfile::tempdir().unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_window")).unwrap();
        assert_eq!(
            log.append_output(chunk("bg_1", "stdout", 0, b"x")),
            Some(OUTPUT_WINDOW)
        );
        let left = log.flush_due().expect("still waiting");
        assert!(left <= OUTPUT_WINDOW);
        assert_eq!(log.last_seq(), 0);
        std::thread::sleep(left);
        assert_eq!(log.flush_due(), None);
        assert_eq!(log.last_seq(), 1);
        // Nothing waits: the next chunk asks for a flush again.
        assert_eq!(
            log.append_output(chunk("bg_1", "stdout", 1, b"y")),
            Some(OUTPUT_WINDOW)
        );
        drop(log);
        let log = HostSessionLog::resume(dir.path(), "hs_window").unwrap();
        let texts: Vec<_> = outputs(&log).into_iter().map(|o| o.3).collect();
        assert_eq!(texts, ["x", "y"]);
    }
}
