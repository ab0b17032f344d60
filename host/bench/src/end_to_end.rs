//! P2: the `bash` tool running `true` through the whole host (tool call → policy
//! plugin → bash plugin → sandboxed process → result) against spawning the same
//! shell (`SHELL -c true`, the shell the bash tool runs: bash where the machine
//! has it) with tokio and waiting for it, in the same process, interleaved. The
//! details add `sh -c true` (the baseline before the bash tool ran bash: dash
//! starts ≈ 0.45 ms faster than bash here, which no host can win back).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use serde_json::json;

use toolhost_process::{Caller, Sessions, SessionsConfig, StartRequest};
use toolhost_process::{SandboxMode, SandboxPaths, SandboxPolicy};

use crate::fixture::{ALLOW_ALL, Fixture};
use crate::plugin_call::ratio;
use crate::report::Row;
use crate::stats::{Summary, duration};

/// One raw baseline run: `sh -c true`, spawned by tokio and awaited.
pub async fn raw_true() -> Result<()> {
    raw_shell_true(Path::new("/bin/sh")).await
}

/// One raw baseline run of `shell -c true`, spawned by tokio and awaited.
pub async fn raw_shell_true(shell: &Path) -> Result<()> {
    let status = tokio::process::Command::new(shell)
        .args(["-c", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .status()
        .await?;
    ensure!(
        status.success(),
        "{} -c true failed: {status}",
        shell.display()
    );
    Ok(())
}

/// `true` through the session engine alone: start, wait for the exit.
pub async fn session_true(sessions: &Sessions) -> Result<std::time::Duration> {
    let t = Instant::now();
    let id = sessions
        .start(&Caller::Host, StartRequest::new("true"))
        .await?;
    let exit = sessions.wait(&Caller::Host, &id).await?;
    let elapsed = t.elapsed();
    ensure!(exit.code == Some(0), "`true` failed: {exit:?}");
    Ok(elapsed)
}

/// Runs P2 with `calls` calls of each kind, interleaved.
pub async fn run(calls: usize) -> Result<Vec<Row>> {
    let fixture = Fixture::new()?;
    // The built-in default policy allows `true`; the default sandbox confines it.
    let host = fixture.host(None).await?;
    let args = json!({"command": "true"});
    // The shell the bash tool runs (its structured result names it).
    let first = host.call_tool("bash", args.clone()).await?;
    let shell: PathBuf = first
        .structured
        .as_ref()
        .and_then(|s| s.get("shell"))
        .and_then(|s| s.as_str())
        .context("the bash tool's result names no shell")?
        .into();
    for _ in 0..calls.clamp(5, 30) {
        host.call_tool("bash", args.clone()).await?;
        raw_shell_true(&shell).await?;
        raw_true().await?;
    }
    // Where the time goes: the same process through the session engine alone,
    // sandboxed and not, and the whole path with a policy that allows everything.
    let confined = fixture.sessions(8)?;
    let open = {
        let mut config = SessionsConfig::new(&fixture.workspace, &fixture.state);
        config.sandbox = SandboxPolicy {
            mode: SandboxMode::FullAccess,
            ..SandboxPolicy::default()
        };
        Sessions::new(config)?
    };
    let lenient = Fixture::new()?;
    let lenient = lenient.host(Some(ALLOW_ALL)).await?;
    let mut ours = Vec::with_capacity(calls);
    let mut raw = Vec::with_capacity(calls);
    let mut parts: [Vec<std::time::Duration>; 5] = Default::default();
    // What the session engine does in the host for each sandboxed command before the
    // child starts: build the sandbox for the session's paths (SandboxPolicy::prepare).
    let prepare_paths = SandboxPaths {
        workspace: fixture.workspace.clone(),
        private_tmp: fixture.state.join("bench-prepare-tmp"),
        protected: Vec::new(),
        hidden: vec![fixture.state.clone()],
        ..Default::default()
    };
    for _ in 0..calls {
        let t = Instant::now();
        let result = host.call_tool("bash", args.clone()).await?;
        ours.push(t.elapsed());
        ensure!(!result.is_error, "bash `true` failed: {}", result.text());
        let t = Instant::now();
        raw_shell_true(&shell).await?;
        raw.push(t.elapsed());
        let t = Instant::now();
        raw_true().await?;
        parts[4].push(t.elapsed());
        parts[0].push(session_true(&confined).await?);
        parts[1].push(session_true(&open).await?);
        let t = Instant::now();
        lenient.call_tool("bash", args.clone()).await?;
        parts[2].push(t.elapsed());
        let t = Instant::now();
        let prepared = SandboxPolicy::default().prepare(&prepare_paths)?;
        parts[3].push(t.elapsed());
        drop(prepared);
    }
    let ours = Summary::of(ours);
    let raw = Summary::of(raw);
    let r = ratio(ours.median, raw.median);
    let medians = parts.map(|p| Summary::of(p).median);
    let sh_ratio = ratio(ours.median, medians[4]);
    let [confined_t, open_t, lenient_t, prepare_t, sh_t] = medians.map(duration);
    Ok(vec![Row {
        id: "P2".into(),
        what: format!(
            "end to end: `bash` tool `true` through host → policy plugin → bash plugin → \
             process ({}) → result, vs tokio spawning the same shell (`{} -c true`) and \
             waiting",
            host.sessions().sandbox(),
            shell.display()
        ),
        measured: duration(ours.median),
        baseline: duration(raw.median),
        ratio: Some(r),
        ratio_note: "toolhost / raw".into(),
        goal: "≤ 1.25× raw, sandboxed".into(),
        met: r <= 1.25,
        details: vec![
            format!("toolhost: {}", ours.describe()),
            format!("raw:      {}", raw.describe()),
            format!("raw `sh -c true` (dash here): median {sh_t}; toolhost / it {sh_ratio:.3}"),
            format!(
                "parts (medians): session engine start + wait of `true`: sandboxed \
                 {confined_t}, full-access {open_t}; whole path with an allow-all policy \
                 {lenient_t}; building the sandbox in the host (`prepare`) {prepare_t}"
            ),
        ],
    }])
}
