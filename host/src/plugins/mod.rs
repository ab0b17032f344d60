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

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::error::Context as _;
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::v0_1_0::{policy_plugin, tool_plugin};
use crate::engine::{CompileSource, Runtime};
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

/// What one call is: which plugin, which tool call.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// The calling plugin's id.
    pub plugin: Arc<str>,
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
            let message = match trap {
                wasmtime::Trap::StackOverflow => {
                    "call stack exhausted (deep recursion)".to_string()
                }
                other => other.to_string(),
            };
            return CallError::Trap {
                plugin: plugin.to_string(),
                message,
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
    pre: tool_plugin::ToolPluginPre<CallState>,
    limits: Limits,
    tools: Vec<tool_plugin::exports::toolhost::plugin::tool::ToolSpec>,
    services: Arc<Services>,
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
    /// Loads a tool plugin from component bytes: compiles (or loads from the
    /// cache), links it against WASI and `sessions`, and asks it to
    /// `describe` its tools.
    pub async fn load(
        runtime: &Runtime,
        id: &str,
        bytes: &[u8],
        limits: Limits,
        services: Arc<Services>,
    ) -> Result<ToolPlugin, LoadError> {
        let (component, source) = runtime.compile(bytes).map_err(|e| LoadError::Invalid {
            plugin: id.to_string(),
            message: format!("{e:#}"),
        })?;
        let linker = tool_linker(runtime).map_err(|e| LoadError::Invalid {
            plugin: id.to_string(),
            message: format!("{e:#}"),
        })?;
        let pre = instantiate_pre(&linker, &component, id, "toolhost:plugin/tool-plugin@0.1.0")?;
        let pre = tool_plugin::ToolPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: "toolhost:plugin/tool-plugin@0.1.0".into(),
            message: format!("{e:#}"),
        })?;
        let mut plugin = ToolPlugin {
            id: id.into(),
            pre,
            limits,
            tools: Vec::new(),
            services,
            source,
        };
        let info = CallInfo {
            plugin: plugin.id.clone(),
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

    /// Runs one tool call in a fresh instance under the plugin's limits.
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
            tool: tool.to_string(),
            tool_call_id: tool_call_id.to_string(),
        };
        let call = tool_plugin::exports::toolhost::plugin::tool::ToolCall {
            tool_call_id: tool_call_id.to_string(),
            name: tool.to_string(),
            arguments: arguments.to_string(),
        };
        self.run(info, move |bindings, store| {
            Box::pin(async move {
                let result = bindings
                    .toolhost_plugin_tool()
                    .call_call(&mut *store, &call)
                    .await?;
                Ok((result, std::mem::take(&mut store.data_mut().sessions_used)))
            })
        })
        .await
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
        let mut store = new_store(
            &self.pre.engine().clone(),
            &self.limits,
            info,
            Some(self.services.clone()),
        );
        let work = async {
            let bindings = self.pre.instantiate_async(&mut store).await?;
            f(&bindings, &mut store).await
        };
        match tokio::time::timeout(self.limits.wall, work).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(CallError::from_wasmtime(&plugin, e)),
            Err(_) => Err(CallError::Limit {
                plugin,
                limit: LimitExceeded::Wall {
                    limit: self.limits.wall,
                },
            }),
        }
    }
}

/// A loaded policy plugin (`policy-plugin` world).
pub struct PolicyPlugin {
    id: Arc<str>,
    pre: policy_plugin::PolicyPluginPre<CallState>,
    limits: Limits,
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
    /// Loads a policy plugin from component bytes.
    pub fn load(
        runtime: &Runtime,
        id: &str,
        bytes: &[u8],
        limits: Limits,
    ) -> Result<PolicyPlugin, LoadError> {
        let (component, source) = runtime.compile(bytes).map_err(|e| LoadError::Invalid {
            plugin: id.to_string(),
            message: format!("{e:#}"),
        })?;
        let mut linker = Linker::new(runtime.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| LoadError::Invalid {
            plugin: id.to_string(),
            message: format!("{e:#}"),
        })?;
        let pre = instantiate_pre(
            &linker,
            &component,
            id,
            "toolhost:plugin/policy-plugin@0.1.0",
        )?;
        let pre = policy_plugin::PolicyPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: "toolhost:plugin/policy-plugin@0.1.0".into(),
            message: format!("{e:#}"),
        })?;
        Ok(PolicyPlugin {
            id: id.into(),
            pre,
            limits,
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
            tool: String::new(),
            tool_call_id: String::new(),
        };
        let mut store = new_store(self.pre.engine(), &self.limits, info, None);
        let work = async {
            let bindings = self.pre.instantiate_async(&mut store).await?;
            f(&bindings, &mut store).await
        };
        match tokio::time::timeout(self.limits.wall, work).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(CallError::from_wasmtime(&plugin, e)),
            Err(_) => Err(CallError::Limit {
                plugin,
                limit: LimitExceeded::Wall {
                    limit: self.limits.wall,
                },
            }),
        }
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
fn new_store(
    engine: &wasmtime::Engine,
    limits: &Limits,
    call: CallInfo,
    services: Option<Arc<Services>>,
) -> Store<CallState> {
    let wasi = WasiCtx::builder()
        .stdout(GuestLog::new(call.plugin.clone(), "stdout"))
        .stderr(GuestLog::new(call.plugin.clone(), "stderr"))
        .build();
    let state = CallState {
        wasi,
        table: ResourceTable::new(),
        limiter: limits::Limiter::new(limits.clone()),
        cpu_ticks: 0,
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
        let state = ctx.data_mut();
        state.cpu_ticks += 1;
        if state.cpu_ticks > budget {
            return Err(wasmtime::Error::new(LimitExceeded::Cpu { limit: cpu }));
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store
}
