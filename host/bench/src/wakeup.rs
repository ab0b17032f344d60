//! P3: wake-up latency, from a process's death to the subscriber that waits for it
//! being woken. The process (`exec sleep`) is SIGKILLed by the benchmark itself at
//! t0; the host-API subscriber, the guest (the bash plugin's foreground call blocked
//! on its pollable) and the raw baseline (tokio's `Child::wait` on the same kind of
//! process) each stop the clock when they see the exit.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use toolhost_process::{Caller, SessionEventKind, Sessions, StartRequest, Subscription};

use crate::fixture::{ALLOW_ALL, Fixture};
use crate::plugin_call::ratio;
use crate::report::Row;
use crate::stats::{Summary, duration};

/// One host-API sample: start `exec sleep 1000`, subscribe, SIGKILL it, time until
/// the subscription yields `Exited`.
pub async fn host_once(sessions: &Sessions) -> Result<Duration> {
    let id = sessions
        .start(&Caller::Host, StartRequest::new("exec sleep 1000"))
        .await?;
    let mut sub = sessions.subscribe(&Caller::Host, &id, 1)?;
    let pid = sessions.check(&Caller::Host, &id)?.pid.context("no pid")?;
    // Drain what is there (`started`) so the next wait really blocks.
    sub.next(16);
    let t0 = Instant::now();
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL)?;
    exited(&mut sub).await?;
    Ok(t0.elapsed())
}

/// Waits until `sub` yields the session's `Exited` event.
async fn exited(sub: &mut Subscription) -> Result<()> {
    loop {
        sub.ready().await;
        let events = sub.next(16);
        if events
            .iter()
            .any(|e| matches!(e.kind, SessionEventKind::Exited(_)))
        {
            return Ok(());
        }
        if events.is_empty() && sub.finished() {
            bail!("the subscription ended without an exit event");
        }
    }
}

/// One raw sample: tokio spawns `sleep 1000`, SIGKILL, time until `wait` returns.
pub async fn raw_once() -> Result<Duration> {
    let mut child = tokio::process::Command::new("sleep")
        .arg("1000")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().context("no pid")?;
    let t0 = Instant::now();
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL)?;
    let status = child.wait().await?;
    let elapsed = t0.elapsed();
    ensure!(status.code().is_none(), "sleep was not killed: {status}");
    Ok(elapsed)
}

/// One guest sample: a foreground `bash` tool call of `exec sleep 1000` (the plugin
/// blocks on its subscription's pollable), SIGKILL, time until the tool call
/// returns (wake-up plus the plugin formatting its result). Also returns when a
/// host-API subscription to the same session saw the exit, in the same sample: the
/// difference is the guest's part.
pub async fn guest_once(
    host: &std::sync::Arc<toolhost_runtime::Host>,
) -> Result<(Duration, Duration)> {
    let id = host.new_call_id();
    let request = toolhost_runtime::CallRequest {
        tool_call_id: id.clone(),
        tool: host.tool("bash").context("the host has no bash tool")?,
        arguments: serde_json::Map::from_iter([("command".into(), json!("exec sleep 1000"))]),
        source: "api",
        cancel: Default::default(),
        client: None,
        progress: None,
        actor: None,
        principal: None,
    };
    let call = {
        let host = host.clone();
        tokio::spawn(async move { host.call(request).await })
    };
    let started = Instant::now();
    let pid = loop {
        if let Some(pid) = host.sessions().pid(&id) {
            break pid;
        }
        ensure!(
            started.elapsed() < Duration::from_secs(10),
            "the call never started"
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    };
    let session = host
        .sessions()
        .running_calls()
        .into_iter()
        .find(|(call, _)| *call == id)
        .map(|(_, session)| session)
        .context("the call's session is not listed")?;
    let mut sub = host.sessions().subscribe(&Caller::Host, &session, 1)?;
    sub.next(16);
    // Let the plugin reach its blocking poll (setup only; the clock is not running).
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t0 = Instant::now();
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL)?;
    let host_seen = async {
        exited(&mut sub).await?;
        Ok::<_, anyhow::Error>(t0.elapsed())
    };
    let (seen, result) = tokio::join!(host_seen, call);
    let elapsed = t0.elapsed();
    let (seen, result) = (seen?, result??);
    ensure!(
        result.text().contains("SIGKILL"),
        "unexpected result: {}",
        result.text()
    );
    Ok((elapsed, seen))
}

/// Runs P3 with `samples` samples of each kind, interleaved.
pub async fn run(samples: usize) -> Result<Vec<Row>> {
    let fixture = Fixture::new()?;
    let host = std::sync::Arc::new(fixture.host(Some(ALLOW_ALL)).await?);
    let sessions = host.sessions().clone();
    for _ in 0..5 {
        host_once(&sessions).await?;
        raw_once().await?;
    }
    let (mut api, mut guest, mut raw) = (Vec::new(), Vec::new(), Vec::new());
    let (mut seen, mut after) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        api.push(host_once(&sessions).await?);
        raw.push(raw_once().await?);
        let (returned, host_saw) = guest_once(&host).await?;
        guest.push(returned);
        seen.push(host_saw);
        after.push(returned.saturating_sub(host_saw));
        raw.push(raw_once().await?);
    }
    let api = Summary::of(api);
    let guest = Summary::of(guest);
    let seen = Summary::of(seen);
    let after = Summary::of(after);
    let raw = Summary::of(raw);
    let goal = Duration::from_micros(500);
    let row = |id: &str, what: &str, s: &Summary| Row {
        id: id.into(),
        what: what.into(),
        measured: format!("{} (p99 {})", duration(s.median), duration(s.p99)),
        baseline: format!("{} (p99 {})", duration(raw.median), duration(raw.p99)),
        ratio: Some(ratio(s.median, raw.median)),
        ratio_note: "toolhost / raw".into(),
        goal: format!("median ≤ {}", duration(goal)),
        met: s.median <= goal,
        details: vec![
            format!("toolhost: {}", s.describe()),
            format!("raw:      {}", raw.describe()),
        ],
    };
    let mut guest_row = row(
        "P3 guest",
        "wake-up: SIGKILL of `exec sleep` → the bash plugin's foreground call, blocked \
         on its pollable, has returned its result, vs tokio `Child::wait`",
        &guest,
    );
    guest_row.details.push(format!(
        "split of the same samples (medians): a host subscription saw the exit after {}; \
         the call returned {} later (the guest's wake-up, its check and read calls, its \
         result, the host's end of the call)",
        duration(seen.median),
        duration(after.median)
    ));
    Ok(vec![
        row(
            "P3 host",
            "wake-up: SIGKILL of `exec sleep` → host-API subscription yields `exited`, vs \
             tokio `Child::wait` returning for the same kill",
            &api,
        ),
        guest_row,
    ])
}
