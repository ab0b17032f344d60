//! toolhost's benchmarks: figures P1–P10, L1, P12 and P13 of `BENCHMARKS.md`, each measured
//! against a baseline in the same run, interleaved. `main.rs` runs every figure in its own
//! child process (so one figure's threads and memory never colour another's) and
//! prints one table; `benches/micro.rs` runs P1, P3 and P7 under criterion.

pub mod capture;
pub mod end_to_end;
pub mod examples;
pub mod fixture;
pub mod load;
pub mod mcp_call;
pub mod plugin_call;
pub mod policy_decide;
pub mod replay;
pub mod report;
pub mod scale;
pub mod serve_startup;
pub mod startup;
pub mod stats;
pub mod tracing_cost;
pub mod wakeup;

/// The figure ids, in table order.
pub const FIGURES: [&str; 13] = [
    "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "L1", "P12", "P13",
];

/// How big a run is: `quick` (under a minute on 2 cores) or full (the real figures).
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// Smaller sizes for a smoke run.
    pub quick: bool,
}

impl Mode {
    /// P5's session count: 500 quick, 10,000 full.
    pub fn sessions(&self) -> usize {
        self.pick(500, 10_000)
    }

    fn pick<T>(&self, quick: T, full: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// Runs a figure's helper part that must live in its own process (`P5-raw`: the
/// P5 baseline with `sessions` children) and returns its JSON; `None` for other ids.
pub fn run_helper(id: &str, sessions: usize) -> Option<anyhow::Result<String>> {
    match id {
        "P5-raw" => Some((|| {
            let runtime = toolhost_runtime::tokio_runtime()?;
            let raw = runtime.block_on(scale::raw(sessions))?;
            Ok(serde_json::to_string(&raw)?)
        })()),
        _ => None,
    }
}

/// Runs figure `id` (`P1` … `P10`, `L1`, `P12`, `P13`) in this process and returns its rows.
///
/// Errors: an unknown id, or whatever the figure's setup or checks hit.
pub fn run_figure(id: &str, mode: Mode) -> anyhow::Result<Vec<report::Row>> {
    let runtime = toolhost_runtime::tokio_runtime()?;
    match id {
        "P1" => runtime.block_on(plugin_call::run(mode.pick(2_000, 10_000))),
        "P2" => runtime.block_on(end_to_end::run(mode.pick(40, 300))),
        "P3" => runtime.block_on(wakeup::run(mode.pick(30, 200))),
        "P4" => runtime.block_on(capture::run(mode.pick(128 << 20, 1 << 30), mode.pick(2, 5))),
        "P5" => runtime.block_on(scale::run(mode.sessions())),
        "P6" => startup::run(mode.pick(4, 20)),
        "P7" => replay::run(100_000, mode.pick(2, 5)),
        "P8" => runtime.block_on(mcp_call::run(mode.pick(300, 3_000), mode.pick(300, 2_000))),
        "P9" => runtime.block_on(serve_startup::run(mode.pick(5, 30))),
        "P10" => runtime.block_on(policy_decide::run(mode.quick)),
        "L1" => runtime.block_on(load::run(mode.pick(40, 200))),
        "P12" => runtime.block_on(examples::run(
            mode.pick(30, 300),
            mode.pick((1, 2), (2, 5)),
            !mode.quick,
        )),
        "P13" => runtime.block_on(tracing_cost::run(
            mode.pick(200, 2_000),
            mode.pick(200, 1_000),
        )),
        other => anyhow::bail!("unknown figure `{other}` (expected one of {FIGURES:?})"),
    }
}
