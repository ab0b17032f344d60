//! Issue 17, item 6 (load): many concurrent tool calls over one `toolhost serve`
//! (foreground commands, background starts, output reads, kills and time-outs
//! issued at once) lose no event, fail only where expected, and leave no process.
//! The full size (200 calls) is figure L1 of the benchmark harness
//! (`host/bench/src/load.rs`); this is the same mix at 40 calls.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::mcp::{call, client, text_of};
use crate::support::dirs;

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

/// One call of the burst.
#[derive(Debug, Clone)]
struct Job {
    tool: &'static str,
    args: Value,
    expect: Expect,
}

/// The burst's shape. The sessions it can hold at once (`pre + timeouts + starts +
/// foreground`) stay within the host's `max_sessions` (64), so no start is refused
/// for the session limit and the only expected errors are the time-outs.
struct Mix {
    /// Background sessions started (and their first output read) before the burst.
    pre: usize,
    /// `kill_shell` of the first `kills` of them, in the burst.
    kills: usize,
    /// `bash_output` reads (waiting `READ_WAIT_MS`) of the others, round robin.
    reads: usize,
    /// Foreground `sleep 3600` with `timeout_ms` = `TIMEOUT_MS`: the expected errors.
    timeouts: usize,
    /// New background starts (`printf ...; exec sleep 3600`), killed after the burst.
    starts: usize,
    /// Foreground `echo` / `printf` with their exact output.
    foreground: usize,
    /// `list_shells`.
    lists: usize,
}

const TIMEOUT_MS: u64 = 1000;
const READ_WAIT_MS: u64 = 200;

impl Mix {
    fn calls(&self) -> usize {
        self.kills + self.reads + self.timeouts + self.starts + self.foreground + self.lists
    }

    /// The burst's jobs for the pre-started sessions `pre`, interleaved by kind.
    fn jobs(&self, pre: &[String]) -> Vec<Job> {
        let mut kinds: Vec<Vec<Job>> = Vec::new();
        kinds.push(
            pre[..self.kills]
                .iter()
                .map(|id| Job {
                    tool: "kill_shell",
                    args: json!({"session_id": id}),
                    expect: Expect::Prefix(
                        "Sent SIGTERM (then SIGKILL after a grace) to 1 process(es) in the \
                         process group of session "
                            .into(),
                        false,
                    ),
                })
                .collect(),
        );
        let running = &pre[self.kills..];
        kinds.push(
            (0..self.reads)
                .map(|i| Job {
                    tool: "bash_output",
                    args: json!({"session_id": running[i % running.len()], "wait_ms": READ_WAIT_MS}),
                    expect: Expect::Prefix("(no new output)\n\n[still running after ".into(), false),
                })
                .collect(),
        );
        kinds.push(
            (0..self.timeouts)
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
        );
        kinds.push(
            (0..self.starts)
                .map(|i| Job {
                    tool: "bash",
                    args: json!({"command": format!("printf 'bg-%d\\n' {i}; exec sleep 3600"),
                                 "run_in_background": true}),
                    expect: Expect::Started,
                })
                .collect(),
        );
        kinds.push(
            (0..self.foreground)
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
        );
        kinds.push(
            (0..self.lists)
                .map(|_| Job {
                    tool: "list_shells",
                    args: json!({}),
                    expect: Expect::Prefix(String::new(), false),
                })
                .collect(),
        );
        let mut jobs = Vec::new();
        let longest = kinds.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            for kind in &kinds {
                if let Some(job) = kind.get(i) {
                    jobs.push(job.clone());
                }
            }
        }
        jobs
    }
}

/// The events of the only host session in `state`, complete lines only.
fn events(state: &Path) -> Vec<Value> {
    let hosts: Vec<_> = std::fs::read_dir(state.join("hosts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    let text = std::fs::read_to_string(hosts[0].join("events.jsonl")).unwrap();
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Field 22 of `/proc/PID/stat` (start time in clock ticks), `None` once the
/// process is gone (reaped).
fn start_time(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(19)?.parse().ok()
}

async fn tool(peer: &Peer<RoleClient>, name: &str, args: Value) -> CallToolResult {
    peer.call_tool(call(name, args.clone()))
        .await
        .unwrap_or_else(|e| panic!("{name} {args}: {e:?}"))
}

/// Reads `session` with short `bash_output` calls (a read of a running session
/// waits its whole `wait_ms`) until at least `want.len()` bytes arrived; returns
/// the output (status lines cut) and how many reads it took.
async fn read_until(peer: &Peer<RoleClient>, session: &str, want: &str) -> (String, usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut output, mut reads) = (String::new(), 0);
    while output.len() < want.len() {
        assert!(Instant::now() < deadline, "{session}: {output:?}");
        let r = tool(
            peer,
            "bash_output",
            json!({"session_id": session, "wait_ms": 100}),
        )
        .await;
        reads += 1;
        let text = text_of(&r);
        assert_eq!(r.is_error, Some(false), "{text}");
        let new = text
            .split_once("\n\n[still running")
            .map_or(text.as_str(), |(o, _)| o);
        if new != "(no new output)" {
            output.push_str(new);
            output.push('\n');
        }
    }
    (output, reads)
}

/// Issue 17, item 6 at 40 calls: every result as expected (the time-outs are the
/// only errors), the host-session log complete (seqs 1..n without a gap, each call
/// started and finished once, each process started and exited once), and every
/// process the run started reaped by the host while it still serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_concurrent_mixed_calls_lose_nothing_and_leave_no_process() {
    let mix = Mix {
        pre: 8,
        kills: 4,
        reads: 8,
        timeouts: 2,
        starts: 4,
        foreground: 18,
        lists: 4,
    };
    assert_eq!(mix.calls(), 40);
    assert!(mix.pre + mix.timeouts + mix.starts + mix.foreground <= 64);
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    let peer = client.peer().clone();
    let mut calls_made = 0usize;

    // Before the burst: background sessions, each read once so the burst's reads
    // find no new output.
    let mut pre = Vec::new();
    for i in 0..mix.pre {
        let r = tool(
            &peer,
            "bash",
            json!({"command": format!("printf 'pre-%d\\n' {i}; exec sleep 3600"),
                   "run_in_background": true}),
        )
        .await;
        let id = r.structured_content.as_ref().unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (text, reads) = read_until(&peer, &id, &format!("pre-{i}\n")).await;
        assert_eq!(text, format!("pre-{i}\n"));
        calls_made += 1 + reads;
        pre.push(id);
    }

    // The burst: every call issued at once.
    let jobs = mix.jobs(&pre);
    assert_eq!(jobs.len(), 40);
    let mut set = tokio::task::JoinSet::new();
    for (i, job) in jobs.iter().enumerate() {
        let peer = peer.clone();
        let (tool, args) = (job.tool, job.args.clone());
        set.spawn(async move {
            let t = Instant::now();
            let r = peer.call_tool(call(tool, args)).await;
            (i, t.elapsed(), r)
        });
    }
    let mut results = BTreeMap::new();
    while let Some(joined) = set.join_next().await {
        let (i, _, r) = joined.unwrap();
        results.insert(i, r);
    }
    calls_made += jobs.len();
    let mut started = Vec::new();
    let mut errors = 0;
    for (i, job) in jobs.iter().enumerate() {
        let r = results[&i]
            .as_ref()
            .unwrap_or_else(|e| panic!("{} {}: {e:?}", job.tool, job.args));
        let text = text_of(r);
        let what = format!("{} {}: {text}", job.tool, job.args);
        match &job.expect {
            Expect::Exact(want, is_error) => {
                assert_eq!(&text, want, "{what}");
                assert_eq!(r.is_error, Some(*is_error), "{what}");
            }
            Expect::Prefix(want, is_error) => {
                assert!(text.starts_with(want.as_str()), "{what}");
                assert_eq!(r.is_error, Some(*is_error), "{what}");
            }
            Expect::Started => {
                assert_eq!(r.is_error, Some(false), "{what}");
                let s = r.structured_content.as_ref().unwrap();
                assert_eq!(s["status"], json!("running"), "{what}");
                started.push(s["session_id"].as_str().unwrap().to_owned());
            }
        }
        errors += usize::from(r.is_error == Some(true));
    }
    assert_eq!(errors, mix.timeouts, "only the time-outs fail");

    // After it: the new starts print their line; then every running session is killed.
    for (i, id) in started.iter().enumerate() {
        let (text, reads) = read_until(&peer, id, &format!("bg-{i}\n")).await;
        assert_eq!(text, format!("bg-{i}\n"));
        calls_made += reads;
    }
    let mut set = tokio::task::JoinSet::new();
    for id in pre[mix.kills..].iter().chain(&started) {
        let peer = peer.clone();
        let id = id.clone();
        set.spawn(async move { tool(&peer, "kill_shell", json!({"session_id": id})).await });
        calls_made += 1;
    }
    while let Some(r) = set.join_next().await {
        let r = r.unwrap();
        assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
    }
    let r = tool(&peer, "list_shells", json!({})).await;
    calls_made += 1;
    assert!(
        text_of(&r).contains(" session(s), 0 running"),
        "{}",
        text_of(&r)
    );

    // Every process the log names is reaped by the host, which still serves.
    let pids: Vec<(u64, u64)> = events(state.path())
        .iter()
        .filter(|e| e["kind"] == "process_started")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["start_time"].as_u64().unwrap(),
            )
        })
        .collect();
    let sessions = mix.pre + mix.timeouts + mix.starts + mix.foreground;
    assert_eq!(pids.len(), sessions);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left: Vec<_> = pids
            .iter()
            .filter(|(pid, t)| {
                start_time(*pid) == Some(*t)
                    || !toolhost_process::group_members(*pid as u32).is_empty()
            })
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "not reaped: {left:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The log, once the host has stopped: complete and consistent.
    client.cancel().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let events = loop {
        let events = events(state.path());
        if events
            .last()
            .is_some_and(|e| e["kind"] == "lifecycle" && e["state"] == "stopped")
        {
            break events;
        }
        assert!(
            Instant::now() < deadline,
            "the host never recorded `stopped`"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(i as u64 + 1), "event {i}: {e}");
    }
    let mut calls: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut procs: HashMap<&str, (usize, usize, String)> = HashMap::new();
    for e in &events {
        let call = e["tool_call_id"].as_str().unwrap_or_default();
        let session = e["session_id"].as_str().unwrap_or_default();
        match e["kind"].as_str().unwrap() {
            "tool_call_started" => calls.entry(call).or_default().0 += 1,
            "tool_call_settled" | "tool_call_failed" => {
                let c = calls.entry(call).or_default();
                assert_eq!(c.0, 1, "{call} finished before it started: {e}");
                c.1 += 1;
            }
            "process_started" => procs.entry(session).or_default().0 += 1,
            "process_exited" => {
                let p = procs.entry(session).or_default();
                assert_eq!(p.0, 1, "{session} exited before it started: {e}");
                p.1 += 1;
                p.2 = e["status"].as_str().unwrap().to_owned();
            }
            "lifecycle" | "process_output" => {}
            other => panic!("unexpected event {other}: {e}"),
        }
    }
    assert_eq!(calls.len(), calls_made);
    for (call, (s, f)) in &calls {
        assert_eq!((*s, *f), (1, 1), "{call}: started {s}, finished {f}");
    }
    assert_eq!(procs.len(), sessions);
    let mut statuses: BTreeMap<&str, usize> = BTreeMap::new();
    for (session, (s, x, status)) in &procs {
        assert_eq!((*s, *x), (1, 1), "{session}: started {s}, exited {x}");
        *statuses.entry(status.as_str()).or_default() += 1;
    }
    assert_eq!(
        statuses,
        BTreeMap::from([
            ("exited", mix.foreground),
            ("killed", mix.pre + mix.starts),
            ("timed_out", mix.timeouts),
        ])
    );
}
