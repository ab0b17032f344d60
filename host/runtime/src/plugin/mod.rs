//! Plugins: the one load pipeline for every plugin kind, and each call in a
//! fresh, limited store.
//!
//! Loading (`prepare`): the manifest's sha256 pin, compile (or the on-disk
//! cache), a check of the component's exports and imports against its world
//! *before* linking (so the error names what is wrong), link, `InstancePre`.
//! Tool and policy plugins differ only in their [`PluginKind`].
//!
//! Every call gets a new [`Store`] instantiated from the plugin's cached
//! `InstancePre` (the Spin model): no state survives between calls, a trap
//! or a limit hit discards only that instance, and the store's WASI context
//! grants only what the manifest says (no preopens, env, args or network by
//! default; stdin empty; stdout and stderr to the host log tagged with the
//! plugin id). See ARCHITECTURE.md, "Plugins".

mod guest_log;
mod store;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::error::Context as _;

pub use guest_log::GuestLog;
pub use store::CallState;
use store::new_store;

use crate::call::{CallInfo, Services};
use crate::contract::v0_1_0::{self as contract, policy_plugin, tool_plugin};
use crate::engine::{CompileSource, MAX_WASM_STACK, Runtime, sha256_hex};
use crate::limits::{LimitExceeded, Limits};
use crate::manifest::Manifest;
use crate::permissions::{Decision, PermissionRequest, Policy};

/// Most bytes of text (plus structured JSON) one tool call may return
/// (16 MiB); more is [`CallError::OutputTooLarge`].
pub const MAX_OUTPUT_BYTES: usize = 16 << 20;

/// Interface prefixes the host links for every plugin (`package/`). The
/// sockets interfaces are linked so Rust-std guests load, but the WASI
/// context never grants network access.
const LINKED_WASI: &[&str] = &[
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// The kinds of plugin the contract defines: which world a component must
/// target and what the host links for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    /// `tool-plugin`: exports `tool`, imports `sessions`.
    Tool,
    /// `policy-plugin`: exports `policy`, imports nothing of ours.
    Policy,
}

impl PluginKind {
    /// The world, e.g. `toolhost:plugin/tool-plugin@0.1.0`.
    pub fn world(self) -> String {
        match self {
            PluginKind::Tool => format!("toolhost:plugin/tool-plugin@{}", contract::VERSION),
            PluginKind::Policy => format!("toolhost:plugin/policy-plugin@{}", contract::VERSION),
        }
    }

    /// The interface it must export, e.g. `toolhost:plugin/tool@0.1.0`.
    pub fn export(self) -> String {
        match self {
            PluginKind::Tool => format!("toolhost:plugin/tool@{}", contract::VERSION),
            PluginKind::Policy => format!("toolhost:plugin/policy@{}", contract::VERSION),
        }
    }

    /// Whether the host links `toolhost:plugin/sessions` for it.
    fn links_sessions(self) -> bool {
        self == PluginKind::Tool
    }
}

/// Errors from loading a plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a valid WebAssembly component.
    #[error("plugin `{plugin}` is not a valid component: {message}")]
    Invalid {
        /// The plugin id.
        plugin: String,
        /// What wasmtime said.
        message: String,
    },
    /// The component does not target the contract's world.
    #[error("plugin `{plugin}` does not target {world}: {message}")]
    WrongWorld {
        /// The plugin id.
        plugin: String,
        /// The expected world, e.g. `toolhost:plugin/tool-plugin@0.1.0`.
        world: String,
        /// What is missing.
        message: String,
    },
    /// The component's sha256 differs from the manifest's pin.
    #[error(
        "plugin `{plugin}`: sha256 mismatch: the manifest pins {expected}, the component is {actual}"
    )]
    Sha256Mismatch {
        /// The plugin id.
        plugin: String,
        /// The manifest's pin.
        expected: String,
        /// The component's digest.
        actual: String,
    },
    /// `describe` failed.
    #[error("plugin `{plugin}` failed to describe its tools: {message}")]
    Describe {
        /// The plugin id.
        plugin: String,
        /// Why.
        message: String,
    },
}

/// Why a plugin call produced no result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// A limit was hit; the instance was discarded.
    #[error("plugin `{plugin}` stopped: {limit}")]
    Limit {
        /// The plugin id.
        plugin: String,
        /// Which limit.
        limit: LimitExceeded,
    },
    /// The guest trapped (a real guest fault); the instance was discarded.
    #[error("plugin `{plugin}` trapped: {message}")]
    Trap {
        /// The plugin id.
        plugin: String,
        /// The trap message.
        message: String,
    },
    /// The call returned more than [`MAX_OUTPUT_BYTES`] of text; the result
    /// was dropped.
    #[error(
        "plugin `{plugin}` returned {bytes} bytes of output, more than the limit of {limit} bytes"
    )]
    OutputTooLarge {
        /// The plugin id.
        plugin: String,
        /// How many bytes it returned.
        bytes: usize,
        /// The limit ([`MAX_OUTPUT_BYTES`]).
        limit: usize,
    },
    /// The host could not run the call (instantiation failed, ...).
    #[error("plugin `{plugin}` could not run: {message}")]
    Host {
        /// The plugin id.
        plugin: String,
        /// Why.
        message: String,
    },
}

impl CallError {
    fn from_wasmtime(plugin: &str, err: wasmtime::Error) -> CallError {
        if let Some(limit) = err.chain().find_map(|e| e.downcast_ref::<LimitExceeded>()) {
            return CallError::Limit {
                plugin: plugin.to_string(),
                limit: limit.clone(),
            };
        }
        if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
            if *trap == wasmtime::Trap::StackOverflow {
                return CallError::Limit {
                    plugin: plugin.to_string(),
                    limit: LimitExceeded::Stack {
                        limit: MAX_WASM_STACK,
                    },
                };
            }
            return CallError::Trap {
                plugin: plugin.to_string(),
                message: trap.to_string(),
            };
        }
        CallError::Trap {
            plugin: plugin.to_string(),
            message: format!("{err:#}"),
        }
    }
}

/// A component checked and linked for `kind` ([`prepare`]).
struct Prepared {
    pre: InstancePre<CallState>,
    source: CompileSource,
}

/// The load pipeline every plugin passes: sha256 pin (when the manifest has
/// one), compile or load from the cache, world check before linking, link,
/// `InstancePre`.
///
/// Errors: [`LoadError::Sha256Mismatch`], [`LoadError::Invalid`] (not a
/// component), [`LoadError::WrongWorld`] (missing export, unknown import).
fn prepare(
    runtime: &Runtime,
    manifest: &Manifest,
    bytes: &[u8],
    kind: PluginKind,
) -> Result<Prepared, LoadError> {
    let id = manifest.id.as_str();
    check_pin(manifest, bytes)?;
    let invalid = |e: wasmtime::Error| LoadError::Invalid {
        plugin: id.to_string(),
        message: format!("{e:#}"),
    };
    let (component, source) = runtime.compile(bytes).map_err(invalid)?;
    check_world(runtime, &component, id, kind)?;
    let linker = linker(runtime, kind).map_err(invalid)?;
    let pre = linker
        .instantiate_pre(&component)
        .map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: kind.world(),
            message: format!("{e:#}"),
        })?;
    Ok(Prepared { pre, source })
}

fn linker(runtime: &Runtime, kind: PluginKind) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(runtime.engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).context("linking WASI")?;
    if kind.links_sessions() {
        contract::add_sessions_to_linker(&mut linker, CallState::sessions_ctx)
            .context("linking toolhost:plugin/sessions")?;
    }
    Ok(linker)
}

/// A world's typed `InstancePre` ([`tool_plugin::ToolPluginPre`],
/// [`policy_plugin::PolicyPluginPre`]), so one [`run_call`] serves both.
trait WorldPre: Send + Sync {
    /// The world's bindings to an instance.
    type Bindings: Send + Sync;
    fn engine(&self) -> &wasmtime::Engine;
    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<CallState>,
    ) -> Pin<Box<dyn Future<Output = wasmtime::Result<Self::Bindings>> + Send + 'a>>;
}

impl WorldPre for tool_plugin::ToolPluginPre<CallState> {
    type Bindings = tool_plugin::ToolPlugin;
    fn engine(&self) -> &wasmtime::Engine {
        tool_plugin::ToolPluginPre::engine(self)
    }
    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<CallState>,
    ) -> Pin<Box<dyn Future<Output = wasmtime::Result<Self::Bindings>> + Send + 'a>> {
        Box::pin(self.instantiate_async(store))
    }
}

impl WorldPre for policy_plugin::PolicyPluginPre<CallState> {
    type Bindings = policy_plugin::PolicyPlugin;
    fn engine(&self) -> &wasmtime::Engine {
        policy_plugin::PolicyPluginPre::engine(self)
    }
    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<CallState>,
    ) -> Pin<Box<dyn Future<Output = wasmtime::Result<Self::Bindings>> + Send + 'a>> {
        Box::pin(self.instantiate_async(store))
    }
}

/// One call: a fresh store for `info` (under its manifest's limits), a fresh
/// instance, then `f`, all within the manifest's wall-time limit.
async fn run_call<P: WorldPre, R>(
    pre: &P,
    info: CallInfo,
    services: Option<Arc<Services>>,
    f: impl for<'a> FnOnce(
        &'a P::Bindings,
        &'a mut Store<CallState>,
    ) -> Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>,
) -> Result<R, CallError> {
    let plugin = info.plugin.to_string();
    let wall = info.manifest.limits.wall;
    let mut store = new_store(pre.engine(), info, services)?;
    let work = async {
        let bindings = pre.instantiate(&mut store).await?;
        f(&bindings, &mut store).await
    };
    within_wall(plugin, wall, work).await
}

/// A loaded tool plugin (`tool-plugin` world).
pub struct ToolPlugin {
    id: Arc<str>,
    manifest: Arc<Manifest>,
    pre: tool_plugin::ToolPluginPre<CallState>,
    tools: Vec<ToolSpec>,
    services: Option<Arc<Services>>,
    /// Keeps the engine's epoch ticker running while the plugin is loaded
    /// (without it CPU limits would never fire).
    _runtime: Runtime,
    /// Where its compiled code came from.
    pub source: CompileSource,
}

/// A tool as a plugin describes it.
pub type ToolSpec = tool_plugin::exports::toolhost::plugin::tool::ToolSpec;
/// A tool call's output as a plugin returns it.
pub type ToolOutput = tool_plugin::exports::toolhost::plugin::tool::ToolOutput;
/// A tool call's error as a plugin returns it.
pub type ToolError = tool_plugin::exports::toolhost::plugin::tool::ToolError;

impl ToolPlugin {
    /// Loads a tool plugin from component bytes under `manifest` (`prepare`:
    /// pin, compile or cache, world check, link) and asks it to `describe` its
    /// tools (under its limits, like any call).
    ///
    /// `services`: the session engine and permission pipeline its
    /// `sessions` imports reach; `None` (as for `plugin inspect`) makes
    /// `start` answer `denied` and the other session calls trap.
    ///
    /// Errors: [`LoadError::Sha256Mismatch`], [`LoadError::Invalid`] (not a
    /// component), [`LoadError::WrongWorld`] (missing export, unknown import),
    /// [`LoadError::Describe`] (`describe` trapped or hit a limit).
    pub async fn load(
        runtime: &Runtime,
        manifest: Manifest,
        bytes: &[u8],
        services: Option<Arc<Services>>,
    ) -> Result<ToolPlugin, LoadError> {
        let Prepared { pre, source } = prepare(runtime, &manifest, bytes, PluginKind::Tool)?;
        let id: Arc<str> = manifest.id.as_str().into();
        let pre = tool_plugin::ToolPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: PluginKind::Tool.world(),
            message: format!("{e:#}"),
        })?;
        let mut plugin = ToolPlugin {
            id: id.clone(),
            manifest: Arc::new(manifest),
            pre,
            tools: Vec::new(),
            services,
            _runtime: runtime.clone(),
            source,
        };
        plugin.tools = plugin.describe().await.map_err(|e| LoadError::Describe {
            plugin: id.to_string(),
            message: e.to_string(),
        })?;
        Ok(plugin)
    }

    /// The plugin id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tools it described at load time.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Its manifest (grants and limits; a deny-all one if it has no file).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Asks the plugin to `describe` its tools again, in a fresh instance
    /// under its limits, exactly as a tool call runs (fresh [`Store`] from the
    /// cached `InstancePre`, `describe`, store dropped). [`ToolPlugin::tools`]
    /// keeps what load time saw; this is the per-call path that benchmark P1
    /// measures (see `BENCHMARKS.md`).
    ///
    /// Errors: as [`ToolPlugin::call`].
    pub async fn describe(&self) -> Result<Vec<ToolSpec>, CallError> {
        let info = CallInfo::plugin_only(self.id.clone(), self.manifest.clone());
        self.run(info, |bindings, store| {
            Box::pin(async move { bindings.toolhost_plugin_tool().call_describe(store).await })
        })
        .await
    }

    /// Runs one tool call in a fresh instance under the plugin's limits.
    ///
    /// Errors: [`CallError::Limit`] (memory, table, CPU, wall, stack),
    /// [`CallError::Trap`], [`CallError::OutputTooLarge`] (more than
    /// [`MAX_OUTPUT_BYTES`] of text), [`CallError::Host`]. In each case the
    /// instance is discarded; the plugin stays loaded.
    pub async fn call(
        &self,
        tool: &str,
        tool_call_id: &str,
        arguments: &str,
    ) -> Result<Result<ToolOutput, ToolError>, CallError> {
        let info = CallInfo {
            plugin: self.id.clone(),
            manifest: self.manifest.clone(),
            tool: tool.to_string(),
            tool_call_id: tool_call_id.to_string(),
        };
        let call = tool_plugin::exports::toolhost::plugin::tool::ToolCall {
            tool_call_id: tool_call_id.to_string(),
            name: tool.to_string(),
            arguments: arguments.to_string(),
        };
        let result = self
            .run(info, move |bindings, store| {
                Box::pin(async move {
                    bindings
                        .toolhost_plugin_tool()
                        .call_call(&mut *store, &call)
                        .await
                })
            })
            .await?;
        let bytes = match &result {
            Ok(out) => out.text.len() + out.structured.as_ref().map_or(0, String::len),
            Err(
                ToolError::Failed(t) | ToolError::InvalidArguments(t) | ToolError::UnknownTool(t),
            ) => t.len(),
        };
        if bytes > MAX_OUTPUT_BYTES {
            return Err(CallError::OutputTooLarge {
                plugin: self.id.to_string(),
                bytes,
                limit: MAX_OUTPUT_BYTES,
            });
        }
        Ok(result)
    }

    async fn run<R: Send + 'static>(
        &self,
        info: CallInfo,
        f: impl for<'a> FnOnce(
            &'a tool_plugin::ToolPlugin,
            &'a mut Store<CallState>,
        )
            -> Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>
        + Send,
    ) -> Result<R, CallError> {
        run_call(&self.pre, info, self.services.clone(), f).await
    }
}

/// A loaded policy plugin (`policy-plugin` world). It implements [`Policy`]
/// for the permission pipeline, deciding under the rules it was given.
pub struct PolicyPlugin {
    id: Arc<str>,
    manifest: Arc<Manifest>,
    pre: policy_plugin::PolicyPluginPre<CallState>,
    rules: String,
    /// Keeps the epoch ticker running (see [`ToolPlugin`]).
    _runtime: Runtime,
    /// Where its compiled code came from.
    pub source: CompileSource,
}

/// A rules-file error from `validate`.
pub type RulesError = policy_plugin::exports::toolhost::plugin::policy::RulesError;

impl PolicyPlugin {
    /// Loads a policy plugin from component bytes (`prepare`). It runs with
    /// no grants (a deny-all manifest) and the given limits, and decides under
    /// `rules` (the `--policy` file's text; empty for the plugin's defaults).
    ///
    /// Errors: [`LoadError::Invalid`], [`LoadError::WrongWorld`].
    pub fn load(
        runtime: &Runtime,
        id: &str,
        bytes: &[u8],
        limits: Limits,
        rules: String,
    ) -> Result<PolicyPlugin, LoadError> {
        let manifest = Manifest {
            limits,
            ..Manifest::deny_all(id)
        };
        let Prepared { pre, source } = prepare(runtime, &manifest, bytes, PluginKind::Policy)?;
        let pre = policy_plugin::PolicyPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: PluginKind::Policy.world(),
            message: format!("{e:#}"),
        })?;
        Ok(PolicyPlugin {
            id: id.into(),
            manifest: Arc::new(manifest),
            pre,
            rules,
            _runtime: runtime.clone(),
            source,
        })
    }

    /// The plugin id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Calls `validate` on the rules it was loaded with.
    ///
    /// Errors: as [`ToolPlugin::call`].
    pub async fn validate(&self) -> Result<Result<(), RulesError>, CallError> {
        let rules = self.rules.clone();
        self.run(move |bindings, store| {
            Box::pin(async move {
                bindings
                    .toolhost_plugin_policy()
                    .call_validate(store, &rules)
                    .await
            })
        })
        .await
    }

    /// Calls `decide(rules, request)` for a process start.
    ///
    /// Errors: as [`ToolPlugin::call`].
    pub async fn decide_start(&self, request: &PermissionRequest) -> Result<Decision, CallError> {
        use policy_plugin::exports::toolhost::plugin::policy as wit;
        let rules = self.rules.clone();
        let request = wit::PermissionRequest {
            plugin: request.plugin.clone(),
            tool: request.tool.clone(),
            tool_call_id: request.tool_call_id.clone(),
            action: wit::Action::ProcessStart(wit::ProcessStart {
                command: request.command.clone(),
                cwd: request.cwd.clone(),
                workspace: request.workspace.clone(),
                env_keys: request.env_keys.clone(),
                shell: request.shell.clone(),
            }),
        };
        let decision = self
            .run(move |bindings, store| {
                Box::pin(async move {
                    bindings
                        .toolhost_plugin_policy()
                        .call_decide(store, &rules, &request)
                        .await
                })
            })
            .await?;
        Ok(match decision {
            wit::Decision::Allow => Decision::Allow,
            wit::Decision::Deny(reason) => Decision::Deny(reason),
            wit::Decision::Ask(ask) => Decision::Ask(ask.prompt),
        })
    }

    async fn run<R: Send + 'static>(
        &self,
        f: impl for<'a> FnOnce(
            &'a policy_plugin::PolicyPlugin,
            &'a mut Store<CallState>,
        )
            -> Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>
        + Send,
    ) -> Result<R, CallError> {
        let info = CallInfo::plugin_only(self.id.clone(), self.manifest.clone());
        run_call(&self.pre, info, None, f).await
    }
}

impl Policy for PolicyPlugin {
    fn decide<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Decision, String>> + Send + 'a>> {
        Box::pin(async move { self.decide_start(request).await.map_err(|e| e.to_string()) })
    }
}

/// Runs one call's `work` (instantiate + export call) under the wall-time
/// limit, turning traps and limit hits into [`CallError`]s naming `plugin`.
async fn within_wall<R>(
    plugin: String,
    wall: std::time::Duration,
    work: impl std::future::Future<Output = wasmtime::Result<R>>,
) -> Result<R, CallError> {
    match tokio::time::timeout(wall, work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(CallError::from_wasmtime(&plugin, e)),
        Err(_) => Err(CallError::Limit {
            plugin,
            limit: LimitExceeded::Wall { limit: wall },
        }),
    }
}

fn check_pin(manifest: &Manifest, bytes: &[u8]) -> Result<(), LoadError> {
    if let Some(expected) = &manifest.sha256 {
        let actual = sha256_hex(bytes);
        if &actual != expected {
            return Err(LoadError::Sha256Mismatch {
                plugin: manifest.id.clone(),
                expected: expected.clone(),
                actual,
            });
        }
    }
    Ok(())
}

/// The names of a component's imports and exports (interfaces and
/// functions), as `Component::component_type` lists them.
pub fn imports_and_exports(
    engine: &wasmtime::Engine,
    component: &Component,
) -> (Vec<String>, Vec<String>) {
    let ty = component.component_type();
    let imports = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    (imports, exports)
}

/// Checks a component against a world before linking, so the error names
/// what is wrong: the export it lacks, or an import the host does not link.
fn check_world(
    runtime: &Runtime,
    component: &Component,
    id: &str,
    kind: PluginKind,
) -> Result<(), LoadError> {
    let world = kind.world();
    let export = kind.export();
    let sessions_import = format!("toolhost:plugin/sessions@{}", contract::VERSION);
    let engine = runtime.engine();
    let ty = component.component_type();
    let wrong = |message: String| LoadError::WrongWorld {
        plugin: id.to_string(),
        world: world.clone(),
        message,
    };
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    if !exports.contains(&export) {
        return Err(wrong(format!(
            "it does not export {export} (it exports: {})",
            if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            }
        )));
    }
    for (name, item) in ty.imports(engine) {
        let linked = LINKED_WASI.iter().any(|p| name.starts_with(p))
            || (kind.links_sessions() && name == sessions_import);
        if !linked {
            let what = match item.ty {
                ComponentItem::ComponentFunc(_) => "function ",
                _ => "",
            };
            return Err(wrong(format!(
                "it imports {what}{name}, which toolhost does not provide to this kind of plugin"
            )));
        }
    }
    Ok(())
}
