//! Character boundaries in raw UTF-8 bytes (which may be cut anywhere, and may
//! not be valid UTF-8 at all). Invalid bytes count as one-byte characters;
//! nothing here panics on any input.

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

fn sequence_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
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

/// The largest index `<= index` that does not fall inside a UTF-8 sequence of
/// `bytes`: for valid UTF-8 the start of the character containing `index` (or
/// `index` itself when it is a boundary). `index` past the end returns
/// `bytes.len()`.
pub fn floor_char_boundary(bytes: &[u8], index: usize) -> usize {
    if index >= bytes.len() {
        return bytes.len();
    }
    let mut i = index;
    let lower = index.saturating_sub(3);
    while i > lower && is_continuation(bytes[i]) {
        i -= 1;
    }
    if i < index && !is_continuation(bytes[i]) && sequence_len(bytes[i]) > index - i {
        i
    } else {
        index
    }
}

/// The smallest index `>= index` that does not fall inside a UTF-8 sequence of
/// `bytes` (the end of the character containing `index`, capped at
/// `bytes.len()`).
pub fn ceil_char_boundary(bytes: &[u8], index: usize) -> usize {
    if index >= bytes.len() {
        return bytes.len();
    }
    let floor = floor_char_boundary(bytes, index);
    if floor == index {
        index
    } else {
        (floor + sequence_len(bytes[floor])).min(bytes.len())
    }
}

/// The longest suffix of `s` that is at most `max_bytes` bytes long, starting on a
/// char boundary (so it may be up to 3 bytes shorter than `max_bytes`). Never panics.
pub fn tail_str(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let start = ceil_char_boundary(s.as_bytes(), s.len() - max_bytes);
    s.get(start..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn char_boundary_helpers_at_every_offset() {
        let s = "a\u{e9}\u{20ac}\u{1f600}b"; // 1 + 2 + 3 + 4 + 1 bytes
        let bytes = s.as_bytes();
        let boundaries: Vec<usize> = (0..=s.len()).filter(|&i| s.is_char_boundary(i)).collect();
        for i in 0..=s.len() + 2 {
            let floor = boundaries
                .iter()
                .copied()
                .filter(|&b| b <= i)
                .max()
                .unwrap();
            let ceil = boundaries
                .iter()
                .copied()
                .find(|&b| b >= i)
                .unwrap_or(s.len());
            assert_eq!(floor_char_boundary(bytes, i), floor, "floor at {i}");
            assert_eq!(ceil_char_boundary(bytes, i), ceil, "ceil at {i}");
            // What std cuts valid UTF-8 with agrees.
            assert_eq!(s.floor_char_boundary(i), floor, "std floor at {i}");
            let tail = tail_str(s, i);
            assert!(tail.len() <= i && s.ends_with(tail));
            let start = s.len().saturating_sub(i);
            let expected_start = boundaries.iter().copied().find(|&b| b >= start).unwrap();
            assert_eq!(tail, &s[expected_start..], "tail at {i}");
        }
        let junk = [0x80u8, 0xbf, 0xe2, 0x82, 0xff, 0xf0];
        for i in 0..=junk.len() {
            assert!(floor_char_boundary(&junk, i) <= i);
            assert!(ceil_char_boundary(&junk, i) >= i.min(junk.len()));
        }
    }
}
