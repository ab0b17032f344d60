//! Plugins: loading components, checking them against the contract, and
//! running each call in a fresh, limited store.
//!
//! Every call gets a new [`Store`] instantiated from the plugin's cached
//! `InstancePre` (the Spin model): no state survives between calls, a trap
//! or a limit hit discards only that instance, and the store's WASI context
//! grants nothing (no preopens, env, args or network; stdin empty; stdout and
//! stderr to the host log tagged with the plugin id).

pub mod guest_log;
pub mod limits;
pub mod sessions_api;

use std::sync::Arc;

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::error::Context as _;
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

use crate::bindings::v0_1_0::{policy_plugin, tool_plugin};
use crate::engine::{CompileSource, MAX_WASM_STACK, Runtime, sha256_hex};
use crate::manifest::{Manifest, PreopenMode};
use crate::permissions::Permissions;
use crate::sessions::Sessions;
pub use guest_log::GuestLog;
pub use limits::{LimitExceeded, Limits};

/// The host services a call can reach through its imports.
pub struct Services {
    /// The process session engine.
    pub sessions: Sessions,
    /// The permission pipeline every `sessions.start` passes.
    pub permissions: Permissions,
}

/// Most bytes of text (plus structured JSON) one tool call may return
/// (16 MiB); more is [`CallError::OutputTooLarge`].
pub const MAX_OUTPUT_BYTES: usize = 16 << 20;

/// The world a tool plugin targets.
pub const TOOL_WORLD: &str = "toolhost:plugin/tool-plugin@0.1.0";
/// The interface a tool plugin must export.
pub const TOOL_EXPORT: &str = "toolhost:plugin/tool@0.1.0";
/// The world a policy plugin targets.
pub const POLICY_WORLD: &str = "toolhost:plugin/policy-plugin@0.1.0";
/// The interface a policy plugin must export.
pub const POLICY_EXPORT: &str = "toolhost:plugin/policy@0.1.0";

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
/// The toolhost interface linked for tool plugins only.
const SESSIONS_IMPORT: &str = "toolhost:plugin/sessions@";

/// What one call is: which plugin, which tool call.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// The calling plugin's id.
    pub plugin: Arc<str>,
    /// The calling plugin's manifest (its exec grant is step 1 of the
    /// permission pipeline).
    pub manifest: Arc<Manifest>,
    /// The tool being called (empty for policy calls).
    pub tool: String,
    /// The host-assigned tool call id.
    pub tool_call_id: String,
}

/// The data of one call's [`Store`].
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: limits::Limiter,
    cpu_ticks: u64,
    /// When the epoch callback last ran (or the call started).
    last_tick: std::time::Instant,
    /// Which call this store runs.
    pub call: CallInfo,
    /// Host services (`None` for plugins that import none, such as policies).
    pub services: Option<Arc<Services>>,
    /// Ids of the sessions this call started or asked about (`start`, `check`,
    /// `subscribe`, `read-output`, `read-new-output`), first use first, no repeats.
    /// The host uses them after the call, e.g. to report sandbox denials.
    pub sessions_used: Vec<String>,
}

impl CallState {
    /// Records that this call used session `id` (see [`CallState::sessions_used`]).
    pub(crate) fn note_session(&mut self, id: &str) {
        /// Bound on what one call can make the host remember.
        const MAX_NOTED: usize = 64;
        if self.sessions_used.len() < MAX_NOTED && !self.sessions_used.iter().any(|s| s == id) {
            self.sessions_used.push(id.to_owned());
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
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

/// A loaded tool plugin (`tool-plugin` world).
pub struct ToolPlugin {
    id: Arc<str>,
    manifest: Arc<Manifest>,
    pre: tool_plugin::ToolPluginPre<CallState>,
    tools: Vec<tool_plugin::exports::toolhost::plugin::tool::ToolSpec>,
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
    /// Loads a tool plugin from component bytes under `manifest`: checks the
    /// manifest's sha256 pin, compiles (or loads from the cache), checks that
    /// the component exports `toolhost:plugin/tool@0.1.0` and imports nothing
    /// the host does not link, links it against WASI and `sessions`, and asks
    /// it to `describe` its tools (under its limits, like any call).
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
        let id = manifest.id.clone();
        let id = id.as_str();
        check_pin(&manifest, bytes)?;
        let (component, source) = runtime.compile(bytes).map_err(|e| LoadError::Invalid {
            plugin: id.to_string(),
            message: format!("{e:#}"),
        })?;
        check_world(runtime, &component, id, TOOL_WORLD, TOOL_EXPORT, true)?;
        let linker = tool_linker(runtime).map_err(|e| LoadError::Invalid {
            plugin: id.to_string(),
            message: format!("{e:#}"),
        })?;
        let pre = instantiate_pre(&linker, &component, id, TOOL_WORLD)?;
        let pre = tool_plugin::ToolPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: TOOL_WORLD.into(),
            message: format!("{e:#}"),
        })?;
        let mut plugin = ToolPlugin {
            id: id.into(),
            manifest: Arc::new(manifest),
            pre,
            tools: Vec::new(),
            services,
            _runtime: runtime.clone(),
            source,
        };
        let info = CallInfo {
            plugin: plugin.id.clone(),
            manifest: plugin.manifest.clone(),
            tool: String::new(),
            tool_call_id: String::new(),
        };
        let tools = plugin
            .run(info, |bindings, store| {
                Box::pin(async move { bindings.toolhost_plugin_tool().call_describe(store).await })
            })
            .await
            .map_err(|e| LoadError::Describe {
                plugin: id.to_string(),
                message: e.to_string(),
            })?;
        plugin.tools = tools;
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

    /// The sandbox policy its manifest asks for the commands it starts (see
    /// [`Manifest::sandbox_policy`]); the exec sandbox combines it with the
    /// operator's.
    pub fn sandbox_policy(&self) -> crate::sandbox::SandboxPolicy {
        self.manifest.sandbox_policy()
    }

    /// Asks the plugin to `describe` its tools again, in a fresh instance
    /// under its limits, exactly as a tool call runs (fresh [`Store`] from the
    /// cached `InstancePre`, `describe`, store dropped). [`ToolPlugin::tools`]
    /// keeps what load time saw; this is the per-call path that benchmark P1
    /// measures (see `BENCHMARKS.md`).
    ///
    /// Errors: as [`ToolPlugin::call`].
    pub async fn describe(&self) -> Result<Vec<ToolSpec>, CallError> {
        let info = CallInfo {
            plugin: self.id.clone(),
            manifest: self.manifest.clone(),
            tool: String::new(),
            tool_call_id: String::new(),
        };
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
        self.call_traced(tool, tool_call_id, arguments)
            .await
            .map(|(result, _)| result)
    }

    /// Like [`ToolPlugin::call`], also returning the ids of the sessions the call
    /// started or asked about ([`CallState::sessions_used`]).
    pub async fn call_traced(
        &self,
        tool: &str,
        tool_call_id: &str,
        arguments: &str,
    ) -> Result<(Result<ToolOutput, ToolError>, Vec<String>), CallError> {
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
        let (result, sessions_used) = self
            .run(info, move |bindings, store| {
                Box::pin(async move {
                    let result = bindings
                        .toolhost_plugin_tool()
                        .call_call(&mut *store, &call)
                        .await?;
                    Ok((result, std::mem::take(&mut store.data_mut().sessions_used)))
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
        Ok((result, sessions_used))
    }

    async fn run<R: Send + 'static>(
        &self,
        info: CallInfo,
        f: impl for<'a> FnOnce(
            &'a tool_plugin::ToolPlugin,
            &'a mut Store<CallState>,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = wasmtime::Result<R>> + Send + 'a>,
        > + Send,
    ) -> Result<R, CallError> {
        let plugin = self.id.to_string();
        let limits = &self.manifest.limits;
        let mut store = new_store(self.pre.engine(), info, self.services.clone())?;
        let work = async {
            let bindings = self.pre.instantiate_async(&mut store).await?;
            f(&bindings, &mut store).await
        };
        within_wall(plugin, limits.wall, work).await
    }
}

/// A loaded policy plugin (`policy-plugin` world).
pub struct PolicyPlugin {
    id: Arc<str>,
    manifest: Arc<Manifest>,
    pre: policy_plugin::PolicyPluginPre<CallState>,
    /// Keeps the epoch ticker running (see [`ToolPlugin`]).
    _runtime: Runtime,
    /// Where its compiled code came from.
    pub source: CompileSource,
}

/// A permission request as the policy interface takes it.
pub type PermissionRequest = policy_plugin::exports::toolhost::plugin::policy::PermissionRequest;
/// A policy decision.
pub type Decision = policy_plugin::exports::toolhost::plugin::policy::Decision;
/// A rules-file error from `validate`.
pub type RulesError = policy_plugin::exports::toolhost::plugin::policy::RulesError;

impl PolicyPlugin {
    /// Loads a policy plugin from component bytes. It runs with no grants
    /// (a deny-all manifest) and the given limits.
    ///
    /// Errors: [`LoadError::Invalid`], [`LoadError::WrongWorld`].
    pub fn load(
        runtime: &Runtime,
        id: &str,
        bytes: &[u8],
        limits: Limits,
    ) -> Result<PolicyPlugin, LoadError> {
        let manifest = Manifest {
            limits,
            ..Manifest::deny_all(id)
        };
        let (component, source) = runtime.compile(bytes).map_err(|e| LoadError::Invalid {
            plugin: id.to_string(),
            message: format!("{e:#}"),
        })?;
        let mut linker = Linker::new(runtime.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| LoadError::Invalid {
            plugin: id.to_string(),
            message: format!("{e:#}"),
        })?;
        check_world(runtime, &component, id, POLICY_WORLD, POLICY_EXPORT, false)?;
        let pre = instantiate_pre(&linker, &component, id, POLICY_WORLD)?;
        let pre = policy_plugin::PolicyPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: POLICY_WORLD.into(),
            message: format!("{e:#}"),
        })?;
        Ok(PolicyPlugin {
            id: id.into(),
            manifest: Arc::new(manifest),
            pre,
            _runtime: runtime.clone(),
            source,
        })
    }

    /// The plugin id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Calls `validate(rules)`.
    pub async fn validate(&self, rules: &str) -> Result<Result<(), RulesError>, CallError> {
        let rules = rules.to_string();
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

    /// Calls `decide(rules, request)`.
    pub async fn decide(
        &self,
        rules: &str,
        request: PermissionRequest,
    ) -> Result<Decision, CallError> {
        let rules = rules.to_string();
        self.run(move |bindings, store| {
            Box::pin(async move {
                bindings
                    .toolhost_plugin_policy()
                    .call_decide(store, &rules, &request)
                    .await
            })
        })
        .await
    }

    async fn run<R: Send + 'static>(
        &self,
        f: impl for<'a> FnOnce(
            &'a policy_plugin::PolicyPlugin,
            &'a mut Store<CallState>,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = wasmtime::Result<R>> + Send + 'a>,
        > + Send,
    ) -> Result<R, CallError> {
        let plugin = self.id.to_string();
        let info = CallInfo {
            plugin: self.id.clone(),
            manifest: self.manifest.clone(),
            tool: String::new(),
            tool_call_id: String::new(),
        };
        let wall = self.manifest.limits.wall;
        let mut store = new_store(self.pre.engine(), info, None)?;
        let work = async {
            let bindings = self.pre.instantiate_async(&mut store).await?;
            f(&bindings, &mut store).await
        };
        within_wall(plugin, wall, work).await
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

fn tool_linker(runtime: &Runtime) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(runtime.engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).context("linking WASI")?;
    tool_plugin::toolhost::plugin::sessions::add_to_linker::<CallState, HasSelf<CallState>>(
        &mut linker,
        |state| state,
    )
    .context("linking toolhost:plugin/sessions")?;
    Ok(linker)
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
    world: &str,
    export: &str,
    sessions: bool,
) -> Result<(), LoadError> {
    let engine = runtime.engine();
    let ty = component.component_type();
    let wrong = |message: String| LoadError::WrongWorld {
        plugin: id.to_string(),
        world: world.to_string(),
        message,
    };
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    if !exports.iter().any(|e| e == export) {
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
            || (sessions && name.starts_with(SESSIONS_IMPORT));
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

fn instantiate_pre(
    linker: &Linker<CallState>,
    component: &Component,
    id: &str,
    world: &str,
) -> Result<wasmtime::component::InstancePre<CallState>, LoadError> {
    linker
        .instantiate_pre(component)
        .map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: world.to_string(),
            message: format!("{e:#}"),
        })
}

/// A fresh store for one call: a WASI context that grants nothing, the
/// limiter, and the epoch-based CPU budget. Each epoch tick during which the
/// guest runs costs one tick of budget; time blocked in host calls does not
/// (the deadline callback only fires while guest code runs). Between ticks the
/// guest yields to tokio, so a spinning guest cannot starve other tasks.
///
/// The WASI context holds exactly the manifest's preopens and env (nothing
/// for a plugin without a manifest); network is always denied.
fn new_store(
    engine: &wasmtime::Engine,
    call: CallInfo,
    services: Option<Arc<Services>>,
) -> Result<Store<CallState>, CallError> {
    let manifest = call.manifest.clone();
    let limits = &manifest.limits;
    let mut builder = WasiCtx::builder();
    builder
        .stdout(GuestLog::new(call.plugin.clone(), "stdout"))
        .stderr(GuestLog::new(call.plugin.clone(), "stderr"));
    for (key, value) in &manifest.env {
        builder.env(key, value);
    }
    for p in &manifest.preopens {
        let perms = match p.mode {
            PreopenMode::ReadOnly => FsPerms::ReadOnly,
            PreopenMode::ReadWrite => FsPerms::ReadWrite,
        };
        builder
            .preopened_dir(&p.host, &p.guest, perms)
            .map_err(|e| CallError::Host {
                plugin: call.plugin.to_string(),
                message: format!("cannot open preopen {}: {e:#}", p.host.display()),
            })?;
    }
    let wasi = builder.build();
    let state = CallState {
        wasi,
        table: ResourceTable::new(),
        limiter: limits::Limiter::new(limits.clone()),
        cpu_ticks: 0,
        last_tick: std::time::Instant::now(),
        call,
        services,
        sessions_used: Vec::new(),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    let budget = limits.cpu_ticks();
    let cpu = limits.cpu;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |mut ctx| {
        // The callback runs at the guest's first epoch check after the
        // deadline. While the guest computes, that is once per tick; after it
        // was blocked in a host call (a `poll` waiting for output, say) the
        // epoch moved on while it ran nothing, and the callback fires at once
        // when it resumes. Charge a tick only when the previous callback was
        // about a tick ago (the guest has been running since), so time spent
        // blocked never counts as CPU.
        let state = ctx.data_mut();
        let now = std::time::Instant::now();
        if now.duration_since(state.last_tick) <= crate::engine::EPOCH_TICK * 2 {
            state.cpu_ticks += 1;
        }
        state.last_tick = now;
        if state.cpu_ticks > budget {
            return Err(wasmtime::Error::new(LimitExceeded::Cpu { limit: cpu }));
        }
        Ok(UpdateDeadline::Yield(1))
    });
    Ok(store)
}
