//! Output capture: a bounded head + tail of the raw bytes, per-stream stateful UTF-8
//! decoding of the text shown to humans, and the bounded per-session event log. Text
//! is cut on character boundaries with `toolhost_text`'s helpers, the ones the bash
//! plugin cuts with.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Buf, Bytes};
use serde::{Deserialize, Serialize};

use encoding_rs::{Decoder, UTF_8};
use toolhost_text::{ceil_char_boundary, tail_str};

use crate::{OmittedRange, OutputStream, SessionEvent, SessionEventKind};

/// Most bytes of decoded text a [`Snapshot::output_tail`](crate::Snapshot::output_tail)
/// holds: 16 KiB.
pub const OUTPUT_TAIL_MAX_BYTES: usize = 16 * 1024;

/// Most events a session keeps in memory; older output events are folded into
/// [`SessionEventKind::Omitted`] ranges beyond this (their bytes stay in the log).
pub(crate) const MAX_EVENTS_IN_MEMORY: usize = 8192;

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
    /// The bytes `output.log` no longer holds (see [`OutputLog`]): reads skip them.
    omitted: Option<OutputOmission>,
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
            omitted: None,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Records what the session's `output.log` omits (from [`OutputLog::omission`]).
    pub(crate) fn set_omitted(&mut self, omitted: Option<OutputOmission>) {
        self.omitted = omitted;
    }

    /// What the session's `output.log` omits, if anything.
    pub(crate) fn omitted(&self) -> Option<&OutputOmission> {
        self.omitted.as_ref()
    }

    /// Where a read of up to `max` bytes from `offset` really starts and how long it
    /// is: a start inside the omitted range moves to its end (the kept tail), and a
    /// read that would run into the omitted range stops at its start. `offset` must
    /// be at most [`OutputBuffer::total`].
    pub(crate) fn readable(&self, offset: u64, max: u64) -> (u64, u64) {
        let mut start = offset;
        let mut end = offset.saturating_add(max).min(self.total);
        if let Some(o) = &self.omitted {
            let (from, to) = (o.offset, o.offset + o.len);
            if start >= from && start < to {
                start = to;
                end = start.saturating_add(max).min(self.total);
            } else if start < from && end > from {
                end = from;
            }
        }
        (start, end.max(start))
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

    /// Bytes this buffer holds in memory: the raw head and tail and the text's
    /// allocation.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.head.capacity() + self.tail_len + self.text.capacity()
    }

    /// For a finished session: keeps only the shown part of the text
    /// ([`OUTPUT_TAIL_MAX_BYTES`]) and frees the rest of its allocation.
    pub(crate) fn compact(&mut self) {
        if self.text.len() > OUTPUT_TAIL_MAX_BYTES {
            let keep_from = ceil_char_boundary(
                self.text.as_bytes(),
                self.text.len() - OUTPUT_TAIL_MAX_BYTES,
            );
            self.text.drain(..keep_from);
            self.text_dropped = true;
        }
        self.text.shrink_to_fit();
    }

    /// For a session of an earlier run (`restore.rs`): `total` bytes of
    /// output, all read from the log file, `omitted` the middle it dropped.
    pub(crate) fn restore(&mut self, total: u64, omitted: Option<OutputOmission>) {
        self.release();
        self.total = total;
        self.omitted = omitted;
        self.text_dropped = total > 0;
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
        if let Some(o) = &self.omitted
            && offset < o.offset + o.len
            && offset + len as u64 > o.offset
        {
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

/// What happens to a running session when its `output.log` reaches its cap
/// ([`SessionsConfig::output_log_max_bytes`](crate::SessionsConfig::output_log_max_bytes)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputCapPolicy {
    /// The process keeps running; the log keeps its head and its newest bytes and
    /// drops the middle. The default: a long build or test run is not killed for
    /// being verbose.
    #[default]
    Keep,
    /// The session's group is ended (SIGTERM, grace, SIGKILL) with reason
    /// [`KilledBy::OutputCap`](crate::KilledBy::OutputCap); the log keeps the head and the newest bytes.
    Stop,
}

impl OutputCapPolicy {
    /// `keep` or `stop`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputCapPolicy::Keep => "keep",
            OutputCapPolicy::Stop => "stop",
        }
    }
}

impl std::fmt::Display for OutputCapPolicy {
    /// [`OutputCapPolicy::as_str`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bytes of a session's output that its `output.log` no longer holds: the range
/// `offset..offset + len` of the combined output, in bytes. Everything before it (the
/// head) and after it (the tail) is kept byte-exact at its own offset: `output.log`
/// is a sparse file whose omitted middle is a hole (it reads as zeros), so an offset
/// is always a file position. [`Sessions::read_output`](crate::Sessions::read_output)
/// never returns omitted bytes: a read that starts inside the range returns bytes
/// from its end, with [`OutputRange::offset`](crate::OutputRange::offset) saying
/// where they start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputOmission {
    /// Log offset of the first omitted byte (the size of the kept head), in bytes.
    pub offset: u64,
    /// Bytes omitted so far.
    pub len: u64,
    /// What the cap did to the process.
    pub policy: OutputCapPolicy,
    /// Which cap and what it keeps, e.g. `output.log keeps the first 1048576 and the
    /// last 66060288 bytes (output_log_max_bytes = 67108864); the process keeps
    /// running (output_cap_policy = keep)`.
    pub reason: String,
}

/// Least bytes between two hole punches of one log: the omitted middle is given
/// back to the file system in steps of at least this much (so at most this much
/// over the cap is on disk at any time), and once more when the session ends.
const PUNCH_STEP: u64 = 256 * 1024;

/// The block size punches are aligned to when the file system does not say one
/// (`st_blksize`) we can use.
const FALLBACK_BLOCK: u64 = 4096;

/// The block size of the file system holding `file`, which hole punches are
/// aligned to: `st_blksize` when it is a power of two from 512 bytes to 1 MiB
/// (ext4, xfs, btrfs and tmpfs give their block or page size), else
/// [`FALLBACK_BLOCK`].
fn punch_block(file: &File) -> u64 {
    use std::os::unix::fs::MetadataExt;
    match file.metadata().map(|m| m.blksize()) {
        Ok(size) if size.is_power_of_two() && (512..=1 << 20).contains(&size) => size,
        _ => FALLBACK_BLOCK,
    }
}

/// The bytes the `output.log`s of one engine's running sessions keep on disk
/// together, against the host-wide cap
/// ([`SessionsConfig::output_logs_max_bytes`](crate::SessionsConfig::output_logs_max_bytes)).
#[derive(Debug)]
pub(crate) struct LogBudget {
    used: AtomicU64,
    max: u64,
}

impl LogBudget {
    /// A budget of `max` bytes.
    pub(crate) fn new(max: u64) -> LogBudget {
        LogBudget {
            used: AtomicU64::new(0),
            max,
        }
    }

    /// Bytes the running sessions' logs keep on disk now.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    fn over(&self) -> bool {
        self.used() > self.max
    }

    fn add(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }
}

/// The caps one [`OutputLog`] applies, in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogCaps {
    /// Most bytes the log keeps (head plus tail).
    pub(crate) max_bytes: u64,
    /// Bytes of the head kept (at most `max_bytes`).
    pub(crate) head_bytes: u64,
    /// The tail kept while the host-wide budget is exceeded (at most
    /// `max_bytes - head_bytes`).
    pub(crate) pressed_tail_bytes: u64,
    /// What the cap does to the process.
    pub(crate) policy: OutputCapPolicy,
}

/// A session's `output.log` writer with a cap: up to `max_bytes` it is the byte-exact
/// log; past it the file keeps its first `head_bytes` and its newest
/// `max_bytes - head_bytes` bytes at their offsets and gives the middle back to the
/// file system (`fallocate(FALLOC_FL_PUNCH_HOLE)`), so the disk it uses stays bounded
/// while offsets keep their meaning. While the host's running logs together exceed
/// their budget, only `pressed_tail_bytes` of tail are kept. Opens the file on its
/// first write (the session created it empty), so a session that has printed
/// nothing holds no descriptor for it (benchmark P5); a sweep
/// ([`super::retention`]) knows a live log by its session's `owner` link, not by a
/// lock on the file.
pub(crate) struct OutputLog {
    path: std::path::PathBuf,
    /// Open once something was written.
    file: Option<File>,
    caps: LogCaps,
    budget: Arc<LogBudget>,
    /// Bytes of output so far (the file's length).
    written: u64,
    /// The omitted range is `caps.head_bytes..omit_end` when `omit_end > head_bytes`.
    omit_end: u64,
    /// The next punch starts here: after the first punch, the block boundary at or
    /// below where the last one ended.
    punched: u64,
    /// The file system's block size ([`punch_block`], known once the file is open).
    /// A punch frees whole blocks only and zeroes the part of a block its range ends
    /// in, so the next punch starts again at that block's start and frees it whole:
    /// starting where the last one ended would keep that zeroed block allocated
    /// inside the hole for good, one per punch (4 KiB in every 256 KiB of a flood,
    /// unbounded).
    block: u64,
    /// Bytes this log counts in the budget now.
    counted: u64,
    /// The file system cannot punch holes: from this offset on nothing more is
    /// written (the tail is lost instead of the middle).
    stopped_at: Option<u64>,
    /// What `omission` says, built when the cap is first reached.
    reason: Option<String>,
}

impl OutputLog {
    /// The writer of the freshly created, empty `output.log` at `path`.
    pub(crate) fn new(
        path: std::path::PathBuf,
        caps: LogCaps,
        budget: Arc<LogBudget>,
    ) -> OutputLog {
        let mut caps = caps;
        caps.head_bytes = caps.head_bytes.min(caps.max_bytes);
        caps.pressed_tail_bytes = caps
            .pressed_tail_bytes
            .min(caps.max_bytes - caps.head_bytes);
        OutputLog {
            path,
            file: None,
            caps,
            budget,
            written: 0,
            omit_end: 0,
            punched: caps.head_bytes,
            block: FALLBACK_BLOCK,
            counted: 0,
            stopped_at: None,
            reason: None,
        }
    }

    /// Appends `data` (the next bytes of output) and applies the caps. Returns true
    /// when this write made the log reach its cap for the first time (the caller
    /// records it and applies [`OutputCapPolicy`]). Errors: the write failed (the
    /// caller stops logging).
    pub(crate) fn write_all(&mut self, data: &[u8]) -> std::io::Result<bool> {
        let first = self.reason.is_none();
        if self.stopped_at.is_none() {
            self.file()?.write_all(data)?;
        }
        self.written += data.len() as u64;
        let tail = if self.budget.over() {
            self.caps.pressed_tail_bytes
        } else {
            self.caps.max_bytes - self.caps.head_bytes
        };
        if self.written > self.caps.head_bytes + tail {
            self.omit_end = self.omit_end.max(self.written - tail);
            if self.reason.is_none() {
                self.reason = Some(self.describe(tail));
            }
        }
        if self.omit_end >= self.punched + PUNCH_STEP {
            self.punch();
        }
        if let Some(at) = self.stopped_at {
            self.omit_end = self.written.max(at);
        }
        self.recount();
        Ok(first && self.reason.is_some())
    }

    /// The file, opened for appending on first use (above the descriptor range
    /// children copy, `spawn.rs`).
    fn file(&mut self) -> std::io::Result<&mut File> {
        if self.file.is_none() {
            use std::os::unix::fs::OpenOptionsExt;
            // The file the session created: never one a symlink put in its place.
            let file = std::fs::OpenOptions::new()
                .append(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&self.path)?;
            self.block = punch_block(&file);
            self.file = Some(File::from(crate::spawn::move_above_low_fds(file.into())));
        }
        Ok(self.file.as_mut().expect("opened above"))
    }

    fn describe(&self, tail: u64) -> String {
        let what = match self.caps.policy {
            OutputCapPolicy::Keep => "the process keeps running (output_cap_policy = keep)",
            OutputCapPolicy::Stop => "the process is stopped (output_cap_policy = stop)",
        };
        let pressed = if tail < self.caps.max_bytes - self.caps.head_bytes {
            format!(
                "; the host's running output logs exceed output_logs_max_bytes = {}, so only \
                 {tail} bytes of tail are kept",
                self.budget.max
            )
        } else {
            String::new()
        };
        format!(
            "output.log keeps the first {} and the last {} bytes (output_log_max_bytes = {}){pressed}; {what}",
            self.caps.head_bytes,
            self.caps.max_bytes - self.caps.head_bytes,
            self.caps.max_bytes,
        )
    }

    /// Gives the omitted middle up to `omit_end` back to the file system (the
    /// middle reads as zeros; the block it ends in is zeroed and freed by the next
    /// punch, so at most one such block stays once the session ends). If the file
    /// system cannot, logging stops here instead (the tail is lost, not the disk).
    fn punch(&mut self) {
        if self.omit_end <= self.punched || self.stopped_at.is_some() {
            return;
        }
        let (from, len) = (self.punched, self.omit_end - self.punched);
        let flags = nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE
            | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE;
        let punched = self.file().and_then(|file| {
            nix::fcntl::fallocate(&*file, flags, from as i64, len as i64)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))
        });
        match punched {
            Ok(()) => {
                let block_start = self.omit_end - self.omit_end % self.block;
                self.punched = block_start.max(self.punched);
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "the file system cannot punch holes in output logs; logging stops at the cap"
                );
                self.stopped_at = Some(self.written);
                self.omit_end = self.written;
                if let Some(reason) = &mut self.reason {
                    reason.push_str(&format!(
                        " (this file system cannot drop the middle of a file ({e}): nothing \
                         after the cap is logged)"
                    ));
                }
            }
        }
    }

    fn recount(&mut self) {
        let omitted = self.omit_end.saturating_sub(self.caps.head_bytes);
        let kept = self.written - omitted.min(self.written);
        if kept > self.counted {
            self.budget.add(kept - self.counted);
        } else {
            self.budget.sub(self.counted - kept);
        }
        self.counted = kept;
    }

    /// The session ended: punches the rest of the omitted middle, closes the file
    /// and leaves the budget (a finished log is bounded by retention instead).
    pub(crate) fn finish(mut self) -> Option<OutputOmission> {
        self.punch();
        self.budget.sub(self.counted);
        self.counted = 0;
        self.omission()
    }

    /// What the log omits so far (`None` below the cap).
    pub(crate) fn omission(&self) -> Option<OutputOmission> {
        let reason = self.reason.clone()?;
        Some(OutputOmission {
            offset: self.caps.head_bytes,
            len: self.omit_end.saturating_sub(self.caps.head_bytes),
            policy: self.caps.policy,
            reason,
        })
    }
}

impl Drop for OutputLog {
    fn drop(&mut self) {
        self.budget.sub(self.counted);
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

    /// Bytes the backlog holds in memory: the output bytes it keeps plus each event's
    /// own size.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.output_bytes_held + self.events.capacity() * std::mem::size_of::<SessionEvent>()
    }

    /// For a finished session: folds the oldest output events into omitted ranges
    /// until at most `max_output_bytes` of output and `max_events` events are kept,
    /// copies the kept chunks out of the (up to 64 KiB) read blocks they share, so a
    /// small chunk does not pin a whole block, and frees the spare capacity.
    pub(crate) fn shrink(&mut self, max_output_bytes: usize, max_events: usize) {
        while self.output_bytes_held > max_output_bytes || self.events.len() > max_events {
            if !self.drop_oldest_output() {
                break;
            }
        }
        for event in &mut self.events {
            if let SessionEventKind::Output(chunk) = &mut event.kind {
                chunk.data = Bytes::copy_from_slice(&chunk.data);
            }
        }
        self.events.shrink_to_fit();
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
    fn a_capped_log_omits_the_middle_and_shrinks_its_tail_under_host_pressure() {
        let dir = tempfile::tempdir().unwrap();
        let caps = LogCaps {
            max_bytes: 1000,
            head_bytes: 100,
            pressed_tail_bytes: 50,
            policy: OutputCapPolicy::Keep,
        };
        let roomy = Arc::new(LogBudget::new(u64::MAX));
        File::create(dir.path().join("a")).unwrap();
        let mut log = OutputLog::new(dir.path().join("a"), caps, roomy);
        assert!(!log.write_all(&[1; 1000]).unwrap());
        assert_eq!(log.omission(), None);
        assert!(
            log.write_all(&[2; 10]).unwrap(),
            "the first write past the cap"
        );
        assert!(!log.write_all(&[3; 10]).unwrap());
        let o = log.finish().unwrap();
        assert_eq!((o.offset, o.len), (100, 20));
        // Over the host budget: only `pressed_tail_bytes` of tail.
        let full = Arc::new(LogBudget::new(10));
        File::create(dir.path().join("b")).unwrap();
        let mut log = OutputLog::new(dir.path().join("b"), caps, full.clone());
        log.write_all(&[1; 200]).unwrap();
        assert_eq!(log.omission(), None, "within the budget when written");
        assert!(log.write_all(&[1; 200]).unwrap());
        assert_eq!(log.omission().map(|o| (o.offset, o.len)), Some((100, 250)));
        assert_eq!(full.used(), 150);
        drop(log);
        assert_eq!(full.used(), 0, "a finished log leaves the budget");
        // Reads skip the omitted range.
        let mut b = OutputBuffer::new(8);
        b.push(OutputStream::Stdout, &Bytes::from(vec![0; 400]));
        b.set_omitted(Some(OutputOmission {
            offset: 100,
            len: 250,
            policy: OutputCapPolicy::Keep,
            reason: String::new(),
        }));
        assert_eq!(b.readable(0, 1000), (0, 100));
        assert_eq!(b.readable(120, 10), (350, 360));
        assert_eq!(b.readable(360, 1000), (360, 400));
    }

    /// A flood written in chunks that never end on a block boundary: once the log
    /// is finished, what is on disk is the head and the tail plus at most the block
    /// each of them shares with the hole, however long the flood (unaligned punches
    /// kept a zeroed block per punch: 248 KiB more for these 16 MiB).
    #[test]
    fn a_flood_in_unaligned_chunks_leaves_only_head_and_tail_on_disk() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flood");
        let caps = LogCaps {
            max_bytes: 64 * 1024,
            head_bytes: 16 * 1024,
            pressed_tail_bytes: 8 * 1024,
            policy: OutputCapPolicy::Keep,
        };
        File::create(&path).unwrap();
        let mut log = OutputLog::new(path.clone(), caps, Arc::new(LogBudget::new(u64::MAX)));
        let chunk: Vec<u8> = (0..10_001u32).map(|i| (i % 251) as u8).collect();
        let mut total = 0u64;
        while total < 16 << 20 {
            log.write_all(&chunk).unwrap();
            total += chunk.len() as u64;
        }
        let block = log.block;
        let omission = log.finish().unwrap();
        assert_eq!(omission.offset, 16 * 1024);
        assert_eq!(omission.len, total - 64 * 1024);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), total, "offsets stay file positions");
        let on_disk = meta.blocks() * 512;
        assert!(
            on_disk <= caps.max_bytes + 2 * block,
            "{on_disk} bytes on disk for a {}-byte cap ({block}-byte blocks)",
            caps.max_bytes
        );
        // The kept tail is the flood's last bytes.
        let file = std::fs::read(&path).unwrap();
        let tail_at = (total - 48 * 1024) as usize;
        let expected: Vec<u8> = (tail_at..total as usize)
            .map(|at| chunk[at % chunk.len()])
            .collect();
        assert_eq!(&file[tail_at..], &expected[..]);
        assert!(
            file[16 * 1024..tail_at].iter().all(|&b| b == 0),
            "the hole reads as zeros"
        );
    }

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
    fn a_finished_backlog_shrinks_to_its_bounds() {
        let mut log = EventBacklog::new(1 << 20);
        let block = Bytes::from(vec![b'x'; 64 * 1024]);
        for i in 0..64u64 {
            log.push(
                SessionEventKind::Output(OutputChunk {
                    stream: OutputStream::Stdout,
                    offset: i * 1024,
                    data: block.slice(0..1024),
                }),
                0,
            );
        }
        log.shrink(4096, 3);
        assert!(log.output_bytes_held <= 4096);
        let all = log.since(1, 1000, None);
        assert!(matches!(
            all[0].kind,
            SessionEventKind::Omitted(OmittedRange { first_seq: 1, .. })
        ));
        assert_eq!(all.last().unwrap().seq, 64);
        // The kept chunks no longer share the 64 KiB block.
        for e in &all {
            if let SessionEventKind::Output(c) = &e.kind {
                assert!(!std::ptr::eq(c.data.as_ptr(), block.as_ptr()));
            }
        }
        assert!(log.memory_bytes() < 8 * 1024);
    }

    #[test]
    fn events_fold_into_omitted_ranges() {
        let mut log = EventBacklog::new(10);
        log.push(
            SessionEventKind::Started(crate::StartedInfo {
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
