//! The load mix: one `toolhost serve` takes a burst of concurrent MCP tool
//! calls (foreground `echo`/`printf`, background starts, `bash_output` reads,
//! `kill_shell`s, `list_shells` and a few calls that time out) issued at once
//! over stdio; then every session still running is killed, `/proc` is
//! watched until the host has reaped every process it started, and its
//! host-session log is checked for lost events. Figure L1
//! (`host/bench/src/load.rs`) runs it at 200 calls and reports what it saw;
//! `tests/all/load.rs` runs it at 40 and asserts.
//!
//! A [`Mix`] is sized so the sessions it can hold at once stay within the
//! host's `max_sessions` ([`MAX_SESSIONS`]): no start may be refused, and the
//! only expected errors are the time-outs. Every other way a result differs
//! from what its call must answer is counted, by class, as unexpected.
//!
//! The mix drives any [`ToolCaller`] (the stdio client here; the soak,
//! `tests/all/soak.rs`, runs [`round`]s of it from 32 HTTP clients at once).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};

use crate::stdio::{StdioClient, is_error, result_text};

/// An MCP client the mix can drive: `tools/call` of `tool` with `args`,
/// giving its `result` as JSON (`content`, `structuredContent`, `isError`).
pub trait ToolCaller: Send + Sync + 'static {
    /// One `tools/call`.
    ///
    /// Errors: the transport failed or the server answered a JSON-RPC error.
    fn call_tool(&self, tool: &str, args: Value) -> impl Future<Output = Result<Value>> + Send;
}

impl ToolCaller for StdioClient {
    fn call_tool(&self, tool: &str, args: Value) -> impl Future<Output = Result<Value>> + Send {
        StdioClient::call_tool(self, tool, args)
    }
}

/// The host's default `max_sessions`: a mix never holds more sessions at once.
pub const MAX_SESSIONS: usize = 64;
/// `timeout_ms` of the calls meant to time out (`sleep 3600`).
pub const TIMEOUT_MS: u64 = 1000;
/// `wait_ms` of the burst's `bash_output` reads (of sessions that print
/// nothing more).
pub const READ_WAIT_MS: u64 = 200;
/// How long the host gets to reap every process after the kills, and a
/// session to print its first line.
const LIMIT: Duration = Duration::from_secs(60);

/// The burst's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Background sessions started, and their first line read, before the
    /// burst (so the burst's reads find no new output).
    pub pre: usize,
    /// `kill_shell`s of the first `kills` of them, in the burst.
    pub kills: usize,
    /// `bash_output` reads (waiting [`READ_WAIT_MS`]) of the others, round
    /// robin, in the burst.
    pub reads: usize,
    /// Foreground `sleep 3600` with `timeout_ms` = [`TIMEOUT_MS`]: the
    /// expected errors.
    pub timeouts: usize,
    /// New background starts (`printf 'bg-N\n'; exec sleep 3600`), read and
    /// killed after the burst.
    pub starts: usize,
    /// Foreground `echo` / `printf` with their exact output.
    pub foreground: usize,
    /// `list_shells`.
    pub lists: usize,
}

impl Mix {
    /// The mix for a burst of `calls` (at least 10): 200 gives 12 kills, 98
    /// reads, 4 time-outs, 12 starts, 24 foreground and 50 lists over 24
    /// pre-started sessions (64 sessions in all, the host's limit).
    pub fn for_calls(calls: usize) -> Mix {
        let pre = (calls * 3 / 25).clamp(2, 24);
        let kills = pre / 2;
        let starts = pre / 2;
        let timeouts = (calls / 50).max(1);
        let foreground = (MAX_SESSIONS - pre - starts - timeouts).min(calls * 3 / 10);
        let rest = calls - kills - starts - timeouts - foreground;
        let reads = rest * 2 / 3;
        Mix {
            pre,
            kills,
            reads,
            timeouts,
            starts,
            foreground,
            lists: rest - reads,
        }
    }

    /// Calls in the burst.
    pub fn calls(&self) -> usize {
        self.kills + self.reads + self.timeouts + self.starts + self.foreground + self.lists
    }

    /// Process sessions the whole run starts.
    pub fn sessions(&self) -> usize {
        self.pre + self.timeouts + self.starts + self.foreground
    }

    /// The exit statuses of the run's sessions in the log when every call
    /// answered as it must: `exited` (foreground), `killed` (pre-started and
    /// background starts), `timed_out`.
    pub fn statuses(&self) -> BTreeMap<String, usize> {
        statuses(self.foreground, self.pre + self.starts, self.timeouts)
    }
}

fn statuses(exited: usize, killed: usize, timed_out: usize) -> BTreeMap<String, usize> {
    BTreeMap::from([
        ("exited".to_owned(), exited),
        ("killed".to_owned(), killed),
        ("timed_out".to_owned(), timed_out),
    ])
}

/// How one call of the burst must end.
#[derive(Debug, Clone)]
enum Expect {
    /// This exact text and `isError`.
    Exact(String, bool),
    /// Text starting with this, and `isError`.
    Prefix(String, bool),
    /// A background start: `status` running and a `session_id`, whose
    /// session then prints this.
    Started(String),
}

/// One call of the burst.
#[derive(Debug, Clone)]
struct Job {
    tool: &'static str,
    args: Value,
    expect: Expect,
}

/// The burst's jobs over the pre-started sessions `pre`, interleaved by kind.
fn jobs(mix: &Mix, pre: &[String]) -> Vec<Job> {
    let running = &pre[mix.kills..];
    let kinds: Vec<Vec<Job>> = vec![
        pre[..mix.kills]
            .iter()
            .map(|id| Job {
                tool: "kill_shell",
                args: json!({"session_id": id}),
                expect: Expect::Prefix(
                    "Sent SIGTERM (then SIGKILL after a grace) to 1 process(es) in the process \
                     group of session "
                        .into(),
                    false,
                ),
            })
            .collect(),
        (0..mix.reads)
            .map(|i| Job {
                tool: "bash_output",
                args: json!({"session_id": running[i % running.len()], "wait_ms": READ_WAIT_MS}),
                expect: Expect::Prefix("(no new output)\n\n[still running after ".into(), false),
            })
            .collect(),
        (0..mix.timeouts)
            .map(|_| Job {
                tool: "bash",
                args: json!({"command": "sleep 3600", "timeout_ms": TIMEOUT_MS}),
                expect: Expect::Exact(
                    format!(
                        "(no output)\n\n[timed out after {TIMEOUT_MS} ms; process group killed]"
                    ),
                    true,
                ),
            })
            .collect(),
        (0..mix.starts)
            .map(|i| Job {
                tool: "bash",
                args: json!({"command": format!("printf 'bg-%d\\n' {i}; exec sleep 3600"),
                             "run_in_background": true}),
                expect: Expect::Started(format!("bg-{i}\n")),
            })
            .collect(),
        (0..mix.foreground)
            .map(|i| {
                if i % 2 == 0 {
                    Job {
                        tool: "bash",
                        args: json!({"command": format!("echo echo-{i}")}),
                        expect: Expect::Exact(format!("echo-{i}"), false),
                    }
                } else {
                    Job {
                        tool: "bash",
                        args: json!({"command": format!("printf 'printf-%d\\n%s\\n' {i} two")}),
                        expect: Expect::Exact(format!("printf-{i}\ntwo"), false),
                    }
                }
            })
            .collect(),
        (0..mix.lists)
            .map(|_| Job {
                tool: "list_shells",
                args: json!({}),
                expect: Expect::Prefix(String::new(), false),
            })
            .collect(),
    ];
    let longest = kinds.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::new();
    for i in 0..longest {
        out.extend(kinds.iter().filter_map(|k| k.get(i)).cloned());
    }
    out
}

/// Checks `result` against `expect`; `Err("class: text")` says how it differs.
fn judge(result: &Result<Value>, expect: &Expect) -> std::result::Result<(), String> {
    let r = match result {
        Ok(r) => r,
        Err(e) => return Err(format!("protocol error: {e:#}")),
    };
    let t = result_text(r);
    let class = if t.contains("maximum concurrent limit") {
        "instance pool exhausted"
    } else if t.contains("resource limit") {
        "resource limit"
    } else {
        "unexpected result"
    };
    let ok = match expect {
        Expect::Exact(want, err) => t == want && is_error(r) == *err,
        Expect::Prefix(want, err) => t.starts_with(want.as_str()) && is_error(r) == *err,
        Expect::Started(_) => {
            !is_error(r)
                && r["structuredContent"]["status"] == "running"
                && r["structuredContent"]["session_id"].is_string()
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{class}: {}", one_line(t)))
    }
}

/// The first 300 characters of `text`, newlines as spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .take(300)
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect()
}

/// What the host-session log says: events missing or inconsistent, and
/// counts.
#[derive(Debug, Clone, Default)]
pub struct LogCheck {
    /// Events in the log.
    pub events: usize,
    /// Items missing or out of place: seqs not 1, 2, ...; calls without
    /// exactly one start and, after it, one end; sessions without exactly one
    /// start and, after it, one exit; events of a kind the run cannot cause.
    pub lost: usize,
    /// What the first few lost items were.
    pub lost_examples: Vec<String>,
    /// Tool calls the log names.
    pub calls: usize,
    /// Process sessions the log names.
    pub sessions: usize,
    /// Sessions by exit status (`exited`, `killed`, `timed_out`, ...).
    pub statuses: BTreeMap<String, usize>,
}

/// Checks a host-session log (see [`LogCheck`]).
pub fn check_log(events: &[Value]) -> LogCheck {
    check_log_allowing(events, &[])
}

/// [`check_log`], with events of the kinds in `also` (e.g.
/// `permission_requested`, which a run with permission questions causes)
/// not counted as lost.
pub fn check_log_allowing(events: &[Value], also: &[&str]) -> LogCheck {
    let mut lost = 0;
    let mut examples = Vec::new();
    let mut note = |what: String| {
        lost += 1;
        if examples.len() < 5 {
            examples.push(what);
        }
    };
    for (i, e) in events.iter().enumerate() {
        if e["seq"] != json!(i as u64 + 1) {
            note(format!("event {} has seq {}", i + 1, e["seq"]));
        }
    }
    let mut calls: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut procs: HashMap<&str, (usize, usize, String)> = HashMap::new();
    for e in events {
        let call = e["tool_call_id"].as_str().unwrap_or_default();
        let session = e["session_id"].as_str().unwrap_or_default();
        match e["kind"].as_str().unwrap_or_default() {
            "tool_call_started" => calls.entry(call).or_default().0 += 1,
            "tool_call_settled" | "tool_call_failed" => {
                let c = calls.entry(call).or_default();
                if c.0 == 0 {
                    note(format!("call {call} finished before it started: {e}"));
                }
                c.1 += 1;
            }
            "process_started" => procs.entry(session).or_default().0 += 1,
            "process_exited" => {
                let p = procs.entry(session).or_default();
                if p.0 == 0 {
                    note(format!("session {session} exited before it started: {e}"));
                }
                p.1 += 1;
                p.2 = e["status"].as_str().unwrap_or_default().to_owned();
            }
            "lifecycle" | "process_output" => {}
            other if also.contains(&other) => {}
            other => note(format!("unexpected event kind {other}: {e}")),
        }
    }
    for (call, (s, f)) in &calls {
        if (*s, *f) != (1, 1) {
            note(format!("call {call}: {s} started, {f} finished"));
        }
    }
    let mut statuses = BTreeMap::new();
    for (session, (s, x, status)) in &procs {
        if (*s, *x) != (1, 1) {
            note(format!("session {session}: {s} started, {x} exited"));
        }
        *statuses.entry(status.clone()).or_default() += 1;
    }
    LogCheck {
        events: events.len(),
        lost,
        lost_examples: examples,
        calls: calls.len(),
        sessions: procs.len(),
        statuses,
    }
}

/// What one [`run`] saw.
#[derive(Debug, Clone)]
pub struct Report {
    /// Calls in the burst.
    pub burst: usize,
    /// Each burst call's latency (request written to response read).
    pub latencies: Vec<Duration>,
    /// The burst's first request to its last response.
    pub wall: Duration,
    /// The burst's calls that do not wait for a time-out ...
    pub quick_calls: usize,
    /// ... and when the last of them was answered, from the burst's start.
    pub quick_done: Duration,
    /// The most burst calls in flight at once.
    pub peak: usize,
    /// Calls that failed as they must (the time-outs).
    pub expected_errors: usize,
    /// Every other result that was not as its call must answer, by class:
    /// how many, and the first (call and text).
    pub unexpected: BTreeMap<String, (usize, String)>,
    /// Calls made in the whole run (before, in and after the burst).
    pub calls_made: usize,
    /// The log's own check.
    pub log: LogCheck,
    /// [`LogCheck::lost`] plus what the log lacks against the run: calls
    /// made but not logged, sessions started but not logged, no `stopped`
    /// at the end.
    pub lost: usize,
    /// What the first lost items were.
    pub lost_examples: Vec<String>,
    /// The exit statuses the results call for (see [`Mix::statuses`]).
    pub want_statuses: BTreeMap<String, usize>,
    /// Processes the log names.
    pub processes: usize,
    /// How many of them (or of their process groups) were still alive when
    /// the wait for the host to reap them ended.
    pub leftover: usize,
    /// How long that wait took.
    pub reaped_in: Duration,
}

impl Report {
    /// Whether `mix` ran clean: nothing lost, nothing unexpected, exactly
    /// its time-outs failed, no process left, and the log's exit statuses
    /// are the results'.
    pub fn met(&self, mix: &Mix) -> bool {
        self.lost == 0
            && self.unexpected.is_empty()
            && self.expected_errors == mix.timeouts
            && self.leftover == 0
            && self.log.statuses == self.want_statuses
    }

    fn note_unexpected(&mut self, class: &str, example: String) {
        let entry = self.unexpected.entry(class.to_owned()).or_default();
        entry.0 += 1;
        if entry.1.is_empty() {
            entry.1 = example;
        }
    }

    fn note_lost(&mut self, count: usize, example: String) {
        self.lost += count;
        self.lost_examples.push(example);
    }
}

/// Reads `session` with short `bash_output` calls (a read of a running
/// session waits its whole `wait_ms`) until at least `want.len()` bytes
/// arrived or [`LIMIT`] passed; returns the output, status lines cut. Counts
/// each call in `calls`.
async fn read_until<C: ToolCaller>(
    client: &C,
    session: &str,
    want: &str,
    calls: &mut usize,
) -> Result<String> {
    let deadline = Instant::now() + LIMIT;
    let mut output = String::new();
    while output.len() < want.len() {
        ensure!(
            Instant::now() < deadline,
            "{session} printed {output:?} in {LIMIT:?}, not {want:?}"
        );
        let r = client
            .call_tool(
                "bash_output",
                json!({"session_id": session, "wait_ms": 100}),
            )
            .await?;
        *calls += 1;
        let text = result_text(&r);
        ensure!(!is_error(&r), "bash_output of {session}: {text}");
        let new = text
            .split_once("\n\n[still running")
            .map_or(text, |(o, _)| o);
        if new != "(no new output)" {
            output.push_str(new);
            output.push('\n');
        }
    }
    Ok(output)
}

/// What one [`round`] of the mix saw.
#[derive(Debug, Clone, Default)]
pub struct Round {
    /// Calls in the burst.
    pub burst: usize,
    /// Each burst call's latency (request written to response read).
    pub latencies: Vec<Duration>,
    /// The burst's first request to its last response.
    pub wall: Duration,
    /// The burst's calls that do not wait for a time-out ...
    pub quick_calls: usize,
    /// ... and when the last of them was answered, from the burst's start.
    pub quick_done: Duration,
    /// The most burst calls in flight at once.
    pub peak: usize,
    /// Calls that failed as they must (the time-outs).
    pub expected_errors: usize,
    /// Every other result that was not as its call must answer, by class:
    /// how many, and the first (call and text).
    pub unexpected: BTreeMap<String, (usize, String)>,
    /// Calls made in the round (before, in and after the burst).
    pub calls_made: usize,
    /// Foreground calls that ran and answered as they must.
    pub ok_foreground: usize,
    /// Background starts of the burst that answered as they must.
    pub started: usize,
}

impl Round {
    fn note_unexpected(&mut self, class: &str, example: String) {
        let entry = self.unexpected.entry(class.to_owned()).or_default();
        entry.0 += 1;
        if entry.1.is_empty() {
            entry.1 = example;
        }
    }
}

/// One round of `mix` on `client` (a `toolhost serve` whose policy allows
/// the mix's commands): background sessions started and read, the burst
/// issued at once and judged, the burst's starts read, then every session
/// the round started and did not kill in the burst killed. Other clients may
/// run rounds on the same host meanwhile.
///
/// Errors: a call before the burst failed or a pre-started session did not
/// print its line, or a burst task panicked. Everything else is in the
/// [`Round`].
pub async fn round<C: ToolCaller>(client: &Arc<C>, mix: &Mix) -> Result<Round> {
    let mut calls_made = 0usize;

    // Before the burst: background sessions, each read until its first line.
    let mut pre = Vec::new();
    for i in 0..mix.pre {
        let r = client
            .call_tool(
                "bash",
                json!({"command": format!("printf 'pre-%d\\n' {i}; exec sleep 3600"),
                       "run_in_background": true}),
            )
            .await?;
        calls_made += 1;
        let id = r["structuredContent"]["session_id"]
            .as_str()
            .with_context(|| format!("no session id: {r}"))?
            .to_owned();
        let want = format!("pre-{i}\n");
        let output = read_until(client.as_ref(), &id, &want, &mut calls_made).await?;
        ensure!(output == want, "{id} printed {output:?}, not {want:?}");
        pre.push(id);
    }

    // The burst: every call issued at once.
    let jobs = jobs(mix, &pre);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, job) in jobs.iter().enumerate() {
        let (client, in_flight, peak) = (client.clone(), in_flight.clone(), peak.clone());
        let (tool, args) = (job.tool, job.args.clone());
        set.spawn(async move {
            let n = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            let t = Instant::now();
            let r = client.call_tool(tool, args).await;
            let took = t.elapsed();
            in_flight.fetch_sub(1, Ordering::SeqCst);
            (i, took, t0.elapsed(), r)
        });
    }
    let mut results: Vec<Option<(Duration, Duration, Result<Value>)>> =
        (0..jobs.len()).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        let (i, took, done, r) = joined?;
        results[i] = Some((took, done, r));
    }
    let wall = t0.elapsed();
    calls_made += jobs.len();

    let mut report = Round {
        burst: jobs.len(),
        latencies: Vec::with_capacity(jobs.len()),
        wall,
        peak: peak.load(Ordering::SeqCst),
        ..Round::default()
    };
    let mut started = Vec::new();
    for (job, slot) in jobs.iter().zip(results) {
        let (took, done, r) = slot.context("a call never finished")?;
        report.latencies.push(took);
        if !matches!(job.expect, Expect::Exact(_, true)) {
            report.quick_calls += 1;
            report.quick_done = report.quick_done.max(done);
        }
        match judge(&r, &job.expect) {
            Ok(()) => {
                let r = r.as_ref().expect("judged ok");
                report.expected_errors += usize::from(is_error(r));
                report.ok_foreground += usize::from(
                    job.tool == "bash" && matches!(job.expect, Expect::Exact(_, false)),
                );
                if let Expect::Started(want) = &job.expect
                    && let Some(id) = r["structuredContent"]["session_id"].as_str()
                {
                    started.push((id.to_owned(), want.clone()));
                }
            }
            Err(why) => {
                let (class, example) = why.split_once(": ").unwrap_or((&why, ""));
                report.note_unexpected(class, format!("{} {}: {example}", job.tool, job.args));
            }
        }
    }
    report.started = started.len();

    // After it: the new starts print their line; then every session still
    // running is killed.
    for (id, want) in &started {
        match read_until(client.as_ref(), id, want, &mut calls_made).await {
            Ok(output) if output == *want => {}
            Ok(output) => report.note_unexpected(
                "background output",
                format!("{id} printed {output:?}, not {want:?}"),
            ),
            Err(e) => report.note_unexpected("background output", format!("{e:#}")),
        }
    }
    let mut set = tokio::task::JoinSet::new();
    for id in pre[mix.kills..]
        .iter()
        .chain(started.iter().map(|(id, _)| id))
    {
        let (client, id) = (client.clone(), id.clone());
        set.spawn(async move {
            client
                .call_tool("kill_shell", json!({"session_id": id}))
                .await
        });
        calls_made += 1;
    }
    while let Some(r) = set.join_next().await {
        match r? {
            Ok(r) if !is_error(&r) => {}
            Ok(r) => report.note_unexpected("cleanup kill failed", result_text(&r).to_owned()),
            Err(e) => report.note_unexpected("cleanup kill failed", format!("{e:#}")),
        }
    }
    report.calls_made = calls_made;
    Ok(report)
}

/// Waits at most [`LIMIT`] until no process the host-session log under
/// `state` names (nor its process group) is alive; returns how many
/// processes the log names, how many were still alive when the wait ended,
/// and how long it took.
///
/// Errors: the log is unreadable.
pub async fn wait_reaped(state: &Path) -> Result<(usize, usize, Duration)> {
    let pids: Vec<(u64, u64)> = crate::host_log::events(state)?
        .iter()
        .filter(|e| e["kind"] == "process_started")
        .filter_map(|e| Some((e["pid"].as_u64()?, e["start_time"].as_u64()?)))
        .collect();
    let alive = |pids: &[(u64, u64)]| -> usize {
        pids.iter()
            .filter(|(pid, t)| {
                start_time(*pid) == Some(*t)
                    || !toolhost_process::group_members(*pid as u32).is_empty()
            })
            .count()
    };
    let reap_start = Instant::now();
    let deadline = reap_start + LIMIT;
    let mut leftover = alive(&pids);
    while leftover > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        leftover = alive(&pids);
    }
    Ok((pids.len(), leftover, reap_start.elapsed()))
}

/// Runs `mix` on `client` (an initialised `toolhost serve` whose state dir is
/// `state` and whose policy allows the mix's commands): one [`round`], a
/// check that nothing runs any more, the wait for every process to be
/// reaped, then closes it and checks its log.
///
/// Errors: as [`round`], the log is unreadable, or the server did not exit
/// cleanly once its stdin closed. Everything else is in the [`Report`].
pub async fn run(client: StdioClient, state: &Path, mix: &Mix) -> Result<Report> {
    let client = Arc::new(client);
    let round = round(&client, mix).await?;
    let mut calls_made = round.calls_made;
    let mut report = Report {
        burst: round.burst,
        latencies: round.latencies,
        wall: round.wall,
        quick_calls: round.quick_calls,
        quick_done: round.quick_done,
        peak: round.peak,
        expected_errors: round.expected_errors,
        unexpected: round.unexpected,
        calls_made: 0,
        log: LogCheck::default(),
        lost: 0,
        lost_examples: Vec::new(),
        want_statuses: BTreeMap::new(),
        processes: 0,
        leftover: 0,
        reaped_in: Duration::ZERO,
    };
    let list = client.call_tool("list_shells", json!({})).await;
    calls_made += 1;
    match list {
        Ok(r) if result_text(&r).contains(" session(s), 0 running") => {}
        Ok(r) => report.note_unexpected(
            "running after the kills",
            one_line(result_text(&r)).to_string(),
        ),
        Err(e) => report.note_unexpected("running after the kills", format!("{e:#}")),
    }
    report.calls_made = calls_made;

    // Every process the log names is reaped by the host, which still serves.
    (report.processes, report.leftover, report.reaped_in) = wait_reaped(state).await?;

    // The log, once the host has stopped.
    let client = Arc::into_inner(client).context("the client is still shared")?;
    let status = client.close().await?;
    ensure!(status.success(), "serve exited with {status}");
    let events = crate::host_log::events(state)?;
    report.log = check_log(&events);
    report.lost = report.log.lost;
    report.lost_examples = report.log.lost_examples.clone();
    if report.log.calls != calls_made {
        report.note_lost(
            calls_made.abs_diff(report.log.calls),
            format!("{calls_made} calls made, {} in the log", report.log.calls),
        );
    }
    // Sessions the results say started: a call that failed may not have
    // started one.
    let sessions = mix.pre + round.ok_foreground + round.started + report.expected_errors;
    if report.log.sessions < sessions {
        report.note_lost(
            sessions - report.log.sessions,
            format!(
                "{sessions} sessions started, {} in the log",
                report.log.sessions
            ),
        );
    }
    let stopped = events
        .last()
        .is_some_and(|e| e["kind"] == "lifecycle" && e["state"] == "stopped");
    if !stopped {
        report.note_lost(1, "the log does not end with `stopped`".into());
    }
    report.want_statuses = statuses(
        round.ok_foreground,
        mix.pre + round.started,
        report.expected_errors,
    );
    Ok(report)
}

/// Field 22 of `/proc/PID/stat` (start time in clock ticks); `None` once the
/// process is gone (reaped).
fn start_time(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_mix_fills_the_session_limit_exactly() {
        let mix = Mix::for_calls(200);
        assert_eq!(
            mix,
            Mix {
                pre: 24,
                kills: 12,
                reads: 98,
                timeouts: 4,
                starts: 12,
                foreground: 24,
                lists: 50,
            }
        );
        assert_eq!((mix.calls(), mix.sessions()), (200, MAX_SESSIONS));
        let pre: Vec<String> = (0..mix.pre).map(|i| format!("bg_{i:012}")).collect();
        let jobs = jobs(&mix, &pre);
        assert_eq!(jobs.len(), 200);
        // Interleaved by kind: one of each kind first.
        let first: Vec<&str> = jobs[..6].iter().map(|j| j.tool).collect();
        assert_eq!(
            first,
            [
                "kill_shell",
                "bash_output",
                "bash",
                "bash",
                "bash",
                "list_shells"
            ]
        );
    }

    #[test]
    fn a_log_with_a_gap_and_an_unfinished_call_is_two_lost_items() {
        let events = [
            json!({"seq": 1, "kind": "lifecycle", "state": "running"}),
            json!({"seq": 2, "kind": "tool_call_started", "tool_call_id": "call_a"}),
            json!({"seq": 4, "kind": "lifecycle", "state": "stopped"}),
        ];
        let check = check_log(&events);
        assert_eq!((check.events, check.lost, check.calls), (3, 2, 1));
        assert_eq!(
            check.lost_examples,
            ["event 3 has seq 4", "call call_a: 1 started, 0 finished"]
        );
    }
}
