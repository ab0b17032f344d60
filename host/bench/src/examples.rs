//! P12: the example plugins (`plugins/examples/{rust,python,js}`, built by
//! `plugins/examples/build.sh` into `target/examples/`), against `CALL_GOAL`.
//!
//! 1. Per-call latency of each example's pure tool `greet`, Python and JS against
//!    Rust in the same run, interleaved: through `toolhost serve` over stdio (an MCP
//!    client in this process, the three examples loaded), through `Host::call_tool`
//!    in this process, the plugin part alone (`ToolPlugin::call`), and a bare
//!    wasmtime instance of the same component split into its phases (store,
//!    instantiate, call, drop, with the page faults of each), so the table shows
//!    where the time goes.
//! 2. The first `greet` of a fresh `toolhost serve` process (spawn to result) after
//!    `toolhost plugin add` against the same with nothing of the plugin in the
//!    compiled cache (the built-in plugins' code is cached in both).
//!
//! Compiling a Python or JS example takes tens of seconds, so the compiled code of
//! the examples is kept between runs in `$TMPDIR/toolhost-bench-compiled` (the
//! cache key is the component's sha256 and the engine's compatibility hash, as in
//! the host). `--quick` measures the first call for Rust only.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use toolhost_runtime::Runtime;
use toolhost_runtime::ToolCallV0_1_0 as ToolCall;
use toolhost_runtime::ToolPlugin;
use toolhost_runtime::ToolPluginPre;
use toolhost_runtime::{Host, HostConfig};
use toolhost_test_support::{RmcpClient, rmcp_client, serve_command};
use wasmtime::Store;
use wasmtime::component::Linker;

use crate::fixture::Fixture;
use crate::plugin_call::{BareState, ratio};
use crate::report::Row;
use crate::startup::{call_once, toolhost_binary};
use crate::stats::{Summary, duration, median};

/// The example languages; Rust is the baseline.
pub const LANGS: [&str; 3] = ["rust", "python", "js"];

/// The goal for a Python or JS call once loaded (P12's goal in BENCHMARKS.md).
const CALL_GOAL: Duration = Duration::from_millis(2);

/// The arguments every `greet` gets, and the text it must answer.
pub(crate) const NAME: &str = "Ada";
pub(crate) const GREETING: &str = "Hello, Ada!";

/// Where the built examples are: `$TOOLHOST_EXAMPLES`, else `target/examples` of
/// this repository.
pub fn examples_dir() -> PathBuf {
    match std::env::var_os("TOOLHOST_EXAMPLES") {
        Some(dir) => dir.into(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/examples"),
    }
}

/// The component of the `lang` example (its manifest is beside it).
pub fn example(lang: &str) -> Result<PathBuf> {
    let wasm = examples_dir()
        .join(lang)
        .join(format!("example_{lang}.wasm"));
    ensure!(
        wasm.exists(),
        "{} is missing: build the examples first (`plugins/examples/build.sh`) or set \
         TOOLHOST_EXAMPLES",
        wasm.display()
    );
    Ok(wasm)
}

/// Compiled code kept between runs (see the module docs).
fn shared_cache() -> PathBuf {
    std::env::temp_dir().join("toolhost-bench-compiled")
}

/// Copies the `*.cwasm` files of `from` that `to` lacks into `to` (created 0700).
fn copy_compiled(from: &Path, to: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(to)
        .with_context(|| format!("creating {}", to.display()))?;
    let Ok(entries) = std::fs::read_dir(from) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        if !name.to_string_lossy().ends_with(".cwasm") || to.join(&name).exists() {
            continue;
        }
        let tmp = to.join(format!(
            ".{}.tmp{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        std::fs::copy(entry.path(), &tmp)?;
        std::fs::rename(&tmp, to.join(&name))?;
    }
    Ok(())
}

/// The compiled cache's files with their sizes and modification times: a serve run
/// that compiled nothing leaves it unchanged.
fn listing(dir: &Path) -> Result<Vec<(String, u64, std::time::SystemTime)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        files.push((
            entry.file_name().to_string_lossy().into_owned(),
            meta.len(),
            meta.modified()?,
        ));
    }
    files.sort();
    Ok(files)
}

/// `toolhost serve` over stdio with `plugins` (none: what the state dir's plugins
/// dir holds), initialised; returns the client and the server's pid.
pub(crate) async fn serve(
    bin: &Path,
    ws: &Path,
    state: &Path,
    plugins: &[PathBuf],
) -> Result<(RmcpClient, u32)> {
    let mut cmd = serve_command(bin, ws, state);
    for p in plugins {
        cmd.arg("--plugin").arg(p);
    }
    rmcp_client((), cmd).await
}

/// One `greet` through MCP, checked.
pub(crate) async fn greet_mcp(client: &RmcpClient, tool: &str) -> Result<()> {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = json!({ "name": NAME }).as_object().cloned();
    let result = client.call_tool(params).await?;
    let text = serde_json::to_value(&result.content)?[0]["text"].clone();
    ensure!(
        result.is_error != Some(true) && text == GREETING,
        "{tool} answered {result:?}"
    );
    Ok(())
}

/// One `greet` through `Host::call_tool`, checked.
pub(crate) async fn greet_host(host: &Host, tool: &str) -> Result<()> {
    let result = host.call_tool(tool, json!({ "name": NAME })).await?;
    ensure!(
        !result.is_error && result.text() == GREETING,
        "{tool} answered {:?}",
        result.content
    );
    Ok(())
}

/// One `greet` through `ToolPlugin::call`, checked.
pub(crate) async fn greet_plugin(plugin: &ToolPlugin) -> Result<()> {
    let greet = plugin
        .tools()
        .iter()
        .find(|t| t.name == "greet")
        .context("the plugin has no greet tool")?;
    let out = plugin
        .call(
            greet,
            "call_bench",
            json!({ "name": NAME }).to_string(),
            None,
            None,
        )
        .await?
        .map_err(|e| anyhow!("greet failed: {e:?}"))?;
    let greeting = [toolhost_runtime::ContentBlock::Text(GREETING.into())];
    ensure!(out.content == greeting, "greet answered {:?}", out.content);
    Ok(())
}

/// CPU time of process `pid` so far, in nanoseconds: the time on a CPU of each
/// of its live threads (`/proc/PID/task/*/schedstat`, first field). The
/// `utime`/`stime` of `/proc/PID/stat` count in clock ticks (10 ms here), too
/// coarse for a few hundred calls of ≈ 100 µs; threads that ended are not
/// counted (a server's workers and blocking threads live as long as it does).
pub(crate) fn cpu_of(pid: u32) -> Result<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        // A thread that ended since the listing has nothing to add.
        let Ok(stat) = std::fs::read_to_string(&path) else {
            continue;
        };
        let on_cpu = stat.split_whitespace().next().context("empty schedstat")?;
        total += on_cpu.parse::<u64>()?;
    }
    Ok(Duration::from_nanos(total))
}

/// Minor and major page faults of this thread so far.
fn faults() -> u64 {
    // SAFETY: `usage` is a valid out-pointer.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    (usage.ru_minflt + usage.ru_majflt) as u64
}

/// An example on a bare wasmtime store (WASI only; `sessions` traps: `greet` uses
/// none), on an engine configured as the host's.
struct Bare {
    pre: ToolPluginPre<BareState>,
}

/// One bare call's phases: store + WASI context, instantiate, `greet`, drop; and
/// the page faults of instantiate, `greet` and drop.
type Phases = ([Duration; 4], [u64; 3]);

impl Bare {
    fn new(runtime: &Runtime, bytes: &[u8]) -> Result<Bare> {
        let (component, _) = runtime.compile(bytes).map_err(|e| anyhow!("{e:#}"))?;
        Bare::from_component(runtime.engine(), component)
    }

    fn from_component(
        engine: &wasmtime::Engine,
        component: wasmtime::component::Component,
    ) -> Result<Bare> {
        let mut linker = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow!("{e:#}"))?;
        crate::plugin_call::link_sessions_as_traps(&mut linker, engine, &component)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| anyhow!("{e:#}"))?;
        Ok(Bare {
            pre: ToolPluginPre::new(pre).map_err(|e| anyhow!("{e:#}"))?,
        })
    }

    async fn greet_phases(&self) -> Result<Phases> {
        let call = ToolCall {
            tool_call_id: "call_bench".into(),
            name: "greet".into(),
            arguments: json!({ "name": NAME }).to_string(),
        };
        let t0 = Instant::now();
        let state = BareState::granting_nothing();
        let mut store = Store::new(self.pre.engine(), state);
        store.set_epoch_deadline(1 << 40);
        let (t1, f1) = (Instant::now(), faults());
        let bindings = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| anyhow!("{e:#}"))?;
        let (t2, f2) = (Instant::now(), faults());
        let out = bindings
            .toolhost_plugin_tool()
            .call_call(&mut store, &call)
            .await
            .map_err(|e| anyhow!("{e:#}"))?
            .map_err(|e| anyhow!("greet failed: {e:?}"))?;
        let (t3, f3) = (Instant::now(), faults());
        ensure!(out.text == GREETING, "bare greet answered {:?}", out.text);
        drop(store);
        let (t4, f4) = (Instant::now(), faults());
        Ok((
            [t1 - t0, t2 - t1, t3 - t2, t4 - t3],
            [f2 - f1, f3 - f2, f4 - f3],
        ))
    }
}

/// Per-call samples of one language.
#[derive(Default)]
struct Samples {
    serve: Vec<Duration>,
    host: Vec<Duration>,
    plugin: Vec<Duration>,
    phases: [Vec<Duration>; 4],
    faults: [Vec<f64>; 3],
    /// `toolhost serve`'s CPU time per call over a block of this language's calls.
    serve_cpu: Duration,
}

/// Section 1: `calls` calls of each kind per language, interleaved.
async fn latency(
    bin: &Path,
    fixture: &Fixture,
    state: &Path,
    wasms: &[PathBuf],
    calls: usize,
) -> Result<Vec<Samples>> {
    let tool = |i: usize| format!("example_{}__greet", LANGS[i]);
    let mut config = HostConfig::new(&fixture.workspace, state);
    config.plugins = wasms.to_vec();
    let host = Host::new(config).await.context("starting the host")?;
    let plugins: Vec<Arc<ToolPlugin>> = LANGS
        .iter()
        .map(|lang| {
            let id = format!("example_{lang}");
            host.plugins()
                .into_iter()
                .find(|p| p.id() == id)
                .with_context(|| format!("the host has no plugin {id}"))
        })
        .collect::<Result<_>>()?;
    let runtime = Runtime::new(Some(state.join("compiled"))).map_err(|e| anyhow!("{e:#}"))?;
    let bare: Vec<Bare> = wasms
        .iter()
        .map(|w| Bare::new(&runtime, &std::fs::read(w)?))
        .collect::<Result<_>>()?;
    let (client, pid) = serve(bin, &fixture.workspace, state, wasms).await?;

    let mut out: Vec<Samples> = LANGS.iter().map(|_| Samples::default()).collect();
    let warmup = calls.clamp(5, 50);
    for round in 0..warmup + calls {
        for k in 0..LANGS.len() {
            // Rotate which language goes first, so none always follows another.
            let i = (round + k) % LANGS.len();
            let t = Instant::now();
            greet_mcp(&client, &tool(i)).await?;
            let serve_t = t.elapsed();
            let t = Instant::now();
            greet_host(&host, &tool(i)).await?;
            let host_t = t.elapsed();
            let t = Instant::now();
            greet_plugin(&plugins[i]).await?;
            let plugin_t = t.elapsed();
            let (phases, faults) = bare[i].greet_phases().await?;
            if round >= warmup {
                let s = &mut out[i];
                s.serve.push(serve_t);
                s.host.push(host_t);
                s.plugin.push(plugin_t);
                for (all, one) in s.phases.iter_mut().zip(phases) {
                    all.push(one);
                }
                for (all, one) in s.faults.iter_mut().zip(faults) {
                    all.push(one as f64);
                }
            }
        }
    }
    // Host CPU per call: a block of 200 of one language's calls at a time (the
    // kernel counts CPU time in 10 ms ticks).
    let block = 200;
    for (i, s) in out.iter_mut().enumerate() {
        let before = cpu_of(pid)?;
        for _ in 0..block {
            greet_mcp(&client, &tool(i)).await?;
        }
        s.serve_cpu = (cpu_of(pid)? - before) / block as u32;
    }
    client
        .cancel()
        .await
        .map_err(|e| anyhow!("stopping toolhost serve: {e}"))?;
    Ok(out)
}

/// Section 2's result for one language.
struct FirstCall {
    /// Spawn to the first `greet` result, with nothing of the plugin compiled.
    cold: Vec<Duration>,
    /// The same after `toolhost plugin add`.
    added: Vec<Duration>,
    /// Spawn to `initialize` answered, after `plugin add`.
    added_init: Vec<Duration>,
    /// How long `toolhost plugin add` took (it compiled).
    add: Duration,
    /// Whether the serve runs after `plugin add` left the compiled cache untouched.
    no_compile: bool,
}

/// A fresh `toolhost serve` (with `plugin`, or the state dir's installed plugins)
/// from spawn to its first `greet` result; returns (to `initialize`, to result).
async fn first_greet(
    bin: &Path,
    ws: &Path,
    state: &Path,
    plugin: Option<&Path>,
) -> Result<(Duration, Duration)> {
    let plugins: Vec<PathBuf> = plugin.map(Path::to_path_buf).into_iter().collect();
    let t = Instant::now();
    let (client, _) = serve(bin, ws, state, &plugins).await?;
    let init = t.elapsed();
    greet_mcp(&client, "greet").await?;
    let total = t.elapsed();
    client
        .cancel()
        .await
        .map_err(|e| anyhow!("stopping toolhost serve: {e}"))?;
    Ok((init, total))
}

/// Section 2 for `lang`: `cold_runs` cold first calls, one `plugin add`, then
/// `added_runs` fresh processes. `builtins`: a state dir whose compiled cache holds
/// the built-in plugins.
async fn first_call(
    bin: &Path,
    fixture: &Fixture,
    builtins: &Path,
    lang: &str,
    wasm: &Path,
    (cold_runs, added_runs): (usize, usize),
) -> Result<FirstCall> {
    let ws = &fixture.workspace;
    let mut cold = Vec::new();
    for i in 0..cold_runs {
        let state = fixture.root().join(format!("cold-{lang}-{i}"));
        copy_compiled(&builtins.join("compiled"), &state.join("compiled"))?;
        cold.push(first_greet(bin, ws, &state, Some(wasm)).await?.1);
        copy_compiled(&state.join("compiled"), &shared_cache())?;
        std::fs::remove_dir_all(&state)?;
    }
    let state = fixture.root().join(format!("added-{lang}"));
    copy_compiled(&builtins.join("compiled"), &state.join("compiled"))?;
    let t = Instant::now();
    let out = Command::new(bin)
        .args(["plugin", "add"])
        .arg(wasm)
        .arg("--state-dir")
        .arg(&state)
        .stdin(Stdio::null())
        .output()
        .context("running toolhost plugin add")?;
    let add = t.elapsed();
    ensure!(
        out.status.success(),
        "toolhost plugin add {} failed ({}): {}",
        wasm.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let before = listing(&state.join("compiled"))?;
    let (mut added, mut added_init) = (Vec::new(), Vec::new());
    for _ in 0..added_runs {
        let (init, total) = first_greet(bin, ws, &state, None).await?;
        added_init.push(init);
        added.push(total);
    }
    let no_compile = listing(&state.join("compiled"))? == before;
    copy_compiled(&state.join("compiled"), &shared_cache())?;
    std::fs::remove_dir_all(&state)?;
    Ok(FirstCall {
        cold,
        added,
        added_init,
        add,
        no_compile,
    })
}

/// Runs P12: `calls` calls of each kind per language; the first call with
/// `cold_runs` cold and `added_runs` after-add processes, for Rust only when
/// `all_languages` is false.
pub async fn run(
    calls: usize,
    (cold_runs, added_runs): (usize, usize),
    all_languages: bool,
) -> Result<Vec<Row>> {
    let bin = toolhost_binary()?;
    let wasms: Vec<PathBuf> = LANGS.iter().map(|l| example(l)).collect::<Result<_>>()?;
    let fixture = Fixture::new()?;
    // The built-in plugins' compiled code (and nothing else: not seeded from the
    // shared cache), for every state dir of the first-call part.
    let builtins = fixture.root().join("builtins");
    call_once(&bin, &fixture.workspace, &builtins)?;
    copy_compiled(&builtins.join("compiled"), &shared_cache())?;

    let mut first = Vec::new();
    for (lang, wasm) in LANGS.iter().zip(&wasms) {
        if !all_languages && *lang != "rust" {
            continue;
        }
        let f = first_call(
            &bin,
            &fixture,
            &builtins,
            lang,
            wasm,
            (cold_runs, added_runs),
        )
        .await
        .with_context(|| format!("first call of the {lang} example"))?;
        first.push((*lang, f));
    }

    copy_compiled(&shared_cache(), &fixture.state.join("compiled"))?;
    let samples = latency(&bin, &fixture, &fixture.state, &wasms, calls).await?;
    copy_compiled(&fixture.state.join("compiled"), &shared_cache())?;

    let mut rows = Vec::new();
    let rust = &samples[0];
    let rust_serve = Summary::of(rust.serve.clone());
    for (i, lang) in LANGS.iter().enumerate().skip(1) {
        let s = &samples[i];
        let serve = Summary::of(s.serve.clone());
        let mut details = Vec::new();
        for (name, s) in [(LANGS[i], s), ("rust", rust)] {
            details.push(format!(
                "{name} serve (MCP round trip): {}",
                Summary::of(s.serve.clone()).describe()
            ));
            details.push(format!(
                "{name} Host::call_tool:        {}",
                Summary::of(s.host.clone()).describe()
            ));
            details.push(format!(
                "{name} ToolPlugin::call:       {}",
                Summary::of(s.plugin.clone()).describe()
            ));
            let [store, inst, call, drop_] =
                s.phases.clone().map(|p| duration(Summary::of(p).median));
            let [f_inst, f_call, f_drop] = s.faults.clone().map(median);
            details.push(format!(
                "{name} bare phases (medians): store {store}, instantiate {inst} \
                 ({f_inst:.0} page faults), greet {call} ({f_call:.0} faults), drop {drop_} \
                 ({f_drop:.0} faults); serve CPU per call {}",
                duration(s.serve_cpu)
            ));
        }
        rows.push(Row {
            id: format!("P12 {lang}"),
            what: format!(
                "example plugins: `greet` of the {lang} example (plugins/examples) through \
                 `toolhost serve` (MCP client in this process, stdio; all three examples \
                 loaded) vs the Rust example's, interleaved; then the same through \
                 Host::call_tool, ToolPlugin::call and a bare wasmtime store"
            ),
            measured: duration(serve.median),
            baseline: format!("rust {}", duration(rust_serve.median)),
            ratio: Some(ratio(serve.median, rust_serve.median)),
            ratio_note: format!("{lang} / rust"),
            goal: format!("median ≤ {}", duration(CALL_GOAL)),
            met: serve.median <= CALL_GOAL,
            details,
        });
    }
    for (lang, f) in first {
        let added = Summary::of(f.added.clone());
        let cold = (!f.cold.is_empty()).then(|| Summary::of(f.cold.clone()));
        let mut details = vec![
            format!("after plugin add: {}", added.describe()),
            format!(
                "after plugin add, to `initialize` answered: {}",
                Summary::of(f.added_init.clone()).describe()
            ),
            format!("plugin add (compiles): {}", duration(f.add)),
            format!(
                "compiled cache after the serve runs: {}",
                if f.no_compile {
                    "unchanged (nothing compiled)"
                } else {
                    "CHANGED (serve compiled)"
                }
            ),
        ];
        match &cold {
            Some(c) => details.push(format!("cold (empty cache): {}", c.describe())),
            None => details.push("cold: not measured (--quick)".into()),
        }
        rows.push(Row {
            id: format!("P12 first {lang}"),
            what: format!(
                "example plugins: a fresh `toolhost serve` process's first `greet` of the \
                 {lang} example (spawn → result over MCP) after `toolhost plugin add` vs with \
                 nothing of it in the compiled cache (built-ins cached in both)"
            ),
            measured: format!("after add {}", duration(added.median)),
            baseline: cold
                .as_ref()
                .map_or("-".into(), |c| format!("cold {}", duration(c.median))),
            ratio: cold.as_ref().map(|c| ratio(added.median, c.median)),
            ratio_note: "after add / cold".into(),
            goal: "no compile on the first call after add".into(),
            met: f.no_compile,
            details,
        });
    }
    if rows.is_empty() {
        bail!("no rows");
    }
    Ok(rows)
}
