//! The text pipeline: raw process output bytes to model-facing text.
//!
//! Decoding, terminal cleaning and the head/tail capture are the host's and
//! this plugin's shared crate `toolhost-text` (re-exported here: [`clean`],
//! [`Capture`], [`incomplete_suffix_len`], [`leading_continuation_len`]); what
//! is the bash tool's own is the words: [`Render::render`] puts the marker
//! where the middle went, naming the `bash_output` call that reads it
//! ([`with_marker`]), and [`cap_result`] bounds every result.

use std::fmt::Write as _;

pub use toolhost_text::{
    Budget, Capture, Parts, TextMode, clean, incomplete_suffix_len, leading_continuation_len,
    render_parts,
};

/// The most characters of any tool result's text, markers and status lines
/// included ([`cap_result`] enforces it on every result).
pub const MAX_RESULT_CHARS: usize = 30_000;

/// The most characters of process output the model is shown per result: the
/// result cap less room for the cut marker (which names the log's path), the
/// status line and a hint.
pub const MAX_CHARS: usize = MAX_RESULT_CHARS - 1_000;

/// Raw bytes kept from the start of an output range (see [`Capture`]).
pub const HEAD_BYTES: usize = toolhost_text::DEFAULT_WINDOW;

/// Raw bytes kept from the end of an output range (see [`Capture`]).
pub const TAIL_BYTES: usize = toolhost_text::DEFAULT_WINDOW;

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

/// The byte index of the `n`th character of `s` (`s.len()` past the end).
fn byte_index_of_char(s: &str, n: usize) -> usize {
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

/// Where a capture's bytes lie in a session's output: what the marker names
/// so the agent can read any part of it again through `bash_output` (the
/// host's path of the log is hidden from sandboxed commands, so the marker
/// names the tool, not the path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source<'a> {
    /// The session (`bg_…`).
    pub session_id: &'a str,
    /// Offset in the session's output of the capture's first byte.
    pub start: u64,
    /// Offset just past its last byte.
    pub end: u64,
    /// The bytes of that range the session's capped log dropped, `(from, to)`
    /// (exclusive end), if it dropped any: they cannot be read again.
    pub dropped: Option<(u64, u64)>,
}

/// Bytes the marker's example `bash_output` call asks for (`length`).
pub const EXAMPLE_LENGTH: u64 = 20_000;

/// Lines the marker's example `bash_output` call asks for (`lines`).
pub const EXAMPLE_LINES: u64 = 200;

/// The bash tool's text for a [`Capture`]: its [`Parts`] with the marker
/// between head and tail that says what was left out and how to read it.
pub trait Render {
    /// Renders the capture as model-facing text cut to `max_chars` characters.
    fn render(&self, max_chars: usize, source: &Source<'_>) -> Rendered;
}

impl Render for Capture {
    fn render(&self, max_chars: usize, source: &Source<'_>) -> Rendered {
        let parts = render_parts(self, Budget::Chars(max_chars), TextMode::Terminal);
        with_marker(&parts, source)
    }
}

/// The text of `parts` with the marker between head and tail when anything was
/// left out: `N characters omitted`, `N bytes omitted` or `N characters and M
/// bytes omitted` (the counts contract 0.1.0's bash tool gave; a summary made
/// by the host gives the same parts), then which bytes of the session's output
/// the text covers, which of them the capped log dropped, and the `bash_output`
/// call that reads any range again (by `offset` and `length`, or `line` and
/// `lines`), e.g.
/// `... [10000 characters omitted from bytes 0-40000 of the output; bash_output
/// {"session_id": "bg_…", "offset": 0, "length": 20000} or {"session_id":
/// "bg_…", "line": 1, "lines": 200} reads any range of it] ...`.
pub fn with_marker(parts: &Parts, source: &Source<'_>) -> Rendered {
    if parts.omitted_chars == 0 && parts.omitted_bytes == 0 {
        return Rendered {
            text: parts.head.clone(),
            truncated: false,
        };
    }
    let mut text = String::with_capacity(parts.head.len() + parts.tail.len() + 512);
    text.push_str(&parts.head);
    // A read that begins past a dropped middle has no head: the text starts
    // with the marker.
    text.push_str(if parts.head.is_empty() {
        "... ["
    } else {
        "\n\n... ["
    });
    let _ = match (parts.omitted_chars, parts.omitted_bytes) {
        (c, 0) => write!(text, "{c} characters omitted"),
        (0, b) => write!(text, "{b} bytes omitted"),
        (c, b) => write!(text, "{c} characters and {b} bytes omitted"),
    };
    let Source {
        session_id: id,
        start,
        end,
        dropped,
    } = *source;
    let _ = write!(text, " from bytes {start}-{end} of the output");
    let rest = match dropped {
        Some((from, to)) => {
            let _ = write!(
                text,
                " (bytes {from}-{to} were dropped from the log at its size cap and cannot be read)"
            );
            "reads any other range"
        }
        None => "reads any range of it",
    };
    let _ = write!(
        text,
        "; bash_output {{\"session_id\": \"{id}\", \"offset\": {start}, \"length\": \
         {EXAMPLE_LENGTH}}} or {{\"session_id\": \"{id}\", \"line\": 1, \"lines\": \
         {EXAMPLE_LINES}}} {rest}] ...\n\n"
    );
    text.push_str(&parts.tail);
    Rendered {
        text,
        truncated: true,
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

    /// Session `bg_000000000001`'s bytes `0..end`, nothing dropped.
    fn whole(end: u64) -> Source<'static> {
        Source {
            session_id: "bg_000000000001",
            start: 0,
            end,
            dropped: None,
        }
    }

    /// The marker after the counts for [`whole`]`(end)`.
    fn names(end: u64) -> String {
        format!(
            " from bytes 0-{end} of the output; bash_output {{\"session_id\": \
             \"bg_000000000001\", \"offset\": 0, \"length\": 20000}} or {{\"session_id\": \
             \"bg_000000000001\", \"line\": 1, \"lines\": 200}} reads any range of it] ..."
        )
    }

    /// `text` (plain: cleaning leaves it as it is) cut in the middle to
    /// `max_chars` characters with the marker for [`whole`].
    fn truncate_middle(text: &str, max_chars: usize) -> (String, bool) {
        let mut cap = Capture::new();
        cap.push(text.as_bytes());
        let r = cap.render(max_chars, &whole(text.len() as u64));
        (r.text, r.truncated)
    }

    #[test]
    fn truncates_ascii_in_the_middle() {
        let text: String = (0..40_000)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        let (out, cut) = truncate_middle(&text, 30_000);
        assert!(cut);
        let marker = format!("\n\n... [10000 characters omitted{}\n\n", names(40_000));
        let (head, tail) = out.split_once(&marker).expect("marker present");
        assert_eq!(head, &text[..15_000]);
        assert_eq!(tail, &text[25_000..]);
    }

    #[test]
    fn no_truncation_at_or_below_limit() {
        for n in [0, 1, MAX_CHARS - 1, MAX_CHARS] {
            let text = "x".repeat(n);
            assert_eq!(truncate_middle(&text, MAX_CHARS), (text, false));
        }
        let (out, cut) = truncate_middle(&"x".repeat(MAX_CHARS + 1), MAX_CHARS);
        assert!(cut);
        assert!(out.contains("[1 characters omitted from bytes 0-29001 of the output; "));
        assert_eq!(out.chars().filter(|c| *c == 'x').count(), MAX_CHARS);
    }

    #[test]
    fn truncates_multibyte_text_on_char_boundaries() {
        for ch in ['é', '日', '🦀'] {
            let text: String = std::iter::repeat_n(ch, 30_001)
                .chain(std::iter::repeat_n('z', 3))
                .collect();
            let (out, cut) = truncate_middle(&text, 30_000);
            assert!(cut);
            let marker = format!(
                "\n\n... [4 characters omitted{}\n\n",
                names(text.len() as u64)
            );
            let (head, tail) = out.split_once(&marker).expect("marker");
            assert_eq!(head.chars().count(), 15_000);
            assert!(head.chars().all(|c| c == ch));
            assert_eq!(tail.chars().count(), 15_000);
            assert!(tail.ends_with("zzz"));
            assert_eq!(head.len(), 15_000 * ch.len_utf8());
        }
    }

    #[test]
    fn odd_limits_split_head_and_tail() {
        let (out, _) = truncate_middle("abcdefghij", 5);
        assert_eq!(
            out,
            format!("ab\n\n... [5 characters omitted{}\n\nhij", names(10))
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
        let r = cap.render(MAX_CHARS, &whole(17));
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
        assert_eq!(cap.render(MAX_CHARS, &whole(5)).text, "ab日");
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
        let r = cap.render(MAX_CHARS, &whole(total));
        assert!(r.truncated);
        assert!(r.text.starts_with("0123456789abc"));
        assert!(r.text.ends_with("LAST LINE\n"));
        assert!(r.text.contains(&format!(" bytes omitted{}", names(total))));
        let shown = r.text.chars().count();
        assert!(shown <= MAX_CHARS + 400, "{shown}");
        assert!(shown >= MAX_CHARS, "{shown}");
    }

    #[test]
    fn capture_skip_counts_skipped_bytes() {
        let mut cap = Capture::new();
        cap.push(b"start\n");
        cap.skip(1_000_000);
        cap.push("é\nend\n".as_bytes()[1..].as_ref()); // begins mid-character
        assert_eq!(cap.total(), 6 + 1_000_000 + 6);
        let source = Source {
            session_id: "bg_00000000000a",
            start: 100,
            end: 100 + cap.total(),
            dropped: Some((106, 1_000_106)),
        };
        let r = cap.render(MAX_CHARS, &source);
        assert_eq!(
            r.text,
            "start\n\n\n... [1000002 bytes omitted from bytes 100-1000112 of the output (bytes \
             106-1000106 were dropped from the log at its size cap and cannot be read); \
             bash_output {\"session_id\": \"bg_00000000000a\", \"offset\": 100, \"length\": \
             20000} or {\"session_id\": \"bg_00000000000a\", \"line\": 1, \"lines\": 200} \
             reads any other range] ...\n\nend\n"
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
