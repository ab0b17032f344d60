//! The oracle: the code of the bash tool of contract 0.1.0 (its text cleaning,
//! its head/tail capture and render, and its `read_within` read schedule over a
//! session's log), kept here verbatim but for the log access. Random outputs
//! (escape sequences, `\r`, backspaces, multibyte and invalid UTF-8, sizes
//! around the 512 KiB window, random chunking, a dropped middle at a random
//! place, a cursor inside a character) must give the same text through this
//! crate: `clean`, `render_parts` plus the marker, and `summarize` from a
//! cursor. Cost: 64 + 64 + 48 cases, about 10 s in a debug build.

use std::fmt::Write as _;

use proptest::prelude::*;
use toolhost_text::{Budget, OutputSource, Parts, SummaryRequest, TextMode};

mod old {
    //! plugins/bash/src/text.rs as of contract 0.1.0 (commit e68d6dd).
    use std::fmt::Write as _;

    pub const HEAD_BYTES: usize = 512 * 1024;
    pub const TAIL_BYTES: usize = 512 * 1024;

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum State {
        Ground,
        Escape,
        EscIntermediate,
        Csi,
        Str,
        StrEsc,
    }

    #[derive(Default)]
    struct Lines {
        out: String,
        line_start: usize,
        seg_start: usize,
    }

    impl Lines {
        fn push(&mut self, c: char) {
            match c {
                '\n' => {
                    self.end_line();
                    self.out.push('\n');
                    self.line_start = self.out.len();
                    self.seg_start = self.out.len();
                }
                '\r' => {
                    if self.out.len() > self.seg_start {
                        self.out.drain(self.line_start..self.seg_start);
                    }
                    self.seg_start = self.out.len();
                }
                '\u{8}' => {
                    if self.out.len() > self.seg_start {
                        self.out.pop();
                    }
                }
                '\t' => self.out.push('\t'),
                c if c.is_control() => {}
                c => self.out.push(c),
            }
        }
        fn end_line(&mut self) {
            if self.out.len() > self.seg_start {
                self.out.drain(self.line_start..self.seg_start);
                self.seg_start = self.line_start;
            }
        }
        fn finish(mut self) -> String {
            self.end_line();
            self.out
        }
    }

    pub fn clean(bytes: &[u8]) -> String {
        let decoded = String::from_utf8_lossy(bytes);
        let mut lines = Lines::default();
        let mut state = State::Ground;
        for c in decoded.chars() {
            state = step(state, c, &mut lines);
        }
        lines.finish()
    }

    fn step(state: State, c: char, lines: &mut Lines) -> State {
        const ESC: char = '\u{1b}';
        const BEL: char = '\u{7}';
        match state {
            State::Ground => match c {
                ESC => State::Escape,
                '\u{9b}' => State::Csi,
                '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => State::Str,
                c => {
                    lines.push(c);
                    State::Ground
                }
            },
            State::Escape => match c {
                '[' => State::Csi,
                ']' | 'P' | 'X' | '^' | '_' => State::Str,
                ESC => State::Escape,
                '\u{20}'..='\u{2f}' => State::EscIntermediate,
                '\u{30}'..='\u{7e}' => State::Ground,
                c => step(State::Ground, c, lines),
            },
            State::EscIntermediate => match c {
                '\u{20}'..='\u{2f}' => State::EscIntermediate,
                '\u{30}'..='\u{7e}' => State::Ground,
                ESC => State::Escape,
                c => step(State::Ground, c, lines),
            },
            State::Csi => match c {
                '\u{20}'..='\u{3f}' => State::Csi,
                '\u{40}'..='\u{7e}' => State::Ground,
                ESC => State::Escape,
                c if (c as u32) < 0x20 => {
                    lines.push(c);
                    State::Csi
                }
                c => step(State::Ground, c, lines),
            },
            State::Str => match c {
                BEL | '\u{9c}' => State::Ground,
                ESC => State::StrEsc,
                '\n' => step(State::Ground, c, lines),
                _ => State::Str,
            },
            State::StrEsc => match c {
                '\\' => State::Ground,
                c => step(State::Escape, c, lines),
            },
        }
    }

    pub fn incomplete_suffix_len(bytes: &[u8]) -> usize {
        let n = bytes.len();
        for back in 1..=n.min(3) {
            let b = bytes[n - back];
            if b & 0xC0 == 0x80 {
                continue;
            }
            let need = match b {
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => return 0,
            };
            return if back < need { back } else { 0 };
        }
        0
    }

    pub fn leading_continuation_len(bytes: &[u8]) -> usize {
        bytes
            .iter()
            .take(3)
            .take_while(|b| **b & 0xC0 == 0x80)
            .count()
    }

    pub fn truncate_middle(
        text: &str,
        max_chars: usize,
        output_path: &str,
        extra_omitted_bytes: u64,
    ) -> (String, bool) {
        let total = text.chars().count();
        if total <= max_chars && extra_omitted_bytes == 0 {
            return (text.to_owned(), false);
        }
        let keep = total.min(max_chars);
        let head_chars = keep / 2;
        let tail_chars = keep - head_chars;
        let head_end = byte_index_of_char(text, head_chars);
        let tail_start = byte_index_of_char(text, total - tail_chars);
        let omitted = total - keep;
        let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 128);
        out.push_str(&text[..head_end]);
        out.push_str("\n\n... [");
        if extra_omitted_bytes == 0 {
            let _ = write!(out, "{omitted} characters omitted");
        } else {
            let _ = write!(
                out,
                "{omitted} characters and {extra_omitted_bytes} bytes omitted"
            );
        }
        let _ = write!(out, "; full output: {output_path}] ...\n\n");
        out.push_str(&text[tail_start..]);
        (out, true)
    }

    fn byte_index_of_char(s: &str, n: usize) -> usize {
        s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
    }

    #[derive(Debug, Default)]
    pub struct Capture {
        head: Vec<u8>,
        tail: Vec<u8>,
        gap: u64,
        total: u64,
    }

    impl Capture {
        pub fn new() -> Self {
            Self::default()
        }
        pub fn push(&mut self, mut data: &[u8]) {
            self.total += data.len() as u64;
            if self.gap == 0 && self.tail.is_empty() && self.head.len() < HEAD_BYTES {
                let room = (HEAD_BYTES - self.head.len()).min(data.len());
                self.head.extend_from_slice(&data[..room]);
                data = &data[room..];
            }
            self.tail.extend_from_slice(data);
            if self.tail.len() > 2 * TAIL_BYTES {
                let drop = self.tail.len() - TAIL_BYTES;
                self.tail.drain(..drop);
                self.gap += drop as u64;
            }
        }
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
        pub fn total(&self) -> u64 {
            self.total
        }
        pub fn render(&self, max_chars: usize, output_path: &str) -> (String, bool) {
            if self.gap == 0 {
                let mut all = Vec::with_capacity(self.head.len() + self.tail.len());
                all.extend_from_slice(&self.head);
                all.extend_from_slice(&self.tail);
                return truncate_middle(&clean(&all), max_chars, output_path, 0);
            }
            let head = &self.head[..self.head.len() - incomplete_suffix_len(&self.head)];
            let mut skip = leading_continuation_len(&self.tail);
            if let Some(nl) = self.tail[skip..]
                .iter()
                .take(4096)
                .position(|b| *b == b'\n')
            {
                skip += nl + 1;
            }
            let tail = &self.tail[skip..];
            let unshown = self.gap + (self.head.len() - head.len() + skip) as u64;
            let head_text = clean(head);
            let tail_text = clean(tail);
            let head_len = head_text.chars().count();
            let tail_len = tail_text.chars().count();
            let head_keep = head_len.min(max_chars / 2);
            let tail_keep = tail_len.min(max_chars - head_keep);
            let omitted = (head_len - head_keep) + (tail_len - tail_keep);
            let mut text = String::new();
            text.push_str(&head_text[..byte_index_of_char(&head_text, head_keep)]);
            text.push_str("\n\n... [");
            if omitted > 0 {
                let _ = write!(text, "{omitted} characters and ");
            }
            let _ = write!(
                text,
                "{unshown} bytes omitted; full output: {output_path}] ...\n\n"
            );
            text.push_str(&tail_text[byte_index_of_char(&tail_text, tail_len - tail_keep)..]);
            (text, true)
        }
    }
}

/// A log whose middle `hole` (offset, len) was dropped, read the way the host's
/// `read-output` reads it (`OutputBuffer::readable`).
struct Log {
    data: Vec<u8>,
    hole: Option<(u64, u64)>,
}

impl OutputSource for Log {
    type Error = ();
    fn readable(&self, offset: u64, max: u64) -> (u64, u64) {
        let total = self.data.len() as u64;
        let mut start = offset;
        let mut end = offset.saturating_add(max).min(total);
        if let Some((from, len)) = self.hole {
            let to = from + len;
            if start >= from && start < to {
                start = to;
                end = start.saturating_add(max).min(total);
            } else if start < from && end > from {
                end = from;
            }
        }
        (start, end.max(start))
    }
    fn read(&mut self, offset: u64, len: usize) -> Result<Vec<u8>, ()> {
        Ok(self.data[offset as usize..offset as usize + len].to_vec())
    }
}

/// `read-new-output` of the host: from `cursor`, at most `max` (1 MiB cap).
fn read_new(log: &Log, cursor: &mut u64, max: u64) -> (u64, Vec<u8>, bool) {
    let (start, end) = log.readable(*cursor, max.min(1 << 20));
    *cursor = end;
    let data = log.data[start as usize..end as usize].to_vec();
    (start, data, end == log.data.len() as u64)
}

/// The 0.1.0 bash tool's `read_within` (ended session), then its render:
/// `(text, truncated, capture.total(), left, cursor)`.
fn old_summary(
    log: &Log,
    mut cursor: u64,
    budget: u64,
    max_chars: usize,
) -> (String, bool, u64, u64, u64) {
    const READ_CHUNK: u64 = 1 << 20;
    let mut capture = old::Capture::new();
    let (first_offset, first, mut eof) = read_new(log, &mut cursor, READ_CHUNK);
    let lead = old::leading_continuation_len(&first);
    if lead > 0 && first_offset > 0 {
        let back = first_offset.min(3);
        let (from, to) = log.readable(first_offset - back, back);
        let prev = &log.data[from as usize..to as usize];
        let k = old::incomplete_suffix_len(prev);
        capture.push(&prev[prev.len() - k..]);
    }
    capture.push(&first);
    let end = log.data.len() as u64;
    let stop = end.min(first_offset.saturating_add(budget));
    let mut pos = first_offset + first.len() as u64;
    while pos < stop && !eof {
        let (offset, next, e) = read_new(log, &mut cursor, (stop - pos).min(READ_CHUNK));
        if next.is_empty() {
            eof = e;
            break;
        }
        pos = offset + next.len() as u64;
        eof = e;
        capture.push(&next);
    }
    if !eof {
        capture.hold_back_incomplete_end();
    }
    let (text, truncated) = capture.render(max_chars, "LOG");
    (
        text,
        truncated,
        capture.total(),
        end.saturating_sub(pos),
        cursor,
    )
}

/// The bash tool's text from `parts`: the three marker spellings of
/// `truncate_middle` and `Capture::render`.
fn with_marker(parts: &Parts) -> (String, bool) {
    if parts.omitted_chars == 0 && parts.omitted_bytes == 0 {
        return (parts.head.clone(), false);
    }
    let mut text = parts.head.clone();
    text.push_str("\n\n... [");
    match (parts.omitted_chars, parts.omitted_bytes) {
        (c, 0) => write!(text, "{c} characters omitted").unwrap(),
        (0, b) => write!(text, "{b} bytes omitted").unwrap(),
        (c, b) => write!(text, "{c} characters and {b} bytes omitted").unwrap(),
    }
    text.push_str("; full output: LOG] ...\n\n");
    text.push_str(&parts.tail);
    (text, true)
}

/// Output pieces that exercise every branch of the cleaner.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => "[a-z0-9 ]{1,80}".prop_map(String::into_bytes),
        2 => Just(b"\n".to_vec()),
        1 => Just(b"\r".to_vec()),
        1 => Just(b"\x08".to_vec()),
        1 => Just(b"\t".to_vec()),
        1 => Just(b"\x1b[31m".to_vec()),
        1 => Just(b"\x1b]0;title\x07".to_vec()),
        1 => Just(b"\x1b]unterminated".to_vec()),
        1 => Just(b"\x1b(B".to_vec()),
        1 => Just(b"\x1b".to_vec()),
        1 => Just("é日🦀".as_bytes().to_vec()),
        1 => Just("\u{9b}1m\u{9d}x\u{9c}".as_bytes().to_vec()),
        1 => Just(vec![0xff, 0xfe, 0xc3]),
        1 => Just(vec![0x80, 0xbf]),
        1 => Just(vec![0x00, 0x07, 0x7f, 0x0b]),
        1 => (3_000usize..6_000).prop_map(|n| vec![b'a'; n]),
    ]
}

fn output(max_pieces: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(piece(), 0..max_pieces).prop_map(|v| v.concat())
}

/// `small` repeated until it is about `size` bytes.
fn grow(small: Vec<u8>, size: usize) -> Vec<u8> {
    if small.is_empty() {
        return vec![b'x'; size];
    }
    small.iter().copied().cycle().take(size).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn clean_is_the_character_by_character_cleaner(bytes in output(200)) {
        prop_assert_eq!(toolhost_text::clean(&bytes), old::clean(&bytes));
    }

    #[test]
    fn render_parts_and_the_marker_are_the_old_render(
        bytes in output(60),
        size in prop_oneof![Just(0usize), 1usize..5_000, 520_000usize..540_000, 1_040_000usize..1_600_000],
        chunk in 1usize..300_000,
        max_chars in prop_oneof![Just(29_000usize), 1usize..200],
        hold in any::<bool>(),
    ) {
        let data = if size == 0 { bytes } else { grow(bytes, size) };
        let mut old = old::Capture::new();
        let mut new = toolhost_text::Capture::new();
        for c in data.chunks(chunk) {
            old.push(c);
            new.push(c);
        }
        if hold {
            prop_assert_eq!(old.hold_back_incomplete_end(), new.hold_back_incomplete_end());
        }
        prop_assert_eq!(old.total(), new.total());
        let parts = toolhost_text::render_parts(&new, Budget::Chars(max_chars), TextMode::Terminal);
        prop_assert_eq!(old.render(max_chars, "LOG"), with_marker(&parts));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn summarize_is_the_old_read_and_render(
        bytes in output(60),
        size in prop_oneof![1usize..3_000, 1_040_000usize..1_100_000, 2_000_000usize..3_200_000],
        hole in prop::option::of((0.0f64..1.0, 0.0f64..0.6)),
        cursor in 0.0f64..1.0,
        budget in prop_oneof![Just(u64::MAX), 1u64..3_000_000],
    ) {
        let data = grow(bytes, size);
        let total = data.len() as u64;
        let hole = hole.map(|(at, len)| {
            let at = (at * total as f64) as u64;
            (at, ((len * total as f64) as u64).min(total - at).min(total.saturating_sub(at + 1)))
        }).filter(|&(_, len)| len > 0);
        let mut log = Log { data, hole };
        let cursor = (cursor * total as f64) as u64;
        let (text, truncated, counted, left, new_cursor) = old_summary(&log, cursor, budget, 29_000);
        let request = SummaryRequest {
            budget: Budget::Chars(29_000),
            mode: TextMode::Terminal,
            window: toolhost_text::DEFAULT_WINDOW,
            max_bytes: (budget != u64::MAX).then_some(budget),
        };
        let summary = toolhost_text::summarize(&mut log, cursor, total, true, &request).unwrap();
        prop_assert_eq!(with_marker(&summary.parts), (text, truncated));
        prop_assert_eq!(summary.covered.len - summary.skipped.map_or(0, |s| s.len), counted);
        prop_assert_eq!(summary.unread_bytes, left);
        prop_assert_eq!(summary.cursor, new_cursor);
    }
}

/// The tail's text starts after the first newline within 4 KiB of the tail
/// window: a newline just inside and just outside that reach.
#[test]
fn the_tail_starts_at_a_newline_within_4_kib() {
    let window = toolhost_text::DEFAULT_WINDOW;
    let n = 4 * window;
    for k in [0usize, 1, 3_999, 4_000, 4_095, 4_096, 4_097, 5_000] {
        let mut data = vec![b'x'; n];
        data[n - window + k] = b'\n';
        let mut old = old::Capture::new();
        old.push(&data);
        let mut new = toolhost_text::Capture::new();
        new.push(&data);
        let parts = toolhost_text::render_parts(&new, Budget::Chars(29_000), TextMode::Terminal);
        assert_eq!(
            old.render(29_000, "LOG"),
            with_marker(&parts),
            "newline at {k}"
        );
    }
}
