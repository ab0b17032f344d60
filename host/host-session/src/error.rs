//! The errors of opening or resuming an event log ([`HostSessionLogError`]).

use std::path::{Path, PathBuf};

/// Errors opening or resuming an event log.
#[derive(Debug, thiserror::Error)]
pub enum HostSessionLogError {
    /// The host session id is not of the form `hs_` + 1-64 of `[0-9a-z_-]`.
    #[error("invalid host session id `{0}`: use hs_ followed by letters, digits, `_` or `-`")]
    InvalidId(String),
    /// The log file could not be created, read or written.
    #[error("event log {path}: {message}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The existing log is not a valid event log (bad JSON before the last
    /// line, or a gap in its seqs).
    #[error("event log {path} is corrupt at line {line}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// `--host-session` named a host session the state dir does not have.
    #[error(
        "unknown host session `{id}`: there is no {path} (toolhost host-sessions lists the \
         host sessions; omit --host-session to start a new one)"
    )]
    Unknown {
        /// The id asked for.
        id: String,
        /// The event log that would be its.
        path: PathBuf,
    },
    /// Another `toolhost serve` holds this host session's log.
    #[error(
        "host session `{id}` is in use by a running toolhost serve (its event log {path} is \
         locked); attach to it with toolhost attach {id}"
    )]
    InUse {
        /// The host session.
        id: String,
        /// Its event log.
        path: PathBuf,
    },
}

/// An I/O error on `path`, as [`HostSessionLogError::Io`].
pub(crate) fn io_err(path: &Path, e: std::io::Error) -> HostSessionLogError {
    HostSessionLogError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}
