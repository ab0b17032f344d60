//! Reading a part of a session's output again (`bash_output` with `offset` or
//! `line`, [`crate::args::Range`]): which bytes a line range is, found by
//! counting newlines from the start of the output ([`LineRange`]), and the
//! line that closes such a result ([`range_line`]).

/// Finds the bytes of lines `first ..= first + count - 1` (1: the first line)
/// in a session's output fed to it in order from byte 0 ([`LineRange::feed`]).
/// A line is what ends with `\n`, or the output's unterminated end. Cleaning
/// never adds or removes a newline (`toolhost_text::clean`), so these are the
/// lines the agent reads in a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRange {
    first: u64,
    count: u64,
    /// The number of the line the next byte fed belongs to.
    line: u64,
    /// The last byte fed was not a newline (an unterminated line so far).
    partial: bool,
    start: Option<u64>,
    end: Option<u64>,
}

impl LineRange {
    /// Looks for `count` (at least 1) lines from line `first` (at least 1).
    pub fn new(first: u64, count: u64) -> LineRange {
        let first = first.max(1);
        LineRange {
            first,
            count: count.max(1),
            line: 1,
            partial: false,
            start: (first == 1).then_some(0),
            end: None,
        }
    }

    /// Feeds `data`, the output's bytes from `offset` on (right after what was
    /// fed before). Returns true once the range's end is known (feed no more).
    pub fn feed(&mut self, offset: u64, data: &[u8]) -> bool {
        if self.end.is_some() {
            return true;
        }
        if let Some(last) = data.last() {
            self.partial = *last != b'\n';
        }
        for (i, _) in data.iter().enumerate().filter(|(_, b)| **b == b'\n') {
            self.line += 1;
            let next = offset + i as u64 + 1;
            if self.start.is_none() && self.line == self.first {
                self.start = Some(next);
            }
            if self.line == self.first.saturating_add(self.count) {
                self.end = Some(next);
                return true;
            }
        }
        false
    }

    /// The offset of the first line's first byte, once fed that far.
    pub fn start(&self) -> Option<u64> {
        self.start
    }

    /// The offset just past the last line's newline, once fed that far.
    pub fn end(&self) -> Option<u64> {
        self.end
    }

    /// Lines fed so far: each newline ends one, and an unterminated end is one
    /// more.
    pub fn lines_seen(&self) -> u64 {
        self.line - 1 + u64::from(self.partial)
    }
}

/// The line that closes a range read: which bytes (and lines, when read by
/// lines: the first, and the last when the range's end was found, else the
/// lines run to the end of what was read) of how many it shows, and that the
/// read cursor did not move, e.g. `[bytes 100-220 (lines 3-4) of 5000 bytes of
/// output; a range read leaves the read cursor where it was]`.
pub fn range_line(start: u64, end: u64, lines: Option<(u64, Option<u64>)>, total: u64) -> String {
    let lines = match lines {
        None => String::new(),
        Some((first, Some(last))) if first == last => format!(" (line {first})"),
        Some((first, Some(last))) => format!(" (lines {first}-{last})"),
        Some((first, None)) => format!(" (lines from {first} on)"),
    };
    format!(
        "[bytes {start}-{end}{lines} of {total} bytes of output; a range read leaves the read \
         cursor where it was]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(output: &[u8], first: u64, count: u64, chunk: usize) -> (Option<u64>, Option<u64>) {
        let mut r = LineRange::new(first, count);
        for (i, part) in output.chunks(chunk).enumerate() {
            if r.feed((i * chunk) as u64, part) {
                break;
            }
        }
        (r.start(), r.end())
    }

    #[test]
    fn lines_are_found_whatever_the_chunks() {
        let out = b"one\ntwo\nthree\nfour";
        for chunk in [1, 2, 5, 100] {
            assert_eq!(find(out, 1, 1, chunk), (Some(0), Some(4)), "{chunk}");
            assert_eq!(find(out, 2, 2, chunk), (Some(4), Some(14)), "{chunk}");
            // The unterminated last line: its end is the output's end.
            assert_eq!(find(out, 4, 5, chunk), (Some(14), None), "{chunk}");
            assert_eq!(find(out, 9, 1, chunk), (None, None), "{chunk}");
        }
        let mut r = LineRange::new(9, 1);
        r.feed(0, out);
        assert_eq!(r.lines_seen(), 4);
        let mut r = LineRange::new(9, 1);
        r.feed(0, b"a\nb\n");
        assert_eq!(r.lines_seen(), 2);
    }

    #[test]
    fn the_closing_line_names_bytes_and_lines() {
        assert_eq!(
            range_line(4, 14, Some((2, Some(3))), 18),
            "[bytes 4-14 (lines 2-3) of 18 bytes of output; a range read leaves the read \
             cursor where it was]"
        );
        assert!(range_line(0, 4, Some((1, Some(1))), 4).starts_with("[bytes 0-4 (line 1) of 4 "));
        assert!(
            range_line(14, 18, Some((4, None)), 18).starts_with("[bytes 14-18 (lines from 4 on)")
        );
        assert!(range_line(0, 4, None, 4).starts_with("[bytes 0-4 of 4 bytes of output; "));
    }
}
