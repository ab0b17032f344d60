//! P1: a plugin call: a fresh store instantiated from the cached `InstancePre` plus a
//! `describe` call of the built-in bash plugin, against the same call on a bare
//! wasmtime store (WASI context only: no limiter, CPU budget, wall timeout or
//! guest log) built on the same engine and component.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use toolhost_runtime::contract::v0_1_0::tool_plugin::ToolPluginPre;
use toolhost_runtime::engine::Runtime;
use toolhost_runtime::plugin::ToolPlugin;
use wasmtime::Store;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Linker, ResourceTable, ResourceType};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::fixture::Fixture;
use crate::report::Row;
use crate::stats::{Summary, duration};

/// The baseline's store data: a WASI context that grants nothing, and a table.
pub struct BareState {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for BareState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// The host type of the baseline's unlinked resources.
struct Unlinked;

/// Links every `toolhost:plugin/sessions@*` import of `component` into `linker`
/// as a stub: its functions trap ("... is not linked"), its `pollable` is WASI's
/// resource type and its other resources one of our own. For bare-wasmtime
/// baselines whose tools start no process.
pub(crate) fn link_sessions_as_traps<T: 'static>(
    linker: &mut Linker<T>,
    engine: &wasmtime::Engine,
    component: &wasmtime::component::Component,
) -> Result<()> {
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        if !name.starts_with("toolhost:plugin/sessions@") {
            continue;
        }
        let mut sessions = linker.instance(name).map_err(|e| anyhow!("{e:#}"))?;
        for (export, item) in instance.exports(engine) {
            let defined = match item.ty {
                ComponentItem::ComponentFunc(_) => {
                    let what = format!("{name}#{export}");
                    sessions.func_new(export, move |_, _, _, _| {
                        Err(wasmtime::Error::msg(format!("{what} is not linked")))
                    })
                }
                ComponentItem::Resource(_) if export == "pollable" => sessions.resource(
                    export,
                    ResourceType::host::<wasmtime_wasi::p2::DynPollable>(),
                    |_, _| Ok(()),
                ),
                ComponentItem::Resource(_) => {
                    sessions.resource(export, ResourceType::host::<Unlinked>(), |_, _| Ok(()))
                }
                _ => Ok(()),
            };
            defined.map_err(|e| anyhow!("{e:#}"))?;
        }
    }
    Ok(())
}

/// The bash plugin on a bare store: what wasmtime alone costs per call.
pub struct Bare {
    pre: ToolPluginPre<BareState>,
    _runtime: Runtime,
}

impl Bare {
    /// Compiles the built-in bash plugin on `runtime`'s engine and links WASI (the
    /// `sessions` imports trap: `describe` uses none).
    pub fn new(runtime: &Runtime) -> Result<Bare> {
        let (component, _) = runtime
            .compile(toolhost_runtime::builtin::BASH)
            .map_err(|e| anyhow!("{e:#}"))?;
        let mut linker = Linker::new(runtime.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow!("{e:#}"))?;
        // The `sessions` functions trap (`describe` calls none).
        link_sessions_as_traps(&mut linker, runtime.engine(), &component)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| anyhow!("{e:#}"))?;
        Ok(Bare {
            pre: ToolPluginPre::new(pre).map_err(|e| anyhow!("{e:#}"))?,
            _runtime: runtime.clone(),
        })
    }

    /// A fresh store, instance and `describe` call; returns the number of tools.
    pub async fn describe(&self) -> Result<usize> {
        let state = BareState {
            ctx: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        };
        let mut store = Store::new(self.pre.engine(), state);
        store.set_epoch_deadline(1 << 40);
        let bindings = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| anyhow!("{e:#}"))?;
        let tools = bindings
            .toolhost_plugin_tool()
            .call_describe(&mut store)
            .await
            .map_err(|e| anyhow!("{e:#}"))?;
        Ok(tools.len())
    }
}

/// Where a bare call's time goes: (store + WASI context, instantiate, `describe`,
/// drop of the store and instance).
pub type Phases = [Duration; 4];

impl Bare {
    /// One bare call, timing each phase.
    pub async fn describe_phases(&self) -> Result<Phases> {
        let t0 = Instant::now();
        let state = BareState {
            ctx: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        };
        let mut store = Store::new(self.pre.engine(), state);
        store.set_epoch_deadline(1 << 40);
        let t1 = Instant::now();
        let bindings = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| anyhow!("{e:#}"))?;
        let t2 = Instant::now();
        let tools = bindings
            .toolhost_plugin_tool()
            .call_describe(&mut store)
            .await
            .map_err(|e| anyhow!("{e:#}"))?;
        let t3 = Instant::now();
        drop(tools);
        drop(store);
        let t4 = Instant::now();
        Ok([t1 - t0, t2 - t1, t3 - t2, t4 - t3])
    }
}

/// The loaded bash plugin of a host started in `fixture`, and the bare baseline on
/// the same engine configuration.
pub async fn setup(fixture: &Fixture) -> Result<(toolhost_runtime::Host, Arc<ToolPlugin>, Bare)> {
    let host = fixture.host(None).await?;
    let plugin = host
        .plugins()
        .into_iter()
        .find(|p| p.id() == toolhost_runtime::builtin::BASH_ID)
        .context("the host has no bash plugin")?;
    let runtime = Runtime::new(None).map_err(|e| anyhow!("{e:#}"))?;
    let bare = Bare::new(&runtime)?;
    Ok((host, plugin, bare))
}

/// Runs P1 with `calls` calls of each kind, interleaved.
pub async fn run(calls: usize) -> Result<Vec<Row>> {
    let fixture = Fixture::new()?;
    let (_host, plugin, bare) = setup(&fixture).await?;
    let expected = plugin.tools().len();
    for _ in 0..calls.min(500) {
        plugin.describe().await?;
        bare.describe().await?;
    }
    let mut ours = Vec::with_capacity(calls);
    let mut raw = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let tools = plugin.describe().await?;
        ours.push(t.elapsed());
        anyhow::ensure!(
            tools.len() == expected,
            "describe returned {} tools",
            tools.len()
        );
        let t = Instant::now();
        let n = bare.describe().await?;
        raw.push(t.elapsed());
        anyhow::ensure!(n == expected, "bare describe returned {n} tools");
    }
    let mut phases: [Vec<Duration>; 4] = Default::default();
    for _ in 0..calls.min(2_000) {
        for (all, one) in phases.iter_mut().zip(bare.describe_phases().await?) {
            all.push(one);
        }
    }
    let [store, instantiate, call, drop_] = phases.map(|p| duration(Summary::of(p).median));
    let ours = Summary::of(ours);
    let raw = Summary::of(raw);
    let goal = Duration::from_micros(10);
    Ok(vec![Row {
        id: "P1".into(),
        what: format!(
            "plugin call: fresh store from the cached InstancePre + `describe` of the bash \
             plugin ({expected} tools), toolhost (limits, CPU budget, wall timeout, guest log) \
             vs a bare wasmtime store on the same engine; {} allocator",
            match plugin_allocation() {
                toolhost_runtime::engine::Allocation::Pooling => "pooling",
                toolhost_runtime::engine::Allocation::OnDemand => "on-demand",
            }
        ),
        measured: duration(ours.median),
        baseline: duration(raw.median),
        ratio: Some(ratio(ours.median, raw.median)),
        ratio_note: "toolhost / bare".into(),
        goal: format!("median ≤ {}", duration(goal)),
        met: ours.median <= goal,
        details: vec![
            format!("toolhost: {}", ours.describe()),
            format!("bare:     {}", raw.describe()),
            format!(
                "bare call phases (medians): store + WASI context {store}, instantiate \
                 {instantiate}, describe {call}, drop {drop_}"
            ),
        ],
    }])
}

fn plugin_allocation() -> toolhost_runtime::engine::Allocation {
    Runtime::new(None)
        .map(|r| r.allocation())
        .unwrap_or(toolhost_runtime::engine::Allocation::OnDemand)
}

/// `a / b` as a float.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}
