//! The hook through which every session event leaves the engine (the host-wide
//! event log listens here).

use crate::{OutputOmission, SessionEvent, SessionId};
#[cfg(doc)]
use crate::{Sessions, SessionsConfig};

/// Receives every [`SessionEvent`] of every session, in seq order per session (the
/// host-wide event log hooks in here).
///
/// Called synchronously while the session's state is locked: it must return quickly
/// and must not call back into [`Sessions`] (send the event over a channel instead).
pub trait SessionObserver: Send + Sync + 'static {
    /// One event of session `session`.
    fn on_event(&self, session: &SessionId, event: &SessionEvent);

    /// One event, with what the session is (its command, tool call and log
    /// path). The default forwards to [`SessionObserver::on_event`].
    fn on_session_event(&self, session: &ObservedSession<'_>, event: &SessionEvent) {
        self.on_event(session.id, event);
    }

    /// A finished session was evicted from memory before its retention window ended,
    /// because a bound on finished sessions was reached; `reason` names the bound, e.g.
    /// ``plugin `x` keeps at most 64 finished sessions (max_finished_per_plugin, default 64)``.
    /// Its `output.log` stays on disk. Called without any lock held. Default: nothing.
    fn on_session_evicted(&self, session: &ObservedSession<'_>, reason: &str) {
        let _ = (session, reason);
    }

    /// The session's `output.log` reached its cap and omits `omission` (see
    /// [`SessionsConfig::output_log_max_bytes`]): called once when the cap is first
    /// reached and once more, with the final range, right before the session's
    /// `Exited` event. Called under the session's lock, like `on_session_event`.
    /// Default: nothing.
    fn on_output_omitted(&self, session: &ObservedSession<'_>, omission: &OutputOmission) {
        let _ = (session, omission);
    }
}

/// What a [`SessionObserver`] is told about the session an event belongs to.
#[derive(Debug, Clone, Copy)]
pub struct ObservedSession<'a> {
    /// The session id.
    pub id: &'a SessionId,
    /// The command line.
    pub command: &'a str,
    /// The tool call it runs (or ran) for in the foreground, if any.
    pub tool_call_id: Option<&'a str>,
    /// Host path of its byte-exact combined `output.log`.
    pub output_path: &'a std::path::Path,
    /// The identity its plugin started it for, if any ([`crate::Principal`]).
    pub principal: Option<&'a str>,
    /// The tool call that started it (foreground or background), if known.
    pub started_by: Option<&'a str>,
}
