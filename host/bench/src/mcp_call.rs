//! P8: the MCP round trip. A trivial tool call over stdio from an rmcp client in
//! this process: the Rust example plugin's pure `greet` (`plugins/examples/rust`,
//! built into `target/examples/rust/` by `plugins/examples/build.sh`) through
//! `toolhost serve`, against the same call to `toolhost-bench-mcp`, a minimal rmcp
//! server whose `greet` returns the same text (`src/bin/toolhost-bench-mcp.rs`).
//! Both servers run side by side and their calls are interleaved.
//!
//! Then each server's CPU per call (time on a CPU of its threads, `/proc/PID/task/*/schedstat`, over a block
//! of calls, blocks of the two servers alternating), and a breakdown of toolhost's
//! share in this process: `Host::call_tool` with a file-backed event log (as `serve`
//! keeps it) and with an in-memory one, and `ToolPlugin::call` (the plugin part
//! alone), each with its latency and CPU per call.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use toolhost_runtime::HostSessionLog;
use toolhost_runtime::{Host, HostConfig};
use toolhost_test_support::{RmcpClient, rmcp_client, serve_command};

use crate::examples::{cpu_of, example, greet_host, greet_mcp, greet_plugin};
use crate::fixture::Fixture;
use crate::plugin_call::ratio;
use crate::report::Row;
use crate::startup::{baseline_mcp_binary, toolhost_binary};
use crate::stats::{Summary, duration};

/// The goal: toolhost's median round trip at most this many times the baseline's.
const GOAL_RATIO: f64 = 1.3;

/// `toolhost serve` of `fixture` with `plugin` (`--plugin`: it alone, no installed
/// plugins), initialised.
async fn toolhost_serve(bin: &Path, fixture: &Fixture, plugin: &Path) -> Result<(RmcpClient, u32)> {
    let mut cmd = serve_command(bin, &fixture.workspace, &fixture.state);
    cmd.arg("--plugin").arg(plugin);
    rmcp_client((), cmd).await
}

/// Context switches (voluntary + involuntary, summed over its threads) of process
/// `pid` so far, from `/proc/PID/task/*/status`: each thread hand-off on the call
/// path is one or two of them. Threads that already exited are not counted.
pub fn switches_of(pid: u32) -> Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Ok(status) = std::fs::read_to_string(task?.path().join("status")) else {
            continue;
        };
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    Ok(total)
}

/// CPU time (user + system, all threads) of this process so far.
pub fn own_cpu() -> Duration {
    // SAFETY: `usage` is a valid out-pointer.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// One in-process variant of the call: latency samples and CPU per call.
struct InProcess {
    latency: Summary,
    cpu: Duration,
}

/// `calls` timed calls of `f`, then the CPU of this process over `block` more.
async fn in_process<F, Fut>(calls: usize, block: usize, mut f: F) -> Result<InProcess>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    for _ in 0..calls.clamp(5, 50) {
        f().await?;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        f().await?;
        samples.push(t.elapsed());
    }
    let before = own_cpu();
    for _ in 0..block {
        f().await?;
    }
    Ok(InProcess {
        latency: Summary::of(samples),
        cpu: (own_cpu() - before) / block as u32,
    })
}

/// One `greet` through MCP, checked and timed.
async fn one(client: &RmcpClient, tool: &str) -> Result<Duration> {
    let t = Instant::now();
    greet_mcp(client, tool).await?;
    Ok(t.elapsed())
}

/// A host in this process with the Rust example, and its `greet` tool's name;
/// `file_log`: a file-backed event log in the state dir (as `serve` has) instead
/// of an in-memory one.
async fn host_with(fixture: &Fixture, wasm: &Path, file_log: bool) -> Result<(Host, String)> {
    let mut config = HostConfig::new(&fixture.workspace, &fixture.state);
    config.plugins = vec![wasm.to_path_buf()];
    if file_log {
        let log = HostSessionLog::open(&fixture.state, None).map_err(|e| anyhow!("{e}"))?;
        config.events = Some(Arc::new(log));
    }
    let host = Host::new(config).await.context("starting the host")?;
    let tool = host
        .tools()
        .iter()
        .map(|t| t.name.clone())
        .find(|n| n == "greet" || n.ends_with("__greet"))
        .context("the host has no greet tool")?;
    Ok((host, tool))
}

/// Runs P8: `calls` interleaved round trips per server, CPU over `block` calls
/// per server (twice, alternating).
pub async fn run(calls: usize, block: usize) -> Result<Vec<Row>> {
    let bin = toolhost_binary()?;
    let baseline_bin = baseline_mcp_binary()?;
    let wasm = example("rust")?;
    let fixture = Fixture::new()?;

    // Compile the built-ins and the example into the state dir's cache first.
    drop(host_with(&fixture, &wasm, false).await?);
    let (toolhost, toolhost_pid) = toolhost_serve(&bin, &fixture, &wasm).await?;
    let tool = toolhost
        .list_all_tools()
        .await?
        .into_iter()
        .map(|t| t.name.to_string())
        .find(|n| n == "greet" || n.ends_with("__greet"))
        .context("toolhost serve lists no greet tool")?;
    let (baseline, baseline_pid) =
        rmcp_client((), tokio::process::Command::new(&baseline_bin)).await?;

    let (mut ours, mut raw) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    let warmup = calls.clamp(20, 200);
    for round in 0..warmup + calls {
        // Alternate which server goes first.
        let (t, b) = if round % 2 == 0 {
            let t = one(&toolhost, &tool).await?;
            (t, one(&baseline, "greet").await?)
        } else {
            let b = one(&baseline, "greet").await?;
            (one(&toolhost, &tool).await?, b)
        };
        if round >= warmup {
            ours.push(t);
            raw.push(b);
        }
    }

    // CPU per call: blocks of `block` calls (the kernel counts CPU time in 10 ms
    // ticks), the two servers alternating, twice each.
    let (mut ours_cpu, mut raw_cpu) = (Duration::ZERO, Duration::ZERO);
    let (mut ours_switches, mut raw_switches) = (0u64, 0u64);
    for _ in 0..2 {
        for (client, name, pid, sum, switches) in [
            (
                &toolhost,
                tool.as_str(),
                toolhost_pid,
                &mut ours_cpu,
                &mut ours_switches,
            ),
            (
                &baseline,
                "greet",
                baseline_pid,
                &mut raw_cpu,
                &mut raw_switches,
            ),
        ] {
            let (before, switched) = (cpu_of(pid)?, switches_of(pid)?);
            for _ in 0..block {
                greet_mcp(client, name).await?;
            }
            *sum += cpu_of(pid)? - before;
            *switches += switches_of(pid)?.saturating_sub(switched);
        }
    }
    let ours_cpu = ours_cpu / (2 * block) as u32;
    let raw_cpu = raw_cpu / (2 * block) as u32;
    let per_call = |n: u64| n as f64 / (2 * block) as f64;
    for client in [toolhost, baseline] {
        client
            .cancel()
            .await
            .map_err(|e| anyhow!("stopping an MCP server: {e}"))?;
    }

    // The breakdown, in this process with the servers stopped.
    let (file_host, file_tool) = host_with(&fixture, &wasm, true).await?;
    let with_file = in_process(calls, block, || greet_host(&file_host, &file_tool)).await?;
    drop(file_host);
    let (mem_host, mem_tool) = host_with(&fixture, &wasm, false).await?;
    let plugin = mem_host
        .plugins()
        .into_iter()
        .find(|p| p.id() == "example_rust")
        .context("the host has no example_rust plugin")?;
    let with_mem = in_process(calls, block, || greet_host(&mem_host, &mem_tool)).await?;
    let plugin_only = in_process(calls, block, || greet_plugin(&plugin)).await?;

    let ours = Summary::of(ours);
    let raw = Summary::of(raw);
    let r = ratio(ours.median, raw.median);
    let cpu = |d: Duration| duration(d);
    Ok(vec![Row {
        id: "P8".into(),
        what: format!(
            "MCP round trip: `{tool}` of the Rust example plugin (text + structured result) \
             over stdio from an rmcp client in this process, through `toolhost serve --plugin \
             example_rust.wasm` vs the same call to a minimal rmcp server ({}), interleaved",
            baseline_bin
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ),
        measured: duration(ours.median),
        baseline: duration(raw.median),
        ratio: Some(r),
        ratio_note: "toolhost / rmcp".into(),
        goal: format!("≤ {GOAL_RATIO}× the rmcp server"),
        met: r <= GOAL_RATIO,
        details: vec![
            format!("toolhost serve: {}", ours.describe()),
            format!("rmcp server:    {}", raw.describe()),
            format!(
                "server CPU per call (its threads' time on a CPU, /proc/PID/task/*/schedstat, 2 × {block} calls): toolhost \
                 {}, rmcp server {} ({:.2}×)",
                cpu(ours_cpu),
                cpu(raw_cpu),
                ratio(ours_cpu, raw_cpu)
            ),
            format!(
                "server context switches per call (voluntary + involuntary, all threads, \
                 /proc/PID/task/*/status): toolhost {:.1}, rmcp server {:.1}",
                per_call(ours_switches),
                per_call(raw_switches)
            ),
            format!(
                "in this process, latency median / CPU per call: Host::call_tool with a \
                 file-backed event log {} / {}; with an in-memory log {} / {}; \
                 ToolPlugin::call {} / {}",
                duration(with_file.latency.median),
                cpu(with_file.cpu),
                duration(with_mem.latency.median),
                cpu(with_mem.cpu),
                duration(plugin_only.latency.median),
                cpu(plugin_only.cpu),
            ),
            format!(
                "CPU per call by part: MCP layer + stdio (serve − Host::call_tool) {}; \
                 event-log file writes {}; host call path (Host::call_tool − ToolPlugin::call) \
                 {}; plugin call {}",
                cpu(ours_cpu.saturating_sub(with_file.cpu)),
                cpu(with_file.cpu.saturating_sub(with_mem.cpu)),
                cpu(with_mem.cpu.saturating_sub(plugin_only.cpu)),
                cpu(plugin_only.cpu)
            ),
        ],
    }])
}
