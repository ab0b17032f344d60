//! P9: `toolhost serve` start-up. From spawning the process to its answer to
//! `tools/list` (after `initialize`), with a warm compiled cache, loading 1, 10, 20
//! and 50 copies of the Rust example plugin (`plugins/examples/rust`, each under its
//! own id with a manifest, in a `--plugins-dir`), against spawning the minimal rmcp
//! server of P8 (`toolhost-bench-mcp`) to its `tools/list` answer. All five are
//! interleaved; each process is gone before the next starts.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};

use toolhost_test_support::{RmcpClient, rmcp_client, serve_command};

use crate::examples::example;
use crate::fixture::Fixture;
use crate::plugin_call::ratio;
use crate::report::Row;
use crate::startup::{baseline_mcp_binary, toolhost_binary};
use crate::stats::{Summary, duration};

/// The plugin counts measured (1 and 20 are the issue's; the others show whether
/// the growth is linear, 50 far enough out for a super-linear term to show).
pub const COUNTS: [usize; 4] = [1, 10, 20, 50];

/// The goal for one plugin.
const GOAL: Duration = Duration::from_millis(20);

/// "At most linear": the per-plugin cost of every later step (10 → 20, 20 → 50) at
/// most this many times that from 1 to 10 (room for noise), judged on the fastest
/// start of each (a start-up's noise only ever adds time; the medians' steps are
/// printed too).
const LINEAR_SLACK: f64 = 1.5;

/// A plugins dir with `n` copies of `wasm`, as `exNN.wasm` with manifest
/// `exNN.toml` (`manifest`'s text with its id replaced).
fn plugins_dir(root: &Path, wasm: &Path, manifest: &str, n: usize) -> Result<PathBuf> {
    let dir = root.join(format!("plugins-{n}"));
    std::fs::create_dir_all(&dir)?;
    for i in 1..=n {
        let id = format!("ex{i:02}");
        std::fs::copy(wasm, dir.join(format!("{id}.wasm")))?;
        let toml: String = manifest
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("id ") || l.trim_start().starts_with("id=") {
                    format!("id = \"{id}\"\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(dir.join(format!("{id}.toml")), toml)?;
    }
    Ok(dir)
}

/// Whether process `pid` is gone (or a zombie).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Stops `client`'s server and waits (up to 5 s) for its process to go.
async fn stop(client: RmcpClient, pid: u32) -> Result<()> {
    client
        .cancel()
        .await
        .map_err(|e| anyhow!("stopping an MCP server: {e}"))?;
    let t = Instant::now();
    while !gone(pid) && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// Spawns `cmd` and times spawn → `initialize` answered → `tools/list` answered;
/// returns both times and the number of tools listed.
async fn start(cmd: tokio::process::Command) -> Result<(Duration, Duration, usize)> {
    let t = Instant::now();
    let (client, pid) = rmcp_client((), cmd).await?;
    let init = t.elapsed();
    let tools = client.list_all_tools().await?.len();
    let listed = t.elapsed();
    stop(client, pid).await?;
    Ok((init, listed, tools))
}

/// Samples of one kind of start.
#[derive(Default)]
struct Starts {
    init: Vec<Duration>,
    listed: Vec<Duration>,
}

/// Runs P9 with `runs` starts of each kind, interleaved.
pub async fn run(runs: usize) -> Result<Vec<Row>> {
    let bin = toolhost_binary()?;
    let baseline_bin = baseline_mcp_binary()?;
    let wasm = example("rust")?;
    let manifest = std::fs::read_to_string(wasm.with_extension("toml"))
        .with_context(|| format!("reading the manifest beside {}", wasm.display()))?;
    let fixture = Fixture::new()?;
    let dirs: Vec<PathBuf> = COUNTS
        .iter()
        .map(|&n| plugins_dir(fixture.root(), &wasm, &manifest, n))
        .collect::<Result<_>>()?;
    let serve = |dir: &Path| {
        let mut cmd = serve_command(&bin, &fixture.workspace, &fixture.state);
        cmd.arg("--plugins-dir").arg(dir);
        cmd
    };
    // Warm the compiled cache (the built-ins and the example, one entry: the
    // copies are the same bytes) and check every copy loads.
    let mut per_plugin_tools = 0;
    for (&n, dir) in COUNTS.iter().zip(&dirs) {
        let (_, _, tools) = start(serve(dir)).await?;
        let (_, _, again) = start(serve(dir)).await?;
        ensure!(tools == again, "{n} plugins: {tools} then {again} tools");
        if n == COUNTS[0] {
            per_plugin_tools = tools;
        } else {
            // Each copy adds the same tools as the first (`exNN__tool`).
            ensure!(
                tools > per_plugin_tools,
                "{n} plugins listed {tools} tools, 1 listed {per_plugin_tools}"
            );
        }
    }
    let (_, _, baseline_tools) = start(tokio::process::Command::new(&baseline_bin)).await?;
    ensure!(
        baseline_tools == 1,
        "the rmcp server listed {baseline_tools} tools"
    );

    let kinds = COUNTS.len() + 1;
    let mut samples: Vec<Starts> = (0..kinds).map(|_| Starts::default()).collect();
    for round in 0..runs {
        for k in 0..kinds {
            // Rotate which kind goes first.
            let i = (round + k) % kinds;
            let cmd = match i {
                0 => tokio::process::Command::new(&baseline_bin),
                i => serve(&dirs[i - 1]),
            };
            let (init, listed, _) = start(cmd).await?;
            samples[i].init.push(init);
            samples[i].listed.push(listed);
        }
    }
    let listed: Vec<Summary> = samples
        .iter()
        .map(|s| Summary::of(s.listed.clone()))
        .collect();
    let init: Vec<Summary> = samples
        .iter()
        .map(|s| Summary::of(s.init.clone()))
        .collect();
    let (base, one, twenty) = (listed[0].median, listed[1].median, listed[3].median);
    let per = |a: Duration, b: Duration, n: usize| {
        Duration::from_secs_f64((b.as_secs_f64() - a.as_secs_f64()).max(0.0) / n as f64)
    };
    // Per-plugin cost of each step between consecutive counts.
    let steps: Vec<(usize, usize, Duration, Duration)> = COUNTS
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let n = w[1] - w[0];
            (
                w[0],
                w[1],
                per(listed[i + 1].median, listed[i + 2].median, n),
                per(listed[i + 1].min, listed[i + 2].min, n),
            )
        })
        .collect();
    let all = per(one, twenty, 19);
    let first = steps[0].3.as_secs_f64().max(1e-4);
    let linear = steps
        .iter()
        .all(|s| s.3.as_secs_f64() <= LINEAR_SLACK * first);
    let mut details = vec![format!(
        "rmcp server (toolhost-bench-mcp): to tools/list {}; to initialize {}",
        listed[0].describe(),
        duration(init[0].median)
    )];
    for (i, n) in COUNTS.iter().enumerate() {
        details.push(format!(
            "{n:>2} plugin{}: to tools/list {}; to initialize {}",
            if *n == 1 { " " } else { "s" },
            listed[i + 1].describe(),
            duration(init[i + 1].median)
        ));
    }
    let show = |f: fn(&(usize, usize, Duration, Duration)) -> Duration| {
        steps
            .iter()
            .map(|s| format!("{}→{} {}", s.0, s.1, duration(f(s))))
            .collect::<Vec<_>>()
            .join(", ")
    };
    details.push(format!(
        "per plugin: medians {}; minima {}; growth {} (minima: every step ≤ {LINEAR_SLACK}× \
         1→10)",
        show(|s| s.2),
        show(|s| s.3),
        if linear { "linear" } else { "MORE than linear" }
    ));
    Ok(vec![Row {
        id: "P9".into(),
        what: format!(
            "serve start-up: spawn of `toolhost serve --plugins-dir D` → `tools/list` answered \
             over stdio, warm compiled cache, D holding {} copies of the Rust example (each \
             its own id and manifest), vs the same for a minimal rmcp server; interleaved",
            COUNTS.map(|n| n.to_string()).join(", ")
        ),
        measured: format!(
            "1: {}, 20: {}, 50: {} ({}/plugin 1→20)",
            duration(one),
            duration(twenty),
            duration(listed[4].median),
            duration(all)
        ),
        baseline: format!("rmcp {}", duration(base)),
        ratio: Some(ratio(one, base)),
        ratio_note: "1 plugin / rmcp".into(),
        goal: format!("1 plugin ≤ {}, linear growth", duration(GOAL)),
        met: one <= GOAL && linear,
        details,
    }])
}
