//! The bridge from process events into the host-session log: [`LogObserver`] turns
//! what `toolhost-process` reports of its sessions ([`toolhost_process::SessionObserver`])
//! and what the permission pipeline asks and hears
//! ([`crate::permissions::PermissionObserver`]) into [`HostEventKind`]s appended to a
//! [`HostSessionLog`] (the `toolhost-host-session` crate).
//!
//! Output chunks go to [`HostSessionLog::append_output`], which coalesces a
//! session's small writes into few `process_output` events; the observer
//! schedules the flush that ends each batch's window on the tokio runtime it
//! was made in (without one, each chunk is recorded at once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use toolhost_host_session::{Actor, HostEventKind, HostSessionLog, INLINE_OUTPUT_MAX, OutputChunk};

/// Feeds process-session events and permission requests into an
/// [`HostSessionLog`] (install it as [`toolhost_process::SessionsConfig::observer`]
/// and with [`crate::permissions::Permissions::set_observer`]).
///
/// It also knows who is behind each tool call in progress ([`Actor`], from
/// [`crate::CallRequest::actor`]): the `process_started` of a session a call
/// started and the `permission_requested` of its asks record it, with the
/// plugin.
#[derive(Debug, Clone)]
pub struct LogObserver {
    log: Arc<HostSessionLog>,
    actors: Arc<Mutex<HashMap<String, Actor>>>,
    /// Where output batches' flushes run (the runtime `new` was called in).
    runtime: Option<tokio::runtime::Handle>,
}

impl LogObserver {
    /// An observer appending to `log`. Called inside a tokio runtime, it
    /// coalesces output there (see the module docs).
    pub fn new(log: Arc<HostSessionLog>) -> LogObserver {
        LogObserver {
            log,
            actors: Arc::default(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Records one output chunk of at most [`INLINE_OUTPUT_MAX`] bytes,
    /// coalesced, scheduling the flush of its batch when the log asks.
    fn output(&self, chunk: OutputChunk) {
        let Some(wait) = self.log.append_output(chunk) else {
            return;
        };
        match &self.runtime {
            Some(runtime) => {
                runtime.spawn(flush_when_due(Arc::downgrade(&self.log), wait));
            }
            None => self.log.flush_output(),
        }
    }

    /// Records `actor` as who is behind tool call `tool_call_id` until
    /// [`LogObserver::call_ended`].
    pub(crate) fn call_started(&self, tool_call_id: &str, actor: Actor) {
        self.actors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tool_call_id.to_string(), actor);
    }

    /// Forgets who was behind tool call `tool_call_id`.
    pub(crate) fn call_ended(&self, tool_call_id: &str) {
        self.actors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(tool_call_id);
    }

    /// Who is behind tool call `tool_call_id` (in progress), with `plugin`.
    fn actor_of(&self, tool_call_id: Option<&str>, plugin: Option<&str>) -> Option<Actor> {
        let mut actor = self
            .actors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(tool_call_id?)
            .cloned()?;
        if let Some(p) = plugin {
            actor.plugin = Some(p.to_string());
        }
        Some(actor)
    }
}

impl toolhost_process::SessionObserver for LogObserver {
    fn on_event(
        &self,
        _session: &toolhost_process::SessionId,
        _event: &toolhost_process::SessionEvent,
    ) {
        // Everything is recorded by `on_session_event`, which knows more.
    }

    fn on_session_event(
        &self,
        s: &toolhost_process::ObservedSession<'_>,
        event: &toolhost_process::SessionEvent,
    ) {
        use toolhost_process::{OutputStream, SessionEventKind as K, SessionStatus};
        let session_id = s.id.to_string();
        let tool_call_id = s.tool_call_id.map(str::to_string);
        let kind = match &event.kind {
            K::Started(started) => HostEventKind::ProcessStarted {
                session_id,
                tool_call_id,
                command: s.command.to_string(),
                pid: started.pid,
                start_time: toolhost_process::process_start_time(started.pid),
                sandbox: started.sandbox.clone(),
                actor: self.actor_of(s.started_by.or(s.tool_call_id), None),
            },
            K::Output(chunk) => {
                let stream = match chunk.stream {
                    OutputStream::Stdout => "stdout",
                    OutputStream::Stderr => "stderr",
                }
                .to_string();
                if chunk.data.len() <= INLINE_OUTPUT_MAX {
                    return self.output(OutputChunk {
                        session_id,
                        tool_call_id,
                        stream,
                        offset: chunk.offset,
                        data: chunk.data.to_vec(),
                    });
                } else {
                    HostEventKind::PayloadOmitted {
                        session_id,
                        tool_call_id,
                        stream,
                        offset: chunk.offset,
                        len: chunk.data.len() as u64,
                        path: s.output_path.display().to_string(),
                    }
                }
            }
            K::Detached(info) => HostEventKind::Detached {
                session_id,
                tool_call_id: info.tool_call_id.clone().or(tool_call_id),
                reason: info.reason.clone(),
            },
            K::Exited(exit) => HostEventKind::ProcessExited {
                session_id,
                tool_call_id,
                status: match exit.reason.status() {
                    SessionStatus::Running => "running",
                    SessionStatus::Exited => "exited",
                    SessionStatus::TimedOut => "timed_out",
                    SessionStatus::Killed => "killed",
                    SessionStatus::Failed => "failed",
                }
                .to_string(),
                code: exit.code,
                signal: exit.signal.clone(),
                summary: exit.to_string(),
            },
            // The session's own memory trimming; the host log has its own.
            K::Omitted(_) => return,
        };
        self.log.append(kind);
    }

    fn on_session_evicted(&self, s: &toolhost_process::ObservedSession<'_>, reason: &str) {
        self.evicted(s, reason);
    }

    fn on_output_omitted(
        &self,
        s: &toolhost_process::ObservedSession<'_>,
        omission: &toolhost_process::OutputOmission,
    ) {
        self.log.append(HostEventKind::Omitted {
            what: "output".into(),
            offset: Some(omission.offset),
            len: Some(omission.len),
            session_id: Some(s.id.to_string()),
            tool_call_id: s.tool_call_id.map(str::to_string),
            reason: omission.reason.clone(),
        });
    }
}

/// Flushes `log`'s output batches as their windows end, until none waits
/// (or the log is gone).
async fn flush_when_due(log: Weak<HostSessionLog>, mut wait: Duration) {
    loop {
        tokio::time::sleep(wait).await;
        let Some(log) = log.upgrade() else { return };
        match log.flush_due() {
            Some(next) => wait = next,
            None => return,
        }
    }
}

impl LogObserver {
    /// Records that a finished session was evicted (see
    /// [`toolhost_process::SessionObserver::on_session_evicted`]).
    fn evicted(&self, s: &toolhost_process::ObservedSession<'_>, reason: &str) {
        self.log.append(HostEventKind::Omitted {
            what: "session".into(),
            offset: None,
            len: None,
            session_id: Some(s.id.to_string()),
            tool_call_id: s.tool_call_id.map(str::to_string),
            reason: reason.to_string(),
        });
    }
}

impl crate::permissions::PermissionObserver for LogObserver {
    fn requested(&self, r: &crate::permissions::ApprovalRequest) {
        self.log.append(HostEventKind::PermissionRequested {
            request_id: r.request_id.clone(),
            tool_call_id: r.tool_call_id.clone(),
            plugin: r.plugin.clone(),
            tool: r.tool.clone(),
            command: r.command.clone(),
            cwd: r.cwd.clone(),
            prompt: r.prompt.clone(),
            options: crate::permissions::APPROVAL_OPTIONS
                .iter()
                .map(|o| o.to_string())
                .collect(),
            program: r.program.clone(),
            actor: self.actor_of(Some(&r.tool_call_id), Some(&r.plugin)),
        });
    }

    fn resolved(
        &self,
        r: &crate::permissions::ApprovalRequest,
        outcome: crate::permissions::ApprovalOutcome,
        by: &str,
    ) {
        self.log.append(HostEventKind::PermissionResolved {
            request_id: r.request_id.clone(),
            outcome: outcome.as_str().to_string(),
            by: by.to_string(),
            remembered_from: None,
        });
    }

    fn resolved_from_memory(
        &self,
        r: &crate::permissions::ApprovalRequest,
        outcome: crate::permissions::ApprovalOutcome,
        original: &str,
    ) {
        self.log.append(HostEventKind::PermissionResolved {
            request_id: r.request_id.clone(),
            outcome: outcome.as_str().to_string(),
            by: "remembered".to_string(),
            remembered_from: Some(original.to_string()),
        });
    }
}
