//! One session: its shared state, the task that captures its output and waits for its
//! exit, and the terminate (TERM, grace, KILL) sequence.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use nix::sys::signal::Signal;
use tokio::net::unix::pipe;
use tokio::sync::watch;

use super::output::{EventBacklog, OutputBuffer, OutputCapPolicy, OutputLog, OutputOmission};
use super::proc_scan;
use super::process;
use super::tree::Tree;
use crate::sandbox::EffectiveSandbox;
use crate::{
    DetachInfo, EndReason, ExitStatus, HostIoError, IoOperation, KilledBy, OutputChunk,
    OutputStream, SessionEventKind, SessionId, SessionObserver, SessionStatus, Snapshot,
    StartedInfo,
};

/// Size of each read from an output pipe, in bytes.
const READ_BUFFER: usize = 64 * 1024;

pub(crate) struct Session {
    pub(crate) id: SessionId,
    pub(crate) owner: Option<Arc<str>>,
    /// Who the plugin started it for (`None`: no principal; every caller of
    /// the plugin sees it).
    pub(crate) principal: Option<super::caller::Principal>,
    /// The tool call that started it, foreground or background.
    pub(crate) started_by: Option<Arc<str>>,
    pub(crate) command: String,
    pub(crate) tool_call_id: Option<String>,
    pub(crate) output_path: PathBuf,
    pub(crate) started: Instant,
    pub(crate) pid: u32,
    /// The process leads its own group/session: signal the whole group.
    pub(crate) group: bool,
    /// Started with an open stdin pipe.
    pub(crate) stdin_open: bool,
    /// The open stdin pipe and the bytes queued for it ([`write_stdin`]).
    pub(crate) stdin: Mutex<StdinQueue>,
    pub(crate) read_cursor: tokio::sync::Mutex<u64>,
    /// The sandbox the process runs under (`None`: adopted, not confined by the host).
    pub(crate) effective: Option<Arc<EffectiveSandbox>>,
    /// Its one-line summary, as snapshots and the `Started` event show it.
    pub(crate) sandbox: String,
    /// Its whole process tree (`None`: adopted; only its group is known).
    pub(crate) tree: Option<Arc<Tree>>,
    /// How the tree is tracked, as snapshots show it (`Tracker::describe`).
    pub(crate) tracking: String,
    state: Mutex<State>,
    /// Bumped (to the last seq) on every event; subscribers wait on it.
    notify: watch::Sender<u64>,
    /// Flips to true once the `Exited` event is recorded: waiters for the end are
    /// not woken by every output chunk (benchmark P4).
    finished: watch::Sender<bool>,
    observer: Option<Arc<dyn SessionObserver>>,
}

pub(crate) struct State {
    pub(crate) exit: Option<ExitStatus>,
    pub(crate) ended_at: Option<Instant>,
    pub(crate) child_exited: bool,
    pub(crate) detached: bool,
    pub(crate) kill_reason: Option<EndReason>,
    pub(crate) output: OutputBuffer,
    pub(crate) events: EventBacklog,
    pub(crate) log_error: Option<HostIoError>,
}

impl State {
    pub(crate) fn status(&self) -> SessionStatus {
        match &self.exit {
            None => SessionStatus::Running,
            Some(exit) => exit.reason.status(),
        }
    }
}

pub(crate) struct SessionInit {
    pub(crate) id: SessionId,
    pub(crate) owner: Option<Arc<str>>,
    pub(crate) principal: Option<super::caller::Principal>,
    pub(crate) started_by: Option<Arc<str>>,
    pub(crate) command: String,
    pub(crate) tool_call_id: Option<String>,
    pub(crate) output_path: PathBuf,
    pub(crate) pid: u32,
    pub(crate) group: bool,
    pub(crate) stdin: Option<pipe::Sender>,
    pub(crate) stdin_open: bool,
    pub(crate) memory_bytes: usize,
    pub(crate) observer: Option<Arc<dyn SessionObserver>>,
    /// `None` for adopted processes.
    pub(crate) sandbox: Option<Arc<EffectiveSandbox>>,
    /// `None` for adopted processes.
    pub(crate) tree: Option<Arc<Tree>>,
    /// How the tree is tracked (see [`Snapshot::tracking`]).
    pub(crate) tracking: String,
}

/// What a session of an earlier run is restored with ([`Session::restored`]).
pub(crate) struct Restored {
    pub(crate) started: Instant,
    pub(crate) ended: Instant,
    pub(crate) exit: ExitStatus,
    /// The sandbox summary it ran under.
    pub(crate) sandbox: String,
    pub(crate) detached: bool,
    /// Bytes of output its `output.log` spans (its length).
    pub(crate) total: u64,
    /// The middle its capped log dropped.
    pub(crate) omitted: Option<OutputOmission>,
}

impl Session {
    /// Creates the session and records its `Started` event (seq 1).
    pub(crate) fn new(init: SessionInit) -> Arc<Session> {
        let (notify, _) = watch::channel(0);
        let sandbox = init.sandbox.as_ref().map_or_else(
            || super::snapshot::SANDBOX_NONE.to_owned(),
            |e| e.to_string(),
        );
        let session = Arc::new(Session {
            id: init.id,
            owner: init.owner,
            principal: init.principal,
            started_by: init.started_by,
            command: init.command,
            tool_call_id: init.tool_call_id.clone(),
            output_path: init.output_path,
            started: Instant::now(),
            pid: init.pid,
            group: init.group,
            stdin_open: init.stdin_open,
            stdin: Mutex::new(StdinQueue::new(init.stdin)),
            read_cursor: tokio::sync::Mutex::new(0),
            effective: init.sandbox,
            sandbox,
            tree: init.tree,
            tracking: init.tracking,
            state: Mutex::new(State {
                exit: None,
                ended_at: None,
                child_exited: false,
                detached: init.tool_call_id.is_none(),
                kill_reason: None,
                output: OutputBuffer::new(init.memory_bytes),
                events: EventBacklog::new(init.memory_bytes.max(64 * 1024)),
                log_error: None,
            }),
            notify,
            finished: watch::channel(false).0,
            observer: init.observer,
        });
        {
            let mut st = session.lock();
            let started = StartedInfo {
                pid: init.pid,
                sandbox: session.sandbox.clone(),
            };
            session.push_event(&mut st, SessionEventKind::Started(started));
        }
        session
    }

    /// A session an earlier run of the host session started and that ended
    /// (`restore.rs`): registered as ended at once, its output read from
    /// `output.log` as the disk holds it, no observer told. Its events are a
    /// `Started` and an `Exited`.
    pub(crate) fn restored(init: SessionInit, r: Restored) -> Arc<Session> {
        let mut output = OutputBuffer::new(0);
        output.restore(r.total, r.omitted);
        let session = Arc::new(Session {
            id: init.id,
            owner: init.owner,
            principal: init.principal,
            started_by: init.started_by,
            command: init.command,
            tool_call_id: init.tool_call_id,
            output_path: init.output_path,
            started: r.started,
            pid: init.pid,
            group: init.group,
            stdin_open: false,
            stdin: Mutex::new(StdinQueue::new(None)),
            read_cursor: tokio::sync::Mutex::new(0),
            effective: None,
            sandbox: r.sandbox,
            tree: None,
            tracking: init.tracking,
            state: Mutex::new(State {
                exit: Some(r.exit.clone()),
                ended_at: Some(r.ended),
                child_exited: true,
                detached: r.detached,
                kill_reason: None,
                output,
                events: EventBacklog::new(64 * 1024),
                log_error: None,
            }),
            notify: watch::channel(0).0,
            finished: watch::channel(true).0,
            observer: None,
        });
        {
            let mut st = session.lock();
            let started = StartedInfo {
                pid: init.pid,
                sandbox: session.sandbox.clone(),
            };
            session.push_event(&mut st, SessionEventKind::Started(started));
            session.push_event(&mut st, SessionEventKind::Exited(r.exit));
        }
        session
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn elapsed_ms(&self, st: &State) -> u64 {
        let end = st.ended_at.unwrap_or_else(Instant::now);
        end.saturating_duration_since(self.started).as_millis() as u64
    }

    /// Records an event, wakes subscribers, then tells the observer.
    ///
    /// Subscribers are woken first, so their wake-up (another worker thread
    /// being scheduled) overlaps the observer's work, e.g. the host-session log's
    /// write (benchmark P3). The observer still runs under the lock the caller
    /// holds: it sees every session's events in seq order, and a woken subscriber
    /// reads the event only after the observer returned (it takes the same lock),
    /// so what the observer records, and its order, are as before.
    pub(crate) fn push_event(&self, st: &mut State, kind: SessionEventKind) -> u64 {
        let at_ms = self.started.elapsed().as_millis() as u64;
        let event = st.events.push(kind, at_ms);
        let seq = event.seq;
        self.notify.send_replace(seq);
        if let Some(observer) = &self.observer {
            let observed = self.observed();
            observer.on_session_event(&observed, event);
        }
        seq
    }

    /// What an observer is told about this session.
    pub(crate) fn observed(&self) -> crate::ObservedSession<'_> {
        crate::ObservedSession {
            id: &self.id,
            command: &self.command,
            tool_call_id: self.tool_call_id.as_deref(),
            output_path: &self.output_path,
            principal: self.principal.as_ref().map(|p| &*p.name),
            started_by: self.started_by.as_deref(),
        }
    }

    /// Bytes this session keeps in memory, roughly: its command, kept output events,
    /// tail text and bookkeeping (what the bounds on finished sessions count).
    pub(crate) fn retained_bytes(&self) -> usize {
        /// The session's fixed parts: ids, paths, locks, channels.
        const OVERHEAD: usize = 1024;
        let st = self.lock();
        OVERHEAD
            + self.command.len()
            + self.output_path.as_os_str().len()
            + self.tool_call_id.as_ref().map_or(0, String::len)
            + st.events.memory_bytes()
            + st.output.memory_bytes()
    }

    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let st = self.lock();
        let (output_tail, truncated) = st.output.tail_text();
        let sandbox_denial = self.denial(st.exit.as_ref(), &output_tail);
        Snapshot {
            id: self.id.clone(),
            command: self.command.clone(),
            status: st.status(),
            exit: st.exit.clone(),
            pid: Some(self.pid),
            elapsed_ms: self.elapsed_ms(&st),
            output_tail,
            output_bytes: st.output.total(),
            truncated,
            last_seq: st.events.last_seq(),
            detached: st.detached,
            tool_call_id: self.tool_call_id.clone(),
            output_path: self.output_path.clone(),
            sandbox: self.sandbox.clone(),
            sandbox_denial,
            tracking: self.tracking.clone(),
            output_omitted: st.output.omitted().cloned(),
        }
    }

    /// Tells the observer what the capped `output.log` omits (under the lock).
    fn report_omission(&self, omission: &OutputOmission) {
        if let Some(observer) = &self.observer {
            observer.on_output_omitted(&self.observed(), omission);
        }
    }

    /// [`crate::denial_hint`] for a session that exited by itself with a
    /// failure (not killed, not timed out) under an active sandbox.
    fn denial(&self, exit: Option<&ExitStatus>, output_tail: &str) -> Option<String> {
        let exit = exit?;
        if exit.reason != EndReason::Exited {
            return None;
        }
        crate::sandbox::denial_hint(self.effective.as_deref()?, exit.code, output_tail)
    }

    pub(crate) fn detach_info(&self, st: &State, reason: &str) -> DetachInfo {
        DetachInfo {
            id: self.id.clone(),
            reason: reason.to_owned(),
            output_bytes: st.output.total(),
            tool_call_id: self.tool_call_id.clone(),
        }
    }

    /// Resolves once the session has ended.
    pub(crate) async fn ended(&self) {
        let mut rx = self.finished.subscribe();
        loop {
            rx.borrow_and_update();
            if self.lock().exit.is_some() {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Logs and records one chunk. Returns true when the log reached its cap with
    /// this chunk and the policy is to stop the process.
    fn record_output(
        &self,
        log: &mut Option<OutputLog>,
        stream: OutputStream,
        data: Bytes,
    ) -> bool {
        let (write_error, capped) = match log.as_mut().map(|f| f.write_all(&data)) {
            Some(Err(e)) => (Some(e), false),
            Some(Ok(capped)) => (None, capped),
            None => (None, false),
        };
        let mut st = self.lock();
        if let Some(e) = write_error {
            tracing::warn!(session = %self.id, error = %e, "output log write failed; log is incomplete from here");
            let operation = IoOperation::WriteOutputLog {
                at: st.output.total(),
            };
            st.log_error = Some(HostIoError::os(operation, Some(&self.output_path), &e));
            *log = None;
        }
        let offset = st.output.total();
        st.output.push(stream, &data);
        let omission = log.as_ref().and_then(OutputLog::omission);
        let stop = capped
            && omission
                .as_ref()
                .is_some_and(|o| o.policy == OutputCapPolicy::Stop);
        if capped && let Some(o) = &omission {
            self.report_omission(o);
        }
        if omission.is_some() {
            st.output.set_omitted(omission);
        }
        self.push_event(
            &mut st,
            SessionEventKind::Output(OutputChunk {
                stream,
                offset,
                data,
            }),
        );
        stop
    }
}

/// Reads what `pipe` has as one chunk (empty at end-of-file). Cancel-safe.
///
/// The bytes are read straight into a block of [`READ_BUFFER`] bytes that the
/// chunk then shares with the session's tail and events, so a flood costs one
/// copy out of the pipe and one into the log (benchmark P4). A block is taken
/// only once the pipe has data (a silent `sleep` holds none) and is reused for
/// the following reads while it has room; a short chunk from a block that has
/// little left is copied out so it does not pin the block.
async fn read_some(
    pipe: &mut Option<pipe::Receiver>,
    block: &mut BytesMut,
) -> std::io::Result<Bytes> {
    let Some(pipe) = pipe else {
        return std::future::pending().await;
    };
    loop {
        pipe.readable().await?;
        if block.capacity() - block.len() < READ_BUFFER / 4 {
            *block = BytesMut::with_capacity(READ_BUFFER);
        }
        match pipe.try_read_buf(block) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
            Ok(_) => {
                let chunk = block.split();
                return Ok(if chunk.len() < READ_BUFFER / 4 {
                    Bytes::copy_from_slice(&chunk)
                } else {
                    chunk.freeze()
                });
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Called by the session task once its session has ended (the engine counts it
/// among the finished sessions and applies their bounds).
pub(crate) type Retire = Box<dyn FnOnce(&Arc<Session>) + Send>;

/// Durations the session task and the terminate sequence use.
#[derive(Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) drain_grace: Duration,
    pub(crate) kill_grace: Duration,
}

/// The life of a session after spawn: capture stdout and stderr in arrival order,
/// wait for the direct child, enforce the timeout, drain the pipes for at most
/// `drain_grace` after the exit, then record the `Exited` event.
#[allow(clippy::too_many_arguments)] // One call site; each is a distinct part of the run.
pub(crate) async fn run(
    session: Arc<Session>,
    mut child: process::ChildProcess,
    mut stdout: Option<pipe::Receiver>,
    mut stderr: Option<pipe::Receiver>,
    mut log: Option<OutputLog>,
    timeout: Option<Duration>,
    timing: Timing,
    slot: super::ledger::Slot,
    retire: Retire,
) {
    let mut out_buf = BytesMut::new();
    let mut err_buf = BytesMut::new();
    let start = tokio::time::Instant::from_std(session.started);
    let timeout_at = timeout.map(|t| start + t);
    let mut timed_out = false;
    let mut exit: Option<std::io::Result<std::process::ExitStatus>> = None;
    let mut drain_deadline: Option<tokio::time::Instant> = None;
    // While the shell is gone but its tree is not: when to look at the tree again,
    // and the bound on waiting for the leftovers' kill.
    let mut tree_check: Option<tokio::time::Instant> = None;
    let mut leftover_deadline: Option<tokio::time::Instant> = None;
    // The shell has exited (reaped): what the loop knows then, and the end of the
    // drain grace it gives the pipes.
    let exited = |result: std::io::Result<std::process::ExitStatus>| {
        session.lock().child_exited = true;
        let drain_until = tokio::time::Instant::now() + timing.drain_grace;
        (Some(result), Some(drain_until))
    };
    loop {
        if exit.is_none() && stdout.is_none() && stderr.is_none() {
            // The pipes closed: most often the child has just exited.
            if let Ok(Some(status)) = child.try_wait() {
                (exit, drain_deadline) = exited(Ok(status));
            }
        }
        if exit.is_some() && stdout.is_none() && stderr.is_none() {
            if !tree_alive(&session).await {
                break;
            }
            tree_check = Some(tokio::time::Instant::now() + process::SURVIVOR_POLL);
        }
        tokio::select! {
            result = child.wait(), if exit.is_none() => {
                (exit, drain_deadline) = exited(result);
            }
            result = read_some(&mut stdout, &mut out_buf) => match result {
                Ok(chunk) if !chunk.is_empty() => {
                    if session.record_output(&mut log, OutputStream::Stdout, chunk) {
                        stop_for_output_cap(&session, timing);
                    }
                }
                _ => stdout = None,
            },
            result = read_some(&mut stderr, &mut err_buf) => match result {
                Ok(chunk) if !chunk.is_empty() => {
                    if session.record_output(&mut log, OutputStream::Stderr, chunk) {
                        stop_for_output_cap(&session, timing);
                    }
                }
                _ => stderr = None,
            },
            () = sleep_until_opt(timeout_at), if !timed_out && exit.is_none() => {
                timed_out = true;
                let session = session.clone();
                tokio::spawn(async move {
                    terminate(&session, EndReason::TimedOut, None, timing).await;
                });
            }
            () = sleep_until_opt(tree_check) => tree_check = None,
            () = sleep_until_opt(drain_deadline) => {
                drain_deadline = None;
                // The shell exited a drain grace ago: what still runs in its tree
                // is ended, as a terminal's session is on hang-up
                // (docs/processes.md#process-tracking), and the session is not
                // reported as a plain exit.
                let Some(reason) = leftovers(&session).await else {
                    break;
                };
                tracing::debug!(session = %session.id, ?reason, "ending leftover processes");
                let bound = timing.kill_grace + timing.drain_grace + Duration::from_secs(5);
                leftover_deadline = Some(tokio::time::Instant::now() + bound);
                let session = session.clone();
                tokio::spawn(async move {
                    terminate(&session, reason, None, timing).await;
                });
            }
            () = sleep_until_opt(leftover_deadline) => break,
        }
    }
    // A grandchild may still hold the pipes: drop our ends and end the run anyway.
    drop(stdout);
    drop(stderr);
    // The rest of a capped log's middle goes back to the file system.
    let omission = log.take().and_then(OutputLog::finish);
    let exit = {
        let mut st = session.lock();
        if let Some(o) = omission {
            session.report_omission(&o);
            st.output.set_omitted(Some(o));
        }
        let reason = st.kill_reason.clone().unwrap_or(EndReason::Exited);
        let exit = match exit {
            Some(Ok(status)) => ExitStatus::from_std(status, reason),
            Some(Err(e)) => ExitStatus {
                code: None,
                signal: None,
                reason: EndReason::Failed(Box::new(HostIoError::os(
                    IoOperation::WaitProcess,
                    None,
                    &e,
                ))),
            },
            None => ExitStatus {
                code: None,
                signal: None,
                reason: EndReason::Failed(Box::new(HostIoError::bare(
                    IoOperation::SessionTask,
                    None,
                ))),
            },
        };
        st.output.finish();
        st.output.release();
        st.exit = Some(exit.clone());
        st.ended_at = Some(Instant::now());
        // Before anyone can see the exit, so a waiter may start another at once.
        drop(slot);
        session.push_event(&mut st, SessionEventKind::Exited(exit.clone()));
        // A finished session keeps little: the newest output events and the tail text
        // (the bytes stay in output.log).
        st.events.shrink(
            crate::FINISHED_OUTPUT_BYTES,
            super::engine::FINISHED_EVENTS_MAX,
        );
        st.output.compact();
        session.finished.send_replace(true);
        exit
    };
    // Let the tasks the `Exited` event woke run first: woken from this worker,
    // they would otherwise wait for the bookkeeping below (removing the tree's
    // cgroups and the private temp dir, retiring the session), about 0.1 ms on
    // the benchmark machine (benchmark P3).
    tokio::task::yield_now().await;
    // The child's mount namespace, if the session held it, goes now: after the
    // exit was reported, not before it (`Started::mount_ns`).
    child.release_mount_ns();
    // The tree is gone (or its processes were killed and are going): remove its
    // cgroups now; what cannot be removed yet goes when the session is dropped.
    if let Some(tree) = &session.tree {
        tree.release();
    }
    // A kill, a timeout or the exit drops what is still queued for stdin.
    session.stdin_queue().end();
    tracing::debug!(session = %session.id, ?exit, "session ended");
    retire(&session);
}

/// The session's log reached its cap under [`OutputCapPolicy::Stop`]: end its group
/// with reason [`KilledBy::OutputCap`].
fn stop_for_output_cap(session: &Arc<Session>, timing: Timing) {
    let session = session.clone();
    tokio::spawn(async move {
        terminate(
            &session,
            EndReason::Killed(KilledBy::OutputCap),
            None,
            timing,
        )
        .await;
    });
}

/// Signals the session's processes. `signal: None` is the terminate sequence:
/// SIGTERM to every process of the group, wait up to `kill_grace` for them to go,
/// SIGKILL whatever is left, then wait (bounded) for the session to end. With a
/// signal, it is sent once and this returns at once. Returns how many distinct
/// processes were signalled. `reason` becomes the session's end reason unless one
/// was already set (a terminating signal only).
pub(crate) async fn terminate(
    session: &Arc<Session>,
    reason: EndReason,
    signal: Option<Signal>,
    timing: Timing,
) -> u32 {
    let terminating = signal.is_none_or(is_terminating);
    if terminating {
        let mut st = session.lock();
        if st.exit.is_none() && st.kill_reason.is_none() {
            st.kill_reason = Some(reason);
        }
    }
    if let Some(tree) = &session.tree {
        return terminate_tree(session, tree, signal, timing).await;
    }
    let mut seen = HashSet::new();
    // A `/proc` snapshot begun at or after `not_before`, for a group session.
    let table = |not_before: Instant| async move {
        if session.group {
            Some(proc_scan::proc_table_async(not_before).await)
        } else {
            None
        }
    };
    if let Some(sig) = signal {
        if !session.group && session.lock().child_exited {
            return 0;
        }
        let t = table(Instant::now()).await;
        process::signal_processes(session.pid, session.group, sig, &mut seen, t.as_deref());
        return seen.len() as u32;
    }
    if !session.group && session.lock().child_exited {
        return 0;
    }
    // Whom the SIGTERM reaches beyond the leader's group: a snapshot begun after the
    // session started and at most SIGNAL_SCAN_MAX_AGE old, so concurrent kills share
    // one scan instead of each scanning (benchmark P5).
    let sent = Instant::now();
    let recent = sent
        .checked_sub(process::SIGNAL_SCAN_MAX_AGE)
        .map_or(session.started, |t| t.max(session.started));
    let t = table(recent).await;
    process::signal_processes(
        session.pid,
        session.group,
        Signal::SIGTERM,
        &mut seen,
        t.as_deref(),
    );
    let deadline = sent + timing.kill_grace;
    // Only a snapshot begun after the SIGTERM can show the group gone; each later
    // check wants a newer one than the last (concurrent kills share the scans).
    // The first check waits one poll too, so kills sent together share a scan.
    let mut last = sent;
    let mut left = 1;
    while left > 0 && Instant::now() < deadline {
        tokio::time::sleep(process::SURVIVOR_POLL).await;
        let not_before = if last == sent {
            sent
        } else {
            last + Duration::from_nanos(1)
        };
        (left, last) = match table(not_before).await {
            Some(t) => (t.members(session.pid).len(), t.started),
            None if session.lock().child_exited => (0, not_before),
            None => (1, not_before),
        };
    }
    if left > 0 {
        let t = table(last).await;
        process::signal_processes(
            session.pid,
            session.group,
            Signal::SIGKILL,
            &mut seen,
            t.as_deref(),
        );
    }
    let bound = timing.drain_grace + Duration::from_secs(5);
    let _ = tokio::time::timeout(bound, session.ended()).await;
    seen.len() as u32
}

/// A `/proc` snapshot begun at or after `not_before` when `tree` is found by
/// scanning (the subreaper mechanism), else `None` (cgroups list their members).
async fn tree_table(tree: &Tree, not_before: Instant) -> Option<Arc<proc_scan::ProcTable>> {
    if tree.needs_scan() {
        Some(proc_scan::proc_table_async(not_before).await)
    } else {
        None
    }
}

/// True while any process of the session's tree runs (the shell included).
async fn tree_alive(session: &Session) -> bool {
    match &session.tree {
        Some(tree) => {
            let table = tree_table(tree, Instant::now()).await;
            tree.alive(table.as_deref())
        }
        None => false,
    }
}

/// Why the session ends its leftovers, when processes of its tree still run after
/// the shell exited (and no kill or timeout is already ending them).
async fn leftovers(session: &Session) -> Option<EndReason> {
    let tree = session.tree.as_ref()?;
    let table = tree_table(tree, Instant::now()).await;
    let n = tree.members(table.as_deref()).len();
    if n == 0 && !tree.alive(table.as_deref()) {
        return None;
    }
    let (process_limit, refused_forks) = tree.limit_hits().unwrap_or((0, 0));
    Some(EndReason::Killed(KilledBy::Leftovers {
        processes: n,
        refused_forks,
        process_limit,
    }))
}

/// [`terminate`] for a session whose whole tree is tracked: every member is
/// signalled, descendants that left the shell's group included, and the final
/// SIGKILL is `cgroup.kill` where there is one (no fork escapes it).
async fn terminate_tree(
    session: &Arc<Session>,
    tree: &Tree,
    signal: Option<Signal>,
    timing: Timing,
) -> u32 {
    let mut seen: HashSet<u32> = HashSet::new();
    if let Some(sig) = signal {
        let t = tree_table(tree, Instant::now()).await;
        seen.extend(tree.signal(sig, t.as_deref()));
        return seen.len() as u32;
    }
    // Whom the SIGTERM reaches: for scans, a snapshot begun after the session
    // started and at most SIGNAL_SCAN_MAX_AGE old, so concurrent kills share it
    // (benchmark P5); later checks use newer ones.
    let sent = Instant::now();
    let recent = sent
        .checked_sub(process::SIGNAL_SCAN_MAX_AGE)
        .map_or(session.started, |t| t.max(session.started));
    let t = tree_table(tree, recent).await;
    seen.extend(tree.signal(Signal::SIGTERM, t.as_deref()));
    let deadline = sent + timing.kill_grace;
    let mut last = sent;
    let mut alive = true;
    while Instant::now() < deadline {
        tokio::time::sleep(process::SURVIVOR_POLL).await;
        let not_before = last.max(sent) + Duration::from_nanos(1);
        let t = tree_table(tree, not_before).await;
        last = t.as_ref().map_or(not_before, |t| t.started);
        if !tree.alive(t.as_deref()) {
            alive = false;
            break;
        }
    }
    if alive {
        // A few rounds for scans: processes forked between a scan and its kills
        // are found by the next one.
        for _ in 0..8 {
            let t = tree_table(tree, Instant::now()).await;
            let killed = tree.kill(t.as_deref());
            let done = killed.is_empty() || !tree.needs_scan();
            seen.extend(killed);
            if done {
                break;
            }
            tokio::time::sleep(process::SURVIVOR_POLL).await;
        }
    }
    let bound = timing.drain_grace + Duration::from_secs(5);
    let _ = tokio::time::timeout(bound, session.ended()).await;
    seen.len() as u32
}

/// Signals whose default action ends the process.
fn is_terminating(sig: Signal) -> bool {
    !matches!(
        sig,
        Signal::SIGCHLD
            | Signal::SIGCONT
            | Signal::SIGSTOP
            | Signal::SIGTSTP
            | Signal::SIGTTIN
            | Signal::SIGTTOU
            | Signal::SIGURG
            | Signal::SIGWINCH
    )
}

// ---- stdin ---------------------------------------------------------------------

use crate::SessionError;

/// A session's open stdin: the pipe and the bytes accepted for it but not yet written
/// ([`write_stdin`]). One writer task at a time drains the queue into the pipe, in
/// order, while the process reads; the caller never waits for the process.
pub(crate) struct StdinQueue {
    /// The pipe, while it is open and no writer task holds it.
    pipe: Option<pipe::Sender>,
    /// Accepted bytes not yet written, oldest first.
    chunks: VecDeque<Bytes>,
    /// Bytes in `chunks`.
    queued: usize,
    /// Bytes written to the pipe so far.
    written: u64,
    /// A writer task holds the pipe and drains `chunks`.
    writer: bool,
    /// `close_stdin` was called: no more bytes are accepted, and the pipe is closed
    /// once `chunks` is empty.
    closing: bool,
    /// The pipe is gone for good: why (`None` while it is open).
    closed: Option<StdinClosed>,
}

/// Why a session's stdin pipe is closed.
enum StdinClosed {
    /// Started with stdin closed or bytes.
    NeverOpen,
    /// By `close_stdin`.
    Requested,
    /// The session ended.
    Ended,
    /// Writing failed (how, and what was dropped).
    Failed(HostIoError),
}

impl StdinQueue {
    pub(crate) fn new(pipe: Option<pipe::Sender>) -> StdinQueue {
        StdinQueue {
            closed: pipe.is_none().then_some(StdinClosed::NeverOpen),
            pipe,
            chunks: VecDeque::new(),
            queued: 0,
            written: 0,
            writer: false,
            closing: false,
        }
    }

    /// Closes the pipe for good and drops what is queued.
    fn shut(&mut self, why: StdinClosed) {
        self.pipe = None;
        self.chunks.clear();
        self.queued = 0;
        self.closed.get_or_insert(why);
    }

    /// The session ended: what is still queued is never delivered.
    pub(crate) fn end(&mut self) {
        self.shut(StdinClosed::Ended);
    }

    /// Why writing failed: the pipe is closed and the queue dropped.
    fn fail(&mut self, id: &SessionId, e: &std::io::Error) -> HostIoError {
        let operation = IoOperation::WriteStdin {
            session: id.clone(),
            written: self.written,
            dropped: self.queued,
        };
        let why = HostIoError::os(operation, None, e);
        self.shut(StdinClosed::Failed(why.clone()));
        why
    }
}

impl Session {
    pub(crate) fn stdin_queue(&self) -> MutexGuard<'_, StdinQueue> {
        self.stdin.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Accepts `data` for the session's stdin and returns at once: what the pipe takes
/// now is written, the rest is queued (at most `limit` bytes waiting) and written in
/// order by a writer task spawned on `handle` while the process reads. A write that
/// would take the queue past `limit` is refused whole.
///
/// Errors: [`SessionError::InvalidRequest`] when stdin is closed or closing;
/// [`SessionError::ResourceLimit`] past `limit`; [`SessionError::Io`] when the process
/// closed its end (the queue is dropped then).
pub(crate) fn write_stdin(
    session: &Arc<Session>,
    data: &[u8],
    limit: usize,
    handle: &tokio::runtime::Handle,
) -> Result<(), SessionError> {
    let id = &session.id;
    let mut q = session.stdin_queue();
    if let Some(closed) = &q.closed {
        let closed = match closed {
            StdinClosed::Failed(why) => return Err(SessionError::Io(why.clone())),
            StdinClosed::NeverOpen => "it was never open",
            StdinClosed::Requested => "it was already closed",
            StdinClosed::Ended => "the session ended",
        };
        return Err(SessionError::InvalidRequest(format!(
            "stdin of session {id} is closed: {closed}"
        )));
    }
    if q.closing {
        return Err(SessionError::InvalidRequest(format!(
            "stdin of session {id} was already closed (it closes once the {} queued byte(s) are written)",
            q.queued
        )));
    }
    if q.queued + data.len() > limit {
        return Err(SessionError::ResourceLimit(format!(
            "the stdin queue of session {id} holds at most {limit} bytes ({} MiB) that the \
             process has not read yet; {} byte(s) are queued now, so these {} byte(s) were \
             refused whole (none of them was queued); wait until the program reads its input",
            limit >> 20,
            q.queued,
            data.len()
        )));
    }
    let mut rest = data;
    if !q.writer
        && let Some(pipe) = &q.pipe
    {
        match pipe.try_write(rest) {
            Ok(n) => {
                q.written += n as u64;
                rest = &rest[n..];
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(SessionError::Io(q.fail(id, &e))),
        }
    }
    if rest.is_empty() {
        return Ok(());
    }
    q.chunks.push_back(Bytes::copy_from_slice(rest));
    q.queued += rest.len();
    if !q.writer
        && let Some(pipe) = q.pipe.take()
    {
        q.writer = true;
        handle.spawn(drain_stdin(session.clone(), pipe));
    }
    Ok(())
}

/// Size of the pieces [`feed_stdin`] queues (each is freed once written): 64 KiB.
const STDIN_PIECE: usize = 64 * 1024;

/// Gives a session started with [`StdinMode::Bytes`](crate::StdinMode::Bytes) its
/// whole stdin: `bytes` are queued in [`STDIN_PIECE`] pieces (the caller's buffer is
/// freed at once, each piece once it is written) and the pipe is closed after the
/// last; a writer task spawned on `handle` writes them as the process reads. The
/// session's end drops what is left.
pub(crate) fn feed_stdin(session: &Arc<Session>, bytes: Vec<u8>, handle: &tokio::runtime::Handle) {
    let mut q = session.stdin_queue();
    for piece in bytes.chunks(STDIN_PIECE) {
        q.chunks.push_back(Bytes::copy_from_slice(piece));
        q.queued += piece.len();
    }
    drop(bytes);
    q.closing = true;
    if q.queued == 0 {
        q.shut(StdinClosed::Requested);
        return;
    }
    if !q.writer
        && let Some(pipe) = q.pipe.take()
    {
        q.writer = true;
        handle.spawn(drain_stdin(session.clone(), pipe));
    }
}

/// Closes the session's stdin: at once when nothing is queued, otherwise once the
/// writer task has written the queue. Closing twice is fine.
pub(crate) fn close_stdin(session: &Session) {
    let mut q = session.stdin_queue();
    q.closing = true;
    if !q.writer {
        q.shut(StdinClosed::Requested);
    }
}

/// The writer task: writes the queued chunks in order, waiting while the pipe is
/// full, until the queue is empty (then it hands the pipe back, or closes it after
/// `close_stdin`), the pipe fails, or the session ends (a kill, a timeout or the
/// exit; the rest of the queue is dropped).
async fn drain_stdin(session: Arc<Session>, mut pipe: pipe::Sender) {
    use bytes::Buf;
    use tokio::io::AsyncWriteExt;
    loop {
        let chunk = {
            let mut q = session.stdin_queue();
            if q.closed.is_some() {
                q.writer = false;
                return;
            }
            match q.chunks.front() {
                Some(chunk) => chunk.clone(),
                None => {
                    q.writer = false;
                    if q.closing {
                        q.shut(StdinClosed::Requested);
                    } else {
                        q.pipe = Some(pipe);
                    }
                    return;
                }
            }
        };
        let result = tokio::select! {
            r = pipe.write(&chunk) => r,
            () = session.ended() => {
                let mut q = session.stdin_queue();
                q.writer = false;
                q.end();
                return;
            }
        };
        let mut q = session.stdin_queue();
        let result = match result {
            Ok(0) => Err(std::io::ErrorKind::WriteZero.into()),
            other => other,
        };
        match result {
            Ok(n) if q.closed.is_none() => {
                q.written += n as u64;
                q.queued -= n;
                if let Some(front) = q.chunks.front_mut() {
                    front.advance(n);
                    if front.is_empty() {
                        q.chunks.pop_front();
                    }
                }
            }
            Ok(_) => {}
            Err(e) => {
                q.writer = false;
                q.fail(&session.id, &e);
                return;
            }
        }
    }
}
