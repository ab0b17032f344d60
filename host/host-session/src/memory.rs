//! What a log keeps in memory ([`Inner`]: the newest [`MEMORY_EVENTS`] events, at
//! most [`MEMORY_BYTES`] of them, and an index of the file's line offsets every
//! [`INDEX_STRIDE`] seqs) and how a replay finds where to start in it.

use std::collections::VecDeque;
use std::fs::File;

use crate::coalesce::Pending;
use crate::record::RecordedEvent;

/// Events kept in memory per host session; older ones are replayed from disk.
pub const MEMORY_EVENTS: usize = 4096;

/// Most bytes of event JSON kept in memory per host session, all events together:
/// 32 MiB. Beyond it the oldest events leave memory (before [`MEMORY_EVENTS`] is
/// reached); they are still replayed from the file (an in-memory log loses them, and
/// replay reports it through `first_retained_seq`).
pub const MEMORY_BYTES: usize = 32 << 20;

/// One seq in every `INDEX_STRIDE` has its byte offset in the file indexed,
/// so a replay from an old cursor seeks instead of scanning.
pub(crate) const INDEX_STRIDE: u64 = 256;

/// What the log holds under its mutex: the file it appends to, the next seq, the
/// newest events in memory and the file's offset index.
pub(crate) struct Inner {
    /// The file appended to (`None` in memory only, or after a write failed).
    pub(crate) file: Option<File>,
    /// Bytes in the file.
    pub(crate) file_len: u64,
    /// The seq the next event gets.
    pub(crate) next_seq: u64,
    /// The newest events, oldest first.
    pub(crate) memory: VecDeque<RecordedEvent>,
    /// Bytes of JSON in `memory` (at most [`MEMORY_BYTES`], unless one event is more).
    pub(crate) memory_bytes: usize,
    /// Most events in `memory` ([`MEMORY_EVENTS`]; lowered by tests).
    pub(crate) memory_limit: usize,
    /// `index[k]` = byte offset of seq `1 + k * INDEX_STRIDE` in the file.
    pub(crate) index: Vec<u64>,
    /// A seq and the byte offset of its line, where the last replay from the file
    /// stopped: the next page of a client paging through the history starts
    /// there instead of at its index entry (benchmark P7).
    pub(crate) resume_at: (u64, u64),
    /// Why the file is not up to date (see `HostSessionLog::write_error`).
    pub(crate) write_error: Option<String>,
    /// The first seq not yet in the file and the error that kept it out: a
    /// write failed (the disk is full) and the events from it on wait in
    /// `memory` for the next append to write them.
    pub(crate) unwritten: Option<(u64, String)>,
    /// Process output waiting to be recorded, in batches, oldest first
    /// (`coalesce.rs`).
    pub(crate) pending: Vec<Pending>,
    /// Whether a flush of `pending` is scheduled (`HostSessionLog::flush_due`).
    pub(crate) flush_armed: bool,
}

/// Appends to `out` at most `max` events of memory, from seq `from` on.
pub(crate) fn take_memory(inner: &Inner, from: u64, max: usize, out: &mut Vec<RecordedEvent>) {
    let first = inner.memory.front().map_or(inner.next_seq, |e| e.seq);
    let skip = from.saturating_sub(first) as usize;
    out.extend(inner.memory.iter().skip(skip).take(max).cloned());
}

impl Inner {
    /// A seq at or before `from` whose line's byte offset is known, and that
    /// offset: the index entry of `from`'s stride, or where the last replay
    /// stopped when that is nearer.
    pub(crate) fn start_of(&self, from: u64) -> (u64, u64) {
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

    /// An empty state whose next event is `next_seq`, appending to `file` (of
    /// `file_len` bytes), if any.
    pub(crate) fn empty(file: Option<File>, file_len: u64, next_seq: u64) -> Inner {
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
            unwritten: None,
            pending: Vec::new(),
            flush_armed: false,
        }
    }

    /// Keeps `event` in memory, dropping the oldest beyond [`Inner::memory_limit`]
    /// events or [`MEMORY_BYTES`] bytes (but never the last one).
    pub(crate) fn remember(&mut self, event: RecordedEvent) {
        self.memory_bytes += event.json().len();
        self.memory.push_back(event);
        while self.memory.len() > self.memory_limit
            || (self.memory_bytes > MEMORY_BYTES && self.memory.len() > 1)
        {
            if let Some(old) = self.memory.pop_front() {
                self.memory_bytes -= old.json().len();
            }
        }
    }
}
