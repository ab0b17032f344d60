//! P4: output capture: `head -c N /dev/zero` written to stdout and captured in full by
//! a session (byte-exact log file, bounded memory), against the same command piped
//! into a raw reader that discards what it reads. Also the host's peak RSS growth
//! while a session captures.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use tokio::io::AsyncReadExt;
use toolhost_process::{Caller, SessionStatus, Sessions, StartRequest};

use crate::fixture::{Fixture, peak_rss, reset_peak_rss, rss};
use crate::report::Row;
use crate::stats::{bytes, median};

/// One capture by the session engine; returns the time and the peak RSS growth.
pub async fn host_once(sessions: &Sessions, size: u64) -> Result<(Duration, u64)> {
    reset_peak_rss()?;
    let before = rss();
    let t = Instant::now();
    let id = sessions
        .start(
            &Caller::Host,
            StartRequest::new(format!("exec head -c {size} /dev/zero")),
        )
        .await?;
    let exit = sessions.wait(&Caller::Host, &id).await?;
    let elapsed = t.elapsed();
    let growth = peak_rss().saturating_sub(before);
    ensure!(exit.code == Some(0), "head failed: {exit:?}");
    let snap = sessions.check(&Caller::Host, &id)?;
    ensure!(snap.status == SessionStatus::Exited);
    ensure!(
        snap.output_bytes == size,
        "captured {} of {size} bytes",
        snap.output_bytes
    );
    let on_disk = std::fs::metadata(&snap.output_path)?.len();
    ensure!(on_disk == size, "the log holds {on_disk} of {size} bytes");
    std::fs::remove_file(&snap.output_path)?;
    Ok((elapsed, growth))
}

/// One raw run: the same command, stdout piped into a 64 KiB read loop.
pub async fn raw_once(size: u64) -> Result<Duration> {
    let t = Instant::now();
    let mut child = tokio::process::Command::new("head")
        .args(["-c", &size.to_string(), "/dev/zero"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut out = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = out.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let status = child.wait().await?;
    let elapsed = t.elapsed();
    ensure!(
        status.success() && total == size,
        "raw read {total} of {size}"
    );
    Ok(elapsed)
}

/// Runs P4 with `size` bytes per run, `reps` runs of each kind, interleaved.
pub async fn run(size: u64, reps: usize) -> Result<Vec<Row>> {
    let fixture = Fixture::new()?;
    let sessions = fixture.sessions(8)?;
    let (mut ours, mut raw, mut growth) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let (t, g) = host_once(&sessions, size).await?;
        ours.push(size as f64 / t.as_secs_f64());
        growth.push(g);
        raw.push(size as f64 / raw_once(size).await?.as_secs_f64());
    }
    let ours_rate = median(ours.clone());
    let raw_rate = median(raw.clone());
    let max_growth = growth.iter().copied().max().unwrap_or(0);
    let r = ours_rate / raw_rate;
    let rss_goal = 32u64 << 20;
    let per_s = |v: f64| format!("{}/s", bytes(v));
    Ok(vec![Row {
        id: "P4".into(),
        what: format!(
            "output capture: `head -c {}` of /dev/zero captured by a session (log file + \
             bounded memory, sandboxed), vs the same command read and discarded by a raw \
             tokio reader; median of {reps} runs each",
            bytes(size as f64)
        ),
        measured: format!(
            "{}, peak RSS +{}",
            per_s(ours_rate),
            bytes(max_growth as f64)
        ),
        baseline: per_s(raw_rate),
        ratio: Some(r),
        ratio_note: "toolhost / raw throughput".into(),
        goal: "≥ 0.8× raw, RSS growth ≤ 32 MiB".into(),
        met: r >= 0.8 && max_growth <= rss_goal,
        details: vec![
            format!(
                "toolhost runs: {}",
                ours.iter()
                    .map(|&v| per_s(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "raw runs:      {}",
                raw.iter().map(|&v| per_s(v)).collect::<Vec<_>>().join(", ")
            ),
            format!(
                "peak RSS growth per toolhost run: {}",
                growth
                    .iter()
                    .map(|&g| bytes(g as f64))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ],
    }])
}
