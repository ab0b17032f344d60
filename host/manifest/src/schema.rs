//! The manifest's shape: [`Manifest`] as the host uses it, and the TOML as written
//! (`Raw`, read by [`Manifest::parse`](crate::Manifest::parse), which validates it
//! into a [`Manifest`]). The file's format is in the crate docs and in
//! docs/manifests.md.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toolhost_process::{HeldDir, SandboxMode, SandboxPolicy};

use crate::contract_version::ContractVersion;
use crate::limits::Limits;

/// A validated manifest. Built by [`Manifest::load`] / [`Manifest::parse`],
/// or from [`Manifest::deny_all`] (the runtime's built-in plugins start there).
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
    /// get beyond [`SAFE_EXEC_ENV`](crate::SAFE_EXEC_ENV) (manifest key `exec_env`). Ignored under
    /// `exec = ["**"]`, which keeps any env. Default: none.
    pub exec_env: Vec<String>,
    /// Shells (absolute paths) its commands may run under beyond
    /// [`DEFAULT_EXEC_SHELL`](crate::DEFAULT_EXEC_SHELL) (manifest key `exec_shells`). Ignored under
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

/// The exec grant: which commands a plugin may ask `sessions.start` to run.
/// Checked first in the permission pipeline; the policy plugin and approver
/// still decide after it. How it judges a request: `exec/mod.rs`
/// ([`ExecGrant::check`], [`Manifest::check_exec`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ExecGrant {
    /// No exec at all (no manifest, `exec` absent or `exec = false`).
    #[default]
    None,
    /// Commands matching at least one pattern (see
    /// [`exec_pattern_matches`](crate::exec_pattern_matches)).
    Patterns(Vec<String>),
}

/// A directory granted to a plugin's WASI context.
///
/// Granted by handle, not by path (ARCHITECTURE.md, invariant "A preopen is the
/// directory granted at load, never what its path names later"): `dir` is opened once
/// at load, and every call gets that directory again, never whatever sits at `host`
/// later; a call is refused when `host` no longer leads to it (the runtime's
/// `plugin/store.rs`).
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

impl PreopenMode {
    /// `read-only` or `read-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            PreopenMode::ReadOnly => "read-only",
            PreopenMode::ReadWrite => "read-write",
        }
    }
}

/// The raw TOML shape (kebab-case keys, unknown keys refused).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Raw {
    pub(crate) id: String,
    pub(crate) contract: String,
    pub(crate) sha256: Option<String>,
    pub(crate) exec: Option<RawExec>,
    pub(crate) exec_env: Option<Vec<String>>,
    pub(crate) exec_shells: Option<Vec<String>>,
    pub(crate) exec_stdin: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) preopen: Vec<RawPreopen>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, RawEnv>,
    pub(crate) memory: Option<String>,
    pub(crate) cpu: Option<String>,
    pub(crate) wall: Option<String>,
    pub(crate) sandbox: Option<SandboxMode>,
    #[serde(default)]
    pub(crate) network: bool,
    #[serde(default)]
    pub(crate) unix_sockets: bool,
    #[serde(default)]
    pub(crate) elicitation: bool,
    #[serde(default)]
    pub(crate) sampling: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum RawExec {
    Flag(bool),
    Patterns(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum RawEnv {
    FromHost(bool),
    Literal(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPreopen {
    pub(crate) host: PathBuf,
    pub(crate) guest: String,
    pub(crate) mode: PreopenMode,
}

impl Manifest {
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
