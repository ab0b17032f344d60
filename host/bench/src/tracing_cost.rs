//! P13: what traces cost a call. The P8 round trip (the Rust example's pure
//! `greet` over stdio from an rmcp client in this process, through `toolhost
//! serve --plugin example_rust.wasm`) on three servers side by side, calls
//! interleaved round-robin: the baseline with no `OTEL_*` variable (the
//! default: no OpenTelemetry layer, every span callsite disabled), one whose
//! spans are made but sampled out (`OTEL_EXPORTER_OTLP_ENDPOINT` set,
//! `OTEL_TRACES_SAMPLER=always_off`: the tracing layer and its per-request
//! work, nothing recorded), and one exporting every span over OTLP/HTTP to a
//! receiver in this process on loopback (`sink`: it reads each request and
//! answers `200`). The metrics hooks are on in all three (they have no
//! switch). Then each server's CPU per call, as P8 measures it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use toolhost_test_support::{RmcpClient, rmcp_client, serve_command};

use crate::examples::{cpu_of, example, greet_mcp};
use crate::fixture::Fixture;
use crate::plugin_call::ratio;
use crate::report::Row;
use crate::startup::toolhost_binary;
use crate::stats::{Summary, duration};

/// The goal with spans made but nothing exported: at most this many times
/// the baseline's median round trip.
const GOAL_SAMPLED_OUT: f64 = 1.05;
/// The goal exporting every span to a local receiver.
const GOAL_EXPORTING: f64 = 1.15;

/// An OTLP/HTTP receiver on loopback that takes every request (keep-alive,
/// `Content-Length` bodies) and answers `200` with an empty body (an empty
/// `ExportTraceServiceResponse`); counts the requests in `exports`.
async fn sink() -> Result<(String, Arc<AtomicU64>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let exports = Arc::new(AtomicU64::new(0));
    let counter = exports.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        match stream.read_line(&mut line).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if stream.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    counter.fetch_add(1, Ordering::Relaxed);
                    let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\
                                 content-length: 0\r\n\r\n";
                    if stream.get_mut().write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((endpoint, exports))
}

/// `toolhost serve` with `plugin` and the environment `env`, initialised.
async fn serve(
    bin: &Path,
    fixture: &Fixture,
    plugin: &Path,
    env: &[(&str, &str)],
) -> Result<(RmcpClient, u32)> {
    let mut cmd = serve_command(bin, &fixture.workspace, &fixture.state);
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") {
            cmd.env_remove(name);
        }
    }
    cmd.arg("--plugin").arg(plugin).envs(env.iter().copied());
    rmcp_client((), cmd).await
}

/// Runs P13: `calls` interleaved round trips per server, then CPU over
/// `block` calls per server (twice, alternating).
pub async fn run(calls: usize, block: usize) -> Result<Vec<Row>> {
    let bin = toolhost_binary()?;
    let wasm = example("rust")?;
    let fixture = Fixture::new()?;
    let (endpoint, exports) = sink().await?;
    let variants: [(&str, Vec<(&str, &str)>); 3] = [
        ("off", vec![]),
        (
            "sampled out",
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
                ("OTEL_TRACES_SAMPLER", "always_off"),
            ],
        ),
        (
            "exporting",
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
                // Batches as often as the SDK's default (5 s) would make them
                // in a long run; shorter so the run sees many exports.
                ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ],
        ),
    ];
    let mut servers = Vec::new();
    for (name, env) in &variants {
        let (client, pid) = serve(&bin, &fixture, &wasm, env).await?;
        let tool = client
            .list_all_tools()
            .await?
            .into_iter()
            .map(|t| t.name.to_string())
            .find(|n| n == "greet" || n.ends_with("__greet"))
            .context("toolhost serve lists no greet tool")?;
        servers.push((*name, client, pid, tool));
    }

    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(calls); servers.len()];
    let warmup = calls.clamp(20, 200);
    for round in 0..warmup + calls {
        // Rotate which server goes first.
        for k in 0..servers.len() {
            let i = (round + k) % servers.len();
            let (_, client, _, tool) = &servers[i];
            let t = Instant::now();
            greet_mcp(client, tool).await?;
            if round >= warmup {
                samples[i].push(t.elapsed());
            }
        }
    }
    let mut cpu = vec![Duration::ZERO; servers.len()];
    for _ in 0..2 {
        for (i, (_, client, pid, tool)) in servers.iter().enumerate() {
            let before = cpu_of(*pid)?;
            for _ in 0..block {
                greet_mcp(client, tool).await?;
            }
            cpu[i] += cpu_of(*pid)? - before;
        }
    }
    let cpu: Vec<Duration> = cpu.iter().map(|c| *c / (2 * block) as u32).collect();
    for (_, client, _, _) in servers {
        client
            .cancel()
            .await
            .map_err(|e| anyhow!("stopping an MCP server: {e}"))?;
    }
    // The exporting server flushed on its way out.
    let exported = exports.load(Ordering::Relaxed);
    anyhow::ensure!(
        exported > 0,
        "the exporting server sent the receiver nothing"
    );

    let summaries: Vec<Summary> = samples.into_iter().map(Summary::of).collect();
    let base = &summaries[0];
    let row = |i: usize, goal: f64| {
        let r = ratio(summaries[i].median, base.median);
        let mut details = vec![
            format!("{}: {}", variants[i].0, summaries[i].describe()),
            format!("off: {}", base.describe()),
            format!(
                "server CPU per call (/proc/PID/task/*/schedstat, 2 × {block} calls): {} {} \
                 vs off {} ({:.2}×)",
                variants[i].0,
                duration(cpu[i]),
                duration(cpu[0]),
                ratio(cpu[i], cpu[0])
            ),
        ];
        if i == 2 {
            details.push(format!("OTLP export requests received: {exported}"));
        }
        Row {
            id: format!("P13 {}", variants[i].0),
            what: format!(
                "tracing's cost per MCP round trip: P8's `greet` through `toolhost serve` with \
                 {} vs no OTEL_* variable, three servers interleaved",
                match i {
                    1 => "spans made and sampled out (OTEL_TRACES_SAMPLER=always_off)",
                    _ => "every span exported over OTLP/HTTP to a receiver on loopback",
                }
            ),
            measured: duration(summaries[i].median),
            baseline: duration(base.median),
            ratio: Some(r),
            ratio_note: format!("{} / off", variants[i].0),
            goal: format!("≤ {goal}× off"),
            met: r <= goal,
            details,
        }
    };
    Ok(vec![row(1, GOAL_SAMPLED_OUT), row(2, GOAL_EXPORTING)])
}
