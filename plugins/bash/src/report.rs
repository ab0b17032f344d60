//! Model-facing reports: status lines, error texts, structured results and the
//! `list_shells` table. Plain Rust mirrors of the WIT types keep all of it
//! testable natively; the component glue converts into them.

use serde_json::{Value, json};

/// A session's state (mirror of `sessions.session-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still running.
    Running,
    /// Exited on its own.
    Exited,
    /// Killed by the host when its timeout elapsed.
    TimedOut,
    /// Killed on request.
    Killed,
    /// Never started.
    Failed,
}

impl Status {
    /// The name used in texts and structured results.
    pub fn name(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Exited => "exited",
            Status::TimedOut => "timed-out",
            Status::Killed => "killed",
            Status::Failed => "failed",
        }
    }
}

/// Why a session ended (mirror of `sessions.end-reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// It exited by itself.
    Exited,
    /// Its timeout elapsed.
    TimedOut,
    /// Killed on request; by whom.
    Killed(String),
    /// It never ran; why.
    Failed(String),
}

/// How a session ended (mirror of `sessions.exit-status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// Exit code of a normal exit.
    pub code: Option<i32>,
    /// Name of the signal that ended the process.
    pub signal: Option<String>,
    /// Why it ended.
    pub reason: Reason,
}

impl Ending {
    /// The status this ending corresponds to.
    pub fn status(&self) -> Status {
        match self.reason {
            Reason::Exited => Status::Exited,
            Reason::TimedOut => Status::TimedOut,
            Reason::Killed(_) => Status::Killed,
            Reason::Failed(_) => Status::Failed,
        }
    }

    /// True unless the process exited by itself with code 0.
    pub fn is_error(&self) -> bool {
        !(self.reason == Reason::Exited && self.code == Some(0))
    }
}

/// A host error (mirror of `sessions.session-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// No such session visible to this plugin.
    UnknownSession(String),
    /// The session already ended.
    SessionExited(Ending),
    /// The permission pipeline refused; the reason says how to get permission.
    Denied(String),
    /// The request was malformed.
    InvalidRequest(String),
    /// A host limit was hit.
    ResourceLimit(String),
    /// Host I/O failed.
    Io(String),
}

/// Formats a duration for people and models: `850 ms`, `12.3 s`, `4 min 05 s`.
pub fn duration(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{}.{} s", ms / 1_000, (ms % 1_000) / 100)
    } else {
        let s = ms / 1_000;
        if s < 3_600 {
            format!("{} min {:02} s", s / 60, s % 60)
        } else {
            format!("{} h {:02} min", s / 3_600, (s % 3_600) / 60)
        }
    }
}

/// Who the host names as having killed a session that an earlier run of its
/// host session left running (the host's `KilledBy::HostRestart`).
pub const HOST_RESTART: &str = "host-restart";

/// True for a session the host's restart ended: it ran when an earlier host
/// process of the host session ended.
fn interrupted(ending: &Ending) -> bool {
    matches!(&ending.reason, Reason::Killed(by) if by == HOST_RESTART)
}

/// The status line that ends a result, e.g. `[exit code 3]`.
///
/// `timeout_ms` is the timeout the run was started with, when known (it names
/// the limit in the timed-out line); otherwise the elapsed time is used.
pub fn status_line(ending: &Ending, timeout_ms: Option<u64>, elapsed_ms: u64) -> String {
    let signal = ending.signal.as_deref();
    match (&ending.reason, ending.code, signal) {
        (Reason::Exited, Some(code), _) => format!("[exit code {code}]"),
        (Reason::Exited, None, Some(sig)) => format!("[killed by {sig}]"),
        (Reason::Exited, None, None) => "[exited; no exit code or signal reported]".into(),
        (Reason::TimedOut, _, _) => match timeout_ms {
            Some(t) => format!("[timed out after {t} ms; process group killed]"),
            None => format!(
                "[timed out after {}; process group killed]",
                duration(elapsed_ms)
            ),
        },
        (Reason::Killed(_), None, None) if interrupted(ending) => "[interrupted: the host \
            restarted while it ran (an earlier host process of this host session ended); its \
            processes were killed]"
            .into(),
        (Reason::Killed(by), _, Some(sig)) => format!("[killed by {sig}; requested by {by}]"),
        (Reason::Killed(by), Some(code), None) => {
            format!("[exit code {code} after a kill requested by {by}]")
        }
        (Reason::Killed(by), None, None) => format!("[killed; requested by {by}]"),
        (Reason::Failed(why), _, _) => format!("[failed to start: {why}]"),
    }
}

/// The status line of a session that is still running.
pub fn running_line(id: &str, elapsed_ms: u64, stdin_hint: bool) -> String {
    let stdin = if stdin_hint {
        ", write_stdin to send it input"
    } else {
        ""
    };
    format!(
        "[still running after {}; session {id}: use bash_output to read more output{stdin}, \
         kill_shell to stop it]",
        duration(elapsed_ms)
    )
}

/// The whole text of a read that found no new output on a session that had
/// already ended before the call: its end is old news, so it is told as the
/// session's state, not as a fresh status line, e.g.
/// `(no new output; session bg_… ended earlier: exit code 0)`.
pub fn ended_earlier(id: &str, ending: &Ending, elapsed_ms: u64) -> String {
    let line = status_line(ending, None, elapsed_ms);
    let state = line.trim_start_matches('[').trim_end_matches(']');
    format!("(no new output; session {id} ended earlier: {state})")
}

/// The line of a read that stopped before the end of the output there was when
/// it began (one read drains at most a budget): the rest waits for the next read.
pub fn more_to_read(left: u64) -> String {
    format!(
        "[{left} more bytes of output ({}) not read yet: call bash_output again to read on]",
        bytes(left)
    )
}

/// What `write_stdin` says of its input. Contract v0.1.0's `write-stdin` only
/// accepts bytes (the host queues what the pipe cannot take yet), so the plugin
/// cannot tell how much the program has read: it says what it knows.
pub fn stdin_note(accepted: usize, close: bool) -> String {
    let then = if close {
        "; stdin closes after them"
    } else {
        ""
    };
    if accepted == 0 {
        return if close {
            "[stdin: closed (after any bytes still queued)]".into()
        } else {
            String::new()
        };
    }
    format!(
        "[stdin: accepted {accepted} bytes (queued for delivery: the host writes them in order \
         as the program reads){then}]"
    )
}

/// The trailer of a foreground run that was detached (its `yield_ms` elapsed).
pub fn detached_trailer(task_id: &str, reason: &str) -> String {
    format!("[Detached to background task {task_id}: {reason}]")
}

/// Joins output text and a trailer line: `BODY\n\nTRAILER`, or just `BODY`
/// when the trailer is empty.
///
/// `output_bytes` is the number of raw bytes the body was made from: with 0,
/// the body is `empty_label` (e.g. `(no output)`); when the bytes held only
/// control sequences, `(no printable output)`.
pub fn compose(body: &str, output_bytes: u64, empty_label: &str, trailer: &str) -> String {
    let body = body.trim_end_matches(['\n', '\r']);
    let body = if output_bytes == 0 {
        empty_label
    } else if body.trim().is_empty() {
        "(no printable output)"
    } else {
        body
    };
    if trailer.is_empty() {
        return body.to_owned();
    }
    format!("{body}\n\n{trailer}")
}

/// The text of a host error. `what` says what was attempted (e.g. `start the
/// command`), `id` names the session when there is one. A `denied` reason is
/// shown verbatim: it tells the agent how to get permission.
pub fn session_error_text(what: &str, id: Option<&str>, err: &SessionError) -> String {
    let session = id.map_or(String::new(), |id| format!(" {id}"));
    match err {
        SessionError::UnknownSession(id) => format!(
            "Could not {what}: no session {id} is visible to this tool (it never existed, was \
             started by another plugin or for another identity, or ended longer ago than the host keeps sessions). Use \
             list_shells to see your sessions."
        ),
        SessionError::SessionExited(ending) => format!(
            "Could not {what}: session{session} has already ended {}.",
            status_line(ending, None, 0)
        ),
        SessionError::Denied(reason) => {
            format!("Could not {what}: permission denied.\n{reason}")
        }
        SessionError::InvalidRequest(msg) => {
            format!("Could not {what}: the host refused the request as invalid: {msg}")
        }
        SessionError::ResourceLimit(msg) => {
            format!("Could not {what}: a host resource limit was reached: {msg}")
        }
        SessionError::Io(msg) => format!("Could not {what}: host I/O error: {msg}"),
    }
}

/// What a run or read produced, for the structured result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<'a> {
    /// The session.
    pub session_id: &'a str,
    /// Its state when the result was made.
    pub status: Status,
    /// How it ended, if it did.
    pub ending: Option<&'a Ending>,
    /// Total output bytes of the session so far.
    pub output_bytes: u64,
    /// True when the text omits part of the output it covers.
    pub truncated: bool,
    /// Host path of the full output log.
    pub output_path: &'a str,
    /// True when the session is (now) a background task.
    pub detached: bool,
    /// Milliseconds since the session started (to its end, if it ended).
    pub elapsed_ms: u64,
    /// The kernel sandbox the command ran under (the snapshot's `sandbox`), e.g.
    /// `workspace-write (landlock abi 7, network blocked, .git read-only)`.
    pub sandbox: &'a str,
}

impl Outcome<'_> {
    /// The structured result, as a JSON value.
    pub fn to_json(&self) -> Value {
        let ending = self.ending;
        json!({
            "session_id": self.session_id,
            "status": self.status.name(),
            "exit_code": ending.and_then(|e| e.code),
            "signal": ending.and_then(|e| e.signal.as_deref()),
            "timed_out": self.status == Status::TimedOut,
            "output_bytes": self.output_bytes,
            "truncated": self.truncated,
            "output_path": self.output_path,
            "detached": self.detached,
            "elapsed_ms": self.elapsed_ms,
            "sandbox": self.sandbox,
        })
    }
}

/// One row of `list_shells`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Session id.
    pub id: String,
    /// Current state.
    pub status: Status,
    /// How it ended, if it did.
    pub ending: Option<Ending>,
    /// The command line.
    pub command: String,
    /// Milliseconds from start to now (or to its end).
    pub elapsed_ms: u64,
    /// Total output bytes.
    pub output_bytes: u64,
    /// True for background tasks.
    pub detached: bool,
    /// Host path of the full output log.
    pub output_path: String,
}

/// The short state of a row: `running`, `exit 0`, `SIGKILL`, `timed-out`, ...
fn short_state(row: &Row) -> String {
    match (&row.ending, row.status) {
        (Some(e), Status::Exited) => match (e.code, &e.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => s.clone(),
            (None, None) => "exited".into(),
        },
        (Some(e), _) if interrupted(e) => "interrupted".into(),
        (_, status) => status.name().into(),
    }
}

/// Shortens a command to one line of at most `max` characters.
fn one_line(command: &str, max: usize) -> String {
    let flat: String = command
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        flat.to_owned()
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// Human-readable byte counts: `512 B`, `1.5 KiB`, `3.0 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Most finished sessions `list_shells` shows: the most recent ones.
pub const MAX_FINISHED_LISTED: usize = 20;

/// Characters of a listing's text kept for its header and footer lines.
const LIST_FRAME_CHARS: usize = 1_000;

/// What `list_shells` shows: every running session and the
/// [`MAX_FINISHED_LISTED`] most recent finished ones, oldest first, within
/// [`MAX_RESULT_CHARS`](crate::text::MAX_RESULT_CHARS), and how many it leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The rows shown, oldest first.
    pub rows: Vec<Row>,
    /// Sessions in all (shown or not).
    pub total: usize,
    /// Running sessions in all.
    pub running: usize,
    /// Finished sessions left out (older than the ones shown).
    pub finished_left_out: usize,
    /// Running sessions left out to keep the text within the cap.
    pub running_left_out: usize,
}

impl Listing {
    /// Chooses the rows to show from all of the caller's sessions, oldest first.
    /// Older finished sessions go first, then (only when even the running ones
    /// do not fit in the cap) the oldest running ones.
    pub fn new(all: Vec<Row>) -> Listing {
        let total = all.len();
        let running = all.iter().filter(|r| r.status == Status::Running).count();
        let finished = total - running;
        let mut finished_left_out = finished.saturating_sub(MAX_FINISHED_LISTED);
        let mut skip_finished = finished_left_out;
        let mut rows: Vec<Row> = all
            .into_iter()
            .filter(|r| {
                let skip = r.status != Status::Running && skip_finished > 0;
                skip_finished -= usize::from(skip);
                !skip
            })
            .collect();
        let budget = crate::text::MAX_RESULT_CHARS - LIST_FRAME_CHARS;
        let mut used: usize = rows.iter().map(|r| row_line(r).chars().count()).sum();
        let mut running_left_out = 0;
        while used > budget {
            let at = rows
                .iter()
                .position(|r| r.status != Status::Running)
                .unwrap_or(0);
            let row = rows.remove(at);
            used -= row_line(&row).chars().count();
            if row.status == Status::Running {
                running_left_out += 1;
            } else {
                finished_left_out += 1;
            }
        }
        Listing {
            rows,
            total,
            running,
            finished_left_out,
            running_left_out,
        }
    }

    /// The `list_shells` text.
    pub fn text(&self) -> String {
        if self.total == 0 {
            return "No shell sessions (running or recently finished) for this tool.".into();
        }
        let mut out = format!(
            "{} session(s), {} running (oldest first):\n",
            self.total, self.running
        );
        for r in &self.rows {
            out.push_str(&row_line(r));
        }
        if self.finished_left_out > 0 {
            out.push_str(&format!(
                "[{} older finished session(s) not listed: the list shows every running session \
                 and at most {MAX_FINISHED_LISTED} finished ones, the most recent]\n",
                self.finished_left_out
            ));
        }
        if self.running_left_out > 0 {
            out.push_str(&format!(
                "[{} of the oldest running session(s) not listed: the list is capped at {} \
                 characters]\n",
                self.running_left_out,
                crate::text::MAX_RESULT_CHARS
            ));
        }
        out.push_str("Use bash_output to read a session's output, kill_shell to stop one.");
        out
    }

    /// The `list_shells` structured result: the rows shown and the counts.
    pub fn json(&self) -> Value {
        let sessions: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "session_id": r.id,
                    "status": r.status.name(),
                    "exit_code": r.ending.as_ref().and_then(|e| e.code),
                    "signal": r.ending.as_ref().and_then(|e| e.signal.as_deref()),
                    "command": r.command,
                    "elapsed_ms": r.elapsed_ms,
                    "output_bytes": r.output_bytes,
                    "detached": r.detached,
                    "output_path": r.output_path,
                })
            })
            .collect();
        json!({
            "sessions": sessions,
            "total": self.total,
            "running": self.running,
            "finished_not_listed": self.finished_left_out,
            "running_not_listed": self.running_left_out,
        })
    }
}

/// One line of the `list_shells` text.
fn row_line(r: &Row) -> String {
    format!(
        "{}  {:<9}  {:>12}  {:>9}  {}{}\n",
        r.id,
        short_state(r),
        duration(r.elapsed_ms),
        bytes(r.output_bytes),
        if r.detached { "" } else { "(foreground) " },
        one_line(&r.command, 120),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ending(code: Option<i32>, signal: Option<&str>, reason: Reason) -> Ending {
        Ending {
            code,
            signal: signal.map(str::to_owned),
            reason,
        }
    }

    #[test]
    fn a_session_the_restart_ended_reads_interrupted() {
        let e = ending(None, None, Reason::Killed(HOST_RESTART.into()));
        assert_eq!(
            status_line(&e, None, 0),
            "[interrupted: the host restarted while it ran (an earlier host process of this host \
             session ended); its processes were killed]"
        );
        let row = Row {
            id: "bg_000000000001".into(),
            status: Status::Killed,
            ending: Some(e),
            command: "sleep 300".into(),
            elapsed_ms: 1,
            output_bytes: 0,
            detached: true,
            output_path: String::new(),
        };
        assert_eq!(short_state(&row), "interrupted");
    }

    #[test]
    fn status_lines() {
        let killed = || Reason::Killed("plugin".into());
        let cases: Vec<(Ending, Option<u64>, u64, &str, bool)> = vec![
            (
                ending(Some(0), None, Reason::Exited),
                None,
                5,
                "[exit code 0]",
                false,
            ),
            (
                ending(Some(3), None, Reason::Exited),
                None,
                5,
                "[exit code 3]",
                true,
            ),
            (
                ending(None, Some("SIGKILL"), Reason::Exited),
                None,
                5,
                "[killed by SIGKILL]",
                true,
            ),
            (
                ending(None, None, Reason::Exited),
                None,
                5,
                "[exited; no exit code or signal reported]",
                true,
            ),
            (
                ending(None, Some("SIGKILL"), Reason::TimedOut),
                Some(120_000),
                120_010,
                "[timed out after 120000 ms; process group killed]",
                true,
            ),
            (
                ending(None, Some("SIGTERM"), Reason::TimedOut),
                None,
                61_500,
                "[timed out after 1 min 01 s; process group killed]",
                true,
            ),
            (
                ending(None, Some("SIGTERM"), killed()),
                None,
                5,
                "[killed by SIGTERM; requested by plugin]",
                true,
            ),
            (
                ending(Some(130), None, killed()),
                None,
                5,
                "[exit code 130 after a kill requested by plugin]",
                true,
            ),
            (
                ending(None, None, killed()),
                None,
                5,
                "[killed; requested by plugin]",
                true,
            ),
            (
                ending(None, None, Reason::Failed("no such directory: x".into())),
                None,
                0,
                "[failed to start: no such directory: x]",
                true,
            ),
        ];
        for (e, timeout, elapsed, want, err) in cases {
            assert_eq!(status_line(&e, timeout, elapsed), want);
            assert_eq!(e.is_error(), err, "{want}");
        }
    }

    #[test]
    fn durations_and_bytes() {
        assert_eq!(duration(0), "0 ms");
        assert_eq!(duration(999), "999 ms");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(duration(245_000), "4 min 05 s");
        assert_eq!(duration(7_380_000), "2 h 03 min");
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MiB");
    }

    #[test]
    fn compose_bodies() {
        assert_eq!(
            compose("", 0, "(no output)", "[exit code 0]"),
            "(no output)\n\n[exit code 0]"
        );
        assert_eq!(
            compose("hi\n\n", 4, "(no output)", "[exit code 0]"),
            "hi\n\n[exit code 0]"
        );
        assert_eq!(
            compose("", 8, "(no output)", "[exit code 0]"),
            "(no printable output)\n\n[exit code 0]"
        );
        assert_eq!(compose("hello\n", 6, "(no output)", ""), "hello");
        assert_eq!(
            compose(
                "partial",
                7,
                "(no output)",
                &detached_trailer("bg_00000000002a", "yield_ms elapsed")
            ),
            "partial\n\n[Detached to background task bg_00000000002a: yield_ms elapsed]"
        );
    }

    #[test]
    fn error_texts() {
        let id = Some("bg_00000000002a");
        let denied = session_error_text(
            "start the command",
            None,
            &SessionError::Denied(
                "policy: `rm -rf *` matches deny rule 3; add an allow rule".into(),
            ),
        );
        assert_eq!(
            denied,
            "Could not start the command: permission denied.\npolicy: `rm -rf *` matches deny rule 3; add an allow rule"
        );
        let exited = session_error_text(
            "write to stdin",
            id,
            &SessionError::SessionExited(ending(Some(1), None, Reason::Exited)),
        );
        assert_eq!(
            exited,
            "Could not write to stdin: session bg_00000000002a has already ended [exit code 1]."
        );
        let unknown = session_error_text(
            "read output",
            id,
            &SessionError::UnknownSession("bg_00000000002a".into()),
        );
        assert!(unknown.contains("no session bg_00000000002a is visible"));
        assert!(unknown.contains("list_shells"));
        for (err, want) in [
            (
                SessionError::InvalidRequest("cwd outside workspace".into()),
                "refused the request as invalid: cwd outside workspace",
            ),
            (
                SessionError::ResourceLimit("too many sessions (64)".into()),
                "resource limit was reached: too many sessions (64)",
            ),
            (
                SessionError::Io("disk full".into()),
                "host I/O error: disk full",
            ),
        ] {
            assert!(session_error_text("x", None, &err).ends_with(want));
        }
    }

    #[test]
    fn structured_outcome() {
        let e = ending(None, Some("SIGKILL"), Reason::TimedOut);
        let v = Outcome {
            session_id: "bg_000000000001",
            status: e.status(),
            ending: Some(&e),
            output_bytes: 42,
            truncated: false,
            output_path: "/state/sessions/bg_000000000001/output.log",
            detached: false,
            elapsed_ms: 1000,
            sandbox: "workspace-write (landlock abi 7, network blocked, .git read-only)",
        }
        .to_json();
        assert_eq!(v["status"], "timed-out");
        assert_eq!(v["timed_out"], true);
        assert_eq!(
            v["sandbox"],
            "workspace-write (landlock abi 7, network blocked, .git read-only)"
        );
        assert_eq!(v["exit_code"], Value::Null);
        assert_eq!(v["signal"], "SIGKILL");
        assert_eq!(v["output_bytes"], 42);
        for key in [
            "exit_code",
            "signal",
            "timed_out",
            "session_id",
            "output_bytes",
            "truncated",
            "output_path",
            "status",
            "detached",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
    }

    #[test]
    fn list_rendering() {
        assert!(
            Listing::new(Vec::new())
                .text()
                .starts_with("No shell sessions")
        );
        let rows = vec![
            Row {
                id: "bg_000000000001".into(),
                status: Status::Exited,
                ending: Some(ending(Some(0), None, Reason::Exited)),
                command: "cargo build\n--release".into(),
                elapsed_ms: 12_300,
                output_bytes: 2048,
                detached: true,
                output_path: "/p1".into(),
            },
            Row {
                id: "bg_000000000002".into(),
                status: Status::Running,
                ending: None,
                command: "x".repeat(300),
                elapsed_ms: 500,
                output_bytes: 0,
                detached: false,
                output_path: "/p2".into(),
            },
        ];
        let listing = Listing::new(rows);
        let text = listing.text();
        assert!(text.starts_with("2 session(s), 1 running"));
        assert!(!text.contains("not listed"), "{text}");
        assert!(text.contains("bg_000000000001  exit 0"));
        assert!(text.contains("cargo build --release"));
        assert!(text.contains("(foreground) "));
        assert!(text.contains(&format!("{}…", "x".repeat(119))));
        let v = listing.json();
        assert_eq!(v["sessions"][0]["exit_code"], 0);
        assert_eq!(v["sessions"][1]["status"], "running");
        assert_eq!(v["finished_not_listed"], 0);
    }

    #[test]
    fn read_notes() {
        let id = "bg_00000000002a";
        assert_eq!(
            ended_earlier(id, &ending(Some(0), None, Reason::Exited), 5),
            "(no new output; session bg_00000000002a ended earlier: exit code 0)"
        );
        assert_eq!(
            ended_earlier(
                id,
                &ending(None, Some("SIGTERM"), Reason::Killed("plugin".into())),
                5
            ),
            "(no new output; session bg_00000000002a ended earlier: killed by SIGTERM; requested by plugin)"
        );
        assert_eq!(
            more_to_read(3 << 20),
            "[3145728 more bytes of output (3.0 MiB) not read yet: call bash_output again to read on]"
        );
        assert_eq!(
            stdin_note(65_537, false),
            "[stdin: accepted 65537 bytes (queued for delivery: the host writes them in order as \
             the program reads)]"
        );
        assert!(stdin_note(3, true).ends_with("; stdin closes after them]"));
        assert_eq!(stdin_note(0, false), "");
        assert_eq!(
            stdin_note(0, true),
            "[stdin: closed (after any bytes still queued)]"
        );
    }

    fn row(n: usize, running: bool, command: &str) -> Row {
        Row {
            id: format!("bg_{n:012x}"),
            status: if running {
                Status::Running
            } else {
                Status::Exited
            },
            ending: (!running).then(|| ending(Some(0), None, Reason::Exited)),
            command: command.to_owned(),
            elapsed_ms: 5,
            output_bytes: 1,
            detached: true,
            output_path: format!("/s/{n}"),
        }
    }

    #[test]
    fn list_shows_running_and_the_most_recent_finished() {
        // 3,000 sessions, every tenth running, oldest first.
        let rows: Vec<Row> = (1..=3_000).map(|n| row(n, n % 10 == 0, "true")).collect();
        let listing = Listing::new(rows);
        let text = listing.text();
        assert!(text.chars().count() <= crate::text::MAX_RESULT_CHARS);
        assert_eq!(listing.rows.len(), 300 + MAX_FINISHED_LISTED);
        assert_eq!(listing.finished_left_out, 2_700 - MAX_FINISHED_LISTED);
        assert_eq!(listing.running_left_out, 0);
        // The finished rows shown are the last ones; order stays oldest first.
        let finished: Vec<&str> = listing
            .rows
            .iter()
            .filter(|r| r.status != Status::Running)
            .map(|r| r.id.as_str())
            .collect();
        // The last 20 finished of 1..=3000 without the tens: 2978 to 2999.
        assert_eq!(finished.first(), Some(&"bg_000000000ba2"));
        assert_eq!(finished.last(), Some(&"bg_000000000bb7"));
        assert_eq!(finished.len(), MAX_FINISHED_LISTED);
        assert!(text.starts_with("3000 session(s), 300 running (oldest first):\n"));
        assert!(
            text.contains("[2680 older finished session(s) not listed: "),
            "{text}"
        );
        let v = listing.json();
        assert_eq!(v["sessions"].as_array().unwrap().len(), 320);
        assert_eq!(
            (v["total"].clone(), v["finished_not_listed"].clone()),
            (json!(3000), json!(2680))
        );
    }

    #[test]
    fn list_text_stays_within_the_cap_with_many_long_running_commands() {
        let long = "y".repeat(500);
        let rows: Vec<Row> = (1..=400).map(|n| row(n, n > 5, &long)).collect();
        let listing = Listing::new(rows);
        let text = listing.text();
        assert!(
            text.chars().count() <= crate::text::MAX_RESULT_CHARS,
            "{}",
            text.chars().count()
        );
        assert_eq!(listing.finished_left_out, 5);
        assert!(listing.running_left_out > 0);
        assert_eq!(listing.rows.len() + listing.running_left_out, 395);
        assert!(listing.rows.iter().all(|r| r.status == Status::Running));
        // The newest running sessions are the ones kept.
        assert_eq!(listing.rows.last().unwrap().id, "bg_000000000190");
        assert!(text.contains(&format!(
            "[{} of the oldest running session(s) not listed: the list is capped at 30000 characters]",
            listing.running_left_out
        )), "{text}");
        assert!(
            text.contains("[5 older finished session(s) not listed"),
            "{text}"
        );
    }
}
