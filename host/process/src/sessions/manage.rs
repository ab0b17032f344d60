//! What callers do with a session once it runs: check, wait, list, subscribe,
//! detach, write and close stdin, kill, read output, and end a call's runs or all.

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::engine::is_foreground_run;
use super::ledger::lock_ledger;
use super::session::{self, Session};
use crate::{
    Caller, DetachInfo, EndReason, ExitStatus, HostIoError, IoOperation, KillInfo, KilledBy,
    MAX_READ_BYTES, OutputRange, SessionError, SessionEventKind, SessionId, SessionUsage, Sessions,
    Snapshot, Subscription,
};
#[cfg(doc)]
use crate::{SessionsConfig, StdinMode};

/// How long [`Sessions::shutdown`] waits, after the last session ended, for the
/// ended sessions' bookkeeping: 1 s (it takes well under 1 ms a session).
const SETTLE_MAX: Duration = Duration::from_secs(1);

impl Sessions {
    /// The current state of a session (running or a tombstone within retention).
    ///
    /// Errors: [`SessionError::UnknownSession`] for malformed, unknown, expired or
    /// other plugins' ids.
    pub fn check(&self, caller: &Caller, id: &str) -> Result<Snapshot, SessionError> {
        Ok(self.inner.lookup(caller, id)?.snapshot())
    }

    /// Waits for session `id` to end (its `Exited` event is recorded) and returns how
    /// it ended. Returns at once for a finished session. Cancel-safe; holds no
    /// subscription, so no output is copied to the waiter.
    ///
    /// Errors: [`SessionError::UnknownSession`] (never started, purged, or another
    /// plugin's).
    pub async fn wait(&self, caller: &Caller, id: &str) -> Result<ExitStatus, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        session.ended().await;
        let exit = session.lock().exit.clone();
        exit.ok_or_else(|| SessionError::Io(HostIoError::bare(IoOperation::SessionTask, None)))
    }

    /// Snapshots of the caller's sessions, running and finished (within retention),
    /// oldest first.
    pub fn list(&self, caller: &Caller) -> Vec<Snapshot> {
        self.inner
            .select(|s| caller.sees(s))
            .iter()
            .map(|s| s.snapshot())
            .collect()
    }

    /// What the engine holds for `caller`: its running and finished sessions and the
    /// bytes the finished ones keep in memory ([`Caller::Host`]: everything). Finished
    /// sessions are bounded by [`SessionsConfig::max_finished_sessions`],
    /// [`SessionsConfig::max_finished_per_plugin`],
    /// [`SessionsConfig::max_finished_bytes`] and
    /// [`SessionsConfig::max_finished_bytes_per_plugin`].
    pub fn usage(&self, caller: &Caller) -> SessionUsage {
        let inner = &self.inner;
        let mut reg = inner.registry();
        inner.purge(&mut reg);
        let mine = |owner: &Option<Arc<str>>| match caller.plugin() {
            None => true,
            Some(name) => owner.as_deref() == Some(&**name),
        };
        let (finished, finished_bytes) = reg
            .finished
            .iter()
            .filter(|f| mine(&f.owner))
            .fold((0, 0), |(n, b), f| (n + 1, b + f.bytes));
        let evicted = match caller.plugin() {
            None => reg.evicted,
            Some(name) => reg.evicted_by.get(name).copied().unwrap_or(0),
        };
        drop(reg);
        let ledger = lock_ledger(&inner.ledger);
        let running = match caller.plugin() {
            None => ledger.active,
            Some(name) if inner.privileged(caller) => {
                drop(ledger);
                return SessionUsage {
                    running: self
                        .inner
                        .select(|s| s.owner.as_deref() == Some(&**name) && s.lock().exit.is_none())
                        .len(),
                    finished,
                    finished_bytes,
                    evicted,
                };
            }
            Some(name) => ledger.per_plugin.get(name).copied().unwrap_or(0),
        };
        SessionUsage {
            running,
            finished,
            finished_bytes,
            evicted,
        }
    }

    /// Subscribes to the events with seq `>= from_seq` (0 and 1 both mean all). A
    /// finished session's events are available at once. Dropping the subscription
    /// unsubscribes.
    ///
    /// Errors: [`SessionError::UnknownSession`].
    pub fn subscribe(
        &self,
        caller: &Caller,
        id: &str,
        from_seq: u64,
    ) -> Result<Subscription, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        Ok(Subscription::new(session, from_seq.max(1)))
    }

    /// Turns a foreground run into a background task: records a `Detached` event (so
    /// a waiting subscriber wakes) and the process keeps running. Detaching a session
    /// that is already detached (or was started in the background) returns its info
    /// again without a new event.
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::SessionExited`] once it ended.
    pub fn detach(
        &self,
        caller: &Caller,
        id: &str,
        reason: &str,
    ) -> Result<DetachInfo, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        Self::detach_session(&session, reason)
    }

    fn detach_session(session: &Session, reason: &str) -> Result<DetachInfo, SessionError> {
        let mut st = session.lock();
        if let Some(exit) = &st.exit {
            return Err(SessionError::SessionExited(exit.clone()));
        }
        let info = session.detach_info(&st, reason);
        if !st.detached {
            st.detached = true;
            session.push_event(&mut st, SessionEventKind::Detached(info.clone()));
        }
        Ok(info)
    }

    /// Detaches every running, not yet detached run of tool call `tool_call_id` (host
    /// only) and returns the info of the newest.
    ///
    /// Errors: [`SessionError::InvalidRequest`] when the call has no such run.
    pub fn detach_call(
        &self,
        tool_call_id: &str,
        reason: &str,
    ) -> Result<DetachInfo, SessionError> {
        let runs = self.inner.select(|s| is_foreground_run(s, tool_call_id));
        let mut last = None;
        for session in runs {
            if let Ok(info) = Self::detach_session(&session, reason) {
                last = Some(info);
            }
        }
        last.ok_or_else(|| {
            SessionError::InvalidRequest(format!(
                "tool call `{tool_call_id}` has no running foreground process to detach"
            ))
        })
    }

    /// Most bytes a session's stdin queue holds that the process has not read yet
    /// ([`Sessions::write_stdin`]): 8 MiB.
    pub const STDIN_QUEUE_MAX_BYTES: usize = 8 << 20;

    /// Hands `data` to the stdin pipe of a session started with [`StdinMode::Open`]
    /// (or adopted with a piped stdin) and returns at once, never waiting for the
    /// process to read: what the pipe takes now is written, the rest waits in the
    /// session's stdin queue and a task writes it in order as the process reads. At
    /// most [`Sessions::STDIN_QUEUE_MAX_BYTES`] may wait; a write that would go past
    /// that is refused whole. The session's end (exit, timeout, kill) drops the queue.
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::SessionExited`] once it
    /// ended; [`SessionError::InvalidRequest`] if stdin is not open or was closed;
    /// [`SessionError::ResourceLimit`] when the queue is full (the text says how much
    /// is queued); [`SessionError::Io`] once the process closed its end (the text says
    /// how many bytes were written and how many queued ones were dropped).
    pub async fn write_stdin(
        &self,
        caller: &Caller,
        id: &str,
        data: &[u8],
    ) -> Result<(), SessionError> {
        let session = self.inner.lookup(caller, id)?;
        let exited =
            |session: &Session| session.lock().exit.clone().map(SessionError::SessionExited);
        if let Some(e) = exited(&session) {
            return Err(e);
        }
        if !session.stdin_open {
            return Err(SessionError::InvalidRequest(format!(
                "stdin of session {id} is not open; start it with stdin mode `open` to write to it"
            )));
        }
        let result = session::write_stdin(
            &session,
            data,
            Self::STDIN_QUEUE_MAX_BYTES,
            &self.inner.handle,
        );
        match (result, exited(&session)) {
            (Err(_), Some(e)) => Err(e),
            (result, _) => result,
        }
    }

    /// Closes the stdin pipe (the process reads end-of-file) once the bytes queued by
    /// [`Sessions::write_stdin`] are written; returns at once. Closing twice is fine.
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::SessionExited`];
    /// [`SessionError::InvalidRequest`] if stdin was never open.
    pub async fn close_stdin(&self, caller: &Caller, id: &str) -> Result<(), SessionError> {
        let session = self.inner.lookup(caller, id)?;
        if let Some(exit) = session.lock().exit.clone() {
            return Err(SessionError::SessionExited(exit));
        }
        if !session.stdin_open {
            return Err(SessionError::InvalidRequest(format!(
                "stdin of session {id} is not open (it was started with stdin closed or bytes)"
            )));
        }
        session::close_stdin(&session);
        Ok(())
    }

    /// Signals every process of the session's group. `None`: SIGTERM, up to
    /// `kill_grace`, then SIGKILL to whatever is left, and returns once the session has
    /// ended (bounded). `Some(sig)`: sends `sig` once and returns. `by` is recorded as
    /// [`EndReason::Killed`] (for signals that terminate by default).
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::SessionExited`].
    pub async fn kill(
        &self,
        caller: &Caller,
        id: &str,
        signal: Option<Signal>,
        by: KilledBy,
    ) -> Result<KillInfo, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        if let Some(exit) = session.lock().exit.clone() {
            return Err(SessionError::SessionExited(exit));
        }
        let signalled =
            session::terminate(&session, EndReason::Killed(by), signal, self.inner.timing()).await;
        Ok(KillInfo { signalled })
    }

    /// Reads up to `max_bytes` (capped at [`MAX_READ_BYTES`]) of the combined output
    /// from log offset `offset`: from memory when the range is in the kept head or tail,
    /// otherwise from the log file.
    ///
    /// Errors: [`SessionError::UnknownSession`]; [`SessionError::InvalidRequest`] when
    /// `offset` is past the output so far; [`SessionError::Io`] if the log cannot be read.
    pub async fn read_output(
        &self,
        caller: &Caller,
        id: &str,
        offset: u64,
        max_bytes: u32,
    ) -> Result<OutputRange, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        read_range(&session, offset, max_bytes).await
    }

    /// Like [`Sessions::read_output`] from the session's read cursor (initially 0),
    /// then moves the cursor past the bytes returned. The cursor is per session,
    /// shared by all callers that can see it.
    ///
    /// A cursor inside the middle a capped `output.log` omits (see
    /// [`OutputOmission`](crate::OutputOmission)) is never moved past it silently:
    /// that read returns no bytes at the cursor's offset (`offset` = where the
    /// cursor was, `data` empty, `eof` false, `offset < total_bytes`) and moves the
    /// cursor to the omitted range's end, so the next read returns bytes from there
    /// and the caller counts `next.offset - offset` bytes as passed over, never
    /// served (docs/bash-tool.md#reading-output-once).
    pub async fn read_new_output(
        &self,
        caller: &Caller,
        id: &str,
        max_bytes: u32,
    ) -> Result<OutputRange, SessionError> {
        let session = self.inner.lookup(caller, id)?;
        let mut cursor = session.read_cursor.lock().await;
        let passed_over = {
            let st = session.lock();
            let total = st.output.total();
            let (start, _) = st.output.readable((*cursor).min(total), 1);
            (start > *cursor).then_some((start, total))
        };
        if let Some((start, total_bytes)) = passed_over {
            let at = std::mem::replace(&mut *cursor, start);
            return Ok(OutputRange {
                offset: at,
                data: Vec::new(),
                total_bytes,
                eof: false,
            });
        }
        let range = read_range(&session, *cursor, max_bytes).await?;
        *cursor = range.offset + range.data.len() as u64;
        Ok(range)
    }

    /// True while tool call `tool_call_id` has a foreground run that is running and not
    /// detached.
    pub fn is_running(&self, tool_call_id: &str) -> bool {
        !self
            .inner
            .select(|s| is_foreground_run(s, tool_call_id))
            .is_empty()
    }

    /// Pid of the oldest running, undetached foreground run of `tool_call_id`.
    pub fn pid(&self, tool_call_id: &str) -> Option<u32> {
        self.inner
            .select(|s| is_foreground_run(s, tool_call_id))
            .first()
            .map(|s| s.pid)
    }

    /// `(tool_call_id, session id)` of every running, undetached foreground run,
    /// oldest first.
    pub fn running_calls(&self) -> Vec<(String, SessionId)> {
        self.inner
            .select(|s| {
                s.tool_call_id
                    .as_deref()
                    .is_some_and(|c| is_foreground_run(s, c))
            })
            .iter()
            .filter_map(|s| Some((s.tool_call_id.clone()?, s.id.clone())))
            .collect()
    }

    /// A tool call ended: terminates (SIGTERM, grace, SIGKILL) its foreground runs that
    /// were not detached, reason [`KilledBy::ToolCallEnded`]. Returns how many runs.
    pub async fn end_call(&self, tool_call_id: &str) -> usize {
        let runs = self.inner.select(|s| is_foreground_run(s, tool_call_id));
        self.terminate_all(runs, KilledBy::ToolCallEnded).await
    }

    /// Terminates every running session, reason [`KilledBy::HostShutdown`], waits
    /// (bounded by the grace periods) for them to end, then at most
    /// 1 s (`SETTLE_MAX`) more for every ended session's bookkeeping (its log's last
    /// hole punch, its retirement, its `owner` link and its private temp dir):
    /// for a host about to exit, so it leaves nothing of a session but its output
    /// log (session tasks and blocking-pool work not yet started die with the
    /// runtime). The engine's owner file goes last (`retention::OwnerLock`).
    pub async fn shutdown(&self) {
        let running = self.inner.select(|s| s.lock().exit.is_none());
        self.terminate_all(running, KilledBy::HostShutdown).await;
        let mut unretired = self.inner.unretired.subscribe();
        let settled = async {
            loop {
                // A session that would not die (its count stays) does not hold
                // this up past its own bound.
                let running = self.inner.select(|s| s.lock().exit.is_none()).len();
                if *unretired.borrow_and_update() <= running {
                    return;
                }
                if unretired.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(SETTLE_MAX, settled).await;
        self.inner.owner_lock.release();
    }

    async fn terminate_all(&self, sessions: Vec<Arc<Session>>, by: KilledBy) -> usize {
        let count = sessions.len();
        let timing = self.inner.timing();
        let mut set = tokio::task::JoinSet::new();
        for session in sessions {
            let by = by.clone();
            set.spawn_on(
                async move { session::terminate(&session, EndReason::Killed(by), None, timing).await },
                &self.inner.handle,
            );
        }
        while set.join_next().await.is_some() {}
        count
    }
}

async fn read_range(
    session: &Arc<Session>,
    offset: u64,
    max_bytes: u32,
) -> Result<OutputRange, SessionError> {
    let max = max_bytes.min(MAX_READ_BYTES) as u64;
    let (total, ended, memory, log_error, offset, len) = {
        let st = session.lock();
        let total = st.output.total();
        if offset > total {
            return Err(SessionError::InvalidRequest(format!(
                "offset {offset} is past the end of the output ({total} bytes so far)"
            )));
        }
        // A start in the middle output.log omitted (its cap) moves to the kept tail.
        let (offset, end) = st.output.readable(offset, max);
        let len = (end - offset) as usize;
        (
            total,
            st.exit.is_some(),
            st.output.read(offset, len),
            st.log_error.clone(),
            offset,
            len,
        )
    };
    let data = match memory {
        Some(data) => data,
        None if len == 0 => Vec::new(),
        None => {
            let path = session.output_path.clone();
            let data = tokio::task::spawn_blocking(move || read_at(&path, offset, len))
                .await
                .map_err(|e| {
                    SessionError::Io(HostIoError::other(IoOperation::ReadOutputLog, None, e))
                })?
                .map_err(|e| {
                    SessionError::Io(HostIoError::os(IoOperation::ReadOutputLog, None, &e))
                })?;
            if data.len() < len {
                return Err(SessionError::Io(log_error.unwrap_or_else(|| {
                    HostIoError::bare(IoOperation::OutputLogShort, Some(&session.output_path))
                })));
            }
            data
        }
    };
    Ok(OutputRange {
        offset,
        eof: ended && offset + data.len() as u64 == total,
        data,
        total_bytes: total,
    })
}

fn read_at(path: &std::path::Path, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        let n = file.read_at(&mut buf[filled..], offset + filled as u64)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    buf.truncate(filled);
    Ok(buf)
}
