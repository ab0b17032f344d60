//! L1: load: one `toolhost serve` takes a burst of concurrent MCP tool calls
//! (foreground `echo`/`printf`, background starts, `bash_output` reads, `kill_shell`s,
//! `list_shells` and a few calls that time out) issued at once over stdio; then its
//! host-session log is checked for lost events and `/proc` for processes left behind.
//! The mix and its checks are `toolhost_test_support::load`, which
//! `tests/all/load.rs` runs at 40 calls; this is its report at full size.

use anyhow::{Result, ensure};
use toolhost_test_support::load::{MAX_SESSIONS, Mix, READ_WAIT_MS, TIMEOUT_MS};
use toolhost_test_support::{StdioClient, serve_command};

use crate::fixture::{ALLOW_ALL, Fixture};
use crate::report::Row;
use crate::startup::toolhost_binary;
use crate::stats::{Summary, duration};

/// Runs L1 with a burst of `calls` concurrent calls.
pub async fn run(calls: usize) -> Result<Vec<Row>> {
    let mix = Mix::for_calls(calls);
    ensure!(
        mix.calls() == calls && mix.sessions() <= MAX_SESSIONS,
        "bad mix for {calls}: {mix:?}"
    );
    let bin = toolhost_binary()?;
    let fixture = Fixture::new()?;
    let policy = fixture.root().join("allow-all.toml");
    std::fs::write(&policy, ALLOW_ALL)?;
    let mut cmd = serve_command(&bin, &fixture.workspace, &fixture.state);
    cmd.arg("--policy").arg(&policy);
    let client = StdioClient::spawn(cmd)?;
    let init = client.initialize("2025-06-18").await?;
    ensure!(init.get("result").is_some(), "initialize failed: {init}");
    let report = toolhost_test_support::load::run(client, &fixture.state, &mix).await?;
    let (log, lost, errors) = (
        &report.log,
        report.lost,
        report.unexpected.values().map(|(n, _)| n).sum::<usize>(),
    );
    let (expected_errors, leftover) = (report.expected_errors, report.leftover);
    let lat = Summary::of(report.latencies.clone());
    // Throughput over the calls that do not wait for a time-out.
    let others = report.quick_calls;
    let per_second = others as f64 / report.quick_done.as_secs_f64();
    let mut details = vec![
        format!(
            "mix: {} kill_shell, {} bash_output (wait_ms {READ_WAIT_MS}), {} timing out \
             (timeout_ms {TIMEOUT_MS}), {} background starts, {} foreground echo/printf, {} \
             list_shells; over {} background sessions started before; {} sessions in all \
             (max_sessions {MAX_SESSIONS})",
            mix.kills,
            mix.reads,
            mix.timeouts,
            mix.starts,
            mix.foreground,
            mix.lists,
            mix.pre,
            mix.sessions()
        ),
        format!(
            "burst: {} calls in {} (the {others} but the time-outs in {}: {:.0} calls/s), peak \
             {} in flight; latency {}",
            report.burst,
            duration(report.wall),
            duration(report.quick_done),
            per_second,
            report.peak,
            lat.describe()
        ),
        format!(
            "log: {} events, seqs 1..{} {}; {} calls, {} sessions, exits {:?} (from the results: {:?})",
            log.events,
            log.events,
            if log.lost == 0 {
                "contiguous, every call started and finished once, every session started and \
                 exited once"
            } else {
                "NOT complete"
            },
            log.calls,
            log.sessions,
            log.statuses,
            report.want_statuses
        ),
        format!("lost events: {lost}"),
        format!(
            "errors: {expected_errors} expected (the {} time-outs), {errors} unexpected",
            mix.timeouts
        ),
    ];
    for (class, (n, example)) in &report.unexpected {
        details.push(format!("    {n} × {class}, e.g. {example}"));
    }
    for example in &report.lost_examples {
        details.push(format!("    lost: {example}"));
    }
    details.push(format!(
        "leftover processes: {leftover} of {} (checked for {})",
        report.processes,
        duration(report.reaped_in)
    ));
    let met = report.met(&mix);
    Ok(vec![Row {
        id: "L1".into(),
        what: format!(
            "load: {} concurrent MCP tool calls over one `toolhost serve` ({}), mixed \
             foreground, background, reads, kills and time-outs; then the host-session log \
             and /proc",
            report.burst,
            bin.display()
        ),
        measured: format!(
            "{per_second:.0} calls/s, p50 {}, p99 {}; lost {lost}, errors {errors}, left {leftover}",
            duration(lat.median),
            duration(lat.p99)
        ),
        baseline: "-".into(),
        ratio: None,
        ratio_note: String::new(),
        goal: "0 lost events, 0 unexpected errors, 0 leftover processes".into(),
        met,
        details,
    }])
}
