//! One call's [`Store`]: a WASI context that grants only what the manifest
//! says, the resource limiter, and the epoch-based CPU budget.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

use super::{CallError, GuestLog};
use crate::call::{CallInfo, Services};
use crate::contract::v0_1_0::SessionsCtx;
use crate::contract::v0_2_0::client::{ClientCtx, ClientState};
use crate::engine::EPOCH_TICK;
use crate::limits::{LimitExceeded, Limits};
use crate::manifest::PreopenMode;

/// The variable of a tool plugin's WASI environment that names the host's shell
/// (`TOOLHOST_SHELL`): the absolute path `Sessions::shell` resolved once when the
/// host started, the first bash it has, else `/bin/sh`
/// (docs/manifests.md#the-plugins-own-environment). Set in every store of a plugin
/// loaded with session services whose manifest grants `exec`; it replaces a manifest
/// `[env]` entry of that name.
pub const SHELL_ENV: &str = "TOOLHOST_SHELL";

/// The data of one call's [`Store`].
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    cpu_ticks: u64,
    /// When the epoch callback last ran (or the call started).
    last_tick: std::time::Instant,
    /// Which call this store runs.
    pub call: CallInfo,
    /// Host services (`None` for plugins that import none, such as policies).
    pub services: Option<Arc<Services>>,
    /// The guest's stderr, whose last lines a trap report carries.
    pub(crate) stderr: GuestLog,
    /// The guest's stdout (kept so a reused policy instance's budget restarts).
    stdout: GuestLog,
    /// The MCP client behind the call, the grants' counters and limits
    /// (`client@0.2.0`; unused by 0.1.0 plugins and policies).
    client: ClientState,
}

impl CallState {
    /// The view the `sessions` implementation works on.
    pub(crate) fn sessions_ctx(&mut self) -> SessionsCtx<'_> {
        SessionsCtx {
            table: &mut self.table,
            call: &self.call,
            services: self.services.as_ref(),
        }
    }

    /// The view the `client` implementation works on.
    pub(crate) fn client_ctx(&mut self) -> ClientCtx<'_> {
        ClientCtx {
            state: &mut self.client,
            call: &self.call,
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

/// A fresh store for one call: a WASI context that grants nothing, the
/// limiter, and the epoch-based CPU budget. Each epoch tick during which the
/// guest runs costs one tick of budget; time blocked in host calls does not
/// (the deadline callback only fires while guest code runs). Between ticks the
/// guest yields to tokio, so a spinning guest cannot starve other tasks.
///
/// The WASI context holds exactly the manifest's preopens and env (nothing
/// for a plugin without a manifest), and [`SHELL_ENV`] naming `host_shell` when
/// given (the host's shell, for a plugin whose calls can start processes);
/// network is always denied. Each preopen is
/// the directory opened at load (`Preopen::dir`, reopened through
/// `/proc/self/fd`), and the call fails with [`CallError::Host`] when its path
/// no longer leads to that directory. `client` is what the `client` import
/// reaches (0.2.0 plugins).
pub(crate) fn new_store(
    engine: &wasmtime::Engine,
    call: CallInfo,
    host_shell: Option<&Path>,
    services: Option<Arc<Services>>,
    client: ClientState,
) -> Result<Store<CallState>, CallError> {
    let mut store = blank_store(engine, call, host_shell)?;
    let state = store.data_mut();
    state.services = services;
    state.client = client;
    Ok(store)
}

/// A store for a call of the plugin of `plugin` that is not known yet (a
/// plugin's ready instance, `instances.rs::ToolInstances`): everything
/// [`new_store`] sets up except the call's own data. Its `call` is `plugin`
/// (no tool, no tool-call id), it has no services and no client until
/// [`attach`] gives it the call's. Instantiating in it runs only the
/// component's start code, under the plugin's limits; its guest log, resource
/// table and CPU ticks are those of the call it will serve.
///
/// Errors: as [`new_store`] (a preopen that is no longer the directory
/// granted at load).
pub(crate) fn blank_store(
    engine: &wasmtime::Engine,
    plugin: CallInfo,
    host_shell: Option<&Path>,
) -> Result<Store<CallState>, CallError> {
    let call = plugin;
    let manifest = call.manifest.clone();
    let limits = &manifest.limits;
    let stderr = GuestLog::new(call.plugin.clone(), "stderr");
    let stdout = GuestLog::new(call.plugin.clone(), "stdout");
    let mut builder = WasiCtx::builder();
    builder.stdout(stdout.clone()).stderr(stderr.clone());
    for (key, value) in &manifest.env {
        if host_shell.is_none() || key != SHELL_ENV {
            builder.env(key, value);
        }
    }
    if let Some(shell) = host_shell {
        builder.env(SHELL_ENV, shell.to_string_lossy());
    }
    for p in &manifest.preopens {
        let perms = match p.mode {
            PreopenMode::ReadOnly => FsPerms::ReadOnly,
            PreopenMode::ReadWrite => FsPerms::ReadWrite,
        };
        verify_preopen(&call, p)?;
        builder
            .preopened_dir(p.dir.reopen_path(), &p.guest, perms)
            .map_err(|e| CallError::Host {
                plugin: call.plugin.to_string(),
                message: format!("cannot open preopen {}: {e:#}", p.host.display()),
            })?;
    }
    let wasi = builder.build();
    let state = CallState {
        wasi,
        table: ResourceTable::new(),
        limiter: Limiter::new(limits.clone()),
        cpu_ticks: 0,
        last_tick: std::time::Instant::now(),
        call,
        services: None,
        stderr,
        stdout,
        client: ClientState::default(),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    let budget = crate::limits::cpu_ticks(limits);
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
        if now.duration_since(state.last_tick) <= EPOCH_TICK * 2 {
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

/// Gives `store` (from [`blank_store`]) the call it runs: `call` (tool and
/// tool-call id), the session `services` and the `client`. The preopens are
/// checked again, so a path swapped since the store was made refuses the
/// call as it would refuse a fresh store's. The CPU clock restarts here: the
/// epoch deadline is one tick from now, as for a store made now, and ticks
/// the start code used stay charged.
///
/// Errors: [`CallError::Host`] when a preopen's path no longer leads to the
/// directory granted at load.
pub(crate) fn attach(
    store: &mut Store<CallState>,
    call: CallInfo,
    services: Option<Arc<Services>>,
    client: ClientState,
) -> Result<(), CallError> {
    for p in &call.manifest.preopens {
        verify_preopen(&call, p)?;
    }
    let state = store.data_mut();
    state.call = call;
    state.services = services;
    state.client = client;
    state.last_tick = std::time::Instant::now();
    store.set_epoch_deadline(1);
    Ok(())
}

/// Granted by handle: the directory opened at load, never what sits at the
/// path now. A path that no longer leads there (a symlink swapped in, say)
/// refuses the call (ARCHITECTURE.md, invariant "A preopen is the directory granted
/// at load, never what its path names later").
fn verify_preopen(call: &CallInfo, p: &crate::manifest::Preopen) -> Result<(), CallError> {
    p.dir.verify().map_err(|why| CallError::Host {
        plugin: call.plugin.to_string(),
        message: format!(
            "preopen {} ({}) is no longer the directory granted at load: {why}; \
             the call is refused",
            p.guest,
            p.host.display()
        ),
    })
}

/// Readies `store`, whose instance has just finished a call without a trap or a
/// limit hit, for another call on the same instance (a policy plugin's idle
/// instance, `plugin/policy.rs`): the CPU budget starts again from zero with
/// the epoch deadline one tick from now, as in a store made now, and the guest
/// log's per-call budget (stdout and stderr) and the stderr lines a trap report
/// shows start empty. The memory and table limits
/// keep applying to the instance as it is (memory never shrinks; see
/// [`CallState::memory_bytes`]).
pub(crate) fn restart_call(store: &mut Store<CallState>) {
    let state = store.data_mut();
    state.cpu_ticks = 0;
    state.last_tick = std::time::Instant::now();
    state.stderr.forget_recent();
    state.stdout.forget_recent();
    store.set_epoch_deadline(1);
}

impl CallState {
    /// The largest linear memory the limiter let this store's instance grow to
    /// (bytes; wasm memories never shrink, so this is also their size now).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.limiter.peak
    }
}

/// The store limiter: refuses growth past [`Limits`] with a [`LimitExceeded`]
/// trap (rather than a silent `-1` from `memory.grow`, which Rust guests turn
/// into an opaque abort).
pub(crate) struct Limiter {
    limits: Limits,
    /// The largest memory size granted so far (bytes).
    peak: usize,
}

impl Limiter {
    /// A limiter enforcing `limits`.
    pub(crate) fn new(limits: Limits) -> Limiter {
        Limiter { limits, peak: 0 }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limits.memory_bytes {
            return Err(wasmtime::Error::new(LimitExceeded::Memory {
                limit: self.limits.memory_bytes,
                requested: desired,
            }));
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limits.table_elements {
            return Err(wasmtime::Error::new(LimitExceeded::Table {
                limit: self.limits.table_elements,
            }));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.limits.instances
    }

    fn tables(&self) -> usize {
        self.limits.instances
    }

    fn memories(&self) -> usize {
        self.limits.instances
    }
}
