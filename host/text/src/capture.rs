//! A bounded record of an output range ([`Capture`]: its first and last window
//! of raw bytes, the middle only counted) and its text cut to a budget
//! ([`render_parts`]).

use crate::clean::clean;
use crate::utf8::{
    ceil_char_boundary, floor_char_boundary, incomplete_suffix_len, leading_continuation_len,
};

/// Raw bytes a [`Capture`] keeps from the start of its range, and about as many
/// from its end, unless told otherwise: 512 KiB (524 288 bytes), what the bash
/// tool of contract 0.1.0 kept (its `HEAD_BYTES` and `TAIL_BYTES`).
pub const DEFAULT_WINDOW: usize = 512 * 1024;

/// How far into the tail window [`render_parts`] looks for the first newline to
/// start the tail's text at: 4 KiB (a tail that begins mid-line shows from the
/// next line).
const TAIL_LINE_SEARCH: usize = 4096;

/// A bounded record of an output byte range: the first `window` bytes, the last
/// `window` to `2 × window` bytes, and how many bytes in between were dropped
/// or skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    window: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Bytes between `head` and `tail` that are not held.
    gap: u64,
    /// Total bytes the range covers (held, dropped and skipped).
    total: u64,
}

impl Default for Capture {
    fn default() -> Self {
        Capture::with_window(DEFAULT_WINDOW)
    }
}

impl Capture {
    /// An empty capture with [`DEFAULT_WINDOW`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty capture keeping `window` bytes (at least 1) at each end.
    pub fn with_window(window: usize) -> Self {
        Capture {
            window: window.max(1),
            head: Vec::new(),
            tail: Vec::new(),
            gap: 0,
            total: 0,
        }
    }

    /// A capture as [`Capture::push`] would have left it: `head` (at most
    /// `window` bytes), then `gap` bytes not held, then `tail`, `total` bytes in
    /// all. For [`crate::CapturePlan`], which works out these parts from byte
    /// ranges and reads only them.
    pub fn from_parts(window: usize, head: Vec<u8>, tail: Vec<u8>, gap: u64, total: u64) -> Self {
        Capture {
            window: window.max(1),
            head,
            tail,
            gap,
            total,
        }
    }

    /// Appends bytes that follow the ones pushed before.
    pub fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.gap == 0 && self.tail.is_empty() && self.head.len() < self.window {
            let room = (self.window - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..room]);
            data = &data[room..];
        }
        self.tail.extend_from_slice(data);
        if self.tail.len() > 2 * self.window {
            let drop = self.tail.len() - self.window;
            self.tail.drain(..drop);
            self.gap += drop as u64;
        }
    }

    /// Records `n` bytes that follow the ones pushed so far but were not read
    /// (the caller then pushes the bytes after them, e.g. the end of the log).
    pub fn skip(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.gap += self.tail.len() as u64 + n;
        self.total += n;
        self.tail.clear();
    }

    /// Removes an incomplete UTF-8 character from the end (it is shown by the
    /// next read instead) and returns how many bytes were removed.
    pub fn hold_back_incomplete_end(&mut self) -> usize {
        let buf = if self.tail.is_empty() && self.gap == 0 {
            &mut self.head
        } else {
            &mut self.tail
        };
        let n = incomplete_suffix_len(buf);
        buf.truncate(buf.len() - n);
        self.total -= n as u64;
        n
    }

    /// Total bytes the capture covers.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// How much text [`render_parts`] keeps, head and tail together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Unicode scalar values (Rust `char`s).
    Chars(usize),
    /// UTF-8 bytes (cut on character boundaries, so up to 3 bytes fewer).
    Bytes(usize),
}

impl Budget {
    fn max(self) -> usize {
        match self {
            Budget::Chars(n) | Budget::Bytes(n) => n,
        }
    }

    /// The size of `s` in this budget's unit.
    fn measure(self, s: &str) -> usize {
        match self {
            Budget::Chars(_) => s.chars().count(),
            Budget::Bytes(_) => s.len(),
        }
    }

    /// The byte index in `s` after its first `n` units (`s.len()` past the end);
    /// `up` rounds a byte index inside a character up instead of down.
    fn index(self, s: &str, n: usize, up: bool) -> usize {
        match self {
            Budget::Chars(_) => s.char_indices().nth(n).map_or(s.len(), |(i, _)| i),
            Budget::Bytes(_) if up => ceil_char_boundary(s.as_bytes(), n),
            Budget::Bytes(_) => floor_char_boundary(s.as_bytes(), n),
        }
    }
}

/// How raw bytes become text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextMode {
    /// Decoded as UTF-8, invalid sequences as U+FFFD; nothing else changed.
    Utf8,
    /// Decoded, then as a terminal shows it ([`clean`]).
    Terminal,
}

impl TextMode {
    fn text(self, bytes: &[u8]) -> String {
        match self {
            TextMode::Utf8 => String::from_utf8_lossy(bytes).into_owned(),
            TextMode::Terminal => clean(bytes),
        }
    }
}

/// A capture's text cut to a budget, without the words a tool puts where the
/// middle went: show `head`, then (when anything was left out) a marker, then
/// `tail`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parts {
    /// The start of the text (all of it when nothing was left out).
    pub head: String,
    /// The end of the text (empty when nothing was left out).
    pub tail: String,
    /// Characters of the made text that are not shown.
    pub omitted_chars: u64,
    /// Raw bytes between the head and tail windows that were never made into
    /// text (0 when the capture held its whole range).
    pub omitted_bytes: u64,
}

/// The text of `capture` cut to `budget`, as the bash tool of contract 0.1.0
/// cut it (`Capture::render` there, marker apart):
///
/// - a capture that holds its whole range is made into one text; it is all in
///   `head` if it fits the budget, else the first half of the budget is `head`
///   and the rest of the budget the end of the text, `tail`;
/// - otherwise the two windows are made into text separately (the head window
///   without a character its end cuts, the tail window from its first newline
///   within 4 KiB, after any continuation bytes it starts with); `head` keeps at
///   most half the budget, `tail` the rest of it, and `omitted_bytes` counts the
///   bytes between what the two texts were made from.
pub fn render_parts(capture: &Capture, budget: Budget, mode: TextMode) -> Parts {
    let max = budget.max();
    if capture.gap == 0 {
        let mut all = Vec::with_capacity(capture.head.len() + capture.tail.len());
        all.extend_from_slice(&capture.head);
        all.extend_from_slice(&capture.tail);
        let text = mode.text(&all);
        let total = budget.measure(&text);
        if total <= max {
            return Parts {
                head: text,
                ..Parts::default()
            };
        }
        let head_units = max / 2;
        let tail_units = max - head_units;
        let head_end = budget.index(&text, head_units, false);
        let tail_start = budget.index(&text, total - tail_units, true);
        let omitted_chars = text[head_end..tail_start].chars().count() as u64;
        return Parts {
            head: text[..head_end].to_owned(),
            tail: text[tail_start..].to_owned(),
            omitted_chars,
            omitted_bytes: 0,
        };
    }
    // The middle was never held: make both ends into text separately, cutting
    // them on character (and, where one is near, line) boundaries.
    let head = &capture.head[..capture.head.len() - incomplete_suffix_len(&capture.head)];
    let mut skip = leading_continuation_len(&capture.tail);
    if let Some(nl) = capture.tail[skip..]
        .iter()
        .take(TAIL_LINE_SEARCH)
        .position(|b| *b == b'\n')
    {
        skip += nl + 1;
    }
    let tail = &capture.tail[skip..];
    // Bytes between the shown head and tail: read past but not held.
    let omitted_bytes = capture.gap + (capture.head.len() - head.len() + skip) as u64;
    let head_text = mode.text(head);
    let tail_text = mode.text(tail);
    let head_len = budget.measure(&head_text);
    let tail_len = budget.measure(&tail_text);
    let head_keep = head_len.min(max / 2);
    let tail_keep = tail_len.min(max - head_keep);
    let head_end = budget.index(&head_text, head_keep, false);
    let tail_start = budget.index(&tail_text, tail_len - tail_keep, true);
    let omitted_chars =
        (head_text[head_end..].chars().count() + tail_text[..tail_start].chars().count()) as u64;
    Parts {
        head: head_text[..head_end].to_owned(),
        tail: tail_text[tail_start..].to_owned(),
        omitted_chars,
        omitted_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_capture_is_one_text() {
        let mut cap = Capture::new();
        cap.push(b"\x1b[32mok\x1b[0m\n");
        cap.push("caf".as_bytes());
        cap.push(&[0xc3]);
        cap.push(&[0xa9]);
        assert_eq!(cap.total(), 17);
        let parts = render_parts(&cap, Budget::Chars(100), TextMode::Terminal);
        assert_eq!(parts.head, "ok\ncafé");
        assert_eq!((parts.tail.as_str(), parts.omitted_chars), ("", 0));
        let raw = render_parts(&cap, Budget::Chars(100), TextMode::Utf8);
        assert_eq!(raw.head, "\x1b[32mok\x1b[0m\ncafé");
    }

    #[test]
    fn a_cut_keeps_half_the_budget_at_each_end() {
        let mut cap = Capture::new();
        cap.push("abcdefghij".as_bytes());
        let parts = render_parts(&cap, Budget::Chars(5), TextMode::Utf8);
        assert_eq!((parts.head.as_str(), parts.tail.as_str()), ("ab", "hij"));
        assert_eq!((parts.omitted_chars, parts.omitted_bytes), (5, 0));
        // A byte budget never cuts a character: 'é' is two bytes.
        let mut cap = Capture::new();
        cap.push("éééééé".as_bytes());
        let parts = render_parts(&cap, Budget::Bytes(5), TextMode::Utf8);
        assert_eq!((parts.head.as_str(), parts.tail.as_str()), ("é", "é"));
        assert_eq!(parts.omitted_chars, 4);
    }

    #[test]
    fn a_capture_with_a_gap_counts_the_bytes_between_its_windows() {
        let mut cap = Capture::with_window(8);
        cap.push(b"head1234");
        cap.skip(1000);
        cap.push(b"xx\nlast");
        let parts = render_parts(&cap, Budget::Chars(100), TextMode::Terminal);
        assert_eq!(
            (parts.head.as_str(), parts.tail.as_str()),
            ("head1234", "last")
        );
        assert_eq!((parts.omitted_chars, parts.omitted_bytes), (0, 1003));
    }

    #[test]
    fn holding_back_a_cut_character() {
        let mut cap = Capture::new();
        cap.push("ab日".as_bytes());
        cap.push(&[0xe6, 0x97]);
        assert_eq!(cap.hold_back_incomplete_end(), 2);
        assert_eq!(cap.total(), 5);
        let parts = render_parts(&cap, Budget::Chars(100), TextMode::Terminal);
        assert_eq!(parts.head, "ab日");
    }
}
