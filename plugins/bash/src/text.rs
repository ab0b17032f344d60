//! The text pipeline: raw process output bytes to model-facing text.
//!
//! Steps, in order:
//! 1. UTF-8 is decoded lossily (invalid sequences become U+FFFD); a multi-byte
//!    character is never split (see [`incomplete_suffix_len`] and
//!    [`leading_continuation_len`] for stitching reads together).
//! 2. Terminal escape sequences are removed: CSI (`ESC [` / U+009B, colours,
//!    cursor moves, erase), OSC (`ESC ]` / U+009D, window titles, hyperlinks;
//!    ended by BEL, `ESC \` or U+009C), DCS/SOS/PM/APC strings, and two- or
//!    three-character `ESC` sequences (`ESC 7`, `ESC ( B`, ...). An OSC or
//!    string sequence that is still open at a newline is ended there, so a
//!    stray `ESC ]` cannot swallow the rest of the output.
//! 3. Carriage-return redraws are collapsed per line to their final state: the
//!    last non-empty `\r`-separated segment of each line is kept
//!    (`10%\r50%\r100%\n` becomes `100%\n`; `\r\n` is a plain newline; a trailing
//!    `\r` keeps what came before it). Backspace deletes the previous character
//!    of the current segment. Other C0/C1 controls except `\t` and `\n` are
//!    dropped.
//! 4. [`truncate_middle`] cuts the text in the middle to at most
//!    [`MAX_CHARS`] characters with a marker naming the full-output log.

use std::fmt::Write as _;

/// The most characters of any tool result's text, markers and status lines
/// included ([`cap_result`] enforces it on every result).
pub const MAX_RESULT_CHARS: usize = 30_000;

/// The most characters of process output the model is shown per result: the
/// result cap less room for the cut marker (which names the log's path), the
/// status line and a hint.
pub const MAX_CHARS: usize = MAX_RESULT_CHARS - 1_000;

/// Raw bytes kept from the start of an output range (see [`Capture`]).
pub const HEAD_BYTES: usize = 512 * 1024;

/// Raw bytes kept from the end of an output range (see [`Capture`]).
pub const TAIL_BYTES: usize = 512 * 1024;

/// Escape-sequence parser state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// Plain text.
    Ground,
    /// After `ESC`.
    Escape,
    /// After `ESC` and one or more intermediate bytes (0x20-0x2f).
    EscIntermediate,
    /// Inside a CSI sequence, waiting for its final byte (0x40-0x7e).
    Csi,
    /// Inside an OSC, DCS, SOS, PM or APC string, waiting for BEL or ST.
    Str,
    /// Inside a string, just after `ESC` (the `ESC \` string terminator?).
    StrEsc,
}

/// Builds the collapsed text of a stream of characters (step 3).
#[derive(Default)]
struct Lines {
    out: String,
    /// Byte index in `out` where the current line starts.
    line_start: usize,
    /// Byte index in `out` where the current `\r` segment starts;
    /// `out[line_start..seg_start]` is the last non-empty earlier segment.
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
                    // A new non-empty segment replaces the previous one.
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

    /// Keeps the final state of the current line.
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

/// Decodes, strips escape sequences and collapses `\r` redraws (steps 1-3 of
/// the module docs).
pub fn clean(bytes: &[u8]) -> String {
    let decoded = String::from_utf8_lossy(bytes);
    let mut lines = Lines::default();
    let mut state = State::Ground;
    for c in decoded.chars() {
        state = step(state, c, &mut lines);
    }
    lines.finish()
}

/// Feeds one character through the escape-sequence state machine.
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
            // C0 controls inside a CSI sequence are executed (as terminals do).
            c if (c as u32) < 0x20 => {
                lines.push(c);
                State::Csi
            }
            // Anything else aborts the malformed sequence and is kept.
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
            // Not a string terminator: the string ended, a new escape began.
            c => step(State::Escape, c, lines),
        },
    }
}

/// The number of bytes at the end of `bytes` that begin a multi-byte UTF-8
/// character whose remaining bytes are missing (0 to 3). Holding them back
/// keeps a character that straddles two reads from being split.
pub fn incomplete_suffix_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(3) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for the lead
        }
        let need = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return 0, // ASCII or invalid lead: nothing to hold back
        };
        return if back < need { back } else { 0 };
    }
    0
}

/// The number of UTF-8 continuation bytes (0x80-0xbf) at the start of `bytes`,
/// at most 3: the tail of a character whose lead byte came before this range.
pub fn leading_continuation_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| **b & 0xC0 == 0x80)
        .count()
}

/// Cuts a whole tool result to at most [`MAX_RESULT_CHARS`] characters, marker
/// included: the middle goes, with a marker saying how many characters did.
/// Results made within the cap (all of them, by construction) are unchanged;
/// this is the guarantee for every tool.
pub fn cap_result(text: String) -> String {
    let total = text.chars().count();
    if total <= MAX_RESULT_CHARS {
        return text;
    }
    // The marker's length with the largest count it can show.
    let marker =
        |omitted: usize| format!("\n\n... [{omitted} characters of this result omitted] ...\n\n");
    let keep = MAX_RESULT_CHARS - marker(total).chars().count();
    let head_end = byte_index_of_char(&text, keep / 2);
    let tail_start = byte_index_of_char(&text, total - (keep - keep / 2));
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 64);
    out.push_str(&text[..head_end]);
    out.push_str(&marker(total - keep));
    out.push_str(&text[tail_start..]);
    out
}

/// Cuts `text` in the middle to at most `max_chars` characters (plus the
/// marker). `extra_omitted_bytes` counts raw output bytes that were skipped
/// (not held; they stay in the log); when non-zero the marker names both.
///
/// Returns the text and whether anything was omitted.
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

/// The byte index of the `n`th character of `s` (`s.len()` past the end).
fn byte_index_of_char(s: &str, n: usize) -> usize {
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

/// A bounded record of an output byte range: the first [`HEAD_BYTES`], the last
/// [`TAIL_BYTES`], and how many bytes in between were dropped or skipped.
#[derive(Debug, Default)]
pub struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Bytes between `head` and `tail` that are not held.
    gap: u64,
    /// Total bytes the range covers (held, dropped and skipped).
    total: u64,
}

impl Capture {
    /// An empty capture.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes that follow the ones pushed before.
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

    /// Renders the capture as model-facing text cut to `max_chars` characters.
    pub fn render(&self, max_chars: usize, output_path: &str) -> Rendered {
        if self.gap == 0 {
            let mut all = Vec::with_capacity(self.head.len() + self.tail.len());
            all.extend_from_slice(&self.head);
            all.extend_from_slice(&self.tail);
            let (text, truncated) = truncate_middle(&clean(&all), max_chars, output_path, 0);
            return Rendered { text, truncated };
        }
        // The middle was never held: clean both ends separately, cutting them
        // on character (and, where one is near, line) boundaries.
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
        // Bytes between the shown head and tail: read past (a read's cursor
        // moves beyond them) but not held; they stay in the log.
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
        Rendered {
            text,
            truncated: true,
        }
    }
}

/// Output rendered for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The cleaned, possibly truncated text.
    pub text: String,
    /// True when part of the output was omitted.
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_escape_sequences() {
        let cases: &[(&str, &[u8], &str)] = &[
            ("plain", b"hello\n", "hello\n"),
            ("sgr colour", b"\x1b[31mred\x1b[0m ok", "red ok"),
            (
                "sgr 256/rgb",
                b"\x1b[38;5;196mA\x1b[38;2;1;2;3mB\x1b[m",
                "AB",
            ),
            (
                "cursor moves",
                b"a\x1b[2Ab\x1b[10;20Hc\x1b[?25l\x1b[?25hd",
                "abcd",
            ),
            ("erase line", b"x\x1b[2K\x1b[1Gy", "xy"),
            ("osc title bel", b"\x1b]0;my title\x07after", "after"),
            ("osc title st", b"\x1b]2;title\x1b\\after", "after"),
            (
                "osc 8 hyperlink",
                b"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\ text",
                "link text",
            ),
            ("c1 csi", "\u{9b}1mbold".as_bytes(), "bold"),
            ("c1 osc with c1 st", "\u{9d}0;t\u{9c}x".as_bytes(), "x"),
            ("dcs string", b"\x1bPq#0;2;0;0;0\x1b\\done", "done"),
            ("esc charset", b"\x1b(Babc\x1b)0", "abc"),
            ("esc single", b"\x1b7save\x1b8\x1bMx\x1b=", "savex"),
            (
                "unterminated osc ends at newline",
                b"\x1b]0;oops\nnext",
                "\nnext",
            ),
            ("esc before newline", b"a\x1b\nb", "a\nb"),
            ("csi aborted by non-ascii", "\x1b[1é".as_bytes(), "é"),
            ("c0 inside csi executed", b"\x1b[1\n2mX", "\nX"),
            ("bel dropped", b"ding\x07!", "ding!"),
            ("tab kept", b"a\tb", "a\tb"),
            ("other controls dropped", b"a\x00b\x0bc\x0cd\x7fe", "abcde"),
            ("esc esc", b"\x1b\x1b[0mz", "z"),
            ("osc then esc non-st", b"\x1b]0;t\x1b[31mred", "red"),
            ("trailing lone esc", b"abc\x1b", "abc"),
            ("multibyte kept", "日本語 🦀 é".as_bytes(), "日本語 🦀 é"),
        ];
        for (name, input, want) in cases {
            assert_eq!(clean(input), *want, "case {name}");
        }
    }

    #[test]
    fn collapses_carriage_returns() {
        let cases: &[(&str, &str, &str)] = &[
            ("progress", "10%\r50%\r100%\n", "100%\n"),
            ("progress no newline", "10%\r50%\r100%", "100%"),
            ("crlf", "a\r\nb\r\n", "a\nb\n"),
            ("trailing cr", "done\r", "done"),
            ("cr then crlf", "50%\r100%\r\n", "100%\n"),
            ("double cr", "abc\r\rdef", "def"),
            ("shorter redraw wins", "Downloading 10%\rDone\n", "Done\n"),
            ("mixed lines", "a\r1\nb\nc\r2\r3\n", "1\nb\n3\n"),
            ("leading cr", "\rabc", "abc"),
            ("only crs", "\r\r\n", "\n"),
            ("backspace", "ab\u{8}c", "ac"),
            ("spinner", "|\u{8}/\u{8}-\u{8}done", "done"),
            ("backspace at segment start", "ab\r\u{8}c", "c"),
            ("empty lines kept", "\n\n", "\n\n"),
            (
                "progress with erase",
                "\x1b[2K\r 1/3\x1b[2K\r 2/3\x1b[2K\r 3/3\n",
                " 3/3\n",
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(clean(input.as_bytes()), *want, "case {name}");
        }
    }

    #[test]
    fn progress_flood_is_linear_and_collapses() {
        let mut input = String::new();
        for i in 0..200_000 {
            input.push_str(&format!("\x1b[2K\rdownloading {i}/200000"));
        }
        input.push_str("\ndone\n");
        assert_eq!(clean(input.as_bytes()), "downloading 199999/200000\ndone\n");
    }

    #[test]
    fn decodes_invalid_utf8_lossily() {
        let cases: &[(&[u8], &str)] = &[
            (b"a\xffb", "a\u{fffd}b"),
            (b"\xc3", "\u{fffd}"),
            (b"\xe6\x97", "\u{fffd}"),
            (b"ok\xf0\x9f\xa6", "ok\u{fffd}"),
            (b"\xed\xa0\x80", "\u{fffd}\u{fffd}\u{fffd}"), // a surrogate
            (b"\xc3\xa9\x80", "é\u{fffd}"),
        ];
        for (input, want) in cases {
            assert_eq!(clean(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn utf8_boundaries() {
        let cases: &[(&[u8], usize)] = &[
            (b"", 0),
            (b"abc", 0),
            (b"\xc3", 1),
            (b"\xc3\xa9", 0),
            (b"\xe6", 1),
            (b"\xe6\x97", 2),
            (b"\xe6\x97\xa5", 0),
            (b"\xf0\x9f", 2),
            (b"\xf0\x9f\xa6", 3),
            (b"\xf0\x9f\xa6\x80", 0),
            (b"\xff", 0),
            (b"a\x80", 0), // stray continuation: nothing to hold back
        ];
        for (input, want) in cases {
            assert_eq!(incomplete_suffix_len(input), *want, "input {input:?}");
        }
        assert_eq!(leading_continuation_len(b"\xa5abc"), 1);
        assert_eq!(leading_continuation_len(b"\x9f\xa6\x80x"), 3);
        assert_eq!(leading_continuation_len(b"abc"), 0);
        assert_eq!(leading_continuation_len(b""), 0);
    }

    #[test]
    fn truncates_ascii_in_the_middle() {
        let text: String = (0..40_000)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        let (out, cut) = truncate_middle(&text, 30_000, "/s/bg_1/output.log", 0);
        assert!(cut);
        let marker = "\n\n... [10000 characters omitted; full output: /s/bg_1/output.log] ...\n\n";
        let (head, tail) = out.split_once(marker).expect("marker present");
        assert_eq!(head, &text[..15_000]);
        assert_eq!(tail, &text[25_000..]);
    }

    #[test]
    fn no_truncation_at_or_below_limit() {
        for n in [0, 1, MAX_CHARS - 1, MAX_CHARS] {
            let text = "x".repeat(n);
            assert_eq!(truncate_middle(&text, MAX_CHARS, "p", 0), (text, false));
        }
        let (out, cut) = truncate_middle(&"x".repeat(MAX_CHARS + 1), MAX_CHARS, "p", 0);
        assert!(cut);
        assert!(out.contains("[1 characters omitted; full output: p]"));
        assert_eq!(out.chars().filter(|c| *c == 'x').count(), MAX_CHARS);
    }

    #[test]
    fn truncates_multibyte_text_on_char_boundaries() {
        for ch in ['é', '日', '🦀'] {
            let text: String = std::iter::repeat_n(ch, 30_001)
                .chain(std::iter::repeat_n('z', 3))
                .collect();
            let (out, cut) = truncate_middle(&text, 30_000, "log", 0);
            assert!(cut);
            let (head, tail) = out
                .split_once("\n\n... [4 characters omitted; full output: log] ...\n\n")
                .expect("marker");
            assert_eq!(head.chars().count(), 15_000);
            assert!(head.chars().all(|c| c == ch));
            assert_eq!(tail.chars().count(), 15_000);
            assert!(tail.ends_with("zzz"));
            assert_eq!(head.len(), 15_000 * ch.len_utf8());
        }
    }

    #[test]
    fn odd_limits_split_head_and_tail() {
        let (out, _) = truncate_middle("abcdefghij", 5, "p", 0);
        assert_eq!(
            out,
            "ab\n\n... [5 characters omitted; full output: p] ...\n\nhij"
        );
    }

    #[test]
    fn capture_small_output_is_exact() {
        let mut cap = Capture::new();
        cap.push(b"\x1b[32mok\x1b[0m\n");
        cap.push("caf".as_bytes());
        cap.push(&[0xc3]);
        cap.push(&[0xa9]);
        assert_eq!(cap.total(), 17);
        let r = cap.render(MAX_CHARS, "p");
        assert_eq!(r.text, "ok\ncafé");
        assert!(!r.truncated);
    }

    #[test]
    fn capture_holds_back_split_char() {
        let mut cap = Capture::new();
        cap.push("ab日".as_bytes());
        cap.push(&[0xe6, 0x97]);
        assert_eq!(cap.hold_back_incomplete_end(), 2);
        assert_eq!(cap.total(), 5);
        assert_eq!(cap.render(MAX_CHARS, "p").text, "ab日");
    }

    #[test]
    fn capture_huge_output_keeps_head_and_tail() {
        let mut cap = Capture::new();
        let line = b"0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\n";
        let chunk: Vec<u8> = line.iter().copied().cycle().take(64 * 1024 * 73).collect();
        for _ in 0..4 {
            cap.push(&chunk);
        }
        cap.push(b"LAST LINE\n");
        let total = 4 * chunk.len() as u64 + 10;
        assert_eq!(cap.total(), total);
        let r = cap.render(MAX_CHARS, "/log");
        assert!(r.truncated);
        assert!(r.text.starts_with("0123456789abc"));
        assert!(r.text.ends_with("LAST LINE\n"));
        assert!(r.text.contains(" bytes omitted; full output: /log] ..."));
        let shown = r.text.chars().count();
        assert!(shown <= MAX_CHARS + 120, "{shown}");
        assert!(shown >= MAX_CHARS, "{shown}");
    }

    #[test]
    fn capture_skip_counts_skipped_bytes() {
        let mut cap = Capture::new();
        cap.push(b"start\n");
        cap.skip(1_000_000);
        cap.push("é\nend\n".as_bytes()[1..].as_ref()); // begins mid-character
        assert_eq!(cap.total(), 6 + 1_000_000 + 6);
        let r = cap.render(MAX_CHARS, "L");
        assert_eq!(
            r.text,
            "start\n\n\n... [1000002 bytes omitted; full output: L] ...\n\nend\n"
        );
    }

    #[test]
    fn every_result_is_capped_with_a_marker() {
        for n in [0, 1, MAX_RESULT_CHARS - 1, MAX_RESULT_CHARS] {
            let text = "é".repeat(n);
            assert_eq!(cap_result(text.clone()), text);
        }
        for n in [MAX_RESULT_CHARS + 1, 236_136, 1_000_000] {
            let text: String = std::iter::once('<')
                .chain(std::iter::repeat_n('日', n - 2))
                .chain(std::iter::once('>'))
                .collect();
            let out = cap_result(text);
            assert!(out.chars().count() <= MAX_RESULT_CHARS, "{n}");
            assert!(out.chars().count() >= MAX_RESULT_CHARS - 10, "{n}");
            assert!(out.starts_with('<') && out.ends_with('>'), "{n}");
            let (head, rest) = out.split_once("\n\n... [").expect("marker");
            let (count, tail) = rest
                .split_once(" characters of this result omitted] ...\n\n")
                .expect("marker");
            let (head, tail) = (head.chars().count(), tail.chars().count());
            assert_eq!(count.parse::<usize>().unwrap(), n - head - tail, "{n}");
            assert!(head.abs_diff(tail) <= 1, "{n}");
        }
    }
}
