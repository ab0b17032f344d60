//! The errors of session calls.

use serde::{Deserialize, Serialize};

use super::ExitStatus;

/// Errors of session calls (WIT `session-error`). Messages say what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum SessionError {
    /// No session with this id is visible to the caller (or the id is malformed).
    #[error(
        "unknown session `{0}`: no such session is visible to you (ids look like bg_000000000001; finished sessions are kept only for the retention window; use list to see yours)"
    )]
    UnknownSession(String),
    /// The session has already ended; here is how.
    #[error("the session has already ended ({0}); its output stays readable with read_output")]
    SessionExited(ExitStatus),
    /// The permission pipeline refused (not produced by this module).
    #[error("denied: {0}")]
    Denied(String),
    /// The request is malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A host limit was hit.
    #[error("resource limit: {0}")]
    ResourceLimit(String),
    /// An I/O error on the host.
    #[error("host I/O error: {0}")]
    Io(String),
}
