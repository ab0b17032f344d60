//! Output capture: a bounded head + tail of the raw bytes, per-stream stateful UTF-8
//! decoding of the text shown to humans, the bounded per-session event log, and the
//! char-boundary helpers used to cut text without splitting a code point.

use std::collections::VecDeque;

use bytes::{Buf, Bytes};

use encoding_rs::{Decoder, UTF_8};

use super::{OmittedRange, OutputStream, SessionEvent, SessionEventKind};

/// Most bytes of decoded text a [`Snapshot::output_tail`](super::Snapshot::output_tail)
/// holds: 16 KiB.
pub const OUTPUT_TAIL_MAX_BYTES: usize = 16 * 1024;

/// Most events a session keeps in memory; older output events are folded into
/// [`SessionEventKind::Omitted`] ranges beyond this (their bytes stay in the log).
pub const MAX_EVENTS_IN_MEMORY: usize = 8192;

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

fn sequence_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// The largest index `<= index` that does not fall inside a UTF-8 sequence of `bytes`.
///
/// For valid UTF-8 this is the start of the character containing `index` (or `index`
/// itself when it is already a boundary). Invalid bytes count as one-byte characters.
/// `index` past the end returns `bytes.len()`. Never panics.
pub fn floor_char_boundary(bytes: &[u8], index: usize) -> usize {
    if index >= bytes.len() {
        return bytes.len();
    }
    let mut i = index;
    let lower = index.saturating_sub(3);
    while i > lower && is_continuation(bytes[i]) {
        i -= 1;
    }
    if i < index && !is_continuation(bytes[i]) && sequence_len(bytes[i]) > index - i {
        i
    } else {
        index
    }
}

/// The smallest index `>= index` that does not fall inside a UTF-8 sequence of `bytes`
/// (the end of the character containing `index`, capped at `bytes.len()`). Never panics.
pub fn ceil_char_boundary(bytes: &[u8], index: usize) -> usize {
    if index >= bytes.len() {
        return bytes.len();
    }
    let floor = floor_char_boundary(bytes, index);
    if floor == index {
        index
    } else {
        (floor + sequence_len(bytes[floor])).min(bytes.len())
    }
}

/// The longest prefix of `s` that is at most `max_bytes` bytes long, cut on a char
/// boundary (so it may be up to 3 bytes shorter than `max_bytes`).
pub fn truncate_str(s: &str, max_bytes: usize) -> &str {
    let end = floor_char_boundary(s.as_bytes(), max_bytes);
    s.get(..end).unwrap_or_default()
}

/// The longest suffix of `s` that is at most `max_bytes` bytes long, starting on a
/// char boundary (so it may be up to 3 bytes shorter than `max_bytes`).
pub fn tail_str(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let start = ceil_char_boundary(s.as_bytes(), s.len() - max_bytes);
    s.get(start..).unwrap_or_default()
}

/// Raw bytes of a session kept in memory (head + tail) and the decoded text tail.
pub(crate) struct OutputBuffer {
    head: Vec<u8>,
    head_cap: usize,
    /// The newest bytes after the head, as the chunks they arrived in (shared with
    /// the chunks' events: no copy), at most `tail_cap` bytes in all.
    tail: VecDeque<Bytes>,
    tail_len: usize,
    tail_cap: usize,
    total: u64,
    decoders: [Decoder; 2],
    text: String,
    text_dropped: bool,
    released: bool,
}

impl OutputBuffer {
    /// `memory_bytes` is split evenly between head and tail.
    pub(crate) fn new(memory_bytes: usize) -> Self {
        let head_cap = memory_bytes / 2;
        OutputBuffer {
            head: Vec::new(),
            head_cap,
            tail: VecDeque::new(),
            tail_len: 0,
            tail_cap: memory_bytes - head_cap,
            total: 0,
            decoders: [UTF_8.new_decoder(), UTF_8.new_decoder()],
            text: String::new(),
            text_dropped: false,
            released: false,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Appends one chunk: O(chunk length) while the head fills, then O(1) plus
    /// the decoding of the text tail; independent of the total so far.
    pub(crate) fn push(&mut self, stream: OutputStream, data: &Bytes) {
        self.total += data.len() as u64;
        if !self.released {
            let room = self.head_cap.saturating_sub(self.head.len());
            let to_head = room.min(data.len());
            self.head.extend_from_slice(&data[..to_head]);
            let rest = data.slice(to_head..);
            if rest.len() >= self.tail_cap {
                self.tail.clear();
                self.tail
                    .push_back(rest.slice(rest.len() - self.tail_cap..));
                self.tail_len = self.tail_cap;
            } else if !rest.is_empty() {
                self.tail_len += rest.len();
                self.tail.push_back(rest);
                let mut excess = self.tail_len.saturating_sub(self.tail_cap);
                while excess > 0 {
                    let Some(front) = self.tail.front_mut() else {
                        break;
                    };
                    if front.len() <= excess {
                        excess -= front.len();
                        self.tail_len -= front.len();
                        self.tail.pop_front();
                    } else {
                        front.advance(excess);
                        self.tail_len -= excess;
                        excess = 0;
                    }
                }
            }
        }
        self.decode(stream, data, false);
    }

    fn decode(&mut self, stream: OutputStream, data: &[u8], last: bool) {
        // Only the last OUTPUT_TAIL_MAX_BYTES of text are ever shown: when one chunk
        // is longer than twice that, everything before its last part would be
        // dropped right after decoding. Decode just that part, starting on a
        // character boundary with a fresh decoder for this stream (benchmark P4).
        let data = if data.len() > 2 * OUTPUT_TAIL_MAX_BYTES {
            let mut start = data.len() - OUTPUT_TAIL_MAX_BYTES;
            let limit = start + 3;
            while start < limit && data[start] & 0xC0 == 0x80 {
                start += 1;
            }
            self.decoders[stream as usize] = UTF_8.new_decoder();
            self.text.clear();
            self.text_dropped = true;
            &data[start..]
        } else {
            data
        };
        let decoder = &mut self.decoders[stream as usize];
        let need = decoder
            .max_utf8_buffer_length(data.len())
            .unwrap_or(data.len().saturating_mul(3).saturating_add(16));
        self.text.reserve(need);
        let _ = decoder.decode_to_string(data, &mut self.text, last);
        if self.text.len() > 2 * OUTPUT_TAIL_MAX_BYTES {
            let keep_from = ceil_char_boundary(
                self.text.as_bytes(),
                self.text.len() - OUTPUT_TAIL_MAX_BYTES,
            );
            self.text.drain(..keep_from);
            self.text.shrink_to(4 * OUTPUT_TAIL_MAX_BYTES);
            self.text_dropped = true;
        }
    }

    /// Flushes both decoders (an incomplete trailing sequence becomes U+FFFD).
    pub(crate) fn finish(&mut self) {
        self.decode(OutputStream::Stdout, &[], true);
        self.decode(OutputStream::Stderr, &[], true);
    }

    /// Frees the raw head/tail bytes (reads then come from the log file).
    pub(crate) fn release(&mut self) {
        self.released = true;
        self.head = Vec::new();
        self.tail = VecDeque::new();
        self.tail_len = 0;
    }

    /// The decoded tail text (at most [`OUTPUT_TAIL_MAX_BYTES`]) and whether it is
    /// missing some of the output.
    pub(crate) fn tail_text(&self) -> (String, bool) {
        let tail = tail_str(&self.text, OUTPUT_TAIL_MAX_BYTES);
        (
            tail.to_owned(),
            self.text_dropped || tail.len() < self.text.len(),
        )
    }

    /// The bytes `offset..offset+len` if they are all held in memory.
    pub(crate) fn read(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        if self.released {
            return None;
        }
        let end = offset.checked_add(len as u64)?;
        if end > self.total {
            return None;
        }
        if end <= self.head.len() as u64 {
            return Some(self.head[offset as usize..end as usize].to_vec());
        }
        let tail_start = self.total - self.tail_len as u64;
        if offset >= tail_start {
            let mut skip = (offset - tail_start) as usize;
            let mut out = Vec::with_capacity(len);
            for chunk in &self.tail {
                if out.len() == len {
                    break;
                }
                if skip >= chunk.len() {
                    skip -= chunk.len();
                    continue;
                }
                let take = (chunk.len() - skip).min(len - out.len());
                out.extend_from_slice(&chunk[skip..skip + take]);
                skip = 0;
            }
            return Some(out);
        }
        None
    }
}

/// The events of one session: seqs 1, 2, ... with no gap; old output events are
/// replaced by [`SessionEventKind::Omitted`] ranges to keep memory bounded.
pub(crate) struct EventBacklog {
    events: VecDeque<SessionEvent>,
    next_seq: u64,
    output_bytes_held: usize,
    byte_cap: usize,
}

impl EventBacklog {
    pub(crate) fn new(byte_cap: usize) -> Self {
        EventBacklog {
            events: VecDeque::new(),
            next_seq: 1,
            output_bytes_held: 0,
            byte_cap,
        }
    }

    /// The seq of the last event recorded (0 if none).
    pub(crate) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Records an event and returns it.
    pub(crate) fn push(&mut self, kind: SessionEventKind, at_ms: u64) -> &SessionEvent {
        if let SessionEventKind::Output(chunk) = &kind {
            self.output_bytes_held += chunk.data.len();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.events.push_back(SessionEvent { seq, at_ms, kind });
        while self.output_bytes_held > self.byte_cap || self.events.len() > MAX_EVENTS_IN_MEMORY {
            if !self.drop_oldest_output() {
                break;
            }
        }
        // The event just pushed is never an output event that got dropped: the loop
        // stops before dropping the last event (see `drop_oldest_output`).
        let last = self.events.len() - 1;
        &self.events[last]
    }

    /// Folds the oldest output event into an omitted range. False if there is none
    /// (other than the newest event).
    fn drop_oldest_output(&mut self) -> bool {
        let limit = self.events.len().saturating_sub(1);
        let Some(index) = self
            .events
            .iter()
            .take(limit)
            .position(|e| matches!(e.kind, SessionEventKind::Output(_)))
        else {
            return false;
        };
        let Some(event) = self.events.remove(index) else {
            return false;
        };
        let SessionEventKind::Output(chunk) = event.kind else {
            return false;
        };
        self.output_bytes_held -= chunk.data.len();
        if index > 0
            && let Some(SessionEvent {
                kind: SessionEventKind::Omitted(range),
                ..
            }) = self.events.get_mut(index - 1)
            && range.last_seq + 1 == event.seq
        {
            range.last_seq = event.seq;
            return true;
        }
        self.events.insert(
            index,
            SessionEvent {
                seq: event.seq,
                at_ms: event.at_ms,
                kind: SessionEventKind::Omitted(OmittedRange {
                    first_seq: event.seq,
                    last_seq: event.seq,
                    offset: chunk.offset,
                }),
            },
        );
        true
    }

    /// Up to `max` events from seq `cursor` on. When `cursor` falls inside an omitted
    /// range, the first event is an omitted range starting at `cursor` whose offset is
    /// `resume_offset` (the end of the last output the reader saw), if known.
    pub(crate) fn since(
        &self,
        cursor: u64,
        max: usize,
        resume_offset: Option<u64>,
    ) -> Vec<SessionEvent> {
        let mut out = Vec::new();
        let max = max.max(1);
        let index = self.events.partition_point(|e| e.seq < cursor);
        if index > 0
            && let Some(SessionEvent {
                at_ms,
                kind: SessionEventKind::Omitted(range),
                ..
            }) = self.events.get(index - 1)
            && range.last_seq >= cursor
        {
            out.push(SessionEvent {
                seq: cursor,
                at_ms: *at_ms,
                kind: SessionEventKind::Omitted(OmittedRange {
                    first_seq: cursor,
                    last_seq: range.last_seq,
                    offset: resume_offset.map_or(range.offset, |o| o.max(range.offset)),
                }),
            });
        }
        out.extend(self.events.range(index..).take(max - out.len()).cloned());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OutputChunk;

    #[test]
    fn head_and_tail_stay_bounded_and_readable() {
        let mut b = OutputBuffer::new(8);
        b.push(
            OutputStream::Stdout,
            &Bytes::copy_from_slice(b"0123456789abcdef"),
        );
        assert_eq!(b.total(), 16);
        assert_eq!(b.read(0, 4).as_deref(), Some(&b"0123"[..]));
        assert_eq!(b.read(12, 4).as_deref(), Some(&b"cdef"[..]));
        assert_eq!(b.read(4, 4), None);
        b.push(OutputStream::Stderr, &Bytes::copy_from_slice(b"gh"));
        assert_eq!(b.read(14, 4).as_deref(), Some(&b"efgh"[..]));
    }

    #[test]
    fn a_huge_chunk_decodes_only_its_tail_with_the_same_result() {
        // 2-byte characters, so a cut can land mid-character.
        let mut whole = "é".repeat(40_000);
        whole.push_str("end\n");
        for split in [0, 1, 7, 30_001] {
            let mut b = OutputBuffer::new(1024);
            b.push(
                OutputStream::Stderr,
                &Bytes::copy_from_slice("prefix ".as_bytes()),
            );
            b.push(
                OutputStream::Stdout,
                &Bytes::copy_from_slice(&whole.as_bytes()[..split]),
            );
            b.push(
                OutputStream::Stdout,
                &Bytes::copy_from_slice(&whole.as_bytes()[split..]),
            );
            b.finish();
            let (tail, truncated) = b.tail_text();
            assert!(truncated, "split {split}");
            assert!(tail.len() <= OUTPUT_TAIL_MAX_BYTES, "split {split}");
            assert!(tail.len() >= OUTPUT_TAIL_MAX_BYTES - 4, "split {split}");
            assert!(whole.ends_with(&tail), "split {split}: {:?}", &tail[..8]);
            assert!(!tail.contains('\u{FFFD}'), "split {split}");
        }
    }

    #[test]
    fn events_fold_into_omitted_ranges() {
        let mut log = EventBacklog::new(10);
        log.push(
            SessionEventKind::Started(super::super::StartedInfo {
                pid: 1,
                sandbox: String::new(),
            }),
            0,
        );
        for i in 0..5u64 {
            log.push(
                SessionEventKind::Output(OutputChunk {
                    stream: OutputStream::Stdout,
                    offset: i * 4,
                    data: Bytes::from_static(b"abcd"),
                }),
                0,
            );
        }
        let all = log.since(1, 100, None);
        let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 5, 6]);
        assert!(matches!(
            all[1].kind,
            SessionEventKind::Omitted(OmittedRange {
                first_seq: 2,
                last_seq: 4,
                offset: 0
            })
        ));
        let mid = log.since(3, 100, Some(4));
        assert!(matches!(
            mid[0].kind,
            SessionEventKind::Omitted(OmittedRange {
                first_seq: 3,
                last_seq: 4,
                offset: 4
            })
        ));
        assert_eq!(mid[0].seq, 3);
        assert_eq!(mid.len(), 3);
    }
}
