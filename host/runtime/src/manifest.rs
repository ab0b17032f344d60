//! Plugin manifests: the TOML file beside a component (`name.toml` next to
//! `name.wasm`) that names the plugin and grants it capabilities
//! (ARCHITECTURE.md, "Plugins").
//!
//! Deny by default: a plugin without a manifest, or a manifest without a
//! grant, gets no authority (no exec, no files, no env) and the default
//! [`Limits`]. Everything is validated before any plugin code runs.
//!
//! ```toml
//! id = "notes"                 # required: [a-z][a-z0-9_-]{0,63}
//! contract = "0.1.0"           # required: the WIT contract version it targets
//! sha256 = "9f86d0…"           # optional pin of the .wasm file's digest
//! exec = ["git status", "git log *", "cargo test *"]  # or false / absent: none
//! exec_env = ["NOTES_MODE", "NOTES_*"]  # env names its commands may get (see below)
//! exec_shells = ["/bin/bash"]  # shells beyond /bin/sh its commands may run under
//! exec_stdin = ["wc -l", "jq *"]  # commands that may be fed stdin (each covered by `exec`)
//! memory = "128MiB"            # linear memory per call (default 64MiB, max 4GiB)
//! cpu = "2s"                   # guest CPU per call (default 1s)
//! wall = "60s"                 # wall time per call, host calls included (default 30s)
//! sandbox = "read-only"        # for commands it starts (stored for the exec sandbox)
//! network = false              # for commands it starts (stored for the exec sandbox)
//! unix_sockets = false         # for commands it starts: AF_UNIX sockets (ssh-agent, docker...)
//! elicitation = false          # contract >= 0.2.0: may ask the user through the MCP client
//! sampling = false             # contract >= 0.2.0: may ask the client's LLM for completions
//!
//! [env]
//! LANG = true                  # copy the host's value (absent if the host has none)
//! NOTES_MODE = "fast"          # a literal value
//!
//! [[preopen]]
//! host = "data"                # relative to the manifest's directory; must exist
//! guest = "/data"
//! mode = "read-only"           # or "read-write"
//! ```
//!
//! Exec patterns are in the one pattern language of toolhost
//! ([`toolhost_pattern`], the same as policy rules): a trailing `*` is any
//! further arguments, a `*` elsewhere one word, `*` inside a word a glob within
//! it, `**` any number of words. [`exec_pattern_matches`] is a pure function
//! with a table test; only the pattern `**` on its own accepts a command with
//! shell metacharacters.
//!
//! # A grant judges the whole request
//!
//! A process start is more than its command text: the environment, the shell
//! and stdin can each make `sleep 1` run anything (`BASH_ENV`, `BASH_FUNC_sleep%%`,
//! `LD_PRELOAD`, `PATH` into the workspace, `shell = /usr/bin/python3`, `sh` fed
//! a script on stdin). [`Manifest::check_exec`] therefore checks, for every
//! grant other than `exec = ["**"]` (which keeps any env, shell and stdin: the
//! policy plugin and approvers judge those requests):
//!
//! - **the command** against `exec` ([`ExecGrant::check`]);
//! - **the shell**: `/bin/sh` ([`DEFAULT_EXEC_SHELL`], the contract's default)
//!   or a path listed in `exec_shells` (absolute paths, compared as written;
//!   [`exec_shell_granted`]). A granted bash reads no startup file: bash acts
//!   on `BASH_ENV`, `BASH_FUNC_*`, `SHELLOPTS`... only from the environment,
//!   which the next rule covers;
//! - **every environment name** the request sets: one of [`SAFE_EXEC_ENV`]
//!   (`LANG`, `LANGUAGE`, `LC_*`, `TZ`, `NO_COLOR`, `FORCE_COLOR`, `CLICOLOR`,
//!   `COLUMNS`, `LINES`, `CI`: names no program runs code or loads a library
//!   from) or one `exec_env` grants, exactly (`NOTES_MODE`) or by prefix
//!   (`NOTES_*`; [`exec_env_granted`]). Nothing else, so no `PATH`, `LD_*`,
//!   `BASH_*`, `ENV`, `IFS`, `PS4`, `PAGER`, `EDITOR` or `GIT_*` unless the
//!   manifest names it;
//! - **the values of the safe default names**: glibc loads a locale from an
//!   absolute path (`LC_ALL=/ws/loc`) and `TZ=/ws/f` makes programs parse a
//!   file the plugin wrote, so without an `exec_env` grant of the name a value
//!   must be plain ([`check_safe_env_value`]): a locale name of
//!   `[A-Za-z0-9_.@-]` (`LANGUAGE` also `:`) without `/` or `..`; a `TZ` not
//!   starting with `/` or `:/`, with no `..` component (`UTC0`,
//!   `EST5EDT,M3.2.0,M11.1.0`, `America/New_York` pass); `COLUMNS`/`LINES`
//!   up to 5 digits; the colour and CI hints up to 16 plain characters. A name
//!   `exec_env` grants (`exec_env = ["TZ"]`) keeps any value: the operator
//!   chose it;
//! - **stdin**: a pattern grant covers the command text, never the bytes fed
//!   on stdin, and the policy never sees them either (`make test -f -` reads a
//!   makefile there, `awk -f /dev/stdin` a program, `rbash` a script). So
//!   stdin, bytes or an open pipe, is refused unless `exec_stdin` grants it
//!   for that command ([`exec_stdin_granted`]): patterns in the same language
//!   as `exec`, each covered by a pattern of `exec` (checked at load,
//!   [`validate_exec_stdin`], [`exec_pattern_covers`]). On top of that, stdin
//!   fed to a program that runs what it reads as code (a shell, an
//!   interpreter, `xargs`, `awk`/`sed`/`make -f -`, or a word naming stdin by
//!   path such as `/dev//stdin`; [`stdin_runs_code`]) is refused even when
//!   `exec_stdin` matches, and such an `exec_stdin` entry is refused at load:
//!   granting it would be `exec = ["**"]` without the policy. That list is
//!   defence in depth (known programs, not a proof); the grant is the rule.
//!
//! Each refusal names the variable, shell or program and the manifest key
//! that would grant it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use toolhost_manifest::ContractVersion;
use toolhost_pattern::{Pattern, PatternError};
use toolhost_process::{HeldDir, SandboxMode, SandboxPolicy};

use crate::limits::Limits;

/// Largest `memory` a manifest may ask for (4 GiB: all a wasm32 memory can hold).
pub const MAX_MEMORY: u64 = 4 << 30;
/// Smallest `memory` a manifest may ask for (1 MiB; a Rust guest needs about that to start).
pub const MIN_MEMORY: u64 = 1 << 20;
/// Longest `cpu` or `wall` a manifest may ask for (24 h).
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

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
        /// What is wrong and what is accepted.
        message: String,
    },
}

/// A validated manifest. Built by [`Manifest::load`] / [`Manifest::parse`],
/// or [`Manifest::builtin_bash`].
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The plugin id (`[a-z][a-z0-9_-]{0,63}`): names it in logs, tool-name
    /// prefixes (`id__tool`), session ownership and permission requests.
    pub id: String,
    /// The contract version it targets (one of [`ContractVersion::ALL`]).
    pub contract: ContractVersion,
    /// The pinned sha256 of the component file (lowercase hex), if any.
    pub sha256: Option<String>,
    /// Which commands it may ask the host to start. Default: none.
    pub exec: ExecGrant,
    /// Environment names (exact, or a prefix ending in `*`) its commands may
    /// get beyond [`SAFE_EXEC_ENV`] (manifest key `exec_env`). Ignored under
    /// `exec = ["**"]`, which keeps any env. Default: none.
    pub exec_env: Vec<String>,
    /// Shells (absolute paths) its commands may run under beyond
    /// [`DEFAULT_EXEC_SHELL`] (manifest key `exec_shells`). Ignored under
    /// `exec = ["**"]`, which allows any shell. Default: none.
    pub exec_shells: Vec<String>,
    /// Commands (exec patterns, each covered by `exec`) that may be fed stdin,
    /// bytes or an open pipe (manifest key `exec_stdin`). Ignored under
    /// `exec = ["**"]`, which keeps any stdin. Default: none, so every command
    /// of a pattern grant runs with stdin closed.
    pub exec_stdin: Vec<String>,
    /// Directories its WASI context preopens. Default: none.
    pub preopens: Vec<Preopen>,
    /// Environment variables its WASI context sees, values resolved at load.
    /// Default: none.
    pub env: Vec<(String, String)>,
    /// Per-call limits (memory, CPU, wall); defaults from [`Limits::default`].
    pub limits: Limits,
    /// The filesystem mode requested for the commands it starts (`None`: the
    /// operator's `--sandbox` alone decides). See [`Manifest::sandbox_policy`].
    pub sandbox: Option<SandboxMode>,
    /// Whether the commands it starts may use the network; they get it only
    /// when the operator allows it too (`--allow-network`). Default: false.
    pub network: bool,
    /// Whether the commands it starts may create UNIX sockets (connect to an
    /// ssh-agent, a Docker daemon, D-Bus, or bind their own); they get it only
    /// when the operator allows it too (`--allow-unix-sockets`). Default: false.
    pub unix_sockets: bool,
    /// Whether its calls may ask the user for input through the MCP client
    /// (`client.elicit`, MCP `elicitation/create`; manifest key
    /// `elicitation`, contract 0.2.0 or later). Without it `elicit` answers
    /// `client-error::not-granted`. Default: false (the built-ins too).
    pub elicitation: bool,
    /// Whether its calls may ask the MCP client's LLM for a completion
    /// (`client.sample`, MCP `sampling/createMessage`; manifest key
    /// `sampling`, contract 0.2.0 or later). Without it `sample` answers
    /// `client-error::not-granted`. Default: false (the built-ins too).
    pub sampling: bool,
}

/// A directory granted to a plugin's WASI context.
///
/// Granted by handle, not by path (ARCHITECTURE.md, "Sandbox"): `dir` is opened once
/// at load, and every call gets that directory again, never whatever sits at `host`
/// later; a call is refused when `host` no longer leads to it (`plugin/store.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    /// The host directory (canonical: the real path of `dir` when it was opened).
    pub host: PathBuf,
    /// The directory itself, opened once at load (`O_PATH`), held for the life of
    /// the manifest.
    pub dir: HeldDir,
    /// Where the guest sees it (e.g. `/data`).
    pub guest: String,
    /// Whether the guest may write.
    pub mode: PreopenMode,
}

/// Access to a preopened directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreopenMode {
    /// Read files and list directories only.
    ReadOnly,
    /// Also create, write, rename and delete.
    ReadWrite,
}

/// The exec grant: which commands a plugin may ask `sessions.start` to run.
/// Checked first in the permission pipeline; the policy plugin and approver
/// still decide after it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ExecGrant {
    /// No exec at all (no manifest, `exec` absent or `exec = false`).
    #[default]
    None,
    /// Commands matching at least one pattern (see [`exec_pattern_matches`]).
    Patterns(Vec<String>),
}

impl ExecGrant {
    /// Whether the grant covers `command` (the text run as `SHELL -c
    /// COMMAND`). `Err` carries the reason for a denial, naming the grant.
    ///
    /// A grant of `**` allows any command. Any other pattern allows only a
    /// single simple command of literal words ([`exec_pattern_matches`]). The
    /// rest of the request (shell, environment, stdin) is judged by
    /// [`Manifest::check_exec`].
    pub fn check(&self, command: &str) -> Result<(), String> {
        let patterns = match self {
            ExecGrant::None => {
                return Err(
                    "the plugin's manifest grants no exec (add `exec = [\"PATTERN\"]` \
                            to its manifest to allow commands)"
                        .into(),
                );
            }
            ExecGrant::Patterns(p) => p,
        };
        if self.grants_everything() || patterns.iter().any(|p| exec_pattern_matches(p, command)) {
            Ok(())
        } else {
            Err(format!(
                "the command does not match the plugin's exec grant ({}); a pattern matches one \
                 simple command word by word, without shell metacharacters",
                patterns
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }

    /// `true` for a grant holding the pattern `**` on its own: every command,
    /// under any shell, with any environment and stdin (the built-in bash
    /// plugin's grant; the policy plugin and approvers judge each request).
    pub fn grants_everything(&self) -> bool {
        match self {
            ExecGrant::None => false,
            ExecGrant::Patterns(p) => p.iter().any(|p| words(p) == ["**"]),
        }
    }
}

/// One process start as [`Manifest::check_exec`] judges it: the request after
/// the host's hard rules resolved it.
#[derive(Debug, Clone, Copy)]
pub struct ExecRequest<'a> {
    /// The command text, run as `SHELL -c COMMAND`.
    pub command: &'a str,
    /// The resolved shell (an absolute path, as the request wrote it, or
    /// `/bin/sh` when it named none).
    pub shell: &'a str,
    /// The environment pairs the request sets (the names are judged, and the
    /// values of [`SAFE_EXEC_ENV`] names the manifest does not grant).
    pub env: &'a [(String, String)],
    /// Whether the process gets input on stdin (`bytes` or an `open` pipe),
    /// rather than `/dev/null`: under a pattern grant, only for a command
    /// `exec_stdin` grants.
    pub feeds_stdin: bool,
}

/// The shell a pattern grant runs commands under unless the manifest's
/// `exec_shells` grants more: the contract's default, `/bin/sh`.
pub const DEFAULT_EXEC_SHELL: &str = "/bin/sh";

/// Environment names any plugin with an exec grant may set on the commands it
/// starts, without an `exec_env` grant: locale, time zone, colour and
/// terminal-size hints. No program runs code, loads a library or finds a
/// program through them; their values are checked ([`check_safe_env_value`])
/// unless `exec_env` grants the name. A trailing `*` is a prefix (`LC_*`).
pub const SAFE_EXEC_ENV: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "COLUMNS",
    "LINES",
    "CI",
];

/// Does the name pattern `pattern` (an exact name, or a prefix ending in `*`)
/// cover the environment name `name`? Case-sensitive.
fn env_pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// May a plugin whose manifest grants `exec_env = granted` set the
/// environment variable `name` on a command it starts (under a pattern grant
/// other than `**`)? Yes for [`SAFE_EXEC_ENV`] and for the names `granted`
/// covers, exactly or by a `PREFIX_*`. Pure; case-sensitive.
pub fn exec_env_granted(name: &str, granted: &[String]) -> bool {
    SAFE_EXEC_ENV
        .iter()
        .copied()
        .chain(granted.iter().map(String::as_str))
        .any(|p| env_pattern_matches(p, name))
}

/// May a plugin whose manifest grants `exec_shells = granted` run a command
/// under `shell` (under a pattern grant other than `**`)? Yes for
/// [`DEFAULT_EXEC_SHELL`] and for a path `granted` lists, compared as written
/// (`/usr/bin/bash` is not `/bin/bash`). Pure.
pub fn exec_shell_granted(shell: &str, granted: &[String]) -> bool {
    shell == DEFAULT_EXEC_SHELL || granted.iter().any(|g| g == shell)
}

/// Programs that run what they read on stdin as code when started without a
/// script (shells, interpreters, debuggers and database shells with a `!`/
/// `.system` escape, editors with `:!`), or that turn stdin into a command line
/// (`xargs`). Wrappers (`env`, `timeout`, `nice`...) need no entry: the program
/// they run is another word of the command.
/// Matched on a word's basename, with a version suffix removed (`python3.12`).
const STDIN_RUNNERS: &[&str] = &[
    "sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "rksh", "mksh", "pdksh", "oksh", "loksh",
    "posh", "yash", "fish", "csh", "tcsh", "elvish", "nu", "xonsh", "pwsh", "busybox", "toybox",
    "xargs", "python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "deno", "bun", "php",
    "lua", "luajit", "tclsh", "wish", "expect", "R", "Rscript", "julia", "gdb", "lldb", "sqlite",
    "mysql", "psql", "ed", "ex", "vi", "vim", "nvim", "dc", "bc",
];

/// Programs that read their program from stdin when a script-file option
/// names `-` (`awk -f -`, `sed -f -`, `make -f -`).
const STDIN_SCRIPT_FLAG: &[&str] = &[
    "awk", "gawk", "mawk", "nawk", "sed", "gsed", "make", "gmake", "bmake",
];

/// Would feeding stdin to `command` run it as code? `Some(word)` names the
/// word that makes it so: a program of [`STDIN_RUNNERS`] anywhere in the
/// command (so wrappers such as `timeout 5 sh` count), `awk`/`sed`/`make` with
/// a script file `-` (`-f -`, `-f-`, `--file=-`, `--makefile=-`), or a word
/// naming stdin by path, however spelled (`/dev/stdin`, `/dev//stdin`,
/// `/dev/fd/./0`, `/proc/self/fd/0`, `/proc/thread-self/fd/0`, `/proc/1/fd/0`,
/// also inside an option such as `-f/dev/stdin` or `--file=/dev/stdin`).
///
/// A list of known programs, not a proof: under a pattern grant stdin needs
/// an `exec_stdin` grant first ([`exec_stdin_granted`]); this is the extra
/// refusal that no `exec_stdin` entry overrides. Pure.
pub fn stdin_runs_code(command: &str) -> Option<&str> {
    let words = words(command);
    let base = |w: &str| -> String {
        let b = w.rsplit('/').next().unwrap_or(w);
        b.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
            .to_string()
    };
    let script_flag = words
        .windows(2)
        .any(|w| matches!(w[0], "-f" | "--file" | "--makefile" | "--script") && w[1] == "-")
        || words
            .iter()
            .any(|w| matches!(*w, "-f-" | "--file=-" | "--makefile=-" | "--script=-"));
    words.iter().copied().find(|w| {
        let b = base(w);
        STDIN_RUNNERS.contains(&b.as_str())
            || (script_flag && STDIN_SCRIPT_FLAG.contains(&b.as_str()))
            || names_stdin_path(w)
    })
}

/// Does `word` hold a path to the process's stdin? The path is the part from
/// the first `/` (so `-f/dev/stdin` and `--file=/dev/stdin` count), normalised
/// lexically (`//`, `.`, `..`), compared with `/dev/stdin`, `/dev/fd/0` and
/// `/proc/{self,thread-self,N}[/task/{N}]/fd/0`.
fn names_stdin_path(word: &str) -> bool {
    let Some(at) = word.find('/') else {
        return false;
    };
    let mut parts: Vec<&str> = Vec::new();
    for c in word[at..].split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let pid = |c: &str| {
        matches!(c, "self" | "thread-self")
            || (!c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
    };
    let tid = |c: &str| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        ["dev", "stdin"] | ["dev", "fd", "0"] => true,
        ["proc", p, "fd", "0"] => pid(p),
        ["proc", p, "task", t, "fd", "0"] => pid(p) && tid(t),
        _ => false,
    }
}

/// May a plugin whose manifest grants `exec_stdin = granted` feed stdin
/// (bytes or an open pipe) to `command` (under a pattern grant other than
/// `**`)? Yes when a pattern of `granted` matches the command
/// ([`exec_pattern_matches`]). Programs that run stdin as code are refused
/// after this by [`stdin_runs_code`], granted or not. Pure.
pub fn exec_stdin_granted(command: &str, granted: &[String]) -> bool {
    granted.iter().any(|p| exec_pattern_matches(p, command))
}

/// Does exec pattern `outer` match every command exec pattern `inner`
/// matches? Decided on the two patterns' words, never by guessing commands:
/// a `*`/`**` of `outer` that takes any words covers any words of `inner`
/// (its wildcards too); a word of `outer` covers a single word of `inner` when
/// it globs it with `inner`'s `*`s taken as text (`test:*` covers `test:*x`,
/// `*` elsewhere covers any one word); nothing else covers a `**` or trailing
/// `*` of `inner`. Sound (never `true` wrongly); it may say `false` for a
/// cover that only a union of patterns makes. O(words × words), no
/// backtracking. Malformed patterns cover nothing.
pub fn exec_pattern_covers(outer: &str, inner: &str) -> bool {
    if validate_exec_pattern(outer).is_err() || validate_exec_pattern(inner).is_err() {
        return false;
    }
    // (text, takes any number of words): `**`, or `*` as the last word.
    let split = |p: &str| -> Vec<(String, bool)> {
        let w = words(p);
        let last = w.len().saturating_sub(1);
        w.iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), *w == "**" || (*w == "*" && i == last)))
            .collect()
    };
    let (outer, inner) = (split(outer), split(inner));
    let (m, n) = (outer.len(), inner.len());
    // covers[i][j]: outer[i..] covers inner[j..].
    let mut covers = vec![vec![false; n + 1]; m + 1];
    covers[m][n] = true;
    for i in (0..m).rev() {
        for j in (0..=n).rev() {
            covers[i][j] = match &outer[i] {
                (_, true) => covers[i + 1][j] || (j < n && covers[i][j + 1]),
                (glob, false) => {
                    j < n
                        && !inner[j].1
                        && toolhost_pattern::glob_match(glob.as_bytes(), inner[j].0.as_bytes())
                        && covers[i + 1][j + 1]
                }
            };
        }
    }
    covers[0][0]
}

/// Longest value a name of [`SAFE_EXEC_ENV`] may get without an `exec_env`
/// grant of it (bytes; `COLUMNS`/`LINES` and the colour hints are shorter).
pub const MAX_SAFE_ENV_VALUE: usize = 128;

/// Checks the value of a [`SAFE_EXEC_ENV`] name set without an `exec_env`
/// grant of that name. The names are safe; some values are not: glibc loads
/// a locale from an absolute path (`LC_ALL=/ws/loc`), and `TZ=/ws/f` makes a
/// program parse a file the plugin wrote. `Err` states the rule:
///
/// - `LANG`, `LC_*`: a locale name of `[A-Za-z0-9_.@-]` (`LANGUAGE`, a list:
///   also `:`), so no `/`, and no `..`; at most [`MAX_SAFE_ENV_VALUE`] bytes;
/// - `TZ`: a POSIX TZ string (`UTC0`, `EST5EDT,M3.2.0,M11.1.0`, `<+03>-3`) or a
///   zoneinfo name (`America/New_York`, `:Europe/Paris`): not starting with
///   `/` or `:/`, no `..` path component, no control character; at most
///   [`MAX_SAFE_ENV_VALUE`] bytes;
/// - `COLUMNS`, `LINES`: at most 5 decimal digits;
/// - `NO_COLOR`, `FORCE_COLOR`, `CLICOLOR`, `CI`: at most 16 bytes of
///   `[A-Za-z0-9_.-]` (`1`, `true`, `3`...).
///
/// Any other name: `Ok` (it is not in the safe set). Pure.
pub fn check_safe_env_value(name: &str, value: &str) -> Result<(), &'static str> {
    let plain = |extra: &str, max: usize| {
        value.len() <= max
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c) || extra.contains(c))
    };
    let (ok, rule) = match name {
        "LANGUAGE" => (
            plain("@:", MAX_SAFE_ENV_VALUE) && !value.contains(".."),
            "a list of locale names: `A-Z a-z 0-9 _ . @ -` and `:`, no `/` or `..`, at most \
             128 bytes (e.g. `en_US:en`)",
        ),
        n if n == "LANG" || n.starts_with("LC_") => (
            plain("@", MAX_SAFE_ENV_VALUE) && !value.contains(".."),
            "a locale name: `A-Z a-z 0-9 _ . @ -`, no `/` or `..`, at most 128 bytes (e.g. \
             `C.UTF-8`, `en_US.UTF-8`)",
        ),
        "TZ" => (
            value.len() <= MAX_SAFE_ENV_VALUE
                && !value.starts_with('/')
                && !value.starts_with(":/")
                && !value.chars().any(char::is_control)
                && !value.split(['/', ':']).any(|c| c == ".."),
            "a POSIX TZ string or zoneinfo name (e.g. `UTC0`, `America/New_York`): not a path \
             starting with `/` or `:/`, no `..` component, no control character, at most 128 \
             bytes",
        ),
        "COLUMNS" | "LINES" => (
            value.len() <= 5 && value.bytes().all(|b| b.is_ascii_digit()),
            "at most 5 decimal digits",
        ),
        "NO_COLOR" | "FORCE_COLOR" | "CLICOLOR" | "CI" => (
            plain("", 16),
            "at most 16 characters of `A-Z a-z 0-9 _ . -` (e.g. `1`, `true`)",
        ),
        _ => (true, ""),
    };
    if ok { Ok(()) } else { Err(rule) }
}

/// Checks an `exec_env` entry: an environment name of `[A-Za-z_][A-Za-z0-9_]*`,
/// optionally ending in `*` (a prefix). `*` alone is refused (that is
/// `exec = ["**"]`'s authority).
pub fn validate_exec_env(pattern: &str) -> Result<(), String> {
    let name = pattern.strip_suffix('*').unwrap_or(pattern);
    let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{pattern}` is not an environment name or prefix: use letters, digits and `_` \
             (not starting with a digit), optionally ending in `*` (e.g. \"NOTES_MODE\", \
             \"NOTES_*\")"
        ))
    }
}

/// Checks an `exec_shells` entry: an absolute path without `.`/`..`
/// components, NUL or control characters. Whether it exists is checked per
/// request by the host's hard rules.
pub fn validate_exec_shell(shell: &str) -> Result<(), String> {
    let ok = shell.starts_with('/')
        && !shell.chars().any(char::is_control)
        && !shell.split('/').any(|c| c == "." || c == "..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{shell}` is not an absolute shell path without `.`/`..` (e.g. \"/bin/bash\")"
        ))
    }
}

/// Checks an `exec_stdin` entry against the manifest's `exec` grant: an exec
/// pattern ([`validate_exec_pattern`]) that a pattern of `exec` covers
/// ([`exec_pattern_covers`]; `exec_stdin` grants stdin, never a command), and
/// not one that feeds stdin to a program that runs it as code
/// ([`stdin_runs_code`]: only `exec = ["**"]` keeps that, judged by the policy).
pub fn validate_exec_stdin(pattern: &str, exec: &ExecGrant) -> Result<(), String> {
    validate_exec_pattern(pattern)?;
    let ExecGrant::Patterns(granted) = exec else {
        return Err("grants nothing without an `exec` grant; add `exec = [\"PATTERN\"]`".into());
    };
    if !granted.iter().any(|g| exec_pattern_covers(g, pattern)) {
        return Err(format!(
            "`{pattern}` is not covered by the `exec` grant ({}): `exec_stdin` lets commands \
             `exec` already grants read stdin, and grants no command (add the pattern to `exec` \
             too)",
            granted
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(word) = stdin_runs_code(pattern) {
        return Err(format!(
            "`{pattern}` feeds stdin to `{word}`, which runs what it reads as code; no \
             `exec_stdin` entry grants that, only `exec = [\"**\"]` (the policy and approvers \
             then judge each command)"
        ));
    }
    Ok(())
}

/// Characters that make a command more than one simple command with literal
/// words: separators, pipes, substitutions, redirections, grouping, quotes
/// and escapes, globs and brace/tilde expansion, comments. A command holding
/// any of them (or any control character other than tab) matches only `**`.
const SHELL_SPECIAL: &[char] = &[
    ';', '&', '|', '$', '`', '(', ')', '<', '>', '\\', '\'', '"', '*', '?', '[', ']', '{', '}',
    '~', '#', '!',
];

/// Does exec `pattern` match `command`? Pure; no I/O; linear in the command's
/// length for patterns without `**`.
///
/// - The pattern `**` alone matches every command, even an empty one or one
///   with shell metacharacters.
/// - Otherwise the command must be a single simple command of literal words:
///   any of `; & | $ \` ( ) < >`, quotes, backslash, `* ? [ ] { } ~ # !`, a
///   newline or other control character makes it fail. Its words (split on
///   spaces and tabs) are matched by the shared pattern language
///   ([`toolhost_pattern::Pattern`]): a trailing `*` is any further arguments,
///   `*` elsewhere one word, `*` inside a word a glob, `**` any words.
/// - A malformed pattern matches nothing; [`validate_exec_pattern`] reports why
///   at load.
pub fn exec_pattern_matches(pattern: &str, command: &str) -> bool {
    if words(pattern) == ["**"] {
        return true;
    }
    let Ok(parsed) = parse_exec_pattern(pattern) else {
        return false;
    };
    if command
        .chars()
        .any(|c| SHELL_SPECIAL.contains(&c) || (c.is_control() && c != '\t'))
    {
        return false;
    }
    parsed.matches_words(&words(command))
}

/// Checks an exec pattern's syntax: the shared language's rules (non-empty, the
/// first word names a program), plus no shell metacharacters other than `*`
/// and no control characters. `**` alone is the grant of every command.
pub fn validate_exec_pattern(pattern: &str) -> Result<(), String> {
    if words(pattern) == ["**"] {
        return Ok(());
    }
    parse_exec_pattern(pattern).map(|_| ())
}

fn parse_exec_pattern(pattern: &str) -> Result<Pattern, String> {
    if pattern.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!(
            "exec pattern `{pattern}` contains a control character"
        ));
    }
    for word in words(pattern) {
        if word.chars().any(|c| c != '*' && SHELL_SPECIAL.contains(&c)) {
            return Err(format!(
                "exec pattern `{pattern}`: `{word}` holds a shell metacharacter; a pattern \
                 matches one simple command of literal words (a trailing `*` is any further \
                 arguments, `*` elsewhere one word, `**` any words)"
            ));
        }
    }
    Pattern::parse(pattern).map_err(|e| match e {
        PatternError::Empty => "an exec pattern must not be empty".to_string(),
        e => format!("exec pattern `{pattern}`: {e}"),
    })
}

fn words(s: &str) -> Vec<&str> {
    s.split([' ', '\t']).filter(|w| !w.is_empty()).collect()
}

/// The raw TOML shape (kebab-case keys, unknown keys refused).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    id: String,
    contract: String,
    sha256: Option<String>,
    exec: Option<RawExec>,
    exec_env: Option<Vec<String>>,
    exec_shells: Option<Vec<String>>,
    exec_stdin: Option<Vec<String>>,
    #[serde(default)]
    preopen: Vec<RawPreopen>,
    #[serde(default)]
    env: BTreeMap<String, RawEnv>,
    memory: Option<String>,
    cpu: Option<String>,
    wall: Option<String>,
    sandbox: Option<SandboxMode>,
    #[serde(default)]
    network: bool,
    #[serde(default)]
    unix_sockets: bool,
    #[serde(default)]
    elicitation: bool,
    #[serde(default)]
    sampling: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawExec {
    Flag(bool),
    Patterns(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawEnv {
    FromHost(bool),
    Literal(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPreopen {
    host: PathBuf,
    guest: String,
    mode: PreopenMode,
}

impl Manifest {
    /// Reads and validates the manifest at `path`. Relative preopen paths are
    /// resolved against the manifest's directory.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Manifest::parse(&text, path, base, &|k| std::env::var(k).ok())
    }

    /// Validates manifest `text`. `path` names the file in errors; `base` is
    /// the directory relative preopen paths resolve against; `host_env` looks
    /// up host environment values for `env` keys granted with `true`.
    ///
    /// Errors: [`ManifestError::Parse`] (syntax, unknown keys, wrong types;
    /// with line and column) or [`ManifestError::Invalid`] (bad id, contract,
    /// sha256, units, exec pattern, env name, or a preopen that does not
    /// exist or is not a directory).
    pub fn parse(
        text: &str,
        path: &Path,
        base: &Path,
        host_env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Manifest, ManifestError> {
        let raw: Raw = toml::from_str(text).map_err(|e| ManifestError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |field: &str, message: String| ManifestError::Invalid {
            path: path.to_path_buf(),
            field: field.to_string(),
            message,
        };
        validate_id(&raw.id).map_err(|m| invalid("id", m))?;
        let contract: ContractVersion =
            raw.contract
                .parse()
                .map_err(|e: toolhost_manifest::UnsupportedContract| {
                    invalid("contract", e.to_string())
                })?;
        // `client` (elicitation, sampling) came with contract 0.2.0: a 0.1.0
        // plugin cannot call it, so a grant for one is a mistake worth naming.
        for (key, granted) in [("elicitation", raw.elicitation), ("sampling", raw.sampling)] {
            if granted && contract < ContractVersion::V0_2_0 {
                return Err(invalid(
                    key,
                    format!(
                        "needs contract {} or later (a {contract} plugin cannot ask the client); \
                         set `contract = \"{}\"` for a plugin built for it",
                        ContractVersion::V0_2_0,
                        ContractVersion::V0_2_0
                    ),
                ));
            }
        }
        let sha256 = match raw.sha256 {
            Some(s) => {
                let s = s.to_ascii_lowercase();
                if s.len() != 64 || !s.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(invalid("sha256", "expected 64 hex digits".into()));
                }
                Some(s)
            }
            None => None,
        };
        let exec = match raw.exec {
            None | Some(RawExec::Flag(false)) => ExecGrant::None,
            Some(RawExec::Flag(true)) => {
                return Err(invalid(
                    "exec",
                    "`true` is not a grant; list patterns (e.g. [\"git status\"]), or [\"**\"] \
                     for every command"
                        .into(),
                ));
            }
            Some(RawExec::Patterns(patterns)) => {
                for p in &patterns {
                    validate_exec_pattern(p).map_err(|m| invalid("exec", m))?;
                }
                ExecGrant::Patterns(patterns)
            }
        };
        for (key, list) in [
            ("exec_env", &raw.exec_env),
            ("exec_shells", &raw.exec_shells),
            ("exec_stdin", &raw.exec_stdin),
        ] {
            if list.is_some() && exec == ExecGrant::None {
                return Err(invalid(
                    key,
                    "grants nothing without an `exec` grant; add `exec = [\"PATTERN\"]`".into(),
                ));
            }
        }
        let exec_env = raw.exec_env.unwrap_or_default();
        for name in &exec_env {
            validate_exec_env(name).map_err(|m| invalid("exec_env", m))?;
        }
        let exec_shells = raw.exec_shells.unwrap_or_default();
        for shell in &exec_shells {
            validate_exec_shell(shell).map_err(|m| invalid("exec_shells", m))?;
        }
        let exec_stdin = raw.exec_stdin.unwrap_or_default();
        for pattern in &exec_stdin {
            validate_exec_stdin(pattern, &exec).map_err(|m| invalid("exec_stdin", m))?;
        }
        let mut preopens = Vec::new();
        for (i, p) in raw.preopen.into_iter().enumerate() {
            let field = format!("preopen[{i}]");
            let host = base.join(&p.host);
            // One open: what is validated here is what every call is granted.
            let dir = HeldDir::open(&host).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotADirectory {
                    invalid(
                        &format!("{field}.host"),
                        format!("{} is not a directory", host.display()),
                    )
                } else {
                    invalid(&format!("{field}.host"), format!("{}: {e}", host.display()))
                }
            })?;
            if !p.guest.starts_with('/') || p.guest.contains('\0') {
                return Err(invalid(
                    &format!("{field}.guest"),
                    format!("`{}` must be an absolute guest path like /data", p.guest),
                ));
            }
            preopens.push(Preopen {
                host: dir.path().to_path_buf(),
                dir,
                guest: p.guest,
                mode: p.mode,
            });
        }
        let mut env = Vec::new();
        for (key, value) in raw.env {
            if key.is_empty() || key.contains(['=', '\0']) {
                return Err(invalid(
                    "env",
                    format!("`{key}` is not a valid variable name"),
                ));
            }
            match value {
                RawEnv::FromHost(true) => {
                    if let Some(v) = host_env(&key) {
                        env.push((key, v));
                    } else {
                        tracing::debug!(
                            "manifest {}: env {key} is granted from the host, which has none",
                            path.display()
                        );
                    }
                }
                RawEnv::FromHost(false) => {
                    return Err(invalid(
                        &format!("env.{key}"),
                        "use `true` (the host's value) or a string (a literal); remove the key \
                         to grant nothing"
                            .into(),
                    ));
                }
                RawEnv::Literal(v) => {
                    if v.contains('\0') {
                        return Err(invalid(&format!("env.{key}"), "contains NUL".into()));
                    }
                    env.push((key, v));
                }
            }
        }
        let mut limits = Limits::default();
        if let Some(m) = &raw.memory {
            let bytes = parse_size(m).map_err(|e| invalid("memory", e))?;
            if !(MIN_MEMORY..=MAX_MEMORY).contains(&bytes) {
                return Err(invalid(
                    "memory",
                    format!("{m} is out of range (1MiB to 4GiB)"),
                ));
            }
            limits.memory_bytes = bytes as usize;
        }
        if let Some(c) = &raw.cpu {
            limits.cpu = parse_duration(c).map_err(|e| invalid("cpu", e))?;
        }
        if let Some(w) = &raw.wall {
            limits.wall = parse_duration(w).map_err(|e| invalid("wall", e))?;
        }
        Ok(Manifest {
            id: raw.id,
            contract,
            sha256,
            exec,
            exec_env,
            exec_shells,
            exec_stdin,
            preopens,
            env,
            limits,
            sandbox: raw.sandbox,
            network: raw.network,
            unix_sockets: raw.unix_sockets,
            elicitation: raw.elicitation,
            sampling: raw.sampling,
        })
    }

    /// A manifest granting nothing, with default limits: what a plugin
    /// loaded without a manifest file gets.
    pub fn deny_all(id: &str) -> Manifest {
        Manifest {
            id: id.to_string(),
            contract: ContractVersion::STARTER,
            sha256: None,
            exec: ExecGrant::None,
            exec_env: Vec::new(),
            exec_shells: Vec::new(),
            exec_stdin: Vec::new(),
            preopens: Vec::new(),
            env: Vec::new(),
            limits: Limits::default(),
            sandbox: None,
            network: false,
            unix_sockets: false,
            elicitation: false,
            sampling: false,
        }
    }

    /// The built-in bash plugin's manifest: exec `**` (the policy plugin and
    /// approvers decide each command), no files or env, default memory, CPU
    /// 60 s, wall time 11 minutes (its longest foreground timeout is 10), and
    /// no sandbox restriction of its own (`--sandbox`/`--allow-network`/
    /// `--allow-unix-sockets` decide).
    pub fn builtin_bash() -> Manifest {
        Manifest {
            exec: ExecGrant::Patterns(vec!["**".into()]),
            network: true,
            unix_sockets: true,
            limits: Limits {
                wall: Duration::from_secs(11 * 60),
                // It drains output events while a command floods: real work
                // that grows with the output, not a runaway loop.
                cpu: Duration::from_secs(60),
                ..Limits::default()
            },
            ..Manifest::deny_all(crate::builtin::BASH_ID)
        }
    }

    /// The manifest's exec step of the permission pipeline: may this plugin
    /// start `request` (already resolved by the host's hard rules)? `Err`
    /// carries the reason, naming the command, shell, variable or program and
    /// the manifest key that would grant it.
    ///
    /// No exec grant: denied. `exec = ["**"]`: any command, shell, environment
    /// and stdin. Any other grant: the command must match a pattern
    /// ([`ExecGrant::check`]), the shell must be [`DEFAULT_EXEC_SHELL`] or in
    /// `exec_shells` ([`exec_shell_granted`]), every environment name must be
    /// in `exec_env` ([`exec_env_granted`]) or in [`SAFE_EXEC_ENV`] with a value
    /// [`check_safe_env_value`] accepts, and stdin (bytes or open) is fed only to
    /// a command `exec_stdin` grants ([`exec_stdin_granted`]) and never to a
    /// program that runs it as code ([`stdin_runs_code`]).
    /// See the module docs, "A grant judges the whole request".
    pub fn check_exec(&self, request: &ExecRequest<'_>) -> Result<(), String> {
        self.exec.check(request.command)?;
        if self.exec.grants_everything() {
            return Ok(());
        }
        if !exec_shell_granted(request.shell, &self.exec_shells) {
            return Err(format!(
                "the plugin's manifest does not grant the shell `{}`: a pattern grant runs \
                 commands with {DEFAULT_EXEC_SHELL} (grant it with `exec_shells = [\"{}\"]`)",
                request.shell, request.shell
            ));
        }
        for (name, value) in request.env {
            if self.exec_env.iter().any(|p| env_pattern_matches(p, name)) {
                // Granted by name: the operator chose it, any value.
                continue;
            }
            if exec_env_granted(name, &[]) {
                if let Err(rule) = check_safe_env_value(name, value) {
                    return Err(format!(
                        "the plugin's manifest does not let its commands get this value of the \
                         environment variable `{name}`: without a grant of the name, its value \
                         must be {rule} (grant any value with `exec_env = [\"{name}\"]`)"
                    ));
                }
                continue;
            }
            let how = if validate_exec_env(name).is_ok() {
                format!("grant it with `exec_env = [\"{name}\"]`")
            } else {
                "no `exec_env` entry can name it; only `exec = [\"**\"]` keeps any environment"
                    .to_string()
            };
            return Err(format!(
                "the plugin's manifest does not let its commands get the environment variable \
                 `{name}`: without a grant only {} are allowed ({how})",
                SAFE_EXEC_ENV.join(", ")
            ));
        }
        if request.feeds_stdin {
            if let Some(word) = stdin_runs_code(request.command) {
                return Err(format!(
                    "the command feeds stdin to `{word}`, which runs what it reads as code; a \
                     pattern grant covers the command text, never stdin, and no `exec_stdin` \
                     entry grants this (start it with stdin closed, or grant `exec = [\"**\"]` \
                     so the policy and approvers judge it)"
                ));
            }
            if !exec_stdin_granted(request.command, &self.exec_stdin) {
                let command = words(request.command).join(" ");
                let how = if command.len() <= 200 {
                    format!("`exec_stdin = [\"{command}\"]`")
                } else {
                    "`exec_stdin = [\"PATTERN\"]`".to_string()
                };
                return Err(format!(
                    "the plugin's manifest does not let this command read stdin: a pattern grant \
                     covers the command text, never what is fed on stdin (start it with stdin \
                     closed, or grant stdin with {how}; each `exec_stdin` pattern must also be \
                     covered by `exec`)"
                ));
            }
        }
        Ok(())
    }

    /// The manifest as JSON (for `plugin inspect --json`): `id`, `contract`,
    /// `sha256`, `exec` (`null` or a list of patterns), `exec_env`,
    /// `exec_shells` and `exec_stdin` (lists), `preopens`
    /// (`host`, `guest`, `mode`), `env` (names only: values may be secrets),
    /// `memory_bytes`, `cpu_ms`, `wall_ms`, `sandbox`, `network`, `unix_sockets`,
    /// `elicitation`, `sampling`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "contract": self.contract.as_str(),
            "sha256": self.sha256,
            "exec": match &self.exec {
                ExecGrant::None => serde_json::Value::Null,
                ExecGrant::Patterns(p) => serde_json::json!(p),
            },
            "exec_env": self.exec_env,
            "exec_shells": self.exec_shells,
            "exec_stdin": self.exec_stdin,
            "preopens": self.preopens.iter().map(|p| serde_json::json!({
                "host": p.host.display().to_string(),
                "guest": p.guest,
                "mode": p.mode.as_str(),
            })).collect::<Vec<_>>(),
            "env": self.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            "memory_bytes": self.limits.memory_bytes,
            "cpu_ms": self.limits.cpu.as_millis() as u64,
            "wall_ms": self.limits.wall.as_millis() as u64,
            "sandbox": self.sandbox.map(|s| s.as_str()),
            "network": self.network,
            "unix_sockets": self.unix_sockets,
            "elicitation": self.elicitation,
            "sampling": self.sampling,
        })
    }

    /// The sandbox policy this manifest asks for the commands its plugin
    /// starts: its `sandbox` mode (absent: no restriction beyond the
    /// operator's), `network` and `unix_sockets` (default off). The session
    /// engine combines it with the operator's `--sandbox`/`--allow-network`/
    /// `--allow-unix-sockets` using
    /// [`SandboxPolicy::stricter`], so a manifest can only tighten.
    pub fn sandbox_policy(&self) -> SandboxPolicy {
        SandboxPolicy {
            mode: self.sandbox.unwrap_or(SandboxMode::FullAccess),
            network: self.network,
            unix_sockets: self.unix_sockets,
            git_writable: false,
        }
    }
}

/// Checks a plugin id: 1 to 64 characters of `[a-z0-9_-]`, starting with a
/// letter, without `__` (reserved for `id__tool` prefixes).
pub fn validate_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && !id.contains("__");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{id}` is not a plugin id: use 1-64 of a-z 0-9 - _, starting with a letter, \
             without `__`"
        ))
    }
}

/// Parses a size: an integer followed by `B`, `KiB`, `MiB` or `GiB`
/// (e.g. `64MiB`; spaces allowed before the unit).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (n, unit) = split_number(s)?;
    let mult: u64 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => {
            return Err(format!(
                "`{s}`: unknown or missing unit; use B, KiB, MiB or GiB (e.g. \"64MiB\")"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// Parses a duration: an integer followed by `ms`, `s`, `m`/`min` or `h`
/// (e.g. `500ms`, `2s`, `11min`). Zero and more than 24 h are refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = split_number(s)?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => {
            return Err(format!(
                "`{s}`: unknown or missing unit; use ms, s, min or h (e.g. \"500ms\", \"2s\")"
            ));
        }
    };
    if d.is_zero() || d > MAX_DURATION {
        return Err(format!("`{s}` is out of range (more than 0, at most 24h)"));
    }
    Ok(d)
}

fn split_number(s: &str) -> Result<(u64, &str), String> {
    let s = s.trim();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return Err(format!("`{s}` does not start with a number"));
    }
    let n = s[..end].parse::<u64>().map_err(|e| format!("`{s}`: {e}"))?;
    Ok((n, s[end..].trim_start()))
}

impl PreopenMode {
    /// `read-only` or `read-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            PreopenMode::ReadOnly => "read-only",
            PreopenMode::ReadWrite => "read-write",
        }
    }
}

impl fmt::Display for ExecGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecGrant::None => f.write_str("none"),
            ExecGrant::Patterns(p) => write!(f, "{}", p.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (pattern, command, matches)
    const CASES: &[(&str, &str, bool)] = &[
        // literal words
        ("git status", "git status", true),
        ("git status", "git  status", true),
        ("git status", "\tgit status ", true),
        ("git status", "git status --short", false),
        ("git status", "git", false),
        ("git status", "git statu", false),
        ("git status", "git Status", false),
        ("git status", "", false),
        // a trailing `*` is any further arguments (the policy's meaning too)
        ("cargo test *", "cargo test foo", true),
        ("cargo test *", "cargo test", true),
        ("cargo test *", "cargo test foo bar", true),
        ("cargo test *", "cargo testx", false),
        // `*` elsewhere is exactly one word
        ("git * --help", "git log --help", true),
        ("git * --help", "git --help", false),
        ("git * --help", "git log x --help", false),
        // `*` inside a word globs within it
        ("npm run test:*", "npm run test:unit", true),
        ("npm run test:*", "npm run build", false),
        // the program is never a wildcard
        ("* --version", "rustc --version", false),
        // trailing `**` is zero or more words
        ("git log **", "git log", true),
        ("git log **", "git log --oneline -n 5", true),
        ("git log **", "git show", false),
        ("git * **", "git", false),
        ("git * **", "git x y z", true),
        // `**` alone is everything, metacharacters included
        ("**", "git status; rm -rf /", true),
        ("**", "", true),
        ("**", "a && b | c > d $(e) `f`", true),
        ("  ** ", "anything at all", true),
        // bypass shapes: a plain pattern matches a single simple command only
        ("git status", "git status; rm -rf /", false),
        ("git status **", "git status; rm -rf /", false),
        ("git status **", "git status && rm -rf /", false),
        ("git status **", "git status || rm -rf /", false),
        ("git status **", "git status & rm -rf /", false),
        ("git status **", "git status | sh", false),
        ("git status **", "git status $(rm -rf /)", false),
        ("git status **", "git status `rm -rf /`", false),
        ("git status **", "git status ${IFS}x", false),
        ("git status **", "git status > /etc/passwd", false),
        ("git status **", "git status < /dev/zero", false),
        ("git status **", "git status <(rm -rf /)", false),
        ("git status **", "git status\nrm -rf /", false),
        ("git status **", "git status\rrm -rf /", false),
        ("git status **", "git status\u{b}rm", false),
        ("git status **", "(git status)", false),
        ("git status **", "git status 'a;b'", false),
        ("git status **", "git status \"$HOME\"", false),
        ("git status **", "git status \\; rm", false),
        ("git status **", "git status #comment", false),
        ("cat *", "cat *", false),
        ("cat *", "cat ~/.ssh/id_rsa", false),
        ("rm *", "rm {a,b}", false),
        ("ls *", "ls [ab]", false),
        ("ls *", "ls ?", false),
        ("git status *", "PATH=/tmp/x git status", false),
        ("git status", "PATH=/tmp/x git status", false),
        // malformed patterns match nothing
        ("", "", false),
        ("   ", "x", false),
        ("* x", "a x", false),
        ("git sta*", "git status", true),
        ("git status; rm", "git status; rm", false),
    ];

    #[test]
    fn exec_pattern_table() {
        for (pattern, command, expected) in CASES {
            assert_eq!(
                exec_pattern_matches(pattern, command),
                *expected,
                "pattern {pattern:?} vs command {command:?}"
            );
        }
    }

    #[test]
    fn exec_grant_check() {
        let none = ExecGrant::None;
        assert!(none.check("ls").unwrap_err().contains("grants no exec"));
        assert!(!none.grants_everything());
        let some = ExecGrant::Patterns(vec!["git status".into()]);
        assert!(some.check("git status").is_ok());
        assert!(some.check("ls").unwrap_err().contains("`git status`"));
        assert!(!some.grants_everything());
        let all = ExecGrant::Patterns(vec!["git status".into(), " ** ".into()]);
        assert!(all.check("a; b").is_ok());
        assert!(all.grants_everything());
    }

    /// (name, exec_env grant, allowed)
    const ENV_CASES: &[(&str, &[&str], bool)] = &[
        // the safe default set
        ("LANG", &[], true),
        ("LANGUAGE", &[], true),
        ("LC_ALL", &[], true),
        ("LC_CTYPE", &[], true),
        ("TZ", &[], true),
        ("NO_COLOR", &[], true),
        ("COLUMNS", &[], true),
        ("LINES", &[], true),
        ("CI", &[], true),
        // names that make bash, ld.so or common programs run code
        ("BASH_ENV", &[], false),
        ("ENV", &[], false),
        ("BASH_FUNC_sleep%%", &[], false),
        ("BASH_FUNC_sleep()", &[], false),
        ("LD_PRELOAD", &[], false),
        ("LD_LIBRARY_PATH", &[], false),
        ("LD_AUDIT", &[], false),
        ("PATH", &[], false),
        ("IFS", &[], false),
        ("PS4", &[], false),
        ("SHELLOPTS", &[], false),
        ("BASHOPTS", &[], false),
        ("PROMPT_COMMAND", &[], false),
        ("GLOBIGNORE", &[], false),
        ("CDPATH", &[], false),
        ("HOME", &[], false),
        ("PAGER", &[], false),
        ("EDITOR", &[], false),
        ("GIT_SSH_COMMAND", &[], false),
        ("GCONV_PATH", &[], false),
        ("GLIBC_TUNABLES", &[], false),
        ("PYTHONPATH", &[], false),
        ("NODE_OPTIONS", &[], false),
        ("TERM", &[], false),
        // case matters
        ("lang", &[], false),
        ("Lang", &[], false),
        ("LC", &[], false),
        // granted names: exact, or by prefix
        ("NOTES_MODE", &["NOTES_MODE"], true),
        ("NOTES_MODEX", &["NOTES_MODE"], false),
        ("NOTES_MOD", &["NOTES_MODE"], false),
        ("NOTES_X", &["NOTES_*"], true),
        ("NOTES_", &["NOTES_*"], true),
        ("NOTESX", &["NOTES_*"], false),
        ("BASH_ENV", &["NOTES_*"], false),
        ("LD_PRELOAD", &["LD_PRELOAD"], true),
    ];

    #[test]
    fn exec_env_table() {
        for (name, granted, expected) in ENV_CASES {
            let granted: Vec<String> = granted.iter().map(|g| g.to_string()).collect();
            assert_eq!(
                exec_env_granted(name, &granted),
                *expected,
                "{name:?} under exec_env = {granted:?}"
            );
        }
        for ok in ["A", "_X", "NOTES_MODE", "NOTES_*", "a1_*"] {
            assert!(validate_exec_env(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "*",
            "1X",
            "A-B",
            "A=B",
            "BASH_FUNC_f%%",
            "A*B",
            "A **",
            "A\0",
        ] {
            assert!(validate_exec_env(bad).is_err(), "{bad:?}");
        }
    }

    /// (shell, exec_shells grant, allowed)
    const SHELL_CASES: &[(&str, &[&str], bool)] = &[
        ("/bin/sh", &[], true),
        ("/bin/bash", &[], false),
        ("/usr/bin/sh", &[], false),
        ("/bin/dash", &[], false),
        ("/usr/bin/python3", &[], false),
        ("/bin/bash", &["/bin/bash"], true),
        ("/usr/bin/bash", &["/bin/bash"], false),
        ("/bin/zsh", &["/bin/bash"], false),
        ("/bin/sh", &["/bin/bash"], true),
    ];

    #[test]
    fn exec_shell_table() {
        for (shell, granted, expected) in SHELL_CASES {
            let granted: Vec<String> = granted.iter().map(|g| g.to_string()).collect();
            assert_eq!(
                exec_shell_granted(shell, &granted),
                *expected,
                "{shell:?} under exec_shells = {granted:?}"
            );
        }
        assert!(validate_exec_shell("/bin/bash").is_ok());
        for bad in ["bash", "", "/bin/../tmp/x", "/bin/./bash", "/bin/ba\nsh"] {
            assert!(validate_exec_shell(bad).is_err(), "{bad:?}");
        }
    }

    /// (command, the word that runs stdin as code)
    const STDIN_CASES: &[(&str, Option<&str>)] = &[
        ("sh", Some("sh")),
        ("bash -s", Some("bash")),
        ("/bin/bash", Some("/bin/bash")),
        ("python3", Some("python3")),
        ("python3.12 -", Some("python3.12")),
        ("timeout 5 sh", Some("sh")),
        ("nice -n 5 perl", Some("perl")),
        ("xargs echo", Some("xargs")),
        ("cat /dev/stdin", Some("/dev/stdin")),
        ("awk -f -", Some("awk")),
        ("sqlite3 db", Some("sqlite3")),
        // the review's bypasses of the old list
        ("make test -f -", Some("make")),
        ("make -f- test", Some("make")),
        ("make --file=- test", Some("make")),
        ("make --makefile=-", Some("make")),
        ("awk -f /dev//stdin", Some("/dev//stdin")),
        ("awk -f/dev/stdin", Some("-f/dev/stdin")),
        ("awk --file=/dev/stdin", Some("--file=/dev/stdin")),
        ("awk -f /proc/self/fd//0", Some("/proc/self/fd//0")),
        ("awk -f /dev/fd/./0", Some("/dev/fd/./0")),
        (
            "awk -f /proc/thread-self/fd/0",
            Some("/proc/thread-self/fd/0"),
        ),
        ("awk -f /proc/1/task/1/fd/0", Some("/proc/1/task/1/fd/0")),
        ("awk -f /dev/../dev/stdin", Some("/dev/../dev/stdin")),
        ("sed -f - x", Some("sed")),
        ("rbash", Some("rbash")),
        ("/usr/bin/rbash -s", Some("/usr/bin/rbash")),
        ("make test", None),
        ("make test -f Makefile", None),
        ("awk -f prog.awk", None),
        ("cat /dev/stdout", None),
        ("cat /proc/self/fd/1", None),
        ("cat /dev/fd/01x", None),
        ("cat", None),
        ("sed s/a/b/", None),
        ("awk {print}", None),
        ("grep -c x", None),
        ("wc -l", None),
        ("sleep 1", None),
    ];

    #[test]
    fn stdin_runs_code_table() {
        for (command, expected) in STDIN_CASES {
            assert_eq!(stdin_runs_code(command), *expected, "{command:?}");
        }
    }

    fn exec_manifest(exec: &[&str], env: &[&str], shells: &[&str]) -> Manifest {
        Manifest {
            exec: ExecGrant::Patterns(exec.iter().map(|p| p.to_string()).collect()),
            exec_env: env.iter().map(|p| p.to_string()).collect(),
            exec_shells: shells.iter().map(|p| p.to_string()).collect(),
            ..Manifest::deny_all("p")
        }
    }

    fn request<'a>(
        command: &'a str,
        shell: &'a str,
        env: &'a [(String, String)],
        feeds_stdin: bool,
    ) -> ExecRequest<'a> {
        ExecRequest {
            command,
            shell,
            env,
            feeds_stdin,
        }
    }

    #[test]
    fn check_exec_judges_the_whole_request() {
        let pair = |k: &str| vec![(k.to_string(), "v".to_string())];
        let sleep = exec_manifest(&["sleep *", "sh", "cat"], &["NOTES_*"], &[]);
        assert_eq!(
            sleep.check_exec(&request("sleep 1", "/bin/sh", &[], false)),
            Ok(())
        );
        assert_eq!(
            sleep.check_exec(&request("sleep 1", "/bin/sh", &pair("LANG"), false)),
            Ok(())
        );
        assert_eq!(
            sleep.check_exec(&request("sleep 1", "/bin/sh", &pair("NOTES_MODE"), false)),
            Ok(())
        );
        let e = sleep
            .check_exec(&request("sleep 1", "/bin/sh", &pair("BASH_ENV"), false))
            .unwrap_err();
        assert!(
            e.contains("`BASH_ENV`") && e.contains("exec_env = [\"BASH_ENV\"]"),
            "{e}"
        );
        let e = sleep
            .check_exec(&request(
                "sleep 1",
                "/bin/sh",
                &pair("BASH_FUNC_sleep%%"),
                false,
            ))
            .unwrap_err();
        assert!(
            e.contains("`BASH_FUNC_sleep%%`") && e.contains("only `exec = [\"**\"]`"),
            "{e}"
        );
        let e = sleep
            .check_exec(&request("sleep 1", "/bin/bash", &[], false))
            .unwrap_err();
        assert!(
            e.contains("`/bin/bash`") && e.contains("exec_shells = [\"/bin/bash\"]"),
            "{e}"
        );
        let e = sleep
            .check_exec(&request("sh", "/bin/sh", &[], true))
            .unwrap_err();
        assert!(
            e.contains("feeds stdin to `sh`") && e.contains("exec_stdin"),
            "{e}"
        );
        assert_eq!(
            sleep.check_exec(&request("sh", "/bin/sh", &[], false)),
            Ok(())
        );
        // Stdin needs `exec_stdin`, even for `cat`.
        let e = sleep
            .check_exec(&request("cat", "/bin/sh", &[], true))
            .unwrap_err();
        assert!(
            e.contains("does not let this command read stdin")
                && e.contains("`exec_stdin = [\"cat\"]`"),
            "{e}"
        );
        let cat = Manifest {
            exec_stdin: vec!["cat".into()],
            ..sleep.clone()
        };
        assert_eq!(
            cat.check_exec(&request("cat", "/bin/sh", &[], true)),
            Ok(())
        );
        // The command is judged first.
        let e = sleep
            .check_exec(&request("ls", "/bin/bash", &pair("BASH_ENV"), true))
            .unwrap_err();
        assert!(e.contains("does not match"), "{e}");
        let bash = exec_manifest(&["sleep *"], &[], &["/bin/bash"]);
        assert_eq!(
            bash.check_exec(&request("sleep 1", "/bin/bash", &[], false)),
            Ok(())
        );
        assert!(
            bash.check_exec(&request("sleep 1", "/bin/bash", &pair("BASH_ENV"), false))
                .is_err()
        );
        // `**` keeps any shell, env and stdin.
        let all = exec_manifest(&["**"], &[], &[]);
        assert_eq!(
            all.check_exec(&request("sh", "/usr/bin/python3", &pair("BASH_ENV"), true)),
            Ok(())
        );
        let none = Manifest::deny_all("p");
        assert!(
            none.check_exec(&request("sleep 1", "/bin/sh", &[], false))
                .unwrap_err()
                .contains("grants no exec")
        );
    }

    #[test]
    fn pattern_validation() {
        assert!(validate_exec_pattern("git status").is_ok());
        assert!(validate_exec_pattern("git * **").is_ok());
        assert!(validate_exec_pattern("**").is_ok());
        assert!(validate_exec_pattern("").is_err());
        assert!(validate_exec_pattern("** x").is_err());
        assert!(validate_exec_pattern("* x").is_err());
        assert!(validate_exec_pattern("git sta*").is_ok());
        assert!(validate_exec_pattern("a;b").is_err());
        assert!(validate_exec_pattern("a\nb").is_err());
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert!(parse_size("64").unwrap_err().contains("unit"));
        assert!(parse_size("64MB").unwrap_err().contains("unit"));
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("-1MiB").is_err());
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("11min"), Ok(Duration::from_secs(660)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("25h").is_err());
        assert!(parse_duration("2").is_err());
        assert!(parse_duration("2 weeks").is_err());
    }

    #[test]
    fn ids() {
        for ok in ["a", "notes", "my-plugin_2"] {
            assert!(validate_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "A", "1x", "-x", "a__b", "a b", "a/b", &"a".repeat(65)] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let dir = std::env::temp_dir();
        Manifest::parse(text, Path::new("p.toml"), &dir, &|k| {
            (k == "HOSTVAR").then(|| "from-host".to_string())
        })
    }

    #[test]
    fn manifest_fields_and_defaults() {
        let m = parse("id = \"p\"\ncontract = \"0.1.0\"\n").unwrap();
        assert_eq!(m, Manifest::deny_all("p"));
        let m = parse(
            r#"
id = "p"
contract = "0.1.0"
sha256 = "AB00000000000000000000000000000000000000000000000000000000000000"
exec = ["git status", "cargo test **"]
exec_env = ["NOTES_MODE", "NOTES_*"]
exec_shells = ["/bin/bash"]
memory = "128MiB"
cpu = "500ms"
wall = "2s"
sandbox = "read-only"
network = true
[env]
HOSTVAR = true
MISSING = true
LIT = "x"
[[preopen]]
host = "."
guest = "/data"
mode = "read-write"
"#,
        )
        .unwrap();
        assert_eq!(m.sha256.as_deref().unwrap()[..2], *"ab");
        assert_eq!(
            m.exec,
            ExecGrant::Patterns(vec!["git status".into(), "cargo test **".into()])
        );
        assert_eq!(m.exec_env, ["NOTES_MODE", "NOTES_*"]);
        assert_eq!(m.exec_shells, ["/bin/bash"]);
        assert_eq!(m.limits.memory_bytes, 128 << 20);
        assert_eq!(m.limits.cpu, Duration::from_millis(500));
        assert_eq!(m.limits.wall, Duration::from_secs(2));
        assert_eq!(m.sandbox, Some(SandboxMode::ReadOnly));
        assert!(m.network);
        assert_eq!(
            m.env,
            vec![
                ("HOSTVAR".to_string(), "from-host".to_string()),
                ("LIT".to_string(), "x".to_string())
            ]
        );
        assert_eq!(m.preopens.len(), 1);
        assert_eq!(m.preopens[0].mode, PreopenMode::ReadWrite);
        assert_eq!(
            parse("id=\"p\"\ncontract=\"0.1.0\"\nexec=false\n")
                .unwrap()
                .exec,
            ExecGrant::None
        );
    }

    #[test]
    fn manifest_errors_are_specific() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexce = [\"ls\"]\n");
        assert!(
            e.contains("line 3") && e.contains("unknown field `exce`"),
            "{e}"
        );
        let e = err(
            "id = \"p\"\ncontract = \"0.1.0\"\n[[preopen]]\nhost=\".\"\nguest=\"/d\"\nmode=\"rw\"\n",
        );
        assert!(e.contains("line 6"), "{e}");
        assert!(err("contract = \"0.1.0\"\n").contains("missing field `id`"));
        assert!(err("id = \"P\"\ncontract = \"0.1.0\"\n").contains("`id`"));
        assert!(err("id = \"p\"\ncontract = \"0.9.0\"\n").contains("not supported"));
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nelicitation = true\n")
                .contains("`elicitation`: needs contract 0.2.0")
        );
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nsampling = true\n")
                .contains("`sampling`: needs contract 0.2.0")
        );
        let m = parse("id = \"p\"\ncontract = \"0.2.0\"\nelicitation = true\nsampling = true\n")
            .unwrap();
        assert!(m.elicitation && m.sampling);
        let m = parse("id = \"p\"\ncontract = \"0.2.0\"\n").unwrap();
        assert!(!m.elicitation && !m.sampling);
        assert!(!Manifest::builtin_bash().elicitation && !Manifest::builtin_bash().sampling);
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nsha256 = \"xyz\"\n").contains("64 hex"));
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nexec = true\n").contains("`exec`"));
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"a;b\"]\n").contains("metacharacter")
        );
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nmemory = \"64\"\n").contains("`memory`"));
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nmemory = \"8GiB\"\n").contains("out of range")
        );
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\ncpu = \"1y\"\n").contains("`cpu`"));
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nwall = \"0s\"\n").contains("`wall`"));
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nsandbox = \"open\"\n").contains("line 3"));
        let e = err(
            "id = \"p\"\ncontract = \"0.1.0\"\n[[preopen]]\nhost=\"no/such/dir\"\nguest=\"/d\"\nmode=\"read-only\"\n",
        );
        assert!(e.contains("preopen[0].host"), "{e}");
        let e = err(
            "id = \"p\"\ncontract = \"0.1.0\"\n[[preopen]]\nhost=\".\"\nguest=\"d\"\nmode=\"read-only\"\n",
        );
        assert!(e.contains("preopen[0].guest"), "{e}");
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\n[env]\nX = false\n").contains("env.X"));
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec_env = [\"A\"]\n");
        assert!(
            e.contains("`exec_env`") && e.contains("without an `exec` grant"),
            "{e}"
        );
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"ls\"]\nexec_env = [\"*\"]\n");
        assert!(e.contains("`exec_env`"), "{e}");
        let e =
            err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"ls\"]\nexec_shells = [\"bash\"]\n");
        assert!(e.contains("`exec_shells`") && e.contains("absolute"), "{e}");
    }

    /// (exec grant, exec_stdin entry, valid at load)
    const EXEC_STDIN_LOAD: &[(&[&str], &str, bool)] = &[
        (&["wc -l"], "wc -l", true),
        (&["wc *"], "wc -l", true),
        (&["wc *"], "wc -l *", true),
        (&["wc *"], "wc **", true),
        (&["jq *"], "jq *", true),
        (&["jq **"], "jq -r *", true),
        (&["git * **"], "git log *", true),
        (&["git * --help"], "git log --help", true),
        (&["git * --help"], "git * --help", true),
        (&["npm run test:*"], "npm run test:*", true),
        (&["npm run test:*"], "npm run test:unit", true),
        (&["npm run test:*"], "npm run test:*x", true),
        (&["ls", "wc *"], "wc -c", true),
        (&["**"], "anything here", true),
        (&["**"], "**", true),
        // not covered: stdin never grants a command
        (&["wc -l"], "wc -c", false),
        (&["wc -l"], "wc *", false),
        (&["wc -l"], "wc -l *", false),
        (&["wc -l *"], "wc *", false),
        (&["git * b"], "git ** b", false),
        (&["git * b"], "git * * b", false),
        (&["a x*"], "a *", false),
        (&["npm run test:*"], "npm run *", false),
        (&["npm run test:*"], "npm run *:x", false),
        (&["jq *"], "jqx *", false),
        (&["wc -l"], "**", false),
        // malformed
        (&["wc -l"], "", false),
        (&["wc *"], "wc -l;id", false),
        // covered, but stdin to a program that runs it as code: only `**`
        (&["sh"], "sh", false),
        (&["python3 *"], "python3 -", false),
        (&["timeout *"], "timeout 5 sh", false),
        (&["make test *"], "make test -f -", false),
        (&["awk *"], "awk -f /dev//stdin", false),
        (&["rbash"], "rbash", false),
    ];

    #[test]
    fn exec_stdin_validation_table() {
        for (exec, entry, expected) in EXEC_STDIN_LOAD {
            let exec = ExecGrant::Patterns(exec.iter().map(|p| p.to_string()).collect());
            let result = validate_exec_stdin(entry, &exec);
            assert_eq!(
                result.is_ok(),
                *expected,
                "{entry:?} under exec = [{exec}]: {result:?}"
            );
        }
        let e =
            validate_exec_stdin("wc -c", &ExecGrant::Patterns(vec!["wc -l".into()])).unwrap_err();
        assert!(
            e.contains("not covered by the `exec` grant (`wc -l`)"),
            "{e}"
        );
        let e = validate_exec_stdin("sh", &ExecGrant::Patterns(vec!["sh".into()])).unwrap_err();
        assert!(
            e.contains("`sh`") && e.contains("only `exec = [\"**\"]`"),
            "{e}"
        );
        assert!(validate_exec_stdin("wc -l", &ExecGrant::None).is_err());
    }

    /// `exec_pattern_covers` never says yes wrongly: every command (from a
    /// small universe of words) the inner pattern matches, the outer matches.
    #[test]
    fn exec_pattern_covers_is_sound() {
        let pats = [
            "a",
            "a *",
            "a **",
            "a b",
            "a * b",
            "a ** b",
            "a x*",
            "a *x",
            "a *x*",
            "a b *",
            "a * *",
            "a ** *",
            "a b**",
            "a *b* c",
            "a ** b **",
        ];
        let vocab = ["b", "x", "bx", "xb", "c", "*", "**"];
        let mut commands = vec!["a".to_string()];
        for len in 1..=3 {
            let mut next = Vec::new();
            for c in commands.iter().filter(|c| words(c).len() == len) {
                for w in vocab {
                    next.push(format!("{c} {w}"));
                }
            }
            commands.extend(next);
        }
        let matches = |p: &str, c: &str| Pattern::parse(p).unwrap().matches_words(&words(c));
        for outer in pats {
            for inner in pats {
                if exec_pattern_covers(outer, inner) {
                    for c in &commands {
                        assert!(
                            !matches(inner, c) || matches(outer, c),
                            "{outer:?} said to cover {inner:?}, but {c:?}"
                        );
                    }
                }
            }
            assert!(exec_pattern_covers(outer, outer), "{outer:?}");
        }
    }

    #[test]
    fn stdin_needs_exec_stdin_under_a_pattern_grant() {
        let m = Manifest {
            exec_stdin: vec!["wc -l".into(), "jq *".into()],
            ..exec_manifest(
                &["make test *", "awk *", "rbash", "wc -l", "jq *", "cat *"],
                &[],
                &[],
            )
        };
        let ok = |c: &str| m.check_exec(&request(c, "/bin/sh", &[], true));
        assert_eq!(ok("wc -l"), Ok(()));
        assert_eq!(ok("jq -r .x"), Ok(()));
        assert_eq!(ok("jq"), Ok(()));
        // Every bypass of the old denylist, with its grant in `exec`.
        for bypass in [
            "make test -f -",
            "make test",
            "awk -f /dev//stdin",
            "awk -f/dev/stdin",
            "awk -f /proc/self/fd//0",
            "awk -f /dev/fd/./0",
            "awk -f /proc/thread-self/fd/0",
            "awk -F: -f prog.awk",
            "rbash",
            "cat",
            "cat -",
        ] {
            let e = ok(bypass).unwrap_err();
            assert!(e.contains("exec_stdin"), "{bypass}: {e}");
            // The same commands with stdin closed are what `exec` grants.
            assert_eq!(
                m.check_exec(&request(bypass, "/bin/sh", &[], false)),
                Ok(()),
                "{bypass}"
            );
        }
        // A granted pattern never lets stdin reach a program that runs it.
        assert!(
            ok("jq -f /dev/stdin")
                .unwrap_err()
                .contains("runs what it reads as code")
        );
        // `**` keeps any stdin.
        let all = exec_manifest(&["**"], &[], &[]);
        assert_eq!(
            all.check_exec(&request("make -f -", "/bin/sh", &[], true)),
            Ok(())
        );
    }

    /// (name, value, allowed without an `exec_env` grant of the name)
    const ENV_VALUES: &[(&str, &str, bool)] = &[
        ("LANG", "C", true),
        ("LANG", "C.UTF-8", true),
        ("LANG", "en_US.UTF-8", true),
        ("LANG", "sr_RS@latin", true),
        ("LANG", "", true),
        ("LC_ALL", "C.UTF-8", true),
        ("LC_MESSAGES", "de_DE.utf8", true),
        ("LANGUAGE", "en_US:en", true),
        ("LANG", "/x", false),
        ("LC_ALL", "/tmp/x", false),
        ("LC_ALL", "/ws/loc", false),
        ("LC_CTYPE", "../../ws/loc", false),
        ("LC_CTYPE", "..", false),
        ("LC_ALL", "C/../x", false),
        ("LC_ALL", "C x", false),
        ("LC_ALL", "C:x", false),
        ("LC_ALL", "C\n", false),
        ("LANGUAGE", "en:/tmp/x", false),
        ("LANGUAGE", "en:..", false),
        ("TZ", "UTC", true),
        ("TZ", "UTC0", true),
        ("TZ", "EST5EDT,M3.2.0,M11.1.0", true),
        ("TZ", "<+0330>-3:30", true),
        ("TZ", "America/New_York", true),
        ("TZ", ":America/New_York", true),
        ("TZ", "Etc/GMT+5", true),
        ("TZ", "", true),
        ("TZ", "/ws/file", false),
        ("TZ", ":/ws/file", false),
        ("TZ", "../../ws/file", false),
        ("TZ", ":../ws/file", false),
        ("TZ", "America/../../../ws/f", false),
        ("TZ", "UTC\n", false),
        ("COLUMNS", "80", true),
        ("LINES", "24", true),
        ("COLUMNS", "", true),
        ("COLUMNS", "999999", false),
        ("COLUMNS", "80x", false),
        ("LINES", "-1", false),
        ("NO_COLOR", "1", true),
        ("FORCE_COLOR", "3", true),
        ("CLICOLOR", "0", true),
        ("CI", "true", true),
        ("CI", "/x", false),
        ("NO_COLOR", "$(id)", false),
        ("FORCE_COLOR", "12345678901234567", false),
        // names outside the safe set are judged by name, not here
        ("NOTES_MODE", "/anything", true),
    ];

    #[test]
    fn safe_env_values_table() {
        for (name, value, expected) in ENV_VALUES {
            assert_eq!(
                check_safe_env_value(name, value).is_ok(),
                *expected,
                "{name}={value:?}"
            );
        }
        assert!(check_safe_env_value("LANG", &"a".repeat(128)).is_ok());
        assert!(check_safe_env_value("LANG", &"a".repeat(129)).is_err());
        assert!(check_safe_env_value("TZ", &"a".repeat(129)).is_err());
        let pair = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let m = exec_manifest(&["date *"], &["NOTES_*"], &[]);
        let e = m
            .check_exec(&request(
                "date",
                "/bin/sh",
                &pair("LC_ALL", "/tmp/x"),
                false,
            ))
            .unwrap_err();
        assert!(
            e.contains("`LC_ALL`")
                && e.contains("a locale name")
                && e.contains("exec_env = [\"LC_ALL\"]"),
            "{e}"
        );
        let e = m
            .check_exec(&request("date", "/bin/sh", &pair("TZ", "/ws/f"), false))
            .unwrap_err();
        assert!(
            e.contains("`TZ`") && e.contains("exec_env = [\"TZ\"]"),
            "{e}"
        );
        for (k, v) in [("LC_ALL", "C.UTF-8"), ("TZ", "America/New_York")] {
            assert_eq!(
                m.check_exec(&request("date", "/bin/sh", &pair(k, v), false)),
                Ok(())
            );
        }
        // A name `exec_env` grants keeps any value: the operator chose it.
        for granted in ["TZ", "LC_*", "LC_ALL"] {
            let m = exec_manifest(&["date *"], &[granted], &[]);
            let name = if granted == "TZ" { "TZ" } else { "LC_ALL" };
            assert_eq!(
                m.check_exec(&request("date", "/bin/sh", &pair(name, "/ws/x"), false)),
                Ok(()),
                "{granted}"
            );
        }
        // `**` keeps any env.
        let all = exec_manifest(&["**"], &[], &[]);
        assert_eq!(
            all.check_exec(&request("date", "/bin/sh", &pair("TZ", "/ws/f"), false)),
            Ok(())
        );
    }

    #[test]
    fn exec_stdin_in_the_manifest_file() {
        let m = parse(
            "id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"wc -l\", \"jq *\"]\n\
             exec_stdin = [\"wc -l\", \"jq *\"]\n",
        )
        .unwrap();
        assert_eq!(m.exec_stdin, ["wc -l", "jq *"]);
        assert_eq!(
            m.to_json()["exec_stdin"],
            serde_json::json!(["wc -l", "jq *"])
        );
        let err = |text: &str| parse(text).unwrap_err().to_string();
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec_stdin = [\"wc -l\"]\n");
        assert!(
            e.contains("`exec_stdin`") && e.contains("without an `exec` grant"),
            "{e}"
        );
        let e =
            err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"wc -l\"]\nexec_stdin = [\"wc *\"]\n");
        assert!(
            e.contains("`exec_stdin`") && e.contains("not covered"),
            "{e}"
        );
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"sh\"]\nexec_stdin = [\"sh\"]\n");
        assert!(
            e.contains("`exec_stdin`") && e.contains("runs what it reads"),
            "{e}"
        );
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"ls\"]\nexec_stdin = [\"a;b\"]\n");
        assert!(
            e.contains("`exec_stdin`") && e.contains("metacharacter"),
            "{e}"
        );
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"ls\"]\nexec_stdin = \"ls\"\n")
                .contains("exec_stdin")
        );
    }
}
