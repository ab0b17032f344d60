//! `toolhost-bench`: runs figures P1–P10, L1 (load), P12 (example plugins) and P13 (tracing) and
//! prints one table (see BENCHMARKS.md). `cargo run --release -p toolhost-bench [-- --quick]`.

use std::process::{Command, ExitCode, Stdio};

use clap::Parser;
use toolhost_bench::report::{Row, table};
use toolhost_bench::{FIGURES, Mode, run_figure};

/// Measure toolhost against raw baselines, side by side (BENCHMARKS.md).
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Smaller sizes: the whole run takes under a minute on 2 cores.
    #[arg(long)]
    quick: bool,
    /// Only these figures (comma-separated ids, e.g. `P1,P3`).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    only: Vec<String>,
    /// Also write the rows as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
    /// Internal: run one figure in this process and print its rows as JSON.
    #[arg(long, hide = true, value_name = "ID")]
    figure: Option<String>,
    /// Internal: the session count for `--figure P5-raw`.
    #[arg(long, hide = true, value_name = "N")]
    sessions: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mode = Mode { quick: args.quick };
    if let Some(id) = args.figure {
        if let Some(result) =
            toolhost_bench::run_helper(&id, args.sessions.unwrap_or(mode.sessions()))
        {
            return match result {
                Ok(json) => {
                    println!("{json}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{id}: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        return match run_figure(&id, mode) {
            Ok(rows) => {
                println!("{}", serde_json::to_string(&rows).expect("rows serialise"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{id}: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let ids: Vec<String> = if args.only.is_empty() {
        FIGURES.iter().map(|s| s.to_string()).collect()
    } else {
        args.only.iter().map(|s| s.trim().to_uppercase()).collect()
    };
    if let Some(bad) = ids.iter().find(|id| !FIGURES.contains(&id.as_str())) {
        eprintln!("toolhost-bench: unknown figure `{bad}` (expected one of {FIGURES:?})");
        return ExitCode::from(2);
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("toolhost-bench: cannot find my own binary: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = std::time::Instant::now();
    let mut rows: Vec<Row> = Vec::new();
    for id in &ids {
        eprintln!(
            "toolhost-bench: running {id}{}…",
            if args.quick { " (quick)" } else { "" }
        );
        let t = std::time::Instant::now();
        let mut child = Command::new(&exe);
        child.arg("--figure").arg(id).stderr(Stdio::inherit());
        if args.quick {
            child.arg("--quick");
        }
        let figure_rows = match child.output() {
            Ok(out) if out.status.success() => {
                serde_json::from_slice::<Vec<Row>>(&out.stdout).map_err(|e| e.to_string())
            }
            Ok(out) => Err(format!("the figure's process failed ({})", out.status)),
            Err(e) => Err(format!("cannot run the figure: {e}")),
        };
        match figure_rows {
            Ok(r) => rows.extend(r),
            Err(message) => rows.push(Row {
                id: id.clone(),
                what: format!("failed: {message}"),
                measured: "error".into(),
                baseline: "-".into(),
                ratio: None,
                ratio_note: String::new(),
                goal: "-".into(),
                met: false,
                details: Vec::new(),
            }),
        }
        eprintln!(
            "toolhost-bench: {id} took {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    println!(
        "toolhost-bench ({} mode, {} cores, {:.0} s)\n",
        if args.quick { "quick" } else { "full" },
        std::thread::available_parallelism().map_or(1, |c| c.get()),
        started.elapsed().as_secs_f64()
    );
    print!("{}", table(&rows));
    if let Some(path) = args.json
        && let Err(e) = std::fs::write(&path, serde_json::to_vec_pretty(&rows).expect("rows"))
    {
        eprintln!("toolhost-bench: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    // A figure that could not be measured (its reason is on stderr) fails the run;
    // a goal not met does not.
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| r.measured == "error")
        .map(|r| r.id.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!(
            "toolhost-bench: {} could not be measured (see above)",
            failed.join(", ")
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
