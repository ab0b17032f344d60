//! Bytes to text as a terminal shows it. Steps, in order:
//!
//! 1. UTF-8 is decoded lossily (invalid sequences become U+FFFD).
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
//!
//! Terminals (ECMA-48, xterm's ctlseqs) are the source of the sequence grammar;
//! what is kept is what a person would see once the output has stopped moving.

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
///
/// Runs of printable ASCII and tabs outside an escape sequence (most of any
/// command's output) are copied whole; the state machine sees only the other
/// characters. The result is the same as feeding every character through it
/// (`tests/oracle.rs` holds the character-by-character version and compares).
pub fn clean(bytes: &[u8]) -> String {
    let decoded = String::from_utf8_lossy(bytes);
    let text: &str = &decoded;
    let raw = text.as_bytes();
    let mut lines = Lines {
        out: String::with_capacity(text.len()),
        ..Lines::default()
    };
    let mut state = State::Ground;
    let mut i = 0;
    while i < raw.len() {
        if state == State::Ground {
            let run = raw[i..]
                .iter()
                .position(|&b| !(b == b'\t' || (0x20..0x7f).contains(&b)))
                .unwrap_or(raw.len() - i);
            if run > 0 {
                lines.out.push_str(&text[i..i + run]);
                i += run;
                continue;
            }
            if raw[i] == b'\n' {
                lines.push('\n');
                i += 1;
                continue;
            }
        }
        let Some(c) = text[i..].chars().next() else {
            break;
        };
        i += c.len_utf8();
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
}
