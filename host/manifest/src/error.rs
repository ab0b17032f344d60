//! The errors of reading and validating a manifest: [`ManifestError`] names the file
//! and the field, [`ValueError`] says which rule one value breaks. Each `Display` is
//! the text a plugin author reads (`toolhost plugin inspect`, `serve`'s refusal to
//! start), unchanged since these were plain strings; code tells them apart by variant.

use std::path::PathBuf;

use toolhost_pattern::PatternError;

/// Errors from reading or validating a manifest. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read manifest {path}: {source}")]
    Read {
        /// The manifest file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not valid TOML, an unknown key, or a value of the wrong type. The
    /// message carries the toml crate's line and column.
    #[error("manifest {path}: {message}")]
    Parse {
        /// The manifest file.
        path: PathBuf,
        /// The parser's message (with line, column and the offending text).
        message: String,
    },
    /// A value parsed but is not acceptable (bad id, unit, pattern, path...).
    #[error("manifest {path}: `{field}`: {message}")]
    Invalid {
        /// The manifest file.
        path: PathBuf,
        /// The field, e.g. `memory` or `preopen[0].host`.
        field: String,
        /// What is wrong and what is accepted (a [`ValueError`]'s text, or a rule of
        /// [`Manifest::parse`](crate::Manifest::parse) itself).
        message: String,
    },
}

/// One manifest value that breaks its rule: an exec pattern, an `exec_env`,
/// `exec_shells` or `exec_stdin` entry, a plugin id, a size or a duration. The
/// `Display` says what is wrong and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// An exec pattern holds a control character other than tab.
    #[error("exec pattern `{0}` contains a control character")]
    PatternControl(String),
    /// A word of an exec pattern holds a shell metacharacter other than `*`.
    #[error(
        "exec pattern `{pattern}`: `{word}` holds a shell metacharacter; a pattern matches one \
         simple command of literal words (a trailing `*` is any further arguments, `*` \
         elsewhere one word, `**` any words)"
    )]
    PatternMetachar {
        /// The pattern.
        pattern: String,
        /// Its word that holds the metacharacter.
        word: String,
    },
    /// An empty exec pattern.
    #[error("an exec pattern must not be empty")]
    PatternEmpty,
    /// The pattern language refused it ([`toolhost_pattern::Pattern::parse`]).
    #[error("exec pattern `{pattern}`: {error}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why the language refused it.
        error: PatternError,
    },
    /// An `exec_env` entry that is no environment name or `PREFIX*`.
    #[error(
        "`{0}` is not an environment name or prefix: use letters, digits and `_` (not starting \
         with a digit), optionally ending in `*` (e.g. \"NOTES_MODE\", \"NOTES_*\")"
    )]
    EnvName(String),
    /// An `exec_shells` entry that is no absolute path without `.`/`..`.
    #[error("`{0}` is not an absolute shell path without `.`/`..` (e.g. \"/bin/bash\")")]
    ShellPath(String),
    /// An `exec_env`, `exec_shells` or `exec_stdin` list without an `exec` grant.
    #[error("grants nothing without an `exec` grant; add `exec = [\"PATTERN\"]`")]
    WithoutExec,
    /// An `exec_stdin` pattern no pattern of `exec` covers.
    #[error(
        "`{pattern}` is not covered by the `exec` grant ({granted}): `exec_stdin` lets commands \
         `exec` already grants read stdin, and grants no command (add the pattern to `exec` too)",
        granted = quoted_list(granted)
    )]
    StdinNotCovered {
        /// The `exec_stdin` pattern.
        pattern: String,
        /// The `exec` grant's patterns.
        granted: Vec<String>,
    },
    /// An `exec_stdin` pattern that feeds stdin to a program that runs it as code
    /// ([`stdin_runs_code`](crate::stdin_runs_code)).
    #[error(
        "`{pattern}` feeds stdin to `{word}`, which runs what it reads as code; no \
         `exec_stdin` entry grants that, only `exec = [\"**\"]` (the policy and approvers \
         then judge each command)"
    )]
    StdinRunsCode {
        /// The `exec_stdin` pattern.
        pattern: String,
        /// The word that runs stdin.
        word: String,
    },
    /// Not a plugin id ([`validate_id`](crate::validate_id)).
    #[error(
        "`{0}` is not a plugin id: use 1-64 of a-z 0-9 - _, starting with a letter, without `__`"
    )]
    Id(String),
    /// A size without one of the units `B`, `KiB`, `MiB`, `GiB`.
    #[error("`{0}`: unknown or missing unit; use B, KiB, MiB or GiB (e.g. \"64MiB\")")]
    SizeUnit(String),
    /// A size past `u64`.
    #[error("`{0}` is too large")]
    SizeTooLarge(String),
    /// A duration without one of the units `ms`, `s`, `m`/`min`, `h`.
    #[error("`{0}`: unknown or missing unit; use ms, s, min or h (e.g. \"500ms\", \"2s\")")]
    DurationUnit(String),
    /// A duration of zero or more than 24 h.
    #[error("`{0}` is out of range (more than 0, at most 24h)")]
    DurationRange(String),
    /// A size or duration that does not start with a digit.
    #[error("`{0}` does not start with a number")]
    NotANumber(String),
    /// A size or duration whose number does not parse (too many digits).
    #[error("`{text}`: {error}")]
    Number {
        /// The value as written (trimmed).
        text: String,
        /// Why the number does not parse.
        error: std::num::ParseIntError,
    },
}

/// `patterns` as `` `a`, `b` `` (how refusals list a grant).
pub(crate) fn quoted_list(patterns: &[String]) -> String {
    patterns
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
