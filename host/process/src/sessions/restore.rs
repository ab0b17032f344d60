//! Sessions of an earlier run of the same host session, known again
//! (docs/event-log.md#crash-and-restart): when `toolhost serve --host-session
//! ID` resumes a log, every process session that log names and did not evict
//! comes back as an ended session ([`Sessions::restore`]), so `list_shells`,
//! `bash_output` and `kill_shell` tell the agent what became of it (its command,
//! start, end and whatever output its `output.log` still holds) instead of
//! calling it unknown. A session the earlier run left running ended with it:
//! it comes back killed by [`KilledBy::HostRestart`].

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::caller::Principal;
use super::output::OutputCapPolicy;
use super::session::{Session, SessionInit};
use crate::{
    EndReason, ExitStatus, HostIoError, IoOperation, KilledBy, OutputOmission, SessionId, Sessions,
};

/// How an earlier run recorded a session's end (the event log's
/// `process_exited`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEnd {
    /// `exited`, `timed_out`, `killed`, `failed`, or `interrupted` (the run
    /// ended while it ran: [`KilledBy::HostRestart`]).
    pub status: String,
    /// The exit code, when it exited normally.
    pub code: Option<i32>,
    /// The signal name, when a signal ended it.
    pub signal: Option<String>,
    /// The summary the log holds, e.g. `ended by SIGKILL, killed by cancelled`.
    pub summary: String,
}

/// A process session an earlier run of the host session started, as its
/// event log tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredSession {
    /// Its id (`bg_…`).
    pub id: String,
    /// The command line (as the log keeps it: at most its field bound).
    pub command: String,
    /// The tool call it ran for in the foreground, if any.
    pub tool_call_id: Option<String>,
    /// The plugin that started it (its owner), if the log says.
    pub plugin: Option<String>,
    /// The identity it was started for, if the log says.
    pub identity: Option<String>,
    /// Pid of its shell (long gone).
    pub pid: u32,
    /// The sandbox's one-line summary it ran under.
    pub sandbox: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// When it ended, in milliseconds since the Unix epoch.
    pub ended_ms: Option<u64>,
    /// How it ended (`None`: the log never said; it is restored as
    /// interrupted).
    pub end: Option<RecordedEnd>,
    /// Detached, or started in the background.
    pub detached: bool,
    /// The middle its capped `output.log` dropped, `(offset, len)`.
    pub output_omitted: Option<(u64, u64)>,
}

impl RestoredSession {
    /// How it ended, as a session's [`ExitStatus`].
    fn exit(&self) -> ExitStatus {
        let Some(end) = &self.end else {
            return interrupted();
        };
        let reason = match end.status.as_str() {
            "exited" => EndReason::Exited,
            "timed_out" | "timed-out" => EndReason::TimedOut,
            "killed" => EndReason::Killed(KilledBy::Recorded(
                end.summary
                    .split_once("killed by ")
                    .map_or(end.summary.as_str(), |(_, by)| by)
                    .to_owned(),
            )),
            "failed" => EndReason::Failed(Box::new(HostIoError::other(
                IoOperation::Recorded,
                None,
                end.summary
                    .split_once("failed: ")
                    .map_or(end.summary.as_str(), |(_, why)| why),
            ))),
            _ => return interrupted(),
        };
        ExitStatus {
            code: end.code,
            signal: end.signal.clone(),
            reason,
        }
    }
}

/// The end of a session an earlier run left running.
fn interrupted() -> ExitStatus {
    ExitStatus {
        code: None,
        signal: None,
        reason: EndReason::Killed(KilledBy::HostRestart),
    }
}

/// The instant `ms` (since the Unix epoch) was, for an engine that measures
/// with [`Instant`]s; now for a time in the future or past what `Instant` holds.
fn instant_of(ms: u64, now: Instant, wall_now: SystemTime) -> Instant {
    let then = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    wall_now
        .duration_since(then)
        .ok()
        .and_then(|ago| now.checked_sub(ago))
        .unwrap_or(now)
}

impl Sessions {
    /// Takes back the ended sessions of an earlier run of this host session
    /// (oldest first, as [`RestoredSession`]s from its event log): each is
    /// registered as ended, visible to the plugin and identity that started it
    /// (the host sees all), with its command, start and end times, how it
    /// ended (a session left running is [`KilledBy::HostRestart`]), and its
    /// `output.log` as the disk still holds it (read from the file; the middle
    /// a capped log dropped stays dropped). Nothing is told to the observer:
    /// the log has these sessions already. A session id this engine already
    /// knows is skipped; the finished-session bounds apply as to any session
    /// that ends.
    pub fn restore(&self, sessions: Vec<RestoredSession>) {
        let inner = &self.inner;
        let (now, wall_now) = (Instant::now(), SystemTime::now());
        for r in sessions {
            let Ok(id) = SessionId::parse(&r.id) else {
                continue;
            };
            if inner.registry().sessions.contains_key(&id) {
                continue;
            }
            let output_path = inner.sessions_dir.join(id.as_str()).join("output.log");
            let total = std::fs::metadata(&output_path).map_or(0, |m| m.len());
            let omitted = r.output_omitted.map(|(offset, len)| OutputOmission {
                offset,
                len,
                policy: OutputCapPolicy::Keep,
                reason: "an earlier run of this host session recorded it".to_owned(),
            });
            let exit = r.exit();
            let started = instant_of(r.started_ms, now, wall_now);
            let ended = r.ended_ms.map_or(now, |ms| instant_of(ms, now, wall_now));
            let principal = r.identity.as_deref().map(|name| Principal {
                name: Arc::from(name),
                admin: false,
            });
            let session = Session::restored(
                SessionInit {
                    id: id.clone(),
                    owner: r.plugin.as_deref().map(Arc::from),
                    principal,
                    started_by: r.tool_call_id.as_deref().map(Arc::from),
                    command: r.command,
                    tool_call_id: r.tool_call_id,
                    output_path,
                    pid: r.pid,
                    group: false,
                    stdin: None,
                    stdin_open: false,
                    memory_bytes: 0,
                    observer: None,
                    sandbox: None,
                    tree: None,
                    tracking: "none (a session of an earlier run of this host session)".to_owned(),
                },
                super::session::Restored {
                    started,
                    ended: ended.max(started),
                    exit,
                    sandbox: r.sandbox,
                    detached: r.detached || r.end.is_none(),
                    total,
                    omitted,
                },
            );
            inner.registry().sessions.insert(id, session.clone());
            inner.retire(&session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(
        status: &str,
        code: Option<i32>,
        signal: Option<&str>,
        summary: &str,
    ) -> ExitStatus {
        RestoredSession {
            id: "bg_000000000001".into(),
            command: "true".into(),
            tool_call_id: None,
            plugin: None,
            identity: None,
            pid: 1,
            sandbox: String::new(),
            started_ms: 0,
            ended_ms: None,
            end: Some(RecordedEnd {
                status: status.into(),
                code,
                signal: signal.map(str::to_owned),
                summary: summary.into(),
            }),
            detached: true,
            output_omitted: None,
        }
        .exit()
    }

    #[test]
    fn recorded_ends_come_back_as_they_were() {
        assert_eq!(
            recorded("exited", Some(3), None, "exited with code 3"),
            ExitStatus {
                code: Some(3),
                signal: None,
                reason: EndReason::Exited
            }
        );
        let killed = recorded(
            "killed",
            None,
            Some("SIGKILL"),
            "ended by SIGKILL, killed by plugin",
        );
        assert_eq!(
            killed.reason,
            EndReason::Killed(KilledBy::Recorded("plugin".into()))
        );
        assert_eq!(killed.to_string(), "ended by SIGKILL, killed by plugin");
        assert_eq!(
            recorded("timed_out", None, Some("SIGKILL"), "x").reason,
            EndReason::TimedOut
        );
        let failed = recorded(
            "failed",
            None,
            None,
            "no exit status, failed: could not start `/x`",
        );
        assert_eq!(
            failed.to_string(),
            "no exit status, failed: could not start `/x`"
        );
        let left = recorded(
            "interrupted",
            None,
            None,
            "interrupted: the host process ended",
        );
        assert_eq!(left, interrupted());
        assert_eq!(left.to_string(), "no exit status, killed by host-restart");
    }

    #[test]
    fn wall_times_become_instants() {
        let now = Instant::now();
        let ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let wall = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        let then = instant_of(ms - 1500, now, wall);
        assert_eq!(now.duration_since(then), Duration::from_millis(1500));
        assert_eq!(instant_of(ms + 10_000, now, wall), now);
    }
}
