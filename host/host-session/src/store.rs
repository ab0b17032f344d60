//! The file store of a host session's log ([`HostSessionLog`]): where it lives
//! (`<state-dir>/hosts/<id>/events.jsonl`, [`hosts_dir`], [`EVENTS_FILE`]), opening,
//! resuming and locking it, appending under its mutex and replaying from memory or
//! the file.

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::coalesce::{MAX_PENDING, OUTPUT_WINDOW, OutputChunk, Pending};
use crate::error::{HostSessionLogError, io_err};
use crate::event::{HostEvent, HostEventKind, INLINE_OUTPUT_MAX, now_ms};
use crate::load::load;
use crate::memory::{INDEX_STRIDE, Inner, take_memory};
use crate::read::read_range;
use crate::record::{MAX_REPLAY_EVENTS, RecordedEvent, Replay};
use crate::recovery::{Recovery, recover};

/// The file name of the log inside the host session's directory.
pub const EVENTS_FILE: &str = "events.jsonl";

/// The event log of one host session. Thread-safe; appends are serialised.
pub struct HostSessionLog {
    id: String,
    path: Option<PathBuf>,
    /// The file opened for reading (replays read it with `pread`, without the
    /// lock); `None` for an in-memory log.
    reader: Option<File>,
    resumed_from: u64,
    recovery: Recovery,
    inner: Mutex<Inner>,
    notify: watch::Sender<u64>,
}

impl fmt::Debug for HostSessionLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostSessionLog")
            .field("id", &self.id)
            .field("path", &self.path)
            .field("last_seq", &self.last_seq())
            .finish()
    }
}

/// Checks a host session id: `hs_` followed by 1-64 of `[0-9a-z_-]`.
pub fn validate_host_session_id(id: &str) -> Result<(), HostSessionLogError> {
    let rest = id.strip_prefix("hs_").unwrap_or("");
    let ok = !rest.is_empty()
        && rest.len() <= 64
        && rest
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'z' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(HostSessionLogError::InvalidId(id.to_string()))
    }
}

/// `<state_dir>/hosts`: where every host session's directory lives.
pub fn hosts_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("hosts")
}

impl HostSessionLog {
    /// A log kept only in memory (for the one-shot CLI and tests): the same
    /// rules, but events older than the memory window are lost
    /// (`first_retained_seq` rises).
    pub fn in_memory(id: impl Into<String>) -> HostSessionLog {
        HostSessionLog::with_parts(id.into(), None, Inner::empty(None, 0, 1), 0)
    }

    /// Resumes host session `id` (`toolhost serve --host-session ID`): like
    /// [`HostSessionLog::open`], but an id without an event log in the state dir is
    /// an error, not a new host session.
    ///
    /// Errors: [`HostSessionLogError::Unknown`], and those of [`HostSessionLog::open`].
    pub fn resume(state_dir: &Path, id: &str) -> Result<HostSessionLog, HostSessionLogError> {
        validate_host_session_id(id)?;
        let path = hosts_dir(state_dir).join(id).join(EVENTS_FILE);
        if !path.is_file() {
            return Err(HostSessionLogError::Unknown {
                id: id.to_string(),
                path,
            });
        }
        HostSessionLog::open(state_dir, Some(id))
    }

    /// Opens the log of host session `id` under `<state_dir>/hosts/<id>/`,
    /// creating it when new (`id` `None`: a fresh id `hs_<12 hex digits>`).
    ///
    /// Resuming an existing id reads the whole file, checks the seqs rise by
    /// one, cuts a torn last line (a crash mid-write; recorded as an
    /// [`HostEventKind::Omitted`] `event_line`), keeps the newest events in memory
    /// and continues at the next seq. When the previous run did not record
    /// `stopped` or `failed` last, a
    /// [`Lifecycle::Interrupted`](crate::Lifecycle::Interrupted) event is appended.
    /// Every tool call and process session the log left open is then closed: the
    /// old processes are killed ([`toolhost_process::kill_survivors`]) and
    /// each session gets a `process_exited` with status `interrupted`, each call a
    /// `tool_call_failed` whose error starts with `interrupted:` (see
    /// [`HostSessionLog::recovery`]). The log file stays locked (`flock`) while the
    /// log is open.
    ///
    /// Errors: [`HostSessionLogError::InvalidId`], [`HostSessionLogError::Io`],
    /// [`HostSessionLogError::Corrupt`], [`HostSessionLogError::InUse`].
    pub fn open(state_dir: &Path, id: Option<&str>) -> Result<HostSessionLog, HostSessionLogError> {
        let hosts = hosts_dir(state_dir);
        let id = match id {
            Some(id) => {
                validate_host_session_id(id)?;
                id.to_string()
            }
            None => fresh_id(&hosts),
        };
        let dir = hosts.join(&id);
        toolhost_process::create_private_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let path = dir.join(EVENTS_FILE);
        // Never through a link: resuming cuts a torn last line, which would
        // cut (and append to) whatever file a link put here names.
        let mut file = toolhost_process::private_open_options()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|f| toolhost_process::make_private(&f).map(|()| f))
            .map_err(|e| io_err(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(HostSessionLogError::InUse { id, path });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&path, e)),
        }
        let loaded = load(&path, &mut file)?;
        let resumed_from = loaded.inner.next_seq - 1;
        // `file` stays open as the replays' reader (`load` keeps a clone to append).
        let mut log =
            HostSessionLog::with_parts(id, Some((path, file)), loaded.inner, resumed_from);
        log.recovery = recover(loaded.scan, state_dir, resumed_from > 0, |kind| {
            log.append(kind);
        });
        Ok(log)
    }

    /// What resuming found and did (empty for a new or in-memory log).
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// A log of `id` over `inner`, reading replays from `file` (its path and an
    /// open handle), if any.
    fn with_parts(
        id: String,
        file: Option<(PathBuf, File)>,
        inner: Inner,
        resumed_from: u64,
    ) -> HostSessionLog {
        let (notify, _) = watch::channel(inner.next_seq - 1);
        let (path, reader) = file.unzip();
        HostSessionLog {
            id,
            path,
            reader,
            resumed_from,
            recovery: Recovery::default(),
            inner: Mutex::new(inner),
            notify,
        }
    }

    /// The state under the mutex (a panic while it was held leaves it usable: every
    /// change to it is complete before the next can fail).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The host session id (`hs_...`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The `events.jsonl` path (`None` for an in-memory log).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The last seq found on disk when the log was opened (0 for a new log).
    pub fn resumed_from(&self) -> u64 {
        self.resumed_from
    }

    /// The newest seq (0 when empty).
    pub fn last_seq(&self) -> u64 {
        self.lock().next_seq - 1
    }

    /// A receiver whose value is the newest seq; it changes on every append.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// Why the file is not up to date, if it is not: the last write failed
    /// (its events wait in memory, and the next append retries them), or the
    /// file was given up (the log keeps going in memory only). `None` once a
    /// retry wrote everything.
    pub fn write_error(&self) -> Option<String> {
        self.lock().write_error.clone()
    }

    /// Appends an event and returns its seq, after any output still waiting
    /// in a batch ([`HostSessionLog::append_output`]), which gets the seqs
    /// before it. The line is written to the file (one `write` call, with any
    /// lines an earlier failed write left waiting before it) before this
    /// returns. Never fails: a write error is logged and kept in
    /// [`HostSessionLog::write_error`]; the events wait in memory and the next
    /// append writes them first, so once the disk has room again the file
    /// holds every seq in order. Only when the oldest waiting event is about to
    /// leave memory does the log give the file up and go on in memory only.
    pub fn append(&self, kind: HostEventKind) -> u64 {
        let mut inner = self.lock();
        self.flush_pending(&mut inner, |_| true);
        let seq = self.record(&mut inner, kind);
        drop(inner);
        self.notify.send_replace(seq);
        seq
    }

    /// Records output of a process session as `process_output`, coalesced
    /// (`coalesce.rs`): the chunk joins the batch its session has waiting when
    /// it continues it (same stream and call, the next offset, at most
    /// [`INLINE_OUTPUT_MAX`] bytes together), else that batch is recorded and a
    /// new one opened. A batch is recorded when it is full, at its
    /// [`OUTPUT_WINDOW`]'s end ([`HostSessionLog::flush_due`]), before any
    /// other event ([`HostSessionLog::append`]) and when the log is dropped.
    ///
    /// Returns `Some(wait)` when no flush is scheduled yet: the caller must
    /// call [`HostSessionLog::flush_due`] after `wait` (and again after what
    /// that returns), or output can wait until the next event.
    pub fn append_output(&self, chunk: OutputChunk) -> Option<Duration> {
        let now = Instant::now();
        let mut inner = self.lock();
        let mut last = None;
        if chunk.data.len() > INLINE_OUTPUT_MAX {
            self.flush_pending(&mut inner, |_| true);
            last = Some(self.record(&mut inner, Pending::new(chunk, now).into_event()));
        } else {
            let waiting = inner
                .pending
                .iter()
                .position(|p| p.chunk.session_id == chunk.session_id);
            match waiting {
                Some(i) if inner.pending[i].takes(&chunk) => {
                    inner.pending[i].chunk.data.extend_from_slice(&chunk.data);
                    if inner.pending[i].chunk.data.len() == INLINE_OUTPUT_MAX {
                        let full = inner.pending.remove(i);
                        last = Some(self.record(&mut inner, full.into_event()));
                    }
                }
                Some(i) => {
                    let done = inner.pending.remove(i);
                    last = Some(self.record(&mut inner, done.into_event()));
                    inner.pending.push(Pending::new(chunk, now));
                }
                None => {
                    if inner.pending.len() >= MAX_PENDING {
                        let oldest = inner.pending.remove(0);
                        last = Some(self.record(&mut inner, oldest.into_event()));
                    }
                    inner.pending.push(Pending::new(chunk, now));
                }
            }
        }
        let arm = !inner.pending.is_empty() && !inner.flush_armed;
        inner.flush_armed |= arm;
        drop(inner);
        if let Some(seq) = last {
            self.notify.send_replace(seq);
        }
        arm.then_some(OUTPUT_WINDOW)
    }

    /// Records every output batch whose [`OUTPUT_WINDOW`] has ended. Returns
    /// how long until the next one's ends, or `None` when no output waits
    /// (the next [`HostSessionLog::append_output`] then asks for a flush again).
    pub fn flush_due(&self) -> Option<Duration> {
        let now = Instant::now();
        let mut inner = self.lock();
        let last = self.flush_pending(&mut inner, |p| p.due() <= now);
        let next = inner.pending.iter().map(Pending::due).min();
        inner.flush_armed = next.is_some();
        drop(inner);
        if let Some(seq) = last {
            self.notify.send_replace(seq);
        }
        next.map(|due| due.saturating_duration_since(now))
    }

    /// Records every output batch waiting, now.
    pub fn flush_output(&self) {
        let mut inner = self.lock();
        let last = self.flush_pending(&mut inner, |_| true);
        drop(inner);
        if let Some(seq) = last {
            self.notify.send_replace(seq);
        }
    }

    /// Records the waiting output batches `due` picks, oldest first; the last
    /// seq given, if any.
    fn flush_pending(&self, inner: &mut Inner, due: impl Fn(&Pending) -> bool) -> Option<u64> {
        if inner.pending.is_empty() {
            return None;
        }
        let (now, later) = std::mem::take(&mut inner.pending)
            .into_iter()
            .partition::<Vec<_>, _>(|p| due(p));
        inner.pending = later;
        let mut last = None;
        for p in now {
            last = Some(self.record(inner, p.into_event()));
        }
        last
    }

    /// Gives `kind` the next seq, keeps it in memory and writes it (with
    /// what waits before it) to the file.
    fn record(&self, inner: &mut Inner, kind: HostEventKind) -> u64 {
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let event = HostEvent {
            seq,
            ts_ms: now_ms(),
            kind: kind.bounded(),
        };
        let json: Arc<str> = match serde_json::to_string(&event) {
            Ok(json) => json.into(),
            Err(e) => {
                // Every event type serialises; this is a bug, not a runtime state.
                tracing::error!(log = %self.id, "cannot encode event {seq}: {e}");
                format!(r#"{{"seq":{seq},"ts_ms":0,"kind":"unencodable"}}"#).into()
            }
        };
        inner.remember(RecordedEvent::whole(seq, json));
        if inner.file.is_some() {
            self.write_waiting(inner, seq);
        }
        seq
    }

    /// Writes the events from the first one not yet in the file through
    /// `seq`, from memory, in one `write`. On a failure the file is cut back
    /// to its last whole line and the events wait for the next append; when
    /// the first of them has left memory, or the cut fails, the file is given
    /// up (the log goes on in memory only; replay reports what is lost).
    fn write_waiting(&self, inner: &mut Inner, seq: u64) {
        let from = inner.unwritten.as_ref().map_or(seq, |(from, _)| *from);
        let memory_first = inner.memory.front().map_or(seq, |e| e.seq);
        if from < memory_first {
            let message = format!(
                "writing the event log failed and events {from}..{} left memory unwritten: \
                 the log goes on in memory only",
                memory_first - 1
            );
            tracing::error!(log = %self.id, "{message}");
            inner.write_error = Some(message);
            inner.unwritten = None;
            inner.file = None;
            return;
        }
        let mut lines = Vec::new();
        let mut indexed = Vec::new();
        for e in inner.memory.iter().skip((from - memory_first) as usize) {
            if (e.seq - 1).is_multiple_of(INDEX_STRIDE) {
                indexed.push(inner.file_len + lines.len() as u64);
            }
            lines.extend_from_slice(e.json().as_bytes());
            lines.push(b'\n');
        }
        let Some(file) = inner.file.as_mut() else {
            return;
        };
        match file.write_all(&lines) {
            Ok(()) => {
                if let Some((from, _)) = inner.unwritten.take() {
                    tracing::warn!(log = %self.id, "the event log is written again (seqs {from}..{seq})");
                    inner.write_error = None;
                }
                inner.file_len += lines.len() as u64;
                inner.index.extend(indexed);
            }
            Err(e) => {
                let message = format!(
                    "writing the event log failed: {e}; events from seq {from} wait in memory"
                );
                if inner.unwritten.is_none() {
                    tracing::error!(log = %self.id, "{message}");
                }
                // A part of a line may have reached the file: cut it off, so
                // the next write starts on a line of its own.
                if let Err(cut) = file.set_len(inner.file_len) {
                    let message = format!(
                        "{message}; cutting its partial line failed: {cut}: the log goes on in memory only"
                    );
                    tracing::error!(log = %self.id, "{message}");
                    inner.write_error = Some(message);
                    inner.unwritten = None;
                    inner.file = None;
                    return;
                }
                inner.write_error = Some(message.clone());
                inner.unwritten = Some((from, message));
            }
        }
    }

    /// The events with seq greater than `cursor` (at most `max`, capped at
    /// [`MAX_REPLAY_EVENTS`]), from memory or from the file.
    pub fn replay(&self, cursor: u64, max: usize) -> Replay {
        let max = max.clamp(1, MAX_REPLAY_EVENTS);
        let inner = self.lock();
        let snapshot_seq = inner.next_seq - 1;
        let memory_first = inner.memory.front().map_or(inner.next_seq, |e| e.seq);
        let on_disk = self.path.is_some() && inner.file.is_some();
        let first_retained_seq = if on_disk { 1 } else { memory_first };
        let mut events = Vec::new();
        let mut from = cursor + 1;
        if from < memory_first && on_disk {
            let stop = memory_first;
            let start = inner.start_of(from);
            drop(inner);
            if let Some(file) = &self.reader {
                match read_range(file, start, from, stop, max) {
                    Ok((found, end)) => {
                        events = found;
                        self.lock().resume_at = end;
                    }
                    Err(e) => tracing::error!(log = %self.id, "replaying from disk failed: {e}"),
                }
            }
            from = events.last().map_or(from, |e| e.seq + 1);
            let inner = self.lock();
            if events.len() < max && from >= memory_first {
                take_memory(&inner, from, max - events.len(), &mut events);
            }
        } else {
            take_memory(&inner, from.max(memory_first), max, &mut events);
        }
        let contiguous = events
            .first()
            .is_none_or(|e| e.seq == cursor + 1 && cursor + 1 >= first_retained_seq);
        let reaches = events
            .last()
            .map_or(cursor >= snapshot_seq, |e| e.seq >= snapshot_seq);
        Replay {
            first_retained_seq,
            snapshot_seq,
            history_complete: contiguous && reaches,
            events,
        }
    }
}

impl Drop for HostSessionLog {
    /// Output still waiting in a batch is recorded before the log goes.
    fn drop(&mut self) {
        self.flush_output();
    }
}

/// `hs_` + 12 hex digits of the current time in ms, bumped past existing dirs.
fn fresh_id(hosts: &Path) -> String {
    let mut n = now_ms() & 0xffff_ffff_ffff;
    loop {
        let id = format!("hs_{n:012x}");
        if !hosts.join(&id).exists() {
            return id;
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::tests::detached as out;
    use crate::{EVENT_FIELD_MAX, MEMORY_BYTES, OMITTED_KEY};

    #[test]
    fn seqs_have_no_gaps_and_replay_pages_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_test")).unwrap();
        {
            let mut inner = log.lock();
            inner.memory_limit = 10;
        }
        for n in 0..700 {
            assert_eq!(log.append(out(n)), n + 1);
        }
        // From disk (before the memory window), across index strides.
        let r = log.replay(250, 100);
        assert_eq!(r.events.len(), 100);
        assert_eq!(r.events[0].seq, 251);
        assert!(r.events.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        assert!(!r.history_complete);
        assert_eq!(r.snapshot_seq, 700);
        assert_eq!(r.first_retained_seq, 1);
        // Disk then memory in one answer.
        let r = log.replay(685, 1000);
        assert_eq!(r.events.first().unwrap().seq, 686);
        assert_eq!(r.events.last().unwrap().seq, 700);
        assert!(r.history_complete);
        // Whole history by paging.
        let mut cursor = 0;
        loop {
            let r = log.replay(cursor, 333);
            for e in &r.events {
                assert_eq!(e.seq, cursor + 1);
                cursor = e.seq;
            }
            if r.history_complete {
                break;
            }
        }
        assert_eq!(cursor, 700);
        // Up to date: empty and complete.
        let r = log.replay(700, 10);
        assert!(r.events.is_empty() && r.history_complete);
    }

    #[test]
    fn in_memory_log_reports_lost_history() {
        let log = HostSessionLog::in_memory("hs_mem");
        log.lock().memory_limit = 5;
        for n in 0..12 {
            log.append(out(n));
        }
        let r = log.replay(0, 100);
        assert_eq!(r.first_retained_seq, 8);
        assert_eq!(r.events.first().unwrap().seq, 8);
        assert!(!r.history_complete, "seqs 1-7 are lost");
        let r = log.replay(7, 100);
        assert!(r.history_complete);
    }

    /// A call's huge structured result and arguments keep their head in the log,
    /// with the omission recorded in place; memory keeps at most MEMORY_BYTES.
    #[test]
    fn huge_fields_are_cut_and_the_omission_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_big")).unwrap();
        let big = "x".repeat(15 << 20);
        for n in 0..4 {
            log.append(HostEventKind::ToolCallStarted {
                actor: None,
                tool_call_id: format!("tc_{n}"),
                tool: "t".into(),
                arguments: serde_json::json!({ "data": big }),
                source: "api".into(),
            });
            log.append(HostEventKind::ToolCallSettled {
                tool_call_id: format!("tc_{n}"),
                is_error: false,
                text: big.clone(),
                truncated: false,
                structured: Some(serde_json::json!({ "data": big })),
            });
        }
        let file_len = std::fs::metadata(log.path().unwrap()).unwrap().len();
        assert!(file_len < 8 * 4 * EVENT_FIELD_MAX as u64, "{file_len}");
        let r = log.replay(0, 100);
        assert_eq!(r.events.len(), 8);
        for e in &r.events {
            assert!(e.json().len() < 3 * EVENT_FIELD_MAX, "{}", e.json().len());
        }
        match r.events[1].event().unwrap().kind {
            HostEventKind::ToolCallSettled {
                text,
                truncated,
                structured: Some(structured),
                ..
            } => {
                assert!(truncated);
                assert!(text.ends_with(&format!(
                    "[toolhost: {} bytes omitted]",
                    big.len() - EVENT_FIELD_MAX
                )));
                let omitted = &structured[OMITTED_KEY];
                assert_eq!(omitted["bytes"], big.len() + 11);
                assert!(
                    omitted["head"]
                        .as_str()
                        .unwrap()
                        .starts_with("{\"data\":\"xxx")
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(log.lock().memory_bytes <= MEMORY_BYTES);
    }
}
