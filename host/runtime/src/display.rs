//! Showing plugin-provided text to a person: one escaping rule for every
//! terminal the host writes to (`toolhost call`, `tools`, `plugin inspect`,
//! the TTY approver, `toolhost attach`).
//!
//! A plugin controls tool names, descriptions, results, the commands it asks
//! to run and their output. Printed raw, an escape sequence (CSI, OSC) in any
//! of them can erase or recolour lines, rewrite the window title, or make a
//! command display as something else; a bidi override can reorder what a
//! person reads. [`escape`] and [`escape_line`] turn every such character into
//! visible text. JSON outputs (`--json`, MCP, the control API) stay exact:
//! JSON already escapes control characters, and programs read them.
//!
//! What is escaped, and how:
//!
//! | characters | shown as |
//! |------------|----------|
//! | C0 controls U+0000–U+001F (ESC included), except `\n` and `\t` in [`escape`] | `\r` for CR, else `\x1b`-style (two hex digits) |
//! | DEL U+007F | `\x7f` |
//! | C1 controls U+0080–U+009F (8-bit CSI U+009B, OSC U+009D, ...) | `\u{9b}` |
//! | bidi controls U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069 | `\u{202e}` |
//! | line and paragraph separators U+2028, U+2029 | `\u{2028}` |
//!
//! A backslash is left as it is, so the escaped form of a character and the
//! same characters typed literally look alike; what matters is that nothing
//! the plugin wrote reaches the terminal as a control.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character (see the module table) escaped, except
/// `\n` and `\t`: for multi-line text whose layout matters (a tool's result, a
/// report, a policy prompt). Borrows when nothing needs escaping.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, true)
}

/// `text` as one line: like [`escape`], but `\n` and `\t` are escaped too
/// (as `\n` and `\t`). For fields a layout puts on one line: tool names,
/// commands in prompts and events, paths.
pub fn escape_line(text: &str) -> Cow<'_, str> {
    escape_with(text, false)
}

/// The most bytes of a name a client sent that an error message repeats
/// ([`echo_name`]): 128.
pub const ECHO_NAME_MAX_BYTES: usize = 128;

/// A name a client sent (a tool or prompt name, a resource URI, a JSON-RPC
/// method, an argument name, a request id) as an error message repeats it:
/// its first [`ECHO_NAME_MAX_BYTES`] bytes (cut at a character boundary),
/// escaped as by [`escape_line`], then, when it was longer, `… (N bytes)`.
/// Error messages reach logs, terminals and other clients' screens, so a name
/// of a megabyte or one holding escape sequences is never repeated as sent.
pub fn echo_name(name: &str) -> String {
    echo_bounded(name, ECHO_NAME_MAX_BYTES)
}

/// The most bytes of a parser's message about a client's input that an
/// error repeats ([`echo_message`]): 512 (serde's messages quote the
/// offending string whole).
pub const ECHO_MESSAGE_MAX_BYTES: usize = 512;

/// A message that may quote a client's input (a JSON parser's, which quotes
/// a wrong string value whole), as an error repeats it: as [`echo_name`],
/// bounded at [`ECHO_MESSAGE_MAX_BYTES`].
pub fn echo_message(message: &str) -> String {
    echo_bounded(message, ECHO_MESSAGE_MAX_BYTES)
}

fn echo_bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return escape_line(text).into_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", escape_line(&text[..end]), text.len())
}

/// Multi-line `text` for a terminal: each line escaped as by [`escape_line`]
/// and every line after the first prefixed with `indent`, so a line break the
/// text carries shows as a line break, but every line stays inside the block
/// its first line starts (a person can tell the block's lines from the host's
/// own). `\r\n` counts as one break.
pub fn escape_block(text: &str, indent: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(indent);
        }
        out.push_str(&escape_line(line.strip_suffix('\r').unwrap_or(line)));
    }
    out
}

/// Whether `c` is shown escaped (`keep_layout`: `\n` and `\t` are not).
fn needs_escape(c: char, keep_layout: bool) -> bool {
    match c {
        '\n' | '\t' => !keep_layout,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

fn escape_with(text: &str, keep_layout: bool) -> Cow<'_, str> {
    let Some(first) = text.find(|c| needs_escape(c, keep_layout)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if !needs_escape(c, keep_layout) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{0}'..='\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            _ => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn echoed_names_are_escaped_and_bounded() {
        assert_eq!(super::echo_name("bash"), "bash");
        assert_eq!(super::echo_name("a\x1b[2Jb\n"), "a\\x1b[2Jb\\n");
        let long = format!("{}é{}", "x".repeat(127), "y".repeat(1 << 20));
        assert_eq!(
            super::echo_name(&long),
            format!("{}… ({} bytes)", "x".repeat(127), long.len())
        );
    }

    use super::*;

    #[test]
    fn table() {
        // (input, escape, escape_line)
        let cases: &[(&str, &str, &str)] = &[
            ("plain text", "plain text", "plain text"),
            ("", "", ""),
            ("a\nb\tc", "a\nb\tc", "a\\nb\\tc"),
            ("\u{1b}[2J\u{1b}[H", "\\x1b[2J\\x1b[H", "\\x1b[2J\\x1b[H"),
            (
                "\u{1b}]0;title\u{7}",
                "\\x1b]0;title\\x07",
                "\\x1b]0;title\\x07",
            ),
            ("a\rb", "a\\rb", "a\\rb"),
            ("nul\u{0}", "nul\\x00", "nul\\x00"),
            ("bs\u{8}", "bs\\x08", "bs\\x08"),
            ("del\u{7f}", "del\\x7f", "del\\x7f"),
            ("csi\u{9b}31m", "csi\\u{9b}31m", "csi\\u{9b}31m"),
            (
                "osc\u{9d}x\u{9c}",
                "osc\\u{9d}x\\u{9c}",
                "osc\\u{9d}x\\u{9c}",
            ),
            ("\u{80}\u{9f}", "\\u{80}\\u{9f}", "\\u{80}\\u{9f}"),
            (
                "rm \u{202e}fdp.exe",
                "rm \\u{202e}fdp.exe",
                "rm \\u{202e}fdp.exe",
            ),
            (
                "\u{202a}\u{202d}",
                "\\u{202a}\\u{202d}",
                "\\u{202a}\\u{202d}",
            ),
            (
                "\u{2066}\u{2067}\u{2068}\u{2069}",
                "\\u{2066}\\u{2067}\\u{2068}\\u{2069}",
                "\\u{2066}\\u{2067}\\u{2068}\\u{2069}",
            ),
            (
                "\u{200e}\u{200f}\u{61c}",
                "\\u{200e}\\u{200f}\\u{61c}",
                "\\u{200e}\\u{200f}\\u{61c}",
            ),
            ("a\u{2028}b", "a\\u{2028}b", "a\\u{2028}b"),
            // Printable non-ASCII stays as it is.
            (
                "café ✓ 日本 \u{a0}",
                "café ✓ 日本 \u{a0}",
                "café ✓ 日本 \u{a0}",
            ),
            ("back\\slash", "back\\slash", "back\\slash"),
        ];
        for (input, multi, line) in cases {
            assert_eq!(escape(input), *multi, "escape({input:?})");
            assert_eq!(escape_line(input), *line, "escape_line({input:?})");
            for out in [escape(input), escape_line(input)] {
                assert!(
                    !out.chars().any(|c| needs_escape(c, true)),
                    "{input:?} -> {out:?} still holds a control"
                );
            }
        }
    }

    #[test]
    fn a_block_keeps_its_lines_inside_it() {
        let cases: &[(&str, &str)] = &[
            ("one line", "one line"),
            ("a\nb", "a\n| b"),
            ("a\r\nb\n", "a\n| b\n| "),
            // A smuggled line stays in the block, its controls escaped.
            (
                "Run `x`?\n  command: ls\u{1b}[2K\rok",
                "Run `x`?\n|   command: ls\\x1b[2K\\rok",
            ),
            ("tab\there", "tab\\there"),
        ];
        for (input, shown) in cases {
            assert_eq!(escape_block(input, "| "), *shown, "{input:?}");
        }
    }

    #[test]
    fn borrows_when_clean() {
        assert!(matches!(escape("no controls\nhere"), Cow::Borrowed(_)));
        assert!(matches!(escape_line("one line"), Cow::Borrowed(_)));
        assert!(matches!(escape_line("two\nlines"), Cow::Owned(_)));
    }
}
