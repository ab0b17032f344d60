//! L1: load: one `toolhost serve` takes a burst of concurrent MCP tool calls
//! (foreground `echo`/`printf`, background starts, `bash_output` reads, `kill_shell`s,
//! `list_shells` and a few calls that time out) issued at once over stdio; then its
//! host-session log is checked for lost events and `/proc` for processes left behind.
//! Issue 17, item 6; `tests/all/load.rs` runs the same mix at 40 calls.
//!
//! The mix is sized so the sessions it can hold at once stay within the host's
//! `max_sessions` (64): no start may be refused, and the only expected errors are the
//! time-outs. Every other error is counted, by class, as unexpected.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

use crate::fixture::{ALLOW_ALL, Fixture};
use crate::report::Row;
use crate::startup::toolhost_binary;
use crate::stats::{Summary, duration};

/// The host's default `max_sessions`: the mix never holds more sessions at once.
const MAX_SESSIONS: usize = 64;
/// `timeout_ms` of the calls meant to time out (`sleep 3600`).
const TIMEOUT_MS: u64 = 1000;
/// `wait_ms` of the burst's `bash_output` reads (of sessions that print nothing more).
const READ_WAIT_MS: u64 = 200;

/// The burst's shape (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    /// Background sessions started, and read once, before the burst.
    pub pre: usize,
    /// `kill_shell`s of the first `kills` of them, in the burst.
    pub kills: usize,
    /// `bash_output` reads of the others (round robin), in the burst.
    pub reads: usize,
    /// Foreground `sleep 3600` with `timeout_ms` = 1000: the expected errors.
    pub timeouts: usize,
    /// New background starts, killed after the burst.
    pub starts: usize,
    /// Foreground `echo` / `printf` with exact output.
    pub foreground: usize,
    /// `list_shells`.
    pub lists: usize,
}

impl Mix {
    /// The mix for a burst of `calls` (at least 10): 200 gives 12 kills, 98 reads,
    /// 4 time-outs, 12 starts, 24 foreground and 50 lists over 24 pre-started
    /// sessions (64 sessions in all, the host's limit).
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
}

/// How one call of the burst must end.
#[derive(Debug, Clone)]
enum Expect {
    /// This exact text and `isError`.
    Exact(String, bool),
    /// Text starting with this, and `isError`.
    Prefix(String, bool),
    /// A background start: `status` running and a `session_id`.
    Started,
}

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
                expect: Expect::Started,
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

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A `toolhost serve` spoken to with JSON-RPC lines over its stdio; responses are
/// matched to requests by id, so calls run concurrently.
struct Client {
    child: Child,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Pending,
    next: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
}

impl Client {
    async fn start(bin: &Path, workspace: &Path, state: &Path, policy: &Path) -> Result<Client> {
        let mut child = Command::new(bin)
            .arg("serve")
            .arg("--policy")
            .arg(policy)
            .arg("--workspace")
            .arg(workspace)
            .arg("--state-dir")
            .arg(state)
            .env_remove("TOOLHOST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting toolhost serve")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let pending: Pending = Arc::default();
        let p = pending.clone();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(id) = msg["id"].as_u64()
                    && let Some(tx) = p.lock().unwrap().remove(&id)
                {
                    let _ = tx.send(msg);
                }
            }
        });
        let client = Client {
            child,
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending,
            next: AtomicU64::new(1),
            reader,
        };
        let init = client
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "toolhost-bench", "version": "1"}}),
            )
            .await?;
        ensure!(init.get("result").is_some(), "initialize failed: {init}");
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(client)
    }

    async fn send(&self, msg: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(msg)?;
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let stdin = stdin.as_mut().context("stdin closed")?;
        stdin.write_all(&line).await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Sends a request and waits for its response (`result` or `error`).
    async fn request(&self, method: &str, params: Value) -> Result<Value> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        rx.await
            .with_context(|| format!("serve closed stdout before answering {method}"))
    }

    /// A `tools/call`; the JSON-RPC `result`, or the whole message if it is an error.
    async fn call(&self, tool: &str, args: Value) -> Result<Value> {
        let msg = self
            .request("tools/call", json!({"name": tool, "arguments": args}))
            .await?;
        match msg.get("result") {
            Some(r) => Ok(r.clone()),
            None => bail!("JSON-RPC error: {msg}"),
        }
    }

    /// Closes stdin (the host stops: "the MCP client closed the connection") and
    /// waits for the process.
    async fn close(mut self) -> Result<()> {
        self.stdin.lock().await.take();
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .context("serve did not exit within 60 s of its stdin closing")??;
        self.reader.abort();
        ensure!(status.success(), "serve exited with {status}");
        Ok(())
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

/// The events of the only host session under `state`, complete lines only.
fn events(state: &Path) -> Result<Vec<Value>> {
    let hosts: Vec<PathBuf> = std::fs::read_dir(state.join("hosts"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    ensure!(hosts.len() == 1, "expected one host session: {hosts:?}");
    let text = std::fs::read_to_string(hosts[0].join("events.jsonl"))?;
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    complete
        .lines()
        .map(|l| serde_json::from_str(l).with_context(|| format!("event line {l}")))
        .collect()
}

/// Field 22 of `/proc/PID/stat` (start time in clock ticks); `None` once reaped.
fn start_time(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// What the log says: events missing or inconsistent, and counts for the details.
struct LogCheck {
    events: usize,
    /// Seqs missing or out of place, calls without exactly one start and one end,
    /// sessions without exactly one start and one exit.
    lost: usize,
    /// What each lost item was (the first few).
    lost_examples: Vec<String>,
    calls: usize,
    sessions: usize,
    statuses: BTreeMap<String, usize>,
}

fn check_log(events: &[Value]) -> LogCheck {
    let mut lost = 0;
    let mut examples = Vec::new();
    let mut note = |lost: &mut usize, what: String| {
        *lost += 1;
        if examples.len() < 5 {
            examples.push(what);
        }
    };
    for (i, e) in events.iter().enumerate() {
        if e["seq"] != json!(i as u64 + 1) {
            note(&mut lost, format!("event {} has seq {}", i + 1, e["seq"]));
        }
    }
    let mut calls: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut procs: HashMap<&str, (usize, usize, String)> = HashMap::new();
    for e in events {
        let call = e["tool_call_id"].as_str().unwrap_or_default();
        let session = e["session_id"].as_str().unwrap_or_default();
        match e["kind"].as_str().unwrap_or_default() {
            "tool_call_started" => calls.entry(call).or_default().0 += 1,
            "tool_call_settled" | "tool_call_failed" => calls.entry(call).or_default().1 += 1,
            "process_started" => procs.entry(session).or_default().0 += 1,
            "process_exited" => {
                let p = procs.entry(session).or_default();
                p.1 += 1;
                p.2 = e["status"].as_str().unwrap_or_default().to_owned();
            }
            _ => {}
        }
    }
    for (call, (s, f)) in &calls {
        if (*s, *f) != (1, 1) {
            note(&mut lost, format!("call {call}: {s} started, {f} finished"));
        }
    }
    let mut statuses = BTreeMap::new();
    for (session, (s, x, status)) in &procs {
        if (*s, *x) != (1, 1) {
            note(
                &mut lost,
                format!("session {session}: {s} started, {x} exited"),
            );
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

/// Checks `result` against `expect`; `Err(class)` names how it differs.
fn judge(result: &Result<Value>, expect: &Expect) -> std::result::Result<(), String> {
    let r = match result {
        Ok(r) => r,
        Err(e) => return Err(format!("protocol error: {e:#}")),
    };
    let t = text(r);
    let class = |t: &str| {
        if t.contains("maximum concurrent limit") {
            "instance pool exhausted"
        } else if t.contains("resource limit") {
            "resource limit"
        } else {
            "unexpected result"
        }
    };
    let ok = match expect {
        Expect::Exact(want, err) => t == want && is_error(r) == *err,
        Expect::Prefix(want, err) => t.starts_with(want.as_str()) && is_error(r) == *err,
        Expect::Started => !is_error(r) && r["structuredContent"]["status"] == json!("running"),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            class(t),
            t.chars()
                .take(300)
                .map(|c| if c == '\n' { ' ' } else { c })
                .collect::<String>()
        ))
    }
}

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
    let client = Arc::new(Client::start(&bin, &fixture.workspace, &fixture.state, &policy).await?);
    let mut calls_made = 0usize;

    // Before the burst: background sessions, each read once (the burst's reads then
    // find no new output).
    let mut pre = Vec::new();
    for i in 0..mix.pre {
        let r = client
            .call(
                "bash",
                json!({"command": format!("printf 'pre-%d\\n' {i}; exec sleep 3600"),
                       "run_in_background": true}),
            )
            .await?;
        let id = r["structuredContent"]["session_id"]
            .as_str()
            .with_context(|| format!("no session id: {r}"))?
            .to_owned();
        // A read of a running session waits its whole `wait_ms`: read in short ones.
        let want = format!("pre-{i}\n\n[still running");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = client
                .call("bash_output", json!({"session_id": id, "wait_ms": 100}))
                .await?;
            calls_made += 1;
            if text(&r).starts_with(&want) {
                break;
            }
            ensure!(
                text(&r).starts_with("(no new output)\n\n[still running")
                    && Instant::now() < deadline,
                "{r}"
            );
        }
        calls_made += 1;
        pre.push(id);
    }

    // The burst: every call issued at once.
    let jobs = jobs(&mix, &pre);
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
            let r = client.call(tool, args).await;
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

    let mut latencies = Vec::new();
    let mut expected_errors = 0;
    let mut unexpected: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut started = Vec::new();
    let (mut ok_foreground, mut others, mut others_done) = (0, 0, Duration::ZERO);
    for (job, slot) in jobs.iter().zip(results) {
        let (took, done, r) = slot.context("a call never finished")?;
        latencies.push(took);
        let timeout = matches!(job.expect, Expect::Exact(_, true));
        if !timeout {
            others += 1;
            others_done = others_done.max(done);
        }
        match judge(&r, &job.expect) {
            Ok(()) => {
                let r = r.as_ref().expect("judged ok");
                expected_errors += usize::from(is_error(r));
                ok_foreground += usize::from(
                    job.tool == "bash" && matches!(job.expect, Expect::Exact(_, false)),
                );
                if let Expect::Started = job.expect
                    && let Some(id) = r["structuredContent"]["session_id"].as_str()
                {
                    started.push(id.to_owned());
                }
            }
            Err(why) => {
                let (class, example) = why.split_once(": ").unwrap_or((&why, ""));
                let entry = unexpected.entry(class.to_owned()).or_default();
                entry.0 += 1;
                if entry.1.is_empty() {
                    entry.1 = format!("{} {}: {example}", job.tool, job.args);
                }
            }
        }
    }

    // After it: kill every session still running, then wait for the host to reap
    // every process the log names (it still serves).
    let mut set = tokio::task::JoinSet::new();
    for id in pre[mix.kills..].iter().chain(&started) {
        let (client, id) = (client.clone(), id.clone());
        set.spawn(async move { client.call("kill_shell", json!({"session_id": id})).await });
        calls_made += 1;
    }
    while let Some(r) = set.join_next().await {
        let r = r??;
        if is_error(&r) {
            let entry = unexpected.entry("cleanup kill failed".into()).or_default();
            entry.0 += 1;
            entry.1 = text(&r).to_owned();
        }
    }
    let pids: Vec<(u64, u64)> = events(&fixture.state)?
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
    let deadline = reap_start + Duration::from_secs(30);
    let mut leftover = alive(&pids);
    while leftover > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        leftover = alive(&pids);
    }
    let reaped_in = reap_start.elapsed();

    // The log, once the host has stopped.
    let client = Arc::into_inner(client).context("client still shared")?;
    client.close().await?;
    let log = check_log(&events(&fixture.state)?);
    let stopped = events(&fixture.state)?
        .last()
        .is_some_and(|e| e["kind"] == "lifecycle" && e["state"] == "stopped");
    let mut lost = log.lost;
    let mut lost_examples = log.lost_examples.clone();
    if log.calls != calls_made {
        lost += calls_made.abs_diff(log.calls);
        lost_examples.push(format!("{calls_made} calls made, {} in the log", log.calls));
    }
    // Sessions the results say started: a call that failed may not have started one.
    let sessions = mix.pre + ok_foreground + started.len() + expected_errors;
    if log.sessions < sessions {
        lost += sessions - log.sessions;
        lost_examples.push(format!(
            "{sessions} sessions started, {} in the log",
            log.sessions
        ));
    }
    if !stopped {
        lost += 1;
        lost_examples.push("the log does not end with `stopped`".into());
    }
    let want_statuses = BTreeMap::from([
        ("exited".to_owned(), ok_foreground),
        ("killed".to_owned(), mix.pre + started.len()),
        ("timed_out".to_owned(), expected_errors),
    ]);

    let lat = Summary::of(latencies);
    let errors: usize = unexpected.values().map(|(n, _)| n).sum();
    // Throughput over the calls that do not wait for a time-out.
    let per_second = others as f64 / others_done.as_secs_f64();
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
            jobs.len(),
            duration(wall),
            duration(others_done),
            per_second,
            peak.load(Ordering::SeqCst),
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
            want_statuses
        ),
        format!("lost events: {lost}"),
        format!(
            "errors: {expected_errors} expected (the {} time-outs), {errors} unexpected",
            mix.timeouts
        ),
    ];
    for (class, (n, example)) in &unexpected {
        details.push(format!("    {n} × {class}, e.g. {example}"));
    }
    for example in &lost_examples {
        details.push(format!("    lost: {example}"));
    }
    details.push(format!(
        "leftover processes: {leftover} of {} (checked for {})",
        pids.len(),
        duration(reaped_in)
    ));
    let met = lost == 0
        && errors == 0
        && expected_errors == mix.timeouts
        && leftover == 0
        && log.statuses == want_statuses;
    Ok(vec![Row {
        id: "L1".into(),
        what: format!(
            "load: {} concurrent MCP tool calls over one `toolhost serve` ({}), mixed \
             foreground, background, reads, kills and time-outs; then the host-session log \
             and /proc",
            jobs.len(),
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
