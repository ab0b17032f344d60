//! [`Host`]: the built-in and loaded plugins, the session engine and the
//! permission pipeline, behind one "call this tool" API that every front door
//! (CLI, MCP, control socket) uses.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use toolhost_host_session::{self as host_session, Actor, HostEventKind, HostSessionLog};
use toolhost_process::HeldDir;
use toolhost_process::{Caller, KilledBy, Principal, Sessions, SessionsConfig};

use crate::builtin;
use crate::call::Services;
use crate::call_sink::{CallProgress, CallSinks, Listeners};
use crate::catalog::{
    Catalog, CompletionRef, PromptEntry, RequestError, ResourceEntry, TemplateEntry,
};
use crate::contract::v0_2_0::ContentBlock;
use crate::contract::v0_2_0::client::CallClient;
use crate::engine::{CompileProgress, EngineOptions, Runtime};
use crate::event_bridge::LogObserver;
use crate::manifest::{Manifest, ManifestError};
use crate::metrics::{CallOutcome, Metrics, ToolMetrics};
use crate::permissions::Permissions;
use crate::plugin::{
    CallError, Completions, LoadError, PolicyPlugin, PromptResult, RefusedOffer, RefusedTool,
    ResourceContents, ToolError, ToolOutput, ToolPlugin, ToolSpec,
};

/// How to set up a [`Host`]: one configuration per layer it drives, each owning
/// its own defaults ([`SessionsConfig::new`] and [`EngineOptions::default`] list
/// them), plus what only the host reads.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The session engine: the workspace root (commands run inside it), the state
    /// dir (sessions' output logs; the compiled-code cache goes to its `compiled/`),
    /// the kernel sandbox of every command a plugin starts (`--sandbox`,
    /// `--allow-network`, ...), the session limits (`--max-sessions`), the output
    /// caps (`--output-cap`, `--output-cap-policy`) and the commands' open-file
    /// limit. [`Host::new`] canonicalises `workspace` and `state_dir` and sets what
    /// the host owns: `observer` (every listener of process events: each
    /// call's own sink, [`CallRequest::progress`], and the event log's
    /// [`LogObserver`]),
    /// `builtin_plugins` (the built-in `bash`, exempt from the per-plugin quotas),
    /// and `output_log_head_bytes` to at most a quarter of `output_log_max_bytes`.
    pub sessions: SessionsConfig,
    /// The wasmtime engine: the pooling allocator and its instance slots, all
    /// plugins together (a call beyond them fails to instantiate; `toolhost call`
    /// uses 8), and the per-plugin call quota. [`Host::new`] sets
    /// `max_memory_bytes` to the largest memory a loaded plugin's manifest allows.
    pub engine: EngineOptions,
    /// The policy rules text handed to the policy plugin (the `--policy`
    /// file); empty for the plugin's built-in defaults.
    pub policy_rules: String,
    /// Third-party tool plugin components to load (`--plugin FILE`), each with
    /// its manifest beside it (`name.toml` next to `name.wasm`).
    pub plugins: Vec<PathBuf>,
    /// A directory whose `*.wasm` files are loaded like [`HostConfig::plugins`]
    /// (`--plugins-dir DIR`), in name order, except that one that fails to load
    /// (invalid manifest, duplicate id, not a component, `describe` trapped or
    /// hit a limit, ...) is skipped with the error ([`Host::skipped_plugins`])
    /// and the others load. The plugins its `plugins.lock` names
    /// (toolhost-installed) load after them, the same way.
    pub plugins_dir: Option<PathBuf>,
    /// The host session's event log (docs/event-log.md). `None`: an in-memory log
    /// (the one-shot CLI); `toolhost serve` opens a persisted one with
    /// [`HostSessionLog::open`].
    pub events: Option<Arc<HostSessionLog>>,
    /// Told of each plugin [`Host::new`] compiles because the compiled-code
    /// cache does not hold it yet ([`CompileProgress`]); `None`: nobody.
    pub compile_progress: Option<CompileProgress>,
}

impl HostConfig {
    /// A configuration for `workspace` and `state_dir` with every other field at
    /// its default:
    ///
    /// - `sessions`: [`SessionsConfig::new`]`(workspace, state_dir)`, whose
    ///   documentation lists its defaults (among them the `workspace-write`
    ///   sandbox with the network blocked, 64 sessions, 64 MiB output logs kept
    ///   running past their cap);
    /// - `engine`: [`EngineOptions::default`] (pooling, 128 instance slots);
    /// - the policy plugin's built-in rules (`policy_rules` empty);
    /// - no third-party plugins, no plugins dir;
    /// - an in-memory event log (`events` `None`);
    /// - no compile progress reported (`compile_progress` `None`).
    pub fn new(workspace: impl Into<PathBuf>, state_dir: impl Into<PathBuf>) -> Self {
        HostConfig {
            sessions: SessionsConfig::new(workspace, state_dir),
            engine: EngineOptions::default(),
            policy_rules: String::new(),
            plugins: Vec::new(),
            plugins_dir: None,
            events: None,
            compile_progress: None,
        }
    }

    /// Every plugin file to load: [`HostConfig::plugins`], then the `*.wasm`
    /// files of [`HostConfig::plugins_dir`] sorted by name.
    ///
    /// Errors: [`StartError::Config`] if the directory cannot be read.
    pub fn plugin_files(&self) -> Result<Vec<PathBuf>, StartError> {
        let mut files = self.plugins.clone();
        files.extend(self.dir_plugin_files()?);
        Ok(files)
    }

    /// The `*.wasm` files of [`HostConfig::plugins_dir`] sorted by name (none
    /// without one).
    ///
    /// Errors: [`StartError::Config`] if the directory cannot be read.
    fn dir_plugin_files(&self) -> Result<Vec<PathBuf>, StartError> {
        let mut files = Vec::new();
        if let Some(dir) = &self.plugins_dir {
            let entries = std::fs::read_dir(dir).map_err(|e| {
                StartError::Config(format!("cannot read plugins dir {}: {e}", dir.display()))
            })?;
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
                .collect();
            found.sort();
            files.extend(found);
        }
        Ok(files)
    }

    /// `$XDG_STATE_HOME/toolhost`, else `$HOME/.local/state/toolhost`, else
    /// `./.toolhost-state`.
    pub fn default_state_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
            return PathBuf::from(dir).join("toolhost");
        }
        if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            return PathBuf::from(home).join(".local/state/toolhost");
        }
        PathBuf::from(".toolhost-state")
    }
}

/// Why a [`Host`] could not be set up ([`Host::new`]) or a plugin file not
/// read ([`HostConfig::plugin_files`], [`manifest_for`]): nothing was served.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is unusable (workspace missing, state dir not
    /// writable, policy rules refused, a plugin file unreadable or its id
    /// taken, ...).
    #[error("{0}")]
    Config(String),
    /// A plugin could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A plugin's manifest is missing a required value or is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The policy plugin trapped or hit a limit while checking the
    /// operator's policy rules ([`HostConfig::policy_rules`]).
    #[error(transparent)]
    PolicyCheck(CallError),
}

/// Why a tool call produced no [`ToolResult`] ([`Host::call`]).
#[derive(Debug, thiserror::Error)]
pub enum ToolCallError {
    /// No loaded plugin offers a tool of this name.
    #[error(
        "unknown tool `{}`; available: {available}",
        crate::display::echo_name(name)
    )]
    UnknownTool {
        /// The requested name.
        name: String,
        /// The tools that exist, comma-separated.
        available: String,
    },
    /// The arguments were refused (not a JSON object, or the plugin said they
    /// do not fit the schema).
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
    /// The plugin trapped, hit a limit, or could not be run.
    #[error(transparent)]
    Plugin(#[from] CallError),
    /// The call was cancelled ([`Host::cancel_call`]); its foreground
    /// processes were killed.
    #[error("tool call `{0}` was cancelled")]
    Cancelled(String),
}

/// A tool call in progress, as [`Host::running_calls`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunningCall {
    /// The host-assigned id (`tc_...`).
    pub tool_call_id: String,
    /// The tool.
    pub tool: String,
    /// The front door it came through (`mcp`, `cli`, `api`).
    pub source: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
}

struct CallSlot {
    info: RunningCall,
    cancel: Arc<tokio::sync::Notify>,
}

/// The outcome of a tool call that ran (MCP `CallToolResult`,
/// <https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-result>).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The content for the agent, in order (MCP `content`): text, images and
    /// audio (raw bytes; the MCP server sends them base64-encoded), embedded
    /// resources and resource links. A contract 0.1.0 tool's text is one
    /// text block. At most [`crate::content::MAX_CONTENT_BLOCKS`] blocks and
    /// [`crate::content::MAX_OUTPUT_BYTES`] in all.
    pub content: Vec<ContentBlock>,
    /// Structured content (a JSON object; MCP `structuredContent`), when the
    /// tool gives one.
    pub structured: Option<serde_json::Value>,
    /// The tool reports failure (MCP `isError`), e.g. a non-zero exit code.
    pub is_error: bool,
}

impl ToolResult {
    /// A result of one text block.
    pub fn text_result(text: String, is_error: bool) -> ToolResult {
        ToolResult {
            content: vec![ContentBlock::Text(text)],
            structured: None,
            is_error,
        }
    }

    /// The text blocks, concatenated in order (other blocks are skipped): the
    /// whole text of a contract 0.1.0 tool's result.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The content as a terminal shows it ([`crate::content::render_terminal`]:
    /// text as it is, one-line markers such as `[image image/png, 68 bytes]`
    /// for the rest). Raw plugin text: escape it before printing.
    pub fn render_terminal(&self) -> String {
        crate::content::render_terminal(&self.content)
    }
}

/// One tool call as a front door asks for it ([`Host::call`]): the tool as
/// [`Host::tool`] found it and the arguments as the front door parsed them,
/// both moved down the call path (nothing looks the tool up or parses the
/// arguments again).
pub struct CallRequest {
    /// The call's id, from [`Host::new_call_id`].
    pub tool_call_id: String,
    /// The tool, from [`Host::tool`].
    pub tool: Arc<ToolEntry>,
    /// The arguments (a JSON object).
    pub arguments: serde_json::Map<String, serde_json::Value>,
    /// The front door (`mcp`, `cli`, `api`), recorded in the event log.
    pub source: &'static str,
    /// Notified to cancel the call (also by [`Host::cancel_call`]).
    pub cancel: Arc<tokio::sync::Notify>,
    /// The MCP client behind the call, which a contract 0.2.0 plugin reaches
    /// through its `client` import (progress, log, elicitation, sampling,
    /// resource updates; see [`crate::contract::v0_2_0::client`]). `None`
    /// (the CLI): progress and log messages go to the host log, elicitation
    /// and sampling answer `unsupported`.
    pub client: Option<Arc<dyn CallClient>>,
    /// The call's own sink of live events (`None`: none): from the call's
    /// start to its end, [`CallProgress::Output`] for every chunk of output
    /// its foreground processes write, delivered where the session engine
    /// reports it (never read back from the event log). The MCP door turns it
    /// into `notifications/progress`.
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<CallProgress>>,
    /// Who is behind the call (docs/event-log.md#who): recorded as the
    /// `actor` of its `tool_call_started` (with `plugin` set to the tool's),
    /// and of the `process_started` and `permission_requested` it causes.
    /// `None`: not recorded.
    pub actor: Option<Actor>,
    /// The identity the call runs for: it owns the process sessions the call
    /// starts, which the calls of another principal cannot see, read or kill
    /// (unless `admin`; [`toolhost_process::Caller::PluginFor`]). `None`: no
    /// principal (every call of the plugin sees them).
    pub principal: Option<Principal>,
}

/// The identity of calls made in-process ([`Host::call_tool`]: `toolhost
/// call`, the embedder), as the event log's `actor` names it: `local`.
pub const LOCAL_IDENTITY: &str = "local";

/// A tool the host offers: which plugin, under which (possibly prefixed) name.
#[derive(Clone)]
pub struct ToolEntry {
    /// The name front doors show (the plugin's own name, or `plugin__name`
    /// when two plugins offer the same name).
    pub name: String,
    /// The plugin's own name for it.
    pub plugin_tool: String,
    /// The plugin offering it.
    pub plugin: Arc<ToolPlugin>,
    /// Its description and JSON Schema.
    pub spec: ToolSpec,
    /// Its calls' counters and latency histogram ([`Host::metrics`]).
    pub metrics: ToolMetrics,
}

/// A plugin file of [`HostConfig::plugins_dir`] that was not loaded, and
/// why (ARCHITECTURE.md, invariant "One broken `--plugins-dir` plugin does not
/// stop the host").
#[derive(Debug, Clone)]
pub struct SkippedPlugin {
    /// The component file.
    pub file: PathBuf,
    /// Why it was skipped: the manifest or load error, naming the plugin and
    /// the rule or limit. It can hold plugin text (a trap message): escape it
    /// before showing it ([`crate::display`]).
    pub error: String,
}

/// The host: plugins, sessions and permissions.
pub struct Host {
    config: HostConfig,
    services: Arc<Services>,
    plugins: Vec<Arc<ToolPlugin>>,
    skipped: Vec<SkippedPlugin>,
    refused: Vec<RefusedTool>,
    tools: Vec<Arc<ToolEntry>>,
    /// Index of each tool in `tools` by its served name ([`Host::tool`]).
    tool_index: HashMap<String, usize>,
    catalog: Arc<Catalog>,
    tools_version: tokio::sync::watch::Sender<u64>,
    next_call: AtomicU64,
    events: Arc<HostSessionLog>,
    /// What feeds the log with process events; knows who is behind each call.
    observer: Arc<LogObserver>,
    calls: Mutex<HashMap<String, CallSlot>>,
    /// The progress sinks of the calls in progress that have one.
    call_sinks: Arc<CallSinks>,
    metrics: Metrics,
}

impl Host {
    /// Sets up the host: checks the workspace, creates the state dir, reads
    /// and validates every third-party plugin's manifest (before any plugin
    /// code runs), loads the built-in policy and bash plugins and the
    /// third-party ones (their `describe` calls run concurrently, with no
    /// session services), and validates the policy rules. Tools are then
    /// named by `merge_tools` (built-in names never change).
    ///
    /// A plugin of [`HostConfig::plugins_dir`] that fails any step is skipped
    /// and logged ([`Host::skipped_plugins`]); tools refused by
    /// [`crate::plugin::check_tools`] or by naming are logged and listed by
    /// [`Host::refused_tools`].
    ///
    /// Errors: [`StartError::Config`] for a bad workspace, state dir, policy
    /// file, plugin file or a duplicate plugin id; [`StartError::Manifest`]
    /// for an invalid manifest; [`StartError::Load`] if a plugin does not
    /// load (a preopen over the state dir, [`check_preopens`]; wrong world,
    /// sha256 mismatch, `describe` failed, too many tools);
    /// [`StartError::PolicyCheck`] if the policy plugin fails checking the
    /// rules. Plugin errors are errors only for the built-in plugins and explicit
    /// [`HostConfig::plugins`] files.
    pub async fn new(mut config: HostConfig) -> Result<Host, StartError> {
        let workspace = canonical_dir(&config.sessions.workspace, "workspace")?;
        toolhost_process::prepare_private_dir(&config.sessions.state_dir).map_err(|e| {
            StartError::Config(format!(
                "cannot create state dir {}: {e}",
                config.sessions.state_dir.display()
            ))
        })?;
        let state_dir = canonical_dir(&config.sessions.state_dir, "state dir")?;
        // Held, so preopens are compared with the directory itself (device and
        // inode), not only with what its path names.
        let state_held = HeldDir::open(&state_dir).map_err(|e| {
            StartError::Config(format!(
                "cannot open state dir {}: {e}",
                state_dir.display()
            ))
        })?;
        config.sessions.workspace = workspace.clone();
        config.sessions.state_dir = state_dir.clone();

        // Manifests first: nothing runs until every grant is valid. An explicit
        // `--plugin` that fails is an error; a `--plugins-dir` one is skipped.
        let mut third_party = Vec::new();
        let mut skipped = Vec::new();
        let mut ids: HashSet<String> = [builtin::BASH_ID, builtin::POLICY_ID]
            .into_iter()
            .map(str::to_string)
            .collect();
        let explicit = config.plugins.iter().map(|f| (f.clone(), true));
        let from_dir = config.dir_plugin_files()?.into_iter().map(|f| (f, false));
        for (file, is_explicit) in explicit.chain(from_dir).collect::<Vec<_>>() {
            let read = read_plugin(&file, &ids).and_then(|(manifest, bytes)| {
                check_preopens(&manifest, &state_held)?;
                Ok((manifest, bytes))
            });
            match read {
                Ok((manifest, bytes)) => {
                    ids.insert(manifest.id.clone());
                    third_party.push(Pending {
                        file,
                        explicit: is_explicit,
                        manifest,
                        bytes,
                    });
                }
                Err(e) if is_explicit => return Err(e),
                Err(e) => skip(&mut skipped, file, e.to_string()),
            }
        }
        // Then what `plugins.lock` names (`toolhost plugin add oci://...`), each
        // blob re-hashed against the lock; skipped like a dir's files.
        for (file, read) in crate::installed::locked_plugins(config.plugins_dir.as_deref(), &ids) {
            match read.and_then(|(manifest, bytes)| {
                check_preopens(&manifest, &state_held).map_err(|e| e.to_string())?;
                Ok((manifest, bytes))
            }) {
                Ok((manifest, bytes)) => {
                    ids.insert(manifest.id.clone());
                    third_party.push(Pending {
                        file,
                        explicit: false,
                        manifest,
                        bytes,
                    });
                }
                Err(e) => skip(&mut skipped, file, e),
            }
        }
        let events = config
            .events
            .clone()
            .unwrap_or_else(|| Arc::new(HostSessionLog::in_memory("hs_oneshot")));
        let observer = Arc::new(LogObserver::new(events.clone()));
        // Process events go to the sink of the call they belong to and to the
        // event log side by side; the log is never read back for a live call.
        let call_sinks = Arc::new(CallSinks::default());
        let metrics = Metrics::default();
        config.sessions.observer = Some(Arc::new(Listeners {
            calls: call_sinks.clone(),
            log: observer.clone(),
            metrics: metrics.clone(),
        }));
        // The built-in bash is exempt from the per-plugin session quotas and may use
        // the slots kept for the host (`SessionsConfig::reserved_sessions`).
        config.sessions.builtin_plugins = vec![builtin::BASH_ID.into()];
        config.sessions.output_log_head_bytes = config
            .sessions
            .output_log_head_bytes
            .min(config.sessions.output_log_max_bytes / 4);
        let sessions_config = config.sessions.clone();
        // The session engine probes the kernel (a few throwaway children, ~2 ms, more
        // when a cgroup join waits for an RCU grace period): on the blocking pool
        // while the engine is built and the policy loads (benchmark P6, P9).
        let sessions = tokio::task::spawn_blocking(move || Sessions::new(sessions_config));
        let bash_manifest = builtin::bash_manifest();
        config.engine.max_memory_bytes = third_party
            .iter()
            .map(|p| p.manifest.limits.memory_bytes)
            .chain([
                bash_manifest.limits.memory_bytes,
                builtin::policy_limits().memory_bytes,
            ])
            .max()
            .unwrap_or_default() as u64;
        let runtime = Runtime::with_options(Some(state_dir.join("compiled")), config.engine)
            .map_err(|e| StartError::Config(format!("{e:#}")))?;
        if let Some(progress) = config.compile_progress.clone() {
            runtime.report_compiles(progress);
        }
        let policy = Arc::new(PolicyPlugin::load(
            &runtime,
            builtin::POLICY_ID,
            builtin::POLICY,
            builtin::policy_limits(),
            config.policy_rules.clone(),
        )?);
        // The built-in rules (an empty text) are checked by the policy plugin's own
        // tests; only an operator's file needs validating at start-up.
        if !config.policy_rules.is_empty()
            && let Err(e) = policy.validate().await.map_err(StartError::PolicyCheck)?
        {
            return Err(StartError::Config(format!(
                "policy file refused: line {}: {}",
                e.line, e.message
            )));
        }
        let sessions = sessions
            .await
            .map_err(|e| StartError::Config(format!("starting the session engine: {e}")))?
            .map_err(|e| StartError::Config(e.to_string()))?;
        // A resumed host session's earlier sessions are known again, ended
        // (those its last run left running as interrupted by the restart).
        sessions.restore(events.recovery().earlier_sessions.clone());
        let metrics = metrics.with_pool(crate::plugin::pool_use(&runtime));
        let permissions = Permissions::new(policy, workspace).with_metrics(metrics.clone());
        // Request ids never repeat within one log: a resumed one continues above its highest.
        permissions.continue_request_ids_after(events.recovery().last_permission_request);
        permissions.set_observer(observer.clone());
        let services = Arc::new(Services {
            sessions,
            permissions,
        });

        let bash = Arc::new(
            ToolPlugin::load(
                &runtime,
                bash_manifest,
                builtin::BASH,
                Some(services.clone()),
            )
            .await?,
        );
        // Each load on its own task, so one plugin's slow `describe` (up to
        // `DESCRIBE_WALL_LIMIT`) does not add to the others'; results in order.
        let loading: Vec<_> = third_party
            .into_iter()
            .map(|p| {
                let runtime = runtime.clone();
                let services = services.clone();
                let handle = tokio::spawn(async move {
                    ToolPlugin::load(&runtime, p.manifest, &p.bytes, Some(services)).await
                });
                (p.file, p.explicit, handle)
            })
            .collect();
        let mut plugins = vec![bash];
        for (file, is_explicit, handle) in loading {
            let loaded = handle.await.unwrap_or_else(|e| {
                Err(LoadError::Describe {
                    plugin: file.display().to_string(),
                    message: format!("loading failed: {e}"),
                })
            });
            match loaded {
                Ok(plugin) => {
                    tracing::info!(plugin = plugin.id(), source = ?plugin.source, tools = plugin.tools().len(), "loaded plugin");
                    plugins.push(Arc::new(plugin));
                }
                Err(e) if is_explicit => return Err(e.into()),
                Err(e) => skip(&mut skipped, file, e.to_string()),
            }
        }
        let (tools, mut refused) = merge_tools(&plugins, &metrics);
        let tools: Vec<Arc<ToolEntry>> = tools.into_iter().map(Arc::new).collect();
        let tool_index = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let mut all_refused: Vec<RefusedTool> = plugins
            .iter()
            .flat_map(|p| p.refused_tools().iter().cloned())
            .collect();
        all_refused.append(&mut refused);
        // Also tells each plugin which of its offers are served: it may
        // announce changes only of those URIs (`UriScope::served`).
        let catalog = Arc::new(Catalog::build(&plugins));
        Ok(Host {
            config,
            services,
            plugins,
            skipped,
            refused: all_refused,
            tools,
            tool_index,
            catalog,
            tools_version: tokio::sync::watch::channel(0).0,
            // Ids never repeat within one log: a resumed one continues above its highest.
            next_call: AtomicU64::new(events.recovery().last_tool_call + 1),
            events,
            observer,
            calls: Mutex::new(HashMap::new()),
            call_sinks,
            metrics,
        })
    }

    /// The host's metric families (`crate::metrics`), for a front door to
    /// register and serve.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The host session's event log.
    pub fn events(&self) -> &Arc<HostSessionLog> {
        &self.events
    }

    /// The permission pipeline (to add approvers).
    pub fn permissions(&self) -> &Permissions {
        &self.services.permissions
    }

    /// A receiver whose value changes whenever the set of tools changes (MCP
    /// `notifications/tools/list_changed`). The set is fixed at start-up for
    /// now, so it never changes yet.
    pub fn tools_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tools_version.subscribe()
    }

    /// A fresh tool-call id (`tc_` + 12 hex digits, unique per host), for
    /// [`Host::call_tool_as`].
    pub fn new_call_id(&self) -> String {
        host_session::tool_call_id(self.next_call.fetch_add(1, Ordering::Relaxed))
    }

    /// The tool calls in progress, oldest first.
    pub fn running_calls(&self) -> Vec<RunningCall> {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let mut list: Vec<_> = calls.values().map(|c| c.info.clone()).collect();
        list.sort_by(|a, b| a.tool_call_id.cmp(&b.tool_call_id));
        list
    }

    /// Cancels tool call `tool_call_id`: the plugin's call is abandoned, the
    /// call's foreground processes are killed (SIGTERM, grace, SIGKILL to the
    /// process group) and the call ends with [`ToolCallError::Cancelled`].
    /// Returns false when no such call is in progress.
    pub fn cancel_call(&self, tool_call_id: &str) -> bool {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        match calls.get(tool_call_id) {
            Some(slot) => {
                slot.cancel.notify_one();
                true
            }
            None => false,
        }
    }

    /// The configuration in effect: paths canonicalised, and the fields
    /// [`Host::new`] sets ([`HostConfig::sessions`], [`HostConfig::engine`]) set.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Every loaded tool plugin: the built-in bash plugin first, then the
    /// third-party ones in load order (also those all of whose tools were
    /// refused).
    pub fn plugins(&self) -> Vec<Arc<ToolPlugin>> {
        self.plugins.clone()
    }

    /// The `--plugins-dir` plugins that were not loaded, in file order, each
    /// with its error.
    pub fn skipped_plugins(&self) -> &[SkippedPlugin] {
        &self.skipped
    }

    /// The tools the loaded plugins described but the host does not offer,
    /// each with its reason: those [`crate::plugin::check_tools`] refused (bad
    /// names, duplicates, sizes over their limits, schemas that are not JSON
    /// objects), then those whose name was already taken when tools were named.
    pub fn refused_tools(&self) -> &[RefusedTool] {
        &self.refused
    }

    /// The tools of all loaded plugins.
    pub fn tools(&self) -> &[Arc<ToolEntry>] {
        &self.tools
    }

    /// The tool served as `name` (one map lookup), for [`CallRequest::tool`];
    /// `None` if no loaded plugin offers it ([`Host::unknown_tool`] says so).
    pub fn tool(&self, name: &str) -> Option<Arc<ToolEntry>> {
        self.tool_index.get(name).map(|&i| self.tools[i].clone())
    }

    /// [`ToolCallError::UnknownTool`] for `name`, listing the tools that exist.
    pub fn unknown_tool(&self, name: &str) -> ToolCallError {
        ToolCallError::UnknownTool {
            name: name.to_string(),
            available: self
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The session engine.
    pub fn sessions(&self) -> &Sessions {
        &self.services.sessions
    }

    /// The resources the loaded plugins list (MCP `resources/list`), in
    /// plugin load order, each URI once (a URI another plugin listed first
    /// is refused: [`Host::refused_offers`]).
    pub fn resources(&self) -> &[ResourceEntry] {
        self.catalog.resources()
    }

    /// The resource templates the loaded plugins list (MCP
    /// `resources/templates/list`), in plugin load order, each template text
    /// once.
    pub fn resource_templates(&self) -> &[TemplateEntry] {
        self.catalog.templates()
    }

    /// The prompts the loaded plugins list (MCP `prompts/list`), in plugin
    /// load order, each name once.
    pub fn prompts(&self) -> &[PromptEntry] {
        self.catalog.prompts()
    }

    /// The resources, templates and prompts listed but not offered, each with
    /// its reason: those the load-time checks refused, then those whose URI,
    /// template or name another plugin offers first.
    pub fn refused_offers(&self) -> &[RefusedOffer] {
        self.catalog.refused()
    }

    /// Reads resource `uri` (MCP `resources/read`): from the plugin that
    /// lists it, else from the first whose template matches it (RFC 6570
    /// level 1), in a fresh instance under that plugin's limits, with
    /// `client` behind its `client` import (`None`: no client) and no session
    /// services. Returns one or more contents.
    ///
    /// Errors: [`RequestError::ResourceNotFound`] (no plugin owns the URI, or
    /// the plugin said `not-found`), [`RequestError::Failed`],
    /// [`RequestError::Plugin`] (trap, limit, too much output).
    pub async fn read_resource(
        &self,
        uri: &str,
        client: Option<Arc<dyn CallClient>>,
    ) -> Result<Vec<ResourceContents>, RequestError> {
        self.catalog.read_resource(uri, client).await
    }

    /// Renders prompt `name` with `arguments` (MCP `prompts/get`), in a
    /// fresh instance of its plugin under its limits, with `client` behind
    /// its `client` import and no session services. Required arguments are
    /// checked before the plugin runs.
    ///
    /// Errors: [`RequestError::UnknownPrompt`],
    /// [`RequestError::InvalidArguments`] (a required argument missing, or
    /// the plugin refused them), [`RequestError::Failed`],
    /// [`RequestError::Plugin`].
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Vec<(String, String)>,
        client: Option<Arc<dyn CallClient>>,
    ) -> Result<PromptResult, RequestError> {
        self.catalog.get_prompt(name, arguments, client).await
    }

    /// Suggests values for `argument` of a prompt or resource template (MCP
    /// `completion/complete`), given the prefix `value` and the values of the
    /// other arguments (`context`), in a fresh instance of the owning plugin
    /// with no client and no session services. At most
    /// [`crate::plugin::MAX_COMPLETIONS`] values; `total` counts all the
    /// plugin returned.
    ///
    /// Errors: [`RequestError::UnknownReference`] (no such prompt or
    /// template), [`RequestError::InvalidArguments`] (it has no such
    /// argument), [`RequestError::Plugin`].
    pub async fn complete(
        &self,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: Vec<(String, String)>,
    ) -> Result<Completions, RequestError> {
        self.catalog
            .complete(reference, argument, value, context)
            .await
    }

    /// Calls tool `name` with `arguments` under a fresh tool-call id, as the
    /// embedder (`source` `api`) with no client and no cancel: [`Host::tool`],
    /// then [`Host::call`].
    ///
    /// Errors: [`ToolCallError::UnknownTool`] (checked first),
    /// [`ToolCallError::InvalidArguments`] when `arguments` is not a JSON
    /// object; then as [`Host::call`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<ToolResult, ToolCallError> {
        // The id first, so a refused call uses one up as it always has.
        let tool_call_id = self.new_call_id();
        let tool = self.tool(name).ok_or_else(|| self.unknown_tool(name))?;
        let serde_json::Value::Object(arguments) = arguments else {
            return Err(ToolCallError::InvalidArguments {
                tool: name.to_string(),
                message: "arguments must be a JSON object".into(),
            });
        };
        self.call(CallRequest {
            tool_call_id,
            tool,
            arguments,
            source: "api",
            cancel: Arc::default(),
            client: None,
            progress: None,
            actor: Some(Actor {
                identity: LOCAL_IDENTITY.to_string(),
                transport: "api".to_string(),
                ..Actor::default()
            }),
            principal: None,
        })
        .await
    }

    /// Runs `request`: its `tool` with `arguments` as tool call
    /// `tool_call_id` (from [`Host::new_call_id`]), coming through front door
    /// `source`, with the MCP client `client` behind it.
    /// Runs the plugin in a fresh instance, and when the call returns kills
    /// any foreground process it left running without detaching it.
    ///
    /// `cancel.notify_one()` (or [`Host::cancel_call`]) cancels the call, even
    /// before it has started: the plugin's call is abandoned and the call's
    /// foreground processes are killed.
    ///
    /// Records `tool_call_started` and then exactly one of
    /// `tool_call_settled` (its text is the content as
    /// [`ToolResult::render_terminal`] shows it, cut) / `tool_call_failed` in
    /// the event log.
    ///
    /// Errors: [`ToolCallError::UnknownTool`] and
    /// [`ToolCallError::InvalidArguments`] when the plugin says so,
    /// [`ToolCallError::Plugin`] (trap, limit, too much output),
    /// [`ToolCallError::Cancelled`].
    pub async fn call(&self, request: CallRequest) -> Result<ToolResult, ToolCallError> {
        let CallRequest {
            tool_call_id,
            tool,
            arguments,
            source,
            cancel,
            client,
            progress,
            actor,
            principal,
        } = request;
        let started = std::time::Instant::now();
        let tool_call_id = tool_call_id.as_str();
        let name = tool.name.as_str();
        let info = RunningCall {
            tool_call_id: tool_call_id.to_string(),
            tool: name.to_string(),
            source: source.to_string(),
            started_ms: host_session::now_ms(),
        };
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).insert(
            tool_call_id.to_string(),
            CallSlot {
                info,
                cancel: cancel.clone(),
            },
        );
        let sink = progress.map(|sink| self.call_sinks.register(tool_call_id, sink));
        // The plugin gets the arguments as JSON text; the event log keeps the
        // object itself (moved, not copied).
        let arguments_text = serde_json::to_string(&arguments).unwrap_or_default();
        let actor = actor.map(|mut a| {
            a.plugin = Some(tool.plugin.id().to_string());
            self.observer.call_started(tool_call_id, a.clone());
            a
        });
        self.events.append(HostEventKind::ToolCallStarted {
            tool_call_id: tool_call_id.to_string(),
            tool: name.to_string(),
            arguments: serde_json::Value::Object(arguments),
            source: source.to_string(),
            actor,
        });
        let call = tool
            .plugin
            .call(&tool.spec, tool_call_id, arguments_text, client, principal);
        let outcome = tokio::select! {
            outcome = call => Some(outcome),
            () = cancel.notified() => None,
        };
        let sessions = &self.services.sessions;
        if outcome.is_none() {
            // Kill the call's runs first so their end says who killed them.
            let runs: Vec<_> = sessions
                .running_calls()
                .into_iter()
                .filter(|(tc, _)| tc == tool_call_id)
                .collect();
            for (_, session) in runs {
                let _ = sessions
                    .kill(&Caller::Host, &session, None, KilledBy::ToolCallCancelled)
                    .await;
            }
        }
        sessions.end_call(tool_call_id).await;
        self.observer.call_ended(tool_call_id);
        drop(sink);
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(tool_call_id);
        let result = match outcome {
            None => Err(ToolCallError::Cancelled(tool_call_id.to_string())),
            Some(outcome) => map_outcome(name, outcome),
        };
        let counted = match &result {
            Ok(r) if r.is_error => CallOutcome::Error,
            Ok(_) => CallOutcome::Ok,
            Err(ToolCallError::Cancelled(_)) => CallOutcome::Cancelled,
            Err(ToolCallError::Plugin(_)) => CallOutcome::Failed,
            Err(_) => CallOutcome::Usage,
        };
        tool.metrics
            .record(counted, started.elapsed().as_secs_f64());
        self.events.append(match &result {
            Ok(r) => {
                let text = r.render_terminal();
                let cut = text.floor_char_boundary(host_session::SETTLED_TEXT_MAX.min(text.len()));
                HostEventKind::ToolCallSettled {
                    tool_call_id: tool_call_id.to_string(),
                    is_error: r.is_error,
                    text: text[..cut].to_string(),
                    truncated: cut < text.len(),
                    structured: r.structured.clone(),
                }
            }
            Err(e) => HostEventKind::ToolCallFailed {
                tool_call_id: tool_call_id.to_string(),
                error: e.to_string(),
                cancelled: matches!(e, ToolCallError::Cancelled(_)),
            },
        });
        result
    }
}

fn map_outcome(
    name: &str,
    outcome: Result<Result<ToolOutput, ToolError>, CallError>,
) -> Result<ToolResult, ToolCallError> {
    match outcome? {
        Ok(output) => Ok(ToolResult {
            content: output.content,
            structured: output
                .structured
                .and_then(|s| serde_json::from_str(&s).ok()),
            is_error: output.is_error,
        }),
        Err(ToolError::UnknownTool(t)) => Err(ToolCallError::UnknownTool {
            name: t,
            available: name.to_string(),
        }),
        Err(ToolError::InvalidArguments(message)) => Err(ToolCallError::InvalidArguments {
            tool: name.to_string(),
            message,
        }),
        Err(ToolError::Failed(text)) => Ok(ToolResult::text_result(text, true)),
    }
}

/// Names every tool, in linear time: a built-in tool keeps its name; a
/// third-party tool keeps its own unless a built-in tool or another
/// third-party plugin has it, in which case it is `plugin__name` (for every
/// third-party plugin offering it). Plugins' own names never hold `__`
/// ([`crate::plugin::tool_name_error`]) and ids are unique and never hold it
/// either, so `plugin__name` is only ever given to `plugin`'s tool `name`: no
/// plugin can take the name the host gives another's colliding tool. A name
/// still taken after that (which those rules leave impossible) refuses the
/// later tool.
fn merge_tools(
    plugins: &[Arc<ToolPlugin>],
    metrics: &Metrics,
) -> (Vec<ToolEntry>, Vec<RefusedTool>) {
    let is_builtin = |p: &ToolPlugin| p.id() == builtin::BASH_ID;
    let mut builtin_names: HashSet<&str> = HashSet::new();
    let mut offered_by: HashMap<&str, usize> = HashMap::new();
    for plugin in plugins {
        for spec in plugin.tools() {
            if is_builtin(plugin) {
                builtin_names.insert(&spec.name);
            } else {
                *offered_by.entry(&spec.name).or_default() += 1;
            }
        }
    }
    // Built-in plugins first, so their names are taken before anyone else's.
    let order = plugins
        .iter()
        .filter(|p| is_builtin(p))
        .chain(plugins.iter().filter(|p| !is_builtin(p)));
    let mut taken: HashSet<String> = HashSet::new();
    let mut entries = Vec::new();
    let mut refused = Vec::new();
    for plugin in order {
        for spec in plugin.tools() {
            let clashes = !is_builtin(plugin)
                && (builtin_names.contains(spec.name.as_str())
                    || offered_by.get(spec.name.as_str()).copied().unwrap_or(0) > 1);
            let name = if clashes {
                format!("{}__{}", plugin.id(), spec.name)
            } else {
                spec.name.clone()
            };
            if !taken.insert(name.clone()) {
                refused.push(RefusedTool::new(
                    plugin.id(),
                    &spec.name,
                    format!("the name `{name}` is already taken by another tool"),
                ));
                tracing::warn!(plugin = plugin.id(), tool = %name, "tool refused: the name is already taken");
                continue;
            }
            entries.push(ToolEntry {
                metrics: metrics.tool(&name, plugin.id()),
                name,
                plugin_tool: spec.name.clone(),
                plugin: plugin.clone(),
                spec: spec.clone(),
            });
        }
    }
    (entries, refused)
}

/// Refuses a plugin whose `[[preopen]]` contains the host's state dir (`state`)
/// or lies inside it (ARCHITECTURE.md, invariant "No preopen contains the state
/// dir or lies inside it (so no plugin reads other sessions' logs or the
/// compiled cache, or renames the state dir's parents)").
/// Preopens are used by the host itself, in no mount namespace, so the state dir
/// is not hidden from them as it is from confined commands: through one the plugin
/// would read other sessions' `output.log`s and the host-session event logs, and
/// with write access rename the state dir's parents from under the host. Each
/// preopen is compared by real path and by device and inode, walking up from the
/// held directories ([`HeldDir::contains`]), so a symlinked or bind-mounted
/// spelling of a parent of the state dir is refused too. The compiled cache and the
/// default plugins dir live in the state dir, so they are covered.
///
/// Errors: [`LoadError::PreopenOverlapsStateDir`] naming the preopen, the state
/// dir and the rule (also when the check itself fails: refused, not guessed).
pub fn check_preopens(manifest: &Manifest, state: &HeldDir) -> Result<(), LoadError> {
    for p in &manifest.preopens {
        let relation = match (p.dir.contains(state), state.contains(&p.dir)) {
            (Ok(true), _) => "contains",
            (_, Ok(true)) => "lies inside",
            (Ok(false), Ok(false)) => continue,
            (Err(e), _) | (_, Err(e)) => {
                return Err(overlap(
                    manifest,
                    p,
                    state,
                    format!("cannot be checked ({e}) against"),
                ));
            }
        };
        return Err(overlap(manifest, p, state, relation.to_string()));
    }
    Ok(())
}

fn overlap(
    manifest: &Manifest,
    p: &crate::manifest::Preopen,
    state: &HeldDir,
    relation: String,
) -> LoadError {
    LoadError::PreopenOverlapsStateDir {
        plugin: manifest.id.clone(),
        guest: p.guest.clone(),
        preopen: p.dir.path().to_path_buf(),
        state_dir: state.path().to_path_buf(),
        relation,
    }
}

/// A third-party plugin whose manifest is valid and whose bytes are read,
/// waiting to be loaded.
struct Pending {
    file: PathBuf,
    /// Named by `--plugin` (its failure is an error) rather than found in
    /// `--plugins-dir` (its failure skips it).
    explicit: bool,
    manifest: Manifest,
    bytes: Vec<u8>,
}

/// Reads the manifest (see [`manifest_for`]) and the bytes of the plugin at
/// `file`, refusing an id in `ids`.
///
/// Errors: [`StartError::Manifest`], [`StartError::Config`] (id taken,
/// unreadable file).
fn read_plugin(file: &Path, ids: &HashSet<String>) -> Result<(Manifest, Vec<u8>), StartError> {
    let manifest = manifest_for(file)?;
    if ids.contains(&manifest.id) {
        return Err(StartError::Config(format!(
            "plugin {}: id `{}` is already taken (ids must be unique; `bash` and `policy` are \
             built in)",
            file.display(),
            manifest.id
        )));
    }
    let bytes = std::fs::read(file)
        .map_err(|e| StartError::Config(format!("cannot read plugin {}: {e}", file.display())))?;
    Ok((manifest, bytes))
}

/// Records and logs that the `--plugins-dir` plugin at `file` is skipped.
fn skip(skipped: &mut Vec<SkippedPlugin>, file: PathBuf, error: String) {
    tracing::error!(
        file = %file.display(),
        "skipping plugin: {}",
        crate::display::escape(&error)
    );
    skipped.push(SkippedPlugin { file, error });
}

/// The manifest of the plugin component at `wasm`: `name.toml` beside
/// `name.wasm` if it exists, else a deny-all manifest whose id is the file
/// stem (which must then be a valid id).
///
/// Errors: [`StartError::Manifest`] for an unreadable or invalid manifest, or
/// a file stem that is not a valid id when there is none.
pub fn manifest_for(wasm: &Path) -> Result<Manifest, StartError> {
    let toml = wasm.with_extension("toml");
    if toml.exists() {
        return Ok(Manifest::load(&toml)?);
    }
    let stem = wasm
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    crate::manifest::validate_id(&stem).map_err(|message| ManifestError::Invalid {
        path: toml.clone(),
        field: "id".into(),
        message: format!(
            "{} has no manifest, and its file name is not a plugin id: {message}",
            wasm.display()
        ),
    })?;
    tracing::info!(plugin = %stem, "{} has no manifest: it gets no grants and default limits", wasm.display());
    Ok(Manifest::deny_all(&stem))
}

fn canonical_dir(path: &Path, what: &str) -> Result<PathBuf, StartError> {
    let canonical = path
        .canonicalize()
        .map_err(|e| StartError::Config(format!("{what} {}: {e}", path.display())))?;
    if !canonical.is_dir() {
        return Err(StartError::Config(format!(
            "{what} {} is not a directory",
            path.display()
        )));
    }
    Ok(canonical)
}
