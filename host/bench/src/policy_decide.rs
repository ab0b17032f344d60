//! P10: the cost of a policy decision. `PolicyPlugin::decide_start` of the built-in
//! policy plugin (an idle instance reused across decisions, which keeps the rules
//! it parsed, keyed by the rules text; it parses the command, then judges every
//! simple command against the rules that can match it) for commands of 100 B,
//! 10 KiB and 1 MiB under rule files of 10, 100 and 1,000 rules, against the same
//! Rust code compiled natively and called in this process
//! (`toolhost_policy::decide_cached` with one `RulesCache` per rules file: no wasm,
//! no instance, same parsing and caching), interleaved. For 100 B commands it also
//! times the native code parsing the rules on every decision
//! (`toolhost_policy::decide`, what every decision did before the cache).
//!
//! The commands are `&&`/`;`/`|` lists of five simple commands (`git status`,
//! `cargo test`, `ls`, `grep`, `tail`) repeated to the size, each allowed by a rule
//! placed last in the `allow` list; the other rules name other programs
//! (`rmtool{i}`, `pushtool{i}`, `tool{i}`), so the policy's index by program word
//! skips them (before the index, every part was checked against every rule). The
//! decision is `allow`, checked. A decision that hits the plugin's limits (10 s of
//! CPU) is reported, not fatal. `--quick` measures 1 MiB under 10 rules only.

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, ensure};
use toolhost_runtime::PolicyPlugin;
use toolhost_runtime::{Decision, PermissionRequest};
use toolhost_runtime::{EngineOptions, Runtime};

use crate::fixture::Fixture;
use crate::plugin_call::ratio;
use crate::report::Row;
use crate::stats::{Summary, bytes, duration};

/// Command sizes in bytes.
pub const SIZES: [usize; 3] = [100, 10 << 10, 1 << 20];

/// Rule counts.
pub const RULES: [usize; 3] = [10, 100, 1_000];

/// The goal case: 100 B under 100 rules, median at most this.
const GOAL: Duration = Duration::from_micros(50);

/// "Linear growth": a size or rule-count step may cost at most this many times the
/// step's factor (room for noise and fixed costs' shares).
const LINEAR_SLACK: f64 = 1.5;

/// The simple commands the command lines are made of, with their separators.
const PARTS: [&str; 5] = [
    "git status --porcelain",
    " && cargo test --release -p toolhost -- --nocapture",
    "; ls -la src/",
    " && grep -rn TODO src/",
    " 2>&1 | tail -n 20; ",
];

/// The allow rules that cover [`PARTS`].
const COVER: [&str; 5] = ["git status *", "cargo test *", "ls *", "grep *", "tail *"];

/// A rules file with `n` rules (`n` ≥ 5): 10% deny, 10% ask, the rest allow, with
/// the rules that allow the commands last; `default = "ask"`.
pub fn rules(n: usize) -> String {
    assert!(n >= COVER.len(), "at least {} rules", COVER.len());
    let deny = n / 10;
    let ask = n / 10;
    let filler = n - deny - ask - COVER.len();
    let list = |items: Vec<String>| {
        items
            .iter()
            .map(|p| format!("  \"{p}\",\n"))
            .collect::<String>()
    };
    let deny: Vec<String> = (0..deny).map(|i| format!("rmtool{i} -rf *")).collect();
    let ask: Vec<String> = (0..ask).map(|i| format!("pushtool{i} origin *")).collect();
    let mut allow: Vec<String> = (0..filler).map(|i| format!("tool{i} run *")).collect();
    allow.extend(COVER.iter().map(|s| s.to_string()));
    format!(
        "# {n} rules (toolhost-bench P10)\ndeny = [\n{}]\nask = [\n{}]\nallow = [\n{}]\n\
         default = \"ask\"\n",
        list(deny),
        list(ask),
        list(allow)
    )
}

/// A command of exactly `size` bytes: [`PARTS`] in turn, padded with spaces.
pub fn command(size: usize) -> String {
    let mut out = String::with_capacity(size);
    for part in PARTS.iter().cycle() {
        // Every line ends with a whole part list entry; the rest is padding.
        if out.len() + part.len() > size {
            break;
        }
        out.push_str(part);
    }
    let out = out.trim_end_matches(['&', ';', '|', ' ']).to_string();
    let pad = size - out.len();
    out + &" ".repeat(pad)
}

/// The request for `command`.
fn request(command: &str) -> PermissionRequest {
    PermissionRequest {
        plugin: "bash".into(),
        tool: "bash".into(),
        tool_call_id: "call_bench".into(),
        command: command.into(),
        cwd: "/work/ws".into(),
        workspace: "/work/ws".into(),
        env_keys: Vec::new(),
        shell: "/bin/bash".into(),
    }
}

/// Samples per command size: (quick, full).
fn samples_for(size: usize, quick: bool) -> usize {
    match (size, quick) {
        (s, true) if s <= 100 => 300,
        (s, false) if s <= 100 => 3_000,
        (s, true) if s <= 10 << 10 => 5,
        (s, false) if s <= 10 << 10 => 200,
        (_, true) => 1,
        (_, false) => 3,
    }
}

/// One case's samples: (size index, rules index) → plugin and native.
struct Case {
    plugin: Vec<Duration>,
    native: Vec<Duration>,
    /// Native decisions that parse the rules every time (100 B commands only).
    uncached: Vec<Duration>,
    /// Decisions that failed (a limit hit), with the first error: their time
    /// (until the limit stopped them) is in `plugin`, a lower bound.
    failed: usize,
    error: Option<String>,
}

/// Runs P10 (`quick`: fewer samples, see [`samples_for`]).
pub async fn run(quick: bool) -> Result<Vec<Row>> {
    let fixture = Fixture::new()?;
    // The engine as `Host::new` builds it: pool slots as large as the policy's
    // memory limit.
    let runtime = Runtime::with_options(
        Some(fixture.state.join("compiled")),
        EngineOptions {
            max_memory_bytes: toolhost_runtime::policy_limits().memory_bytes as u64,
            ..EngineOptions::default()
        },
    )
    .map_err(|e| anyhow!("{e:#}"))?;
    let rule_texts: Vec<String> = RULES.iter().map(|&n| rules(n)).collect();
    let plugins: Vec<PolicyPlugin> = rule_texts
        .iter()
        .map(|text| {
            PolicyPlugin::load(
                &runtime,
                toolhost_runtime::POLICY_ID,
                toolhost_runtime::POLICY,
                toolhost_runtime::policy_limits(),
                text.clone(),
            )
            .map_err(|e| anyhow!("{e}"))
        })
        .collect::<Result<_>>()?;
    for (p, n) in plugins.iter().zip(RULES) {
        p.validate()
            .await?
            .map_err(|e| anyhow!("{n} rules refused: {e:?}"))?;
    }
    let commands: Vec<String> = SIZES.iter().map(|&s| command(s)).collect();
    let mut caches: Vec<toolhost_policy::RulesCache> = RULES
        .iter()
        .map(|_| toolhost_policy::RulesCache::new())
        .collect();

    let mut cases: Vec<Vec<Case>> = SIZES
        .iter()
        .map(|_| {
            RULES
                .iter()
                .map(|_| Case {
                    plugin: Vec::new(),
                    native: Vec::new(),
                    uncached: Vec::new(),
                    failed: 0,
                    error: None,
                })
                .collect()
        })
        .collect();
    for (si, cmd) in commands.iter().enumerate() {
        let req = request(cmd);
        let native_req = toolhost_policy::Request {
            command: cmd.clone(),
            cwd: req.cwd.clone(),
            workspace: req.workspace.clone(),
            env_keys: Vec::new(),
            shell: req.shell.clone(),
        };
        let n = samples_for(SIZES[si], quick);
        // No warm-up for the largest commands (each takes seconds).
        let warmup = if n <= 5 { 0 } else { (n / 10).clamp(1, 50) };
        for round in 0..warmup + n {
            for k in 0..RULES.len() {
                // Rotate which rule count goes first.
                let ri = (round + k) % RULES.len();
                if quick && SIZES[si] > 10 << 10 && RULES[ri] > RULES[0] {
                    // Seconds each (1,000 rules hit the 10 s CPU limit): full runs only.
                    continue;
                }
                let t = Instant::now();
                let decision = plugins[ri].decide_start(&req).await;
                let plugin_t = t.elapsed();
                let error = match decision {
                    Ok(decision) => {
                        ensure!(
                            decision == Decision::Allow,
                            "{} B under {} rules: the plugin decided {decision:?}",
                            SIZES[si],
                            RULES[ri]
                        );
                        None
                    }
                    // A limit hit is a finding, not a harness failure.
                    Err(e) => Some(e.to_string()),
                };
                let t = Instant::now();
                let native =
                    toolhost_policy::decide_cached(&mut caches[ri], &rule_texts[ri], &native_req);
                let native_t = t.elapsed();
                ensure!(
                    native == toolhost_policy::Decision::Allow,
                    "{} B under {} rules: native decide said {native:?}",
                    SIZES[si],
                    RULES[ri]
                );
                let uncached_t = (SIZES[si] <= 100).then(|| {
                    let t = Instant::now();
                    let d = toolhost_policy::decide(&rule_texts[ri], &native_req);
                    let e = t.elapsed();
                    (d == toolhost_policy::Decision::Allow).then_some(e)
                });
                if let Some(None) = uncached_t {
                    return Err(anyhow!(
                        "{} B under {} rules: uncached native decide did not allow",
                        SIZES[si],
                        RULES[ri]
                    ));
                }
                if round >= warmup {
                    let case = &mut cases[si][ri];
                    case.plugin.push(plugin_t);
                    case.native.push(native_t);
                    case.uncached.extend(uncached_t.flatten());
                    if let Some(e) = error {
                        case.failed += 1;
                        case.error.get_or_insert(e);
                    }
                }
            }
        }
    }

    // `None`: not measured (`--quick` skips the largest cases).
    let med = |v: &Vec<Duration>| (!v.is_empty()).then(|| Summary::of(v.clone()).median);
    let plugin_med: Vec<Vec<Option<Duration>>> = cases
        .iter()
        .map(|r| r.iter().map(|c| med(&c.plugin)).collect())
        .collect();
    let mut details = Vec::new();
    for (si, size) in SIZES.iter().enumerate() {
        for (ri, n) in RULES.iter().enumerate() {
            let c = &cases[si][ri];
            let size = bytes(*size as f64);
            if c.plugin.is_empty() {
                details.push(format!("{size:>7}, {n:>4} rules: not measured (--quick)"));
                continue;
            }
            details.push(format!(
                "{size:>7}, {n:>4} rules: plugin {}; native {}{}{}",
                Summary::of(c.plugin.clone()).describe(),
                med(&c.native).map_or("-".into(), duration),
                med(&c.uncached).map_or(String::new(), |d| format!(
                    " (parsing the rules every time: {})",
                    duration(d)
                )),
                c.error.as_ref().map_or(String::new(), |e| format!(
                    "; {} of {} FAILED ({e}; their time until then is counted)",
                    c.failed,
                    c.plugin.len()
                )),
            ));
        }
    }
    // Growth: each step's cost factor against the step's own factor; a case with
    // failed decisions has no cost to compare.
    let failed = cases.iter().flatten().any(|c| c.failed > 0);
    let mut linear = !failed;
    let mut growth = Vec::new();
    for (ri, n) in RULES.iter().enumerate() {
        let (Some(big), Some(small)) = (plugin_med[2][ri], plugin_med[1][ri]) else {
            continue;
        };
        let f = ratio(big, small);
        let step = SIZES[2] as f64 / SIZES[1] as f64;
        linear &= f <= LINEAR_SLACK * step;
        growth.push(format!(
            "{n} rules: 10 KiB → 1 MiB ×{f:.1} (size ×{step:.1}; {} per KiB at 1 MiB)",
            duration(big / 1024)
        ));
    }
    for (si, size) in SIZES.iter().enumerate() {
        let (Some(many), Some(few)) = (plugin_med[si][2], plugin_med[si][0]) else {
            continue;
        };
        let f = ratio(many, few);
        let step = RULES[2] as f64 / RULES[0] as f64;
        linear &= f <= LINEAR_SLACK * step;
        let per_rule = (many.as_secs_f64() - few.as_secs_f64()) / (RULES[2] - RULES[0]) as f64;
        growth.push(format!(
            "{}: 10 → 1000 rules ×{f:.2} (rules ×{step:.0}; {} per extra rule)",
            bytes(*size as f64),
            duration(Duration::from_secs_f64(per_rule.max(0.0)))
        ));
    }
    details.push(format!(
        "growth (medians, plugin): {}; {} (each ≤ {LINEAR_SLACK}× its step)",
        growth.join("; "),
        if failed {
            "not shown: a case failed"
        } else if linear {
            "linear"
        } else {
            "MORE than linear"
        }
    ));
    let goal_case = &cases[0][1];
    let ours = Summary::of(goal_case.plugin.clone());
    let native = Summary::of(goal_case.native.clone());
    Ok(vec![Row {
        id: "P10".into(),
        what: "policy decision: PolicyPlugin::decide_start of the built-in policy plugin (idle \
               instance reused, rules parsed once and cached by text; parses the command) for \
               commands of 100 B, 10 KiB, 1 MiB under 10, 100, 1,000 rules, vs the same Rust \
               code native (toolhost_policy::decide_cached), interleaved; the row is 100 B \
               under 100 rules"
            .into(),
        measured: duration(ours.median),
        baseline: format!("native {}", duration(native.median)),
        ratio: Some(ratio(ours.median, native.median)),
        ratio_note: "plugin / native".into(),
        goal: format!("100 B, 100 rules ≤ {}, linear growth", duration(GOAL)),
        met: ours.median <= GOAL && linear,
        details,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_have_the_size_and_rules_the_count() {
        for size in SIZES {
            assert_eq!(command(size).len(), size);
        }
        for n in RULES {
            let text = rules(n);
            let count = text.lines().filter(|l| l.starts_with("  \"")).count();
            assert_eq!(count, n, "{text}");
            assert_eq!(toolhost_policy::validate(&text), Ok(()));
        }
        let req = toolhost_policy::Request {
            command: command(100),
            ..Default::default()
        };
        assert_eq!(
            toolhost_policy::decide(&rules(10), &req),
            toolhost_policy::Decision::Allow
        );
    }
}
