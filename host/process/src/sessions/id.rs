//! The session id: `bg_` and 12 hex digits, unique per state dir.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::SessionError;

/// A session id: `bg_` followed by 12 lowercase hex digits (e.g. `bg_00000000002a`),
/// from a process-wide counter; an id whose log directory already exists in the
/// state dir is skipped, so ids are unique per state dir across host restarts.
/// Ids sort in creation order. Derefs to `&str`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl SessionId {
    pub(super) fn next() -> SessionId {
        let n = NEXT_ID.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff_ffff;
        SessionId(format!("bg_{n:012x}"))
    }

    /// Makes every id this process allocates from now on greater than `id` (a
    /// resumed host-session log names sessions whose directories a sweep may have
    /// removed; their ids must not come back).
    pub fn reserve_through(id: &SessionId) {
        if let Ok(n) = u64::from_str_radix(&id.0[3..], 16) {
            NEXT_ID.fetch_max(n + 1, Ordering::Relaxed);
        }
    }

    /// Validates an incoming id. Errors: [`SessionError::UnknownSession`] (with the
    /// given text) when it is not `bg_` + 12 lowercase hex digits.
    pub fn parse(s: &str) -> Result<SessionId, SessionError> {
        let valid = s.len() == 15
            && s.starts_with("bg_")
            && s.bytes()
                .skip(3)
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if valid {
            Ok(SessionId(s.to_owned()))
        } else {
            Err(SessionError::UnknownSession(s.to_owned()))
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for SessionId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SessionId {
    type Err = SessionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SessionId::parse(s)
    }
}

impl TryFrom<String> for SessionId {
    type Error = SessionError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        SessionId::parse(&s)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}
