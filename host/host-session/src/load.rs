//! Reading an existing `events.jsonl` when a log is opened ([`load`]): every line
//! checked, seqs rising by one, a torn last line cut, a whole last line that does
//! not parse moved to `events.rejected` (a line ending in a newline is not a torn
//! write: its bytes are kept), the newest events kept in memory, and what the log
//! left open noted for [`recover`](crate::recovery::recover). No line is read past
//! [`MAX_LINE_BYTES`].

use std::fs::File;
use std::io::{BufRead, BufReader, Read as _, Seek, SeekFrom, Write as _};
use std::path::Path;

use crate::error::{HostSessionLogError, io_err};
use crate::event::HostEvent;
use crate::memory::{INDEX_STRIDE, Inner};
use crate::record::RecordedEvent;
use crate::recovery::{REJECTED_FILE, Scan};

/// The longest line [`load`] reads: 4 MiB. Every field of an event is capped at
/// [`EVENT_FIELD_MAX`](crate::EVENT_FIELD_MAX) and inline output at
/// [`INLINE_OUTPUT_MAX`](crate::INLINE_OUTPUT_MAX), so no line the host writes
/// comes near it; a longer one is a corrupt log, reported, not held in memory.
pub const MAX_LINE_BYTES: u64 = 4 << 20;

/// An existing log as [`load`] read it.
pub(crate) struct Loaded {
    /// Its newest events in memory, its offset index, the file to append to.
    pub(crate) inner: Inner,
    /// What it left open.
    pub(crate) scan: Scan,
}

/// Reads an existing log: checks it, truncates a torn last line, fills memory
/// and the offset index, and notes what was left open.
pub(crate) fn load(path: &Path, file: &mut File) -> Result<Loaded, HostSessionLogError> {
    file.seek(SeekFrom::Start(0)).map_err(|e| io_err(path, e))?;
    let mut reader = BufReader::new(&*file);
    let mut inner = Inner::empty(None, 0, 1);
    let mut scan = Scan::default();
    let mut offset = 0u64;
    let mut line_no = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| io_err(path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if n as u64 > MAX_LINE_BYTES {
            return Err(HostSessionLogError::Corrupt {
                path: path.to_path_buf(),
                line: line_no,
                message: format!("a line longer than {MAX_LINE_BYTES} bytes"),
            });
        }
        let complete = buf.ends_with(b"\n");
        let parsed = serde_json::from_slice::<HostEvent>(&buf);
        let event = match parsed {
            Ok(event) if complete => event,
            // A whole last line that does not parse was not torn by a crash:
            // keep its bytes, out of the log.
            Err(e) if complete && is_eof(&mut reader) => {
                let rejected = path.with_file_name(REJECTED_FILE);
                reject_line(&rejected, &buf).map_err(|e| io_err(&rejected, e))?;
                tracing::warn!(
                    path = %path.display(),
                    line = line_no,
                    "the last line of the event log is whole but not an event ({e}); moved to {}",
                    rejected.display()
                );
                scan.rejected = Some((offset, n as u64, e.to_string()));
                break;
            }
            // A torn last line: the host died mid-write. Drop it.
            _ if is_eof(&mut reader) => {
                tracing::warn!(path = %path.display(), line = line_no, "dropping a torn last line of the event log");
                scan.torn = Some((offset, n as u64));
                break;
            }
            Ok(_) => unreachable!("a line without newline is the last line"),
            Err(e) => {
                return Err(HostSessionLogError::Corrupt {
                    path: path.to_path_buf(),
                    line: line_no,
                    message: e.to_string(),
                });
            }
        };
        if event.seq != inner.next_seq {
            return Err(HostSessionLogError::Corrupt {
                path: path.to_path_buf(),
                line: line_no,
                message: format!("expected seq {}, found {}", inner.next_seq, event.seq),
            });
        }
        if (event.seq - 1).is_multiple_of(INDEX_STRIDE) {
            inner.index.push(offset);
        }
        scan.note(event.ts_ms, &event.kind);
        offset += n as u64;
        inner.next_seq += 1;
        // Decoded above, so it is one JSON object in UTF-8.
        let text = std::str::from_utf8(buf.trim_ascii()).unwrap_or_default();
        inner.remember(RecordedEvent::whole(event.seq, text.into()));
    }
    drop(reader);
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    if len != offset {
        file.set_len(offset).map_err(|e| io_err(path, e))?;
    }
    inner.file_len = offset;
    inner.file = Some(file.try_clone().map_err(|e| io_err(path, e))?);
    Ok(Loaded { inner, scan })
}

/// Appends `line` to `rejected` (created `0600`) and syncs it, before the log
/// is cut.
fn reject_line(rejected: &Path, line: &[u8]) -> std::io::Result<()> {
    let mut file = toolhost_process::private_open_options()
        .append(true)
        .create(true)
        .open(rejected)?;
    toolhost_process::make_private(&file)?;
    file.write_all(line)?;
    file.sync_all()
}

fn is_eof(reader: &mut BufReader<&File>) -> bool {
    reader.fill_buf().map(|b| b.is_empty()).unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use crate::{EVENTS_FILE, HostSessionLog, HostSessionLogError, hosts_dir};

    #[test]
    fn corrupt_middle_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let d = hosts_dir(dir.path()).join("hs_x");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(EVENTS_FILE),
            "garbage\n{\"seq\":1,\"ts_ms\":1,\"kind\":\"lifecycle\",\"state\":\"running\",\"pid\":1}\n",
        )
        .unwrap();
        assert!(matches!(
            HostSessionLog::open(dir.path(), Some("hs_x")),
            Err(HostSessionLogError::Corrupt { line: 1, .. })
        ));
        assert!(matches!(
            HostSessionLog::open(dir.path(), Some("../x")),
            Err(HostSessionLogError::InvalidId(_))
        ));
    }
}
