//! What a crashed host left behind, found on resume ([`Scan`], filled by
//! [`load`](crate::load::load)) and closed ([`recover`]): its processes killed, each
//! open call and session recorded as interrupted, as [`Recovery`] reports; and
//! the process sessions earlier runs started, for the session engine to know
//! again (`Recovery::earlier_sessions`).

use std::path::Path;

use crate::event::{HostEventKind, Lifecycle};

/// What [`HostSessionLog::open`](crate::HostSessionLog::open) found and did when it
/// resumed a log whose previous host process had died.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes of a torn last line cut from the file (0: none).
    pub torn_bytes: u64,
    /// Tool calls the log left open, now recorded as failed with `interrupted`.
    pub interrupted_calls: Vec<String>,
    /// Process sessions the log left open, now recorded as exited with status
    /// `interrupted`.
    pub interrupted_sessions: Vec<String>,
    /// Pids of the previous run's processes killed (SIGKILL) on resume.
    pub killed: Vec<u32>,
    /// Pids of them still alive when the wait ended (normally none).
    pub survived: Vec<u32>,
    /// The highest tool-call number in the log of an id the host mints
    /// ([`tool_call_number`](crate::tool_call_number); 0: none); new ids continue
    /// above it.
    pub last_tool_call: u64,
    /// The highest permission-request number in the log of an id the host
    /// mints ([`permission_request_number`](crate::permission_request_number);
    /// 0: none); new requests continue above it.
    pub last_permission_request: u64,
    /// The process sessions the earlier runs of a resumed log started and did
    /// not evict, oldest first, at most [`EARLIER_SESSIONS_MAX`] (the newest):
    /// each with its command, owner, start, end (the ones left open recorded
    /// as `interrupted` just now) and the middle its capped log dropped, for
    /// `toolhost_process::Sessions::restore`. Empty for a new log.
    pub earlier_sessions: Vec<toolhost_process::RestoredSession>,
}

/// Most sessions of earlier runs a resumed log gives back
/// ([`Recovery::earlier_sessions`]): the newest 256, the host's bound on
/// finished sessions kept in memory.
pub const EARLIER_SESSIONS_MAX: usize = 256;

/// Records what a crash left behind, as
/// [`HostSessionLog::open`](crate::HostSessionLog::open) says, through `append` (the
/// log's own append): the cut torn line, and for a log `resumed` whose previous run did
/// not end in order or left calls or sessions open, the previous run's processes
/// killed, [`Lifecycle::Interrupted`], and each open session and call closed. Returns
/// what it found and did.
pub(crate) fn recover(
    scan: Scan,
    state_dir: &Path,
    resumed: bool,
    mut append: impl FnMut(HostEventKind),
) -> Recovery {
    let pid = std::process::id();
    let mut recovery = Recovery {
        torn_bytes: scan.torn.map_or(0, |(_, len)| len),
        last_tool_call: scan.last_tool_call,
        last_permission_request: scan.last_permission_request,
        ..Recovery::default()
    };
    if let Some(last) = &scan.last_session {
        toolhost_process::SessionId::reserve_through(last);
    }
    let mut earlier = scan.earlier;
    if resumed {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        // What the restart records for each session left open (below).
        for id in scan.open_sessions.keys() {
            if let Some(s) = earlier.get_mut(id) {
                s.end = Some(toolhost_process::RecordedEnd {
                    status: "interrupted".into(),
                    code: None,
                    signal: None,
                    summary: INTERRUPTED_SUMMARY.into(),
                });
                s.ended_ms = Some(now_ms);
            }
        }
        recovery.earlier_sessions = earlier.into_values().collect();
    }
    if let Some((offset, len)) = scan.torn {
        append(HostEventKind::Omitted {
            what: "event_line".into(),
            offset: Some(offset),
            len: Some(len),
            session_id: None,
            tool_call_id: None,
            reason: format!(
                "the last line of the event log was torn ({len} bytes at byte {offset}, \
                 written when the previous host process died); it was cut, and seqs \
                 continue from the last whole event"
            ),
        });
    }
    if let Some((offset, len, error)) = &scan.rejected {
        append(HostEventKind::Omitted {
            what: "event_line".into(),
            offset: Some(*offset),
            len: Some(*len),
            session_id: None,
            tool_call_id: None,
            reason: format!(
                "the last line of the event log ({len} bytes at byte {offset}) ends in a \
                 newline but is not an event ({error}); it was moved, as it was, to \
                 {}, and seqs continue from the last event",
                REJECTED_FILE
            ),
        });
    }
    let orderly = matches!(
        scan.last_lifecycle,
        Some(Lifecycle::Stopped | Lifecycle::Failed | Lifecycle::Interrupted)
    );
    let open = !scan.open_sessions.is_empty() || !scan.open_calls.is_empty();
    if !(resumed && (!orderly || open)) {
        return recovery;
    }
    let survivors: Vec<toolhost_process::Survivor> = scan
        .open_sessions
        .iter()
        .map(|(id, s)| toolhost_process::Survivor {
            pid: s.pid,
            start_time: s.start_time,
            tmp_dir: state_dir.join("sessions").join(id).join("tmp"),
        })
        .collect();
    let killed = toolhost_process::kill_survivors(&survivors, std::time::Duration::from_secs(5));
    recovery.killed = killed.killed;
    recovery.survived = killed.remaining;
    if !orderly {
        let mut message = "the previous host process ended without recording stopped".to_string();
        if !scan.open_sessions.is_empty() || !scan.open_calls.is_empty() {
            message.push_str(&format!(
                "; {} tool calls and {} process sessions were left open: they are \
                 recorded as interrupted, and {} processes of them were killed",
                scan.open_calls.len(),
                scan.open_sessions.len(),
                recovery.killed.len()
            ));
        }
        if !recovery.survived.is_empty() {
            message.push_str(&format!(
                "; still alive after 5 s: pids {:?}",
                recovery.survived
            ));
        }
        append(HostEventKind::Lifecycle {
            state: Lifecycle::Interrupted,
            pid,
            message: Some(message),
        });
    }
    for (session_id, s) in &scan.open_sessions {
        append(HostEventKind::ProcessExited {
            session_id: session_id.clone(),
            tool_call_id: s.tool_call_id.clone(),
            status: "interrupted".into(),
            code: None,
            signal: None,
            summary: INTERRUPTED_SUMMARY.into(),
        });
        recovery.interrupted_sessions.push(session_id.clone());
    }
    for tool_call_id in &scan.open_calls {
        append(HostEventKind::ToolCallFailed {
            tool_call_id: tool_call_id.clone(),
            error: "interrupted: the host process ended before the call settled".into(),
            cancelled: false,
        });
        recovery.interrupted_calls.push(tool_call_id.clone());
    }
    recovery
}

/// The `process_exited` summary of a session a resume closes.
const INTERRUPTED_SUMMARY: &str = "interrupted: the host process ended while it ran; its \
                                   processes were killed when the host session was resumed";

/// A process session a log started and did not record as exited.
struct OpenSession {
    /// Pid of its shell.
    pid: u32,
    /// The shell's start time (`HostEventKind::ProcessStarted::start_time`).
    start_time: Option<u64>,
    /// The tool call it ran for, if any.
    tool_call_id: Option<String>,
}

/// The file beside `events.jsonl` that a whole but unparsable last line is
/// moved to by [`load`](crate::load::load), appended to, mode `0600`.
pub const REJECTED_FILE: &str = "events.rejected";

/// What [`load`](crate::load::load) learnt from the events on disk.
#[derive(Default)]
pub(crate) struct Scan {
    /// The last lifecycle state recorded.
    last_lifecycle: Option<Lifecycle>,
    /// `(byte offset, length)` of a torn last line that was cut.
    pub(crate) torn: Option<(u64, u64)>,
    /// `(byte offset, length, parse error)` of a whole last line that was not
    /// an event, moved to `events.rejected`.
    pub(crate) rejected: Option<(u64, u64, String)>,
    /// Tool calls started and not settled or failed, in start order.
    open_calls: Vec<String>,
    /// Process sessions started and not exited, by id.
    open_sessions: std::collections::BTreeMap<String, OpenSession>,
    /// The highest `tc_<hex>` number seen (0: none).
    last_tool_call: u64,
    /// The highest `perm_<hex>` number seen (0: none).
    last_permission_request: u64,
    /// The highest session id seen.
    last_session: Option<toolhost_process::SessionId>,
    /// Every process session started and not evicted, by id (ids grow with
    /// time, so the first is the oldest), at most [`EARLIER_SESSIONS_MAX`].
    earlier: std::collections::BTreeMap<String, toolhost_process::RestoredSession>,
}

impl Scan {
    /// Notes what one event of the file, recorded at `ts_ms`, opens or closes.
    pub(crate) fn note(&mut self, ts_ms: u64, kind: &HostEventKind) {
        self.note_session(ts_ms, kind);
        if let Some(n) = kind.tool_call_id().and_then(crate::event::tool_call_number) {
            self.last_tool_call = self.last_tool_call.max(n);
        }
        if let HostEventKind::PermissionRequested { request_id, .. }
        | HostEventKind::PermissionResolved { request_id, .. } = kind
            && let Some(n) = crate::event::permission_request_number(request_id)
        {
            self.last_permission_request = self.last_permission_request.max(n);
        }
        match kind {
            HostEventKind::Lifecycle { state, .. } => self.last_lifecycle = Some(*state),
            HostEventKind::ToolCallStarted { tool_call_id, .. } => {
                self.open_calls.push(tool_call_id.clone());
            }
            HostEventKind::ToolCallSettled { tool_call_id, .. }
            | HostEventKind::ToolCallFailed { tool_call_id, .. } => {
                self.open_calls.retain(|c| c != tool_call_id);
            }
            HostEventKind::ProcessStarted {
                session_id,
                tool_call_id,
                pid,
                start_time,
                ..
            } => {
                if let Ok(id) = toolhost_process::SessionId::parse(session_id)
                    && self.last_session.as_ref().is_none_or(|last| id > *last)
                {
                    self.last_session = Some(id);
                }
                self.open_sessions.insert(
                    session_id.clone(),
                    OpenSession {
                        pid: *pid,
                        start_time: *start_time,
                        tool_call_id: tool_call_id.clone(),
                    },
                );
            }
            HostEventKind::ProcessExited { session_id, .. } => {
                self.open_sessions.remove(session_id);
            }
            _ => {}
        }
    }

    /// Keeps what [`Recovery::earlier_sessions`] says of the session `kind`
    /// is about.
    fn note_session(&mut self, ts_ms: u64, kind: &HostEventKind) {
        match kind {
            HostEventKind::ProcessStarted {
                session_id,
                tool_call_id,
                command,
                pid,
                sandbox,
                actor,
                ..
            } => {
                self.earlier.insert(
                    session_id.clone(),
                    toolhost_process::RestoredSession {
                        id: session_id.clone(),
                        command: command.clone(),
                        tool_call_id: tool_call_id.clone(),
                        plugin: actor.as_ref().and_then(|a| a.plugin.clone()),
                        identity: actor.as_ref().map(|a| a.identity.clone()),
                        pid: *pid,
                        sandbox: sandbox.clone(),
                        started_ms: ts_ms,
                        ended_ms: None,
                        end: None,
                        detached: tool_call_id.is_none(),
                        output_omitted: None,
                    },
                );
                while self.earlier.len() > EARLIER_SESSIONS_MAX {
                    self.earlier.pop_first();
                }
            }
            HostEventKind::Detached { session_id, .. } => {
                if let Some(s) = self.earlier.get_mut(session_id) {
                    s.detached = true;
                }
            }
            HostEventKind::ProcessExited {
                session_id,
                status,
                code,
                signal,
                summary,
                ..
            } => {
                if let Some(s) = self.earlier.get_mut(session_id) {
                    s.ended_ms = Some(ts_ms);
                    s.end = Some(toolhost_process::RecordedEnd {
                        status: status.clone(),
                        code: *code,
                        signal: signal.clone(),
                        summary: summary.clone(),
                    });
                }
            }
            HostEventKind::Omitted {
                what,
                session_id: Some(session_id),
                offset,
                len,
                ..
            } => match what.as_str() {
                // Evicted from memory in its run: unknown then, and now.
                "session" => {
                    self.earlier.remove(session_id);
                }
                "output" => {
                    if let (Some(s), Some(offset), Some(len)) =
                        (self.earlier.get_mut(session_id), offset, len)
                    {
                        s.output_omitted = Some((*offset, *len));
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;
    use std::io::Write;

    use crate::event::tests::detached as out;
    use crate::{
        EVENTS_FILE, HostEvent, HostEventKind, HostSessionLog, HostSessionLogError, Lifecycle,
        hosts_dir,
    };

    #[test]
    fn resume_continues_seq_after_interrupted_and_drops_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let id;
        {
            let log = HostSessionLog::open(dir.path(), None).unwrap();
            id = log.id().to_string();
            log.append(HostEventKind::Lifecycle {
                state: Lifecycle::Running,
                pid: 1,
                message: None,
            });
            log.append(out(1));
        }
        let path = hosts_dir(dir.path()).join(&id).join(EVENTS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        let torn = br#"{"seq":3,"ts_ms":1,"kind":"deta"#;
        f.write_all(torn).unwrap();
        drop(f);
        let torn = torn.len() as u64;
        let whole = std::fs::metadata(&path).unwrap().len() - torn;
        let log = HostSessionLog::open(dir.path(), Some(&id)).unwrap();
        assert_eq!(log.resumed_from(), 2);
        assert_eq!(log.recovery().torn_bytes, torn);
        // The torn line is noted (seq 3); the previous run never said stopped:
        // interrupted is seq 4.
        let r = log.replay(0, 100);
        assert_eq!(r.events.len(), 4);
        match r.events[2].event().unwrap().kind {
            HostEventKind::Omitted {
                what, offset, len, ..
            } => {
                assert_eq!(what, "event_line");
                assert_eq!((offset, len), (Some(whole), Some(torn)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            r.events[3].event().unwrap().kind,
            HostEventKind::Lifecycle {
                state: Lifecycle::Interrupted,
                ..
            }
        ));
        assert_eq!(log.append(out(2)), 5);
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .map(|l| serde_json::from_str::<HostEvent>(l).unwrap().seq)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn an_event_log_that_is_a_symbolic_link_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = crate::hosts_dir(dir.path()).join("hs_link");
        std::fs::create_dir_all(&hosts).unwrap();
        // A torn last line: a resume that followed the link would cut it.
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "precious data line").unwrap();
        std::os::unix::fs::symlink(&victim, hosts.join(crate::EVENTS_FILE)).unwrap();
        let err = HostSessionLog::open(dir.path(), Some("hs_link")).unwrap_err();
        assert!(
            matches!(&err, HostSessionLogError::Io { message, .. } if message.contains("(os error 40)")),
            "{err:?}"
        );
        // A dangling link is not created through either.
        std::fs::remove_file(&victim).unwrap();
        assert!(HostSessionLog::open(dir.path(), Some("hs_link")).is_err());
        assert!(!victim.exists());
        std::fs::write(&victim, "precious data line").unwrap();
        assert!(HostSessionLog::resume(dir.path(), "hs_link").is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious data line");
    }

    #[test]
    fn ids_the_host_does_not_mint_are_not_continued_from() {
        let dir = tempfile::tempdir().unwrap();
        let log = HostSessionLog::open(dir.path(), Some("hs_ids")).unwrap();
        for id in [
            "tc_00000000000b",
            // The counter's last value: continuing from it would overflow (or, in
            // a release build, wrap back onto ids already in the log).
            "tc_ffffffffffffffff",
            "tc_FFFFFFFFFFFF",
            "tc_+0000000000c",
            "tc_0000000000000d",
        ] {
            log.append(HostEventKind::ToolCallFailed {
                tool_call_id: id.into(),
                error: "x".into(),
                cancelled: false,
            });
        }
        drop(log);
        let log = HostSessionLog::resume(dir.path(), "hs_ids").unwrap();
        assert_eq!(log.recovery().last_tool_call, 11);
        assert_eq!(crate::event::tool_call_id(12), "tc_00000000000c");
        assert_eq!(crate::event::tool_call_number("tc_00000000000c"), Some(12));
    }

    #[test]
    fn resume_reports_open_calls_and_sessions_interrupted_and_continues_call_ids() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            HostSessionLog::resume(dir.path(), "hs_doesnotexist"),
            Err(HostSessionLogError::Unknown { .. })
        ));
        let log = HostSessionLog::open(dir.path(), Some("hs_crash")).unwrap();
        // Held: a second open of the same host session is refused.
        assert!(matches!(
            HostSessionLog::open(dir.path(), Some("hs_crash")),
            Err(HostSessionLogError::InUse { .. })
        ));
        let started = |id: &str| HostEventKind::ToolCallStarted {
            actor: None,
            tool_call_id: id.into(),
            tool: "bash".into(),
            arguments: serde_json::json!({}),
            source: "mcp".into(),
        };
        log.append(started("tc_000000000001"));
        log.append(started("tc_00000000000a"));
        log.append(HostEventKind::ToolCallSettled {
            tool_call_id: "tc_000000000001".into(),
            is_error: false,
            text: String::new(),
            truncated: false,
            structured: None,
        });
        log.append(HostEventKind::ProcessStarted {
            actor: None,
            session_id: "bg_0000000000ff".into(),
            tool_call_id: Some("tc_00000000000a".into()),
            command: "sleep 100".into(),
            // No such process: nothing to kill.
            pid: u32::MAX - 1,
            start_time: Some(1),
            sandbox: String::new(),
        });
        drop(log);
        let log = HostSessionLog::resume(dir.path(), "hs_crash").unwrap();
        let r = log.recovery().clone();
        assert_eq!(r.interrupted_calls, ["tc_00000000000a"]);
        assert_eq!(r.interrupted_sessions, ["bg_0000000000ff"]);
        assert_eq!(r.last_tool_call, 10);
        assert!(r.killed.is_empty());
        let kinds: Vec<HostEventKind> = log
            .replay(4, 100)
            .events
            .iter()
            .map(|e| e.event().unwrap().kind)
            .collect();
        assert!(matches!(
            kinds[0],
            HostEventKind::Lifecycle {
                state: Lifecycle::Interrupted,
                ..
            }
        ));
        assert!(
            matches!(&kinds[1], HostEventKind::ProcessExited { session_id, status, .. }
                if session_id == "bg_0000000000ff" && status == "interrupted"),
            "{kinds:?}"
        );
        assert!(
            matches!(&kinds[2], HostEventKind::ToolCallFailed { tool_call_id, error, cancelled: false }
                if tool_call_id == "tc_00000000000a" && error.starts_with("interrupted:")),
            "{kinds:?}"
        );
        assert_eq!(kinds.len(), 3);
        drop(log);
        // Nothing is left open now: a second resume adds only its own events.
        let log = HostSessionLog::resume(dir.path(), "hs_crash").unwrap();
        assert_eq!(log.recovery().interrupted_calls.len(), 0);
        assert_eq!(log.last_seq(), 7);
    }
}
