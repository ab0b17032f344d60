//! Running-session slots: the host's `max_sessions`, the third-party share of it and
//! each plugin's quota, counted from reservation until the session ends.

use std::sync::{Arc, Mutex, MutexGuard};

use super::config::{DEFAULT_MAX_SESSIONS_PER_PLUGIN, DEFAULT_RESERVED_SESSIONS};
use super::engine::Inner;
use crate::{Caller, DEFAULT_MAX_SESSIONS, SessionError};

/// Sessions running or starting: in all, those of callers that may not use the
/// reserved slots, and per plugin.
#[derive(Default)]
pub(super) struct Ledger {
    pub(super) active: usize,
    pub(super) unprivileged: usize,
    pub(super) per_plugin: std::collections::HashMap<Arc<str>, usize>,
}

pub(super) fn lock_ledger(ledger: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|e| e.into_inner())
}

/// A reserved running-session slot: counted from [`Inner::reserve`] until dropped,
/// which is when its session ended (the session task holds it) or its start failed.
pub(crate) struct Slot {
    ledger: Arc<Mutex<Ledger>>,
    owner: Option<Arc<str>>,
    privileged: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut ledger = lock_ledger(&self.ledger);
        ledger.active = ledger.active.saturating_sub(1);
        if !self.privileged {
            ledger.unprivileged = ledger.unprivileged.saturating_sub(1);
            if let Some(owner) = &self.owner
                && let Some(n) = ledger.per_plugin.get_mut(owner)
            {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    ledger.per_plugin.remove(owner);
                }
            }
        }
    }
}

impl Inner {
    /// True for callers that are exempt from the per-plugin quotas and may use the
    /// reserved slots: the host and the built-in plugins.
    pub(super) fn privileged(&self, caller: &Caller) -> bool {
        match caller.plugin() {
            None => true,
            Some(name) => self.config.builtin_plugins.iter().any(|b| b == name),
        }
    }

    /// Reserves a running-session slot for `caller`, checking the host's
    /// `max_sessions`, the third-party share of it (`max_sessions - reserved_sessions`)
    /// and the caller's own quota (`max_sessions_per_plugin`).
    ///
    /// Errors: [`SessionError::ResourceLimit`] naming the quota that is full and its
    /// default.
    pub(super) fn reserve(&self, caller: &Caller) -> Result<Slot, SessionError> {
        self.purge(&mut self.registry());
        let privileged = self.privileged(caller);
        let config = &self.config;
        let mut ledger = lock_ledger(&self.ledger);
        if ledger.active >= config.max_sessions {
            return Err(SessionError::ResourceLimit(format!(
                "{} sessions are running on this host, its limit (max_sessions = {}, default \
                 {DEFAULT_MAX_SESSIONS}); wait for one to end or kill one",
                ledger.active, config.max_sessions
            )));
        }
        if !privileged {
            let reserved = config.reserved_sessions.min(config.max_sessions / 2);
            let share = config.max_sessions - reserved;
            if ledger.unprivileged >= share {
                return Err(SessionError::ResourceLimit(format!(
                    "third-party plugins have {} running sessions, their share of the host \
                     (max_sessions - reserved_sessions = {share}, default \
                     {DEFAULT_MAX_SESSIONS} - {DEFAULT_RESERVED_SESSIONS}); wait for one to end \
                     or kill one",
                    ledger.unprivileged
                )));
            }
            if let Some(name) = caller.plugin() {
                let mine = ledger.per_plugin.get(name).copied().unwrap_or(0);
                if mine >= config.max_sessions_per_plugin {
                    return Err(SessionError::ResourceLimit(format!(
                        "plugin `{name}` has {mine} running sessions, its quota \
                         (per-plugin max_sessions_per_plugin = {}, default \
                         {DEFAULT_MAX_SESSIONS_PER_PLUGIN}); wait for one to end or kill one",
                        config.max_sessions_per_plugin
                    )));
                }
                *ledger.per_plugin.entry(name.clone()).or_default() += 1;
            }
            ledger.unprivileged += 1;
        }
        ledger.active += 1;
        Ok(Slot {
            ledger: self.ledger.clone(),
            owner: caller.owner(),
            privileged,
        })
    }
}
