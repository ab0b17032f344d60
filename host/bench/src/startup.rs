//! P6: start-up: the whole `toolhost call bash '{"command":"true"}'` process with a
//! warm compiled-code cache against the same with an empty cache (which compiles
//! every built-in component first), interleaved.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::fixture::Fixture;
use crate::plugin_call::ratio;
use crate::report::Row;
use crate::stats::{Summary, duration};

/// The `toolhost` binary to measure: `$TOOLHOST_BIN`, else the one beside this
/// benchmark binary, which is (re)built first when running under cargo so it is never
/// stale.
pub fn toolhost_binary() -> Result<PathBuf> {
    built_binary("TOOLHOST_BIN", "toolhost", "toolhost")
}

/// P8's and P9's baseline, the minimal rmcp server `toolhost-bench-mcp`
/// (`src/bin/toolhost-bench-mcp.rs`): `$TOOLHOST_BENCH_MCP`, else the one beside this
/// benchmark binary, (re)built first under cargo as [`toolhost_binary`] is.
pub fn baseline_mcp_binary() -> Result<PathBuf> {
    built_binary("TOOLHOST_BENCH_MCP", "toolhost-bench", "toolhost-bench-mcp")
}

/// `$env` if set, else binary `bin` of `package` beside this benchmark binary,
/// built first (same profile and target dir) when running under cargo.
fn built_binary(env: &str, package: &str, bin: &str) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Ok(path.into());
    }
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent().context("no directory")?;
    // An integration test runs from `target/<profile>/deps`.
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent().context("no profile directory")?;
    }
    let path = dir.join(bin);
    if let Some(cargo) = std::env::var_os("CARGO") {
        let target = dir.parent().context("no target directory")?;
        let mut build = Command::new(cargo);
        build
            .args(["build", "-q", "-p", package, "--bin", bin])
            .env("CARGO_TARGET_DIR", target);
        if dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().context("running cargo build")?;
        ensure!(status.success(), "cargo build of the {bin} binary failed");
    }
    if !path.exists() {
        bail!(
            "{} does not exist: build it (`cargo build --release -p {package} --bin {bin}`) or \
             set {env}",
            path.display()
        );
    }
    Ok(path)
}

/// One whole-process run with `state` as the state dir; returns the wall time.
pub fn call_once(bin: &Path, workspace: &Path, state: &Path) -> Result<Duration> {
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("call")
        .arg("--workspace")
        .arg(workspace)
        .arg("--state-dir")
        .arg(state)
        .args(["bash", r#"{"command":"true"}"#])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()?;
    let elapsed = t.elapsed();
    ensure!(
        out.status.success(),
        "toolhost call failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(elapsed)
}

/// Runs P6 with `runs` runs of each kind, interleaved.
pub fn run(runs: usize) -> Result<Vec<Row>> {
    let bin = toolhost_binary()?;
    let fixture = Fixture::new()?;
    let warm_state = fixture.root().join("warm");
    call_once(&bin, &fixture.workspace, &warm_state)?;
    call_once(&bin, &fixture.workspace, &warm_state)?;
    let (mut warm, mut cold) = (Vec::new(), Vec::new());
    for i in 0..runs {
        warm.push(call_once(&bin, &fixture.workspace, &warm_state)?);
        let cold_state = fixture.root().join(format!("cold-{i}"));
        cold.push(call_once(&bin, &fixture.workspace, &cold_state)?);
        std::fs::remove_dir_all(&cold_state)?;
        warm.push(call_once(&bin, &fixture.workspace, &warm_state)?);
    }
    let warm = Summary::of(warm);
    let cold = Summary::of(cold);
    let r = ratio(warm.median, cold.median);
    let goal = Duration::from_millis(10);
    Ok(vec![Row {
        id: "P6".into(),
        what: format!(
            "start-up: whole process `toolhost call bash '{{\"command\":\"true\"}}'` ({}) with \
             a warm compiled cache vs an empty one",
            bin.display()
        ),
        measured: format!("warm {}", duration(warm.median)),
        baseline: format!("cold {}", duration(cold.median)),
        ratio: Some(r),
        ratio_note: "warm / cold".into(),
        goal: format!("warm ≤ {}, warm/cold ≤ 0.2", duration(goal)),
        met: warm.median <= goal && r <= 0.2,
        details: vec![
            format!("warm: {}", warm.describe()),
            format!("cold: {}", cold.describe()),
        ],
    }])
}
