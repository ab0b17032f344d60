//! P1: a plugin call: a trivial tool call of the built-in bash plugin
//! (`list_shells`, no sessions: one `sessions.list` host call and a small JSON
//! result) through `ToolPlugin::call`, from the call to its result, against the
//! same call on a bare wasmtime store (WASI context only: no limiter, CPU budget,
//! wall timeout or guest log; `sessions.list` answers an empty list) made,
//! instantiated and dropped per call on the same engine and component.
//!
//! Each call runs in a fresh instance; toolhost makes the next call's instance
//! after the previous call returns (`plugin/instances.rs::ToolInstances::give_back`). The
//! headline measures calls spaced as real tool calls are (the background work of
//! the previous call finished before the next starts, `ToolPlugin::wait_ready`,
//! untimed); the details add calls back to back and the old P1 (`describe` in an
//! instance made on the call path).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use toolhost_runtime::Runtime;
use toolhost_runtime::ToolCallV0_1_0 as ToolCall;
use toolhost_runtime::ToolPlugin;
use toolhost_runtime::ToolPluginPre;
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

impl BareState {
    /// A WASI context built with no grants, and an empty table.
    pub fn granting_nothing() -> BareState {
        BareState {
            ctx: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        }
    }
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
    link_sessions_stubs(linker, engine, component, false)
}

/// As [`link_sessions_as_traps`], but `list` answers an empty list when
/// `empty_list` (what the host answers a plugin without sessions).
fn link_sessions_stubs<T: 'static>(
    linker: &mut Linker<T>,
    engine: &wasmtime::Engine,
    component: &wasmtime::component::Component,
    empty_list: bool,
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
                ComponentItem::ComponentFunc(_) if empty_list && export == "list" => sessions
                    .func_new(export, |_, _, _, results| {
                        results[0] = wasmtime::component::Val::List(Vec::new());
                        Ok(())
                    }),
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
    /// `sessions` imports trap, but `list` answers an empty list: `describe` and
    /// `list_shells` use no other).
    pub fn new(runtime: &Runtime) -> Result<Bare> {
        let (component, _) = runtime
            .compile(toolhost_runtime::BASH)
            .map_err(|e| anyhow!("{e:#}"))?;
        let mut linker = Linker::new(runtime.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow!("{e:#}"))?;
        // The `sessions` functions trap but `list` (`describe` calls none).
        link_sessions_stubs(&mut linker, runtime.engine(), &component, true)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| anyhow!("{e:#}"))?;
        Ok(Bare {
            pre: ToolPluginPre::new(pre).map_err(|e| anyhow!("{e:#}"))?,
            _runtime: runtime.clone(),
        })
    }

    /// A fresh store and instance, the tool call `tool` with `arguments`, the
    /// store dropped; returns the result's text length (0 for an error).
    pub async fn call(&self, tool: &str, arguments: &str) -> Result<usize> {
        Ok(self.call_phases(tool, arguments).await?.1)
    }

    /// One bare tool call, timing each phase (as [`Phases`]), and its result's
    /// text length.
    pub async fn call_phases(&self, tool: &str, arguments: &str) -> Result<(Phases, usize)> {
        let t0 = Instant::now();
        let state = BareState::granting_nothing();
        let mut store = Store::new(self.pre.engine(), state);
        store.set_epoch_deadline(1 << 40);
        let t1 = Instant::now();
        let bindings = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| anyhow!("{e:#}"))?;
        let t2 = Instant::now();
        let call = ToolCall {
            tool_call_id: "p1".into(),
            name: tool.into(),
            arguments: arguments.into(),
        };
        let out = bindings
            .toolhost_plugin_tool()
            .call_call(&mut store, &call)
            .await
            .map_err(|e| anyhow!("{e:#}"))?;
        let t3 = Instant::now();
        let len = out.as_ref().map_or(0, |o| o.text.len());
        drop(out);
        drop(store);
        let t4 = Instant::now();
        Ok(([t1 - t0, t2 - t1, t3 - t2, t4 - t3], len))
    }
}

/// Where a bare call's time goes: (store + WASI context, instantiate, the tool
/// call, drop of the store and instance).
pub type Phases = [Duration; 4];

/// The loaded bash plugin of a host started in `fixture`, and the bare baseline on
/// the same engine configuration.
pub async fn setup(fixture: &Fixture) -> Result<(toolhost_runtime::Host, Arc<ToolPlugin>, Bare)> {
    let host = fixture.host(None).await?;
    let plugin = host
        .plugins()
        .into_iter()
        .find(|p| p.id() == toolhost_runtime::BASH_ID)
        .context("the host has no bash plugin")?;
    let runtime = Runtime::new(None).map_err(|e| anyhow!("{e:#}"))?;
    let bare = Bare::new(&runtime)?;
    Ok((host, plugin, bare))
}

/// P1's tool: the bash plugin's cheapest (no session to list).
const TOOL: &str = "list_shells";
/// Its arguments.
const ARGS: &str = "{}";

/// One toolhost call of [`TOOL`], timed from the call to its result; returns the
/// result's first text block's length.
async fn timed_call(plugin: &ToolPlugin, n: usize) -> Result<(Duration, usize)> {
    let id = format!("p1-{n}");
    let spec = plugin
        .tools()
        .iter()
        .find(|t| t.name == TOOL)
        .context("the bash plugin has no list_shells")?;
    let t = Instant::now();
    let out = plugin.call(spec, &id, ARGS.to_string(), None, None).await?;
    let elapsed = t.elapsed();
    let out = out.map_err(|e| anyhow!("{TOOL} failed: {e:?}"))?;
    anyhow::ensure!(!out.is_error, "{TOOL} returned an error result");
    let len = match out.content.first() {
        Some(toolhost_runtime::ContentBlock::Text(t)) => t.len(),
        _ => 0,
    };
    Ok((elapsed, len))
}

/// Runs P1 with `calls` calls of each kind, interleaved, in a task on one of the
/// runtime's workers: where `toolhost serve` runs a tool call (each MCP request is
/// a task). Called from `block_on`'s own thread instead, every call would also pay
/// for waking a parked worker for the task that drops its store (≈ 12 µs here, a
/// futex wake across vCPUs); from a worker that task waits in the worker's own
/// queue until the call's task yields.
pub async fn run(calls: usize) -> Result<Vec<Row>> {
    tokio::spawn(run_on_worker(calls))
        .await
        .map_err(|e| anyhow!("P1's task failed: {e}"))?
}

async fn run_on_worker(calls: usize) -> Result<Vec<Row>> {
    let fixture = Fixture::new()?;
    let (_host, plugin, bare) = setup(&fixture).await?;
    let tools = plugin.tools().len();
    // Warm-up, and the check that both answer the same text.
    let mut expected = 0;
    for n in 0..calls.min(500) {
        expected = timed_call(&plugin, n).await?.1;
        plugin.wait_ready().await;
        let len = bare.call(TOOL, ARGS).await?;
        anyhow::ensure!(
            len == expected,
            "bare {TOOL} returned {len} bytes of text, toolhost {expected}"
        );
    }
    // Spaced: the previous call's background work (store dropped, next instance
    // made) is done before the next call starts; bare calls interleaved.
    let mut spaced = Vec::with_capacity(calls);
    let mut raw = Vec::with_capacity(calls);
    let mut ready_at_call = 0usize;
    for n in 0..calls {
        plugin.wait_ready().await;
        ready_at_call += usize::from(plugin.has_ready_instance());
        let (t, len) = timed_call(&plugin, n).await?;
        spaced.push(t);
        anyhow::ensure!(len == expected, "{TOOL} returned {len} bytes of text");
        let t = Instant::now();
        let len = bare.call(TOOL, ARGS).await?;
        raw.push(t.elapsed());
        anyhow::ensure!(len == expected, "bare {TOOL} returned {len} bytes of text");
    }
    // Back to back: each call starts as soon as the previous one returned (its
    // refill competes with the call for the 2 cores, or is waited for).
    plugin.wait_ready().await;
    let mut back = Vec::with_capacity(calls);
    for n in 0..calls {
        back.push(timed_call(&plugin, n).await?.0);
    }
    plugin.wait_ready().await;
    // The old P1: `describe` in an instance made on the call path.
    let mut describe = Vec::with_capacity(calls.min(2_000));
    for _ in 0..calls.min(2_000) {
        let t = Instant::now();
        let specs = plugin.describe().await?;
        describe.push(t.elapsed());
        anyhow::ensure!(
            specs.len() == tools,
            "describe returned {} tools",
            specs.len()
        );
    }
    let mut phases: [Vec<Duration>; 4] = Default::default();
    for _ in 0..calls.min(2_000) {
        for (all, one) in phases.iter_mut().zip(bare.call_phases(TOOL, ARGS).await?.0) {
            all.push(one);
        }
    }
    let [store, instantiate, call, drop_] = phases.map(|p| duration(Summary::of(p).median));
    let ours = Summary::of(spaced);
    let raw = Summary::of(raw);
    let back = Summary::of(back);
    let describe = Summary::of(describe);
    let goal = Duration::from_micros(10);
    Ok(vec![Row {
        id: "P1".into(),
        what: format!(
            "plugin call: `{TOOL}` of the bash plugin through ToolPlugin::call in a task on a \
             runtime worker (as serve runs calls), call to result, calls spaced (the next instance made in the background before the next \
             call; fresh instance per call), toolhost (limits, CPU budget, wall timeout, \
             guest log, session services) vs a bare wasmtime store made, instantiated and \
             dropped per call on the same engine; {} allocator",
            match plugin_allocation() {
                toolhost_runtime::Allocation::Pooling => "pooling",
                toolhost_runtime::Allocation::OnDemand => "on-demand",
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
                "toolhost back to back (no wait between calls): {}",
                back.describe()
            ),
            format!(
                "a ready instance was there at {ready_at_call} of {calls} spaced calls; \
                 `describe` in an instance made on the call path ({tools} tools): median {}",
                duration(describe.median)
            ),
            format!(
                "bare call phases (medians): store + WASI context {store}, instantiate \
                 {instantiate}, {TOOL} {call}, drop {drop_}"
            ),
        ],
    }])
}

fn plugin_allocation() -> toolhost_runtime::Allocation {
    Runtime::new(None)
        .map(|r| r.allocation())
        .unwrap_or(toolhost_runtime::Allocation::OnDemand)
}

/// `a / b` as a float.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}
