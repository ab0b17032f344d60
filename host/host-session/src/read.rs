//! Reading events back from `events.jsonl` for a replay ([`read_range`]): whole
//! pieces of the file with `pread`, each line's framing checked ([`recorded_line`]).

use std::fs::File;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::record::RecordedEvent;

/// Bytes read from the file at a time by [`read_range`]: 64 KiB.
const READ_CHUNK: usize = 64 * 1024;

/// Reads events `from..stop` (at most `max`) from the file, starting at `start` (a seq
/// at or before `from` and the byte offset of its line; see
/// [`Inner::start_of`](crate::memory::Inner::start_of)). The seq comes from each line's
/// position (the file was checked when opened and only this log appends to it); each
/// line is checked by [`recorded_line`]. Reads with `pread` in [`READ_CHUNK`] pieces
/// and checks each piece's UTF-8 once; the events of one piece share one copy of its
/// whole lines (one allocation per piece, benchmark P7). Also returns the seq after the
/// last event read and the byte offset of its line.
pub(crate) fn read_range(
    file: &File,
    start: (u64, u64),
    from: u64,
    stop: u64,
    max: usize,
) -> std::io::Result<(Vec<RecordedEvent>, (u64, u64))> {
    use std::os::unix::fs::FileExt;
    let (mut seq, mut offset) = start;
    let mut out = Vec::with_capacity(max.min(stop.saturating_sub(from) as usize));
    // Bytes from `offset` on: whole lines, then the start of the next.
    let mut buf: Vec<u8> = Vec::with_capacity(2 * READ_CHUNK);
    let mut read_to = offset;
    while seq < stop && out.len() < max {
        let have = buf.len();
        buf.resize(have + READ_CHUNK, 0);
        let n = file.read_at(&mut buf[have..], read_to)?;
        buf.truncate(have + n);
        read_to += n as u64;
        let Some(last) = buf.iter().rposition(|&b| b == b'\n') else {
            if n == 0 {
                break;
            }
            continue;
        };
        let lines = std::str::from_utf8(&buf[..=last])
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        // The lines this page takes from the piece (a range of `lines`, or the
        // text of a line edited by hand, normalised by `recorded_line`), found
        // before they are copied.
        let mut taken: Vec<(u64, Result<std::ops::Range<usize>, String>)> = Vec::new();
        let mut used = 0;
        for line in lines.split_terminator('\n') {
            if seq >= stop || out.len() + taken.len() >= max {
                break;
            }
            if seq >= from {
                let json = recorded_line(line, seq)?;
                taken.push(if json.len() == line.len() {
                    (seq, Ok(used..used + line.len()))
                } else {
                    (seq, Err(json.to_owned()))
                });
            }
            used += line.len() + 1;
            seq += 1;
        }
        let ranges = || taken.iter().filter_map(|(_, r)| r.as_ref().ok());
        let first = ranges().next().map_or(0, |r| r.start);
        let end = ranges().next_back().map_or(0, |r| r.end);
        let shared: Arc<str> = lines.get(first..end).unwrap_or_default().into();
        // Pieces are READ_CHUNK bytes plus one line, far below 4 GiB.
        let at = |i: usize| u32::try_from(i - first).unwrap_or(u32::MAX);
        for (seq, line) in taken {
            out.push(match line {
                Ok(range) => RecordedEvent {
                    seq,
                    text: shared.clone(),
                    range: at(range.start)..at(range.end),
                },
                Err(json) => RecordedEvent::whole(seq, json.into()),
            });
        }
        offset += used as u64;
        buf.drain(..used);
        if n == 0 {
            break;
        }
    }
    Ok((out, (seq, offset)))
}

/// The JSON of the event with seq `seq`, from its line in the file (newline removed). A
/// line as [`HostSessionLog::append`](crate::HostSessionLog::append) writes it (UTF-8,
/// `{"seq":<seq>,` first, `}` last) is taken as it is: the host encoded it, or
/// [`load`](crate::load::load) decoded it when the log was opened. Any other line (a
/// file edited by hand between runs, which [`load`](crate::load::load) accepted) is
/// checked as a whole, as JSON.
///
/// Errors: [`std::io::ErrorKind::InvalidData`] when the line is not one JSON value.
fn recorded_line(text: &str, seq: u64) -> std::io::Result<&str> {
    if framed(text, seq) {
        return Ok(text);
    }
    let raw: &RawValue = serde_json::from_str(text)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(raw.get())
}

/// True when `text` starts with `{"seq":<seq>,` and ends with `}`, as every line
/// [`HostSessionLog::append`](crate::HostSessionLog::append) writes does.
fn framed(text: &str, seq: u64) -> bool {
    let Some(rest) = text.strip_prefix(r#"{"seq":"#) else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest.as_bytes().get(digits) == Some(&b',')
        && rest[..digits].parse::<u64>() == Ok(seq)
        && !rest[..digits].starts_with('0')
        && text.ends_with('}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::tests::detached as out;
    use crate::{EVENTS_FILE, HostSessionLog, hosts_dir};

    /// Replay from the file returns exactly the JSON the log wrote; a line edited
    /// between runs (keys reordered, blanks added: still a valid event) comes back
    /// as JSON too, and a line that is not JSON is an error, not an event.
    #[test]
    fn replay_from_the_file_returns_each_line_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let written: Vec<String> = {
            let log = HostSessionLog::open(dir.path(), Some("hs_lines")).unwrap();
            for n in 0..600 {
                log.append(out(n));
            }
            log.replay(0, 1000)
                .events
                .iter()
                .map(|e| e.json().to_owned())
                .collect()
        };
        let path = hosts_dir(dir.path()).join("hs_lines").join(EVENTS_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, written);
        // Seq 300 with its keys reordered and blanks around it.
        let edited = lines[299].replacen(r#"{"seq":300,"#, r#" { "ts_ms":0, "seq":300,"#, 1);
        let edited = format!("{} ", edited.replacen(r#""ts_ms":"#, r#""x":"#, 1));
        let edited_text: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 299 {
                    format!("{edited}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&path, &edited_text).unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_lines")).unwrap();
        log.lock().memory_limit = 10;
        let start = log.lock().start_of(290);
        assert_eq!(start.0, 257);
        let file = File::open(&path).unwrap();
        let (got, end) = read_range(&file, start, 290, 310, 100).unwrap();
        assert_eq!(end.0, 310);
        let line_310 = edited_text
            .lines()
            .take(309)
            .map(|l| l.len() + 1)
            .sum::<usize>();
        assert_eq!(end.1, line_310 as u64);
        assert_eq!(got.len(), 20);
        assert_eq!(got[10].seq, 300);
        assert_eq!(got[10].json(), edited.trim());
        assert_eq!(got[9].json(), lines[298]);
        assert_eq!(got[11].json(), lines[300]);
        // A line that is neither framed as the log writes it nor JSON is refused.
        let broken: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 299 {
                    "{\"seq\":300 oops\n".to_owned()
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&path, &broken).unwrap();
        let err = read_range(&file, start, 290, 310, 100).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    }
}
