//! Plugin manifests, read and judged without the engine (no wasmtime): the TOML file
//! beside a component (`name.toml` next to `name.wasm`) that names the plugin and
//! grants it capabilities (docs/manifests.md).
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
//! shell metacharacters. A grant judges the whole request, not only the command
//! text: [`Manifest::check_exec`], and why, the module docs of `exec/mod.rs`.
//!
//! One module per concern:
//!
//! - `contract_version`: [`ContractVersion`], the contract versions this host links,
//!   ordered ([`ContractVersion::MIN`], [`ContractVersion::MAX`]);
//! - `schema`: [`Manifest`] and the TOML as written;
//! - `normalize`: the TOML validated into a [`Manifest`] ([`Manifest::parse`]);
//! - `exec/`: the exec grant judged against a start request
//!   ([`Manifest::check_exec`], [`ExecDenial`]);
//! - `limits`: [`Limits`], the per-call limits a manifest states;
//! - `error`: [`ManifestError`] and [`ValueError`].

mod contract_version;
mod error;
mod exec;
mod limits;
mod normalize;
mod schema;

pub use contract_version::{ContractVersion, UnsupportedContract};
pub use error::{ManifestError, ValueError};
pub use exec::{
    DEFAULT_EXEC_SHELL, ExecDenial, ExecRequest, MAX_SAFE_ENV_VALUE, SAFE_EXEC_ENV,
    check_safe_env_value, exec_env_granted, exec_pattern_covers, exec_pattern_matches,
    exec_shell_granted, exec_stdin_granted, stdin_runs_code, validate_exec_env,
    validate_exec_pattern, validate_exec_shell, validate_exec_stdin,
};
pub use limits::Limits;
pub use normalize::{
    MAX_DURATION, MAX_MEMORY, MIN_MEMORY, parse_duration, parse_size, validate_id,
};
pub use schema::{ExecGrant, Manifest, Preopen, PreopenMode};
