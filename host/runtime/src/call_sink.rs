//! The live events of one tool call, delivered to a sink the call owns
//! ([`CallRequest::progress`](crate::CallRequest::progress)), straight from
//! where the session engine reports them: the event log is one listener of the
//! same events ([`Listeners`]), never a source a front door reads back for a
//! call in progress.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::UnboundedSender;
use toolhost_process::{
    ObservedSession, OutputOmission, SessionEvent, SessionEventKind, SessionObserver,
};

use crate::metrics::Metrics;

/// What a tool call's sink receives while the call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallProgress {
    /// One of the call's foreground processes wrote `bytes` bytes of output
    /// (stdout or stderr, as the session's `output.log` counts them).
    Output {
        /// How many bytes this chunk held.
        bytes: u64,
    },
}

/// The sinks of the calls in progress that asked for one, by tool call id.
#[derive(Debug, Default)]
pub(crate) struct CallSinks {
    sinks: Mutex<HashMap<String, UnboundedSender<CallProgress>>>,
}

/// Removes a call's sink when dropped (the call ended).
pub(crate) struct SinkGuard {
    sinks: Arc<CallSinks>,
    tool_call_id: String,
}

impl Drop for SinkGuard {
    fn drop(&mut self) {
        self.sinks.lock().remove(&self.tool_call_id);
    }
}

impl CallSinks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, UnboundedSender<CallProgress>>> {
        self.sinks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Delivers the events of call `tool_call_id` to `sink` until the guard
    /// is dropped.
    pub(crate) fn register(
        self: &Arc<Self>,
        tool_call_id: &str,
        sink: UnboundedSender<CallProgress>,
    ) -> SinkGuard {
        self.lock().insert(tool_call_id.to_string(), sink);
        SinkGuard {
            sinks: self.clone(),
            tool_call_id: tool_call_id.to_string(),
        }
    }

    /// Sends `progress` to the sink of call `tool_call_id`, if it has one (a
    /// receiver that went away is ignored: the call runs on).
    fn deliver(&self, tool_call_id: &str, progress: CallProgress) {
        if let Some(sink) = self.lock().get(tool_call_id) {
            let _ = sink.send(progress);
        }
    }
}

/// The session engine's one observer, handing each event to every listener:
/// the host's metrics (sessions running and finished, output bytes), the
/// sink of the call the session runs for in the foreground ([`CallSinks`]),
/// then `log` (the host-session event log's bridge).
pub(crate) struct Listeners {
    pub(crate) calls: Arc<CallSinks>,
    pub(crate) log: Arc<dyn SessionObserver>,
    pub(crate) metrics: Metrics,
}

impl SessionObserver for Listeners {
    fn on_event(&self, session: &toolhost_process::SessionId, event: &SessionEvent) {
        self.log.on_event(session, event);
    }

    fn on_session_event(&self, session: &ObservedSession<'_>, event: &SessionEvent) {
        match &event.kind {
            SessionEventKind::Started(_) => self.metrics.session_started(),
            SessionEventKind::Exited(status) => self.metrics.session_ended(&status.reason),
            SessionEventKind::Output(chunk) => {
                let bytes = chunk.data.len() as u64;
                self.metrics.output(bytes);
                if let Some(tool_call_id) = session.tool_call_id {
                    self.calls
                        .deliver(tool_call_id, CallProgress::Output { bytes });
                }
            }
            _ => {}
        }
        self.log.on_session_event(session, event);
    }

    fn on_session_evicted(&self, session: &ObservedSession<'_>, reason: &str) {
        self.log.on_session_evicted(session, reason);
    }

    fn on_output_omitted(&self, session: &ObservedSession<'_>, omission: &OutputOmission) {
        self.log.on_output_omitted(session, omission);
    }
}
