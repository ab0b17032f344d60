//! Summaries of a log read from a cursor, reading only the bytes that are shown.
//!
//! The bash tool of contract 0.1.0 read a session's new output in 1 MiB steps
//! (`read-new-output`), pushed every byte through a [`Capture`] (which keeps
//! the first and last window and counts the middle) and then made text of what
//! the capture kept. [`summarize`] gives the same text, but works out first,
//! from lengths alone ([`CapturePlan`]), which log ranges the capture would
//! keep, and reads only those: at most one head window and one tail window of
//! `2 × window` bytes, however long the output (a 78 MB `seq` costs 1.5 MiB of
//! reads instead of 78 MB copied twice into a plugin).

use std::collections::VecDeque;

use crate::capture::{Budget, Capture, Parts, TextMode, render_parts};
use crate::utf8::{incomplete_suffix_len, leading_continuation_len};

/// Bytes `offset .. offset + len` of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogRange {
    /// First byte's offset.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

impl LogRange {
    fn end(self) -> u64 {
        self.offset + self.len
    }
}

/// Where [`summarize`] reads from: a session's output log as it stands.
pub trait OutputSource {
    /// Why a read failed.
    type Error;
    /// Where a read of up to `max` bytes from `offset` really starts and ends,
    /// `(start, end)`: a log that dropped a middle range (its cap) moves a start
    /// inside that range to its end and stops a read at its start. `offset` is
    /// at most the log's length.
    fn readable(&self, offset: u64, max: u64) -> (u64, u64);
    /// The bytes `offset .. offset + len` (a range [`OutputSource::readable`]
    /// gave, or part of one).
    ///
    /// # Errors
    ///
    /// The log could not be read.
    fn read(&mut self, offset: u64, len: usize) -> Result<Vec<u8>, Self::Error>;
}

/// The record a [`Capture`] would keep, kept as log ranges instead of bytes.
/// [`CapturePlan::push`] does [`Capture::push`]'s arithmetic on lengths.
#[derive(Debug, Clone)]
pub struct CapturePlan {
    window: usize,
    head: Vec<LogRange>,
    head_len: u64,
    tail: VecDeque<LogRange>,
    tail_len: u64,
    gap: u64,
    total: u64,
}

impl CapturePlan {
    /// An empty plan for a capture keeping `window` bytes at each end.
    pub fn new(window: usize) -> Self {
        CapturePlan {
            window: window.max(1),
            head: Vec::new(),
            head_len: 0,
            tail: VecDeque::new(),
            tail_len: 0,
            gap: 0,
            total: 0,
        }
    }

    /// Records that the bytes of `range` follow those pushed before (they need
    /// not follow them in the log: a read may have passed over a dropped middle).
    pub fn push(&mut self, mut range: LogRange) {
        let window = self.window as u64;
        self.total += range.len;
        if self.gap == 0 && self.tail.is_empty() && self.head_len < window {
            let room = (window - self.head_len).min(range.len);
            if room > 0 {
                append(
                    &mut self.head,
                    LogRange {
                        offset: range.offset,
                        len: room,
                    },
                );
                self.head_len += room;
            }
            range = LogRange {
                offset: range.offset + room,
                len: range.len - room,
            };
        }
        if range.len > 0 {
            match self.tail.back_mut() {
                Some(last) if last.end() == range.offset => last.len += range.len,
                _ => self.tail.push_back(range),
            }
            self.tail_len += range.len;
        }
        if self.tail_len > 2 * window {
            let mut drop = self.tail_len - window;
            self.gap += drop;
            self.tail_len -= drop;
            while drop > 0 {
                let Some(front) = self.tail.front_mut() else {
                    break;
                };
                if front.len <= drop {
                    drop -= front.len;
                    self.tail.pop_front();
                } else {
                    front.offset += drop;
                    front.len -= drop;
                    drop = 0;
                }
            }
        }
    }

    /// Total bytes pushed.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The log ranges of the head window, in order.
    pub fn head(&self) -> &[LogRange] {
        &self.head
    }

    /// The log ranges of the tail window, in order.
    pub fn tail(&self) -> impl Iterator<Item = LogRange> + '_ {
        self.tail.iter().copied()
    }

    /// The [`Capture`] this plan stands for, its kept ranges read from `source`.
    ///
    /// # Errors
    ///
    /// A read of `source` failed.
    pub fn materialize<S: OutputSource>(&self, source: &mut S) -> Result<Capture, S::Error> {
        let mut read = |ranges: &mut dyn Iterator<Item = LogRange>| -> Result<Vec<u8>, S::Error> {
            let mut out = Vec::new();
            for r in ranges {
                out.extend_from_slice(&source.read(r.offset, r.len as usize)?);
            }
            Ok(out)
        };
        let head = read(&mut self.head.iter().copied())?;
        let tail = read(&mut self.tail.iter().copied())?;
        Ok(Capture::from_parts(
            self.window,
            head,
            tail,
            self.gap,
            self.total,
        ))
    }
}

/// Appends `r` to `ranges`, merging it into the last one when they touch.
fn append(ranges: &mut Vec<LogRange>, r: LogRange) {
    match ranges.last_mut() {
        Some(last) if last.end() == r.offset => last.len += r.len,
        _ => ranges.push(r),
    }
}

/// What [`summarize`] reads and how it cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryRequest {
    /// Text kept, head and tail together.
    pub budget: Budget,
    /// How bytes become text.
    pub mode: TextMode,
    /// Raw bytes kept at each end before text is made (see [`Capture`]); the
    /// read steps are twice this.
    pub window: usize,
    /// The most bytes to cover from the cursor; `None`: all there is.
    pub max_bytes: Option<u64>,
}

/// New output, summarized ([`summarize`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The text, cut: what to show of it and what was left out.
    pub parts: Parts,
    /// The log bytes the text stands for: from the first byte made into text (up
    /// to 3 bytes before the old cursor when it completes a character the last
    /// read cut) to the last (up to 3 bytes before the new cursor when a
    /// character is still being written: the next summary shows it).
    pub covered: LogRange,
    /// The part of `covered` the log no longer holds (its dropped middle).
    pub skipped: Option<LogRange>,
    /// Bytes there were when the call began that it left for the next
    /// (`max_bytes`).
    pub unread_bytes: u64,
    /// Where the cursor is now: past every byte read.
    pub cursor: u64,
}

/// Summarizes a log's output from `cursor`: reads as the bash tool of contract
/// 0.1.0 did (steps of `2 × window` bytes from the cursor up to the length the
/// log had when the call began, or `max_bytes`; a first step that starts with
/// continuation bytes also takes the end of the character they finish; a
/// trailing incomplete character is left for the next call unless `ended`),
/// reading from `source` only the bytes a [`Capture`] would keep, and cuts their
/// text with [`render_parts`]. `total` is the log's length and `ended` whether
/// it is complete.
///
/// # Errors
///
/// A read of `source` failed; nothing was summarized (the caller keeps its cursor).
pub fn summarize<S: OutputSource>(
    source: &mut S,
    cursor: u64,
    total: u64,
    ended: bool,
    request: &SummaryRequest,
) -> Result<Summary, S::Error> {
    let step = 2 * request.window.max(1) as u64;
    let mut plan = CapturePlan::new(request.window);
    let (first_start, first_end) = source.readable(cursor.min(total), step);
    let mut covered_start = first_start;
    if first_start > 0 && first_end > first_start {
        let lead = source.read(first_start, (first_end - first_start).min(3) as usize)?;
        if leading_continuation_len(&lead) > 0 {
            let back = first_start.min(3);
            let (from, to) = source.readable(first_start - back, back);
            let prev = source.read(from, (to - from) as usize)?;
            let k = incomplete_suffix_len(&prev) as u64;
            if k > 0 {
                covered_start = to - k;
                plan.push(LogRange {
                    offset: to - k,
                    len: k,
                });
            }
        }
    }
    plan.push(LogRange {
        offset: first_start,
        len: first_end - first_start,
    });
    let stop = total.min(first_start.saturating_add(request.max_bytes.unwrap_or(u64::MAX)));
    let mut pos = first_end;
    let mut cursor = first_end;
    let mut eof = ended && first_end == total;
    while pos < stop && !eof {
        let (from, to) = source.readable(pos, (stop - pos).min(step));
        if to == from {
            eof = ended && from == total;
            cursor = from;
            break;
        }
        cursor = to;
        pos = to;
        eof = ended && to == total;
        plan.push(LogRange {
            offset: from,
            len: to - from,
        });
    }
    let mut capture = plan.materialize(source)?;
    let held = if eof {
        0
    } else {
        capture.hold_back_incomplete_end() as u64
    };
    let covered_end = pos - held;
    let covered = LogRange {
        offset: covered_start,
        len: covered_end.saturating_sub(covered_start),
    };
    let counted = capture.total();
    let skipped = (covered.len > counted).then(|| LogRange {
        offset: covered_start.max(first_start),
        len: covered.len - counted,
    });
    Ok(Summary {
        parts: render_parts(&capture, request.budget, request.mode),
        covered,
        skipped,
        unread_bytes: total.saturating_sub(pos),
        cursor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_keeps_the_ranges_a_capture_keeps() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for window in [1usize, 7, 64, 1000, 20_000] {
            for chunk in [1usize, 3, 100, 999, 4096] {
                let mut cap = Capture::with_window(window);
                let mut plan = CapturePlan::new(window);
                for (i, piece) in data.chunks(chunk).enumerate() {
                    cap.push(piece);
                    plan.push(LogRange {
                        offset: (i * chunk) as u64,
                        len: piece.len() as u64,
                    });
                }
                struct Mem<'a>(&'a [u8]);
                impl OutputSource for Mem<'_> {
                    type Error = ();
                    fn readable(&self, offset: u64, max: u64) -> (u64, u64) {
                        (offset, (offset + max).min(self.0.len() as u64))
                    }
                    fn read(&mut self, offset: u64, len: usize) -> Result<Vec<u8>, ()> {
                        Ok(self.0[offset as usize..offset as usize + len].to_vec())
                    }
                }
                assert_eq!(
                    plan.materialize(&mut Mem(&data)).unwrap(),
                    cap,
                    "{window} {chunk}"
                );
            }
        }
    }
}
