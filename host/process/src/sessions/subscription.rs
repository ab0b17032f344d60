//! Event subscriptions: woken through a `tokio::sync::watch` channel that every new
//! event bumps; no thread or poll loop per session or subscriber.

use std::sync::Arc;

use tokio::sync::watch;

use super::session::Session;
use crate::{SessionEvent, SessionEventKind, SessionId};

/// A live feed of one session's events, from a starting seq on.
///
/// Created by [`Sessions::subscribe`](crate::Sessions::subscribe). Dropping it
/// unsubscribes (nothing else refers to it).
pub struct Subscription {
    session: Arc<Session>,
    rx: watch::Receiver<u64>,
    /// The next seq to return.
    cursor: u64,
    /// Log offset just past the last output this subscriber received.
    resume_offset: Option<u64>,
}

impl Subscription {
    pub(crate) fn new(session: Arc<Session>, from_seq: u64) -> Subscription {
        let rx = session.watch();
        Subscription {
            session,
            rx,
            cursor: from_seq,
            resume_offset: None,
        }
    }

    /// The session this subscription follows.
    pub fn id(&self) -> &SessionId {
        &self.session.id
    }

    /// The seq the next event returned will have (events before it were returned or
    /// skipped by `from_seq`).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    fn is_ready(&self) -> bool {
        let st = self.session.lock();
        st.events.last_seq() >= self.cursor || st.exit.is_some()
    }

    /// Resolves when [`Subscription::next`] has events to return, or when the session
    /// has ended (then also once every event was returned: check
    /// [`Subscription::finished`]). Cancel-safe; takes `&mut self` so it can back a
    /// `wasmtime_wasi` `Pollable::ready`.
    pub async fn ready(&mut self) {
        loop {
            self.rx.borrow_and_update();
            if self.is_ready() {
                return;
            }
            if self.rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Returns up to `max` (at least 1) events not yet returned, in seq order; empty
    /// when none are ready. A run of events dropped from memory comes back as one
    /// [`SessionEventKind::Omitted`].
    pub fn next(&mut self, max: usize) -> Vec<SessionEvent> {
        let events = {
            let st = self.session.lock();
            st.events.since(self.cursor, max, self.resume_offset)
        };
        for event in &events {
            match &event.kind {
                SessionEventKind::Omitted(range) => {
                    self.cursor = range.last_seq + 1;
                    self.resume_offset = None;
                }
                SessionEventKind::Output(chunk) => {
                    self.cursor = event.seq + 1;
                    self.resume_offset = Some(chunk.offset + chunk.data.len() as u64);
                }
                _ => self.cursor = event.seq + 1,
            }
        }
        events
    }

    /// True once the session has ended and every event (through `Exited`) was returned.
    pub fn finished(&self) -> bool {
        let st = self.session.lock();
        st.exit.is_some() && self.cursor > st.events.last_seq()
    }
}
