//! Soak: `toolhost serve --http` on loopback with 32 clients running a mixed
//! workload at once for a bounded time: rounds of the load mix
//! (`toolhost_test_support::load::round`: foreground calls, background
//! sessions read and killed, time-outs, lists), permission questions
//! answered (allowed, rejected) and not answered (the call's `timeout_ms`
//! ends them), calls cancelled by the client (`notifications/cancelled`),
//! calls whose HTTP stream the client drops mid-call, and clients that close
//! their session and come back as new ones.
//!
//! It runs `TOOLHOST_SOAK_SECS` seconds (default 60; the on-demand run is
//! 600), after a warm-up (rounds of every client until the log's in-memory
//! window of events is full), and asserts: the serve
//! process's RSS and open descriptors, once it is idle again, within 10% of
//! where they were after the warm-up; every result as its call must answer;
//! the host-session log complete (seqs 1..n without a gap, each call started
//! and finished once, each process started and exited once, nothing a run
//! cannot cause); no process left. It prints the latency percentiles of the
//! calls (p50, p99, max) and the figures it compared; they are not asserted
//! (speed figures belong to the benchmarks).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::service::{PeerRequestOptions, RequestContext, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use toolhost_test_support::load::{Mix, ToolCaller, check_log_allowing, round, wait_reaped};
use toolhost_test_support::{is_error, result_text};

use crate::mcp::call;
use crate::mcp_http::{EXCHANGE_TIMEOUT, HttpServe, open_session, post_headers, send};
use crate::support::dirs;

/// Clients running at once.
/// The events a host-session log keeps in memory (`MEMORY_EVENTS` of
/// host/host-session/src/memory.rs): the warm-up fills them.
const LOG_MEMORY_EVENTS: usize = 4096;

/// Most warm-up rounds past the first (each one round per client).
const WARM_UP_ROUNDS_MAX: usize = 12;

const CLIENTS: usize = 32;

/// The soak's length without `TOOLHOST_SOAK_SECS`, in seconds.
const DEFAULT_SECS: u64 = 60;

/// The slack allowed on RSS and open descriptors once idle: 10%.
const SLACK: f64 = 1.10;

/// How long the server gets to become idle again (its finished sessions
/// retired, its connections closed) before the figures are compared.
const SETTLE_LIMIT: Duration = Duration::from_secs(90);

/// One round of the load mix per client turn: 7 calls in the burst, 7
/// sessions.
const MIX: Mix = Mix {
    pre: 2,
    kills: 1,
    reads: 1,
    timeouts: 1,
    starts: 1,
    foreground: 3,
    lists: 0,
};

/// `timeout_ms` of a call whose permission question nobody answers.
const UNANSWERED_MS: u64 = 1500;

/// The rules: everything runs, but `touch` is asked about.
const POLICY: &str = "default = \"allow\"\nask = [\"touch *\"]\n";

/// Answers the permission questions of the soak by the file the command
/// touches: `ask-allow-*` allowed once, `ask-reject-*` rejected once,
/// `ask-ignore-*` never answered (the answer comes after the call ended).
#[derive(Clone, Default)]
struct Answerer;

impl ClientHandler for Answerer {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.capabilities = serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let message = match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message,
            _ => String::new(),
        };
        let decision = if message.contains("ask-allow-") {
            "allow_once"
        } else if message.contains("ask-ignore-") {
            tokio::time::sleep(Duration::from_millis(UNANSWERED_MS * 4)).await;
            "reject_once"
        } else {
            "reject_once"
        };
        Ok(
            ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({"decision": decision})),
        )
    }
}

/// One client: rmcp's Streamable HTTP client (the official Rust SDK).
struct Client(RunningService<RoleClient, Answerer>);

impl ToolCaller for Client {
    async fn call_tool(&self, tool: &str, args: Value) -> anyhow::Result<Value> {
        let r = self.0.call_tool(call(tool, args)).await?;
        Ok(serde_json::to_value(r)?)
    }
}

async fn connect(url: &str) -> Arc<Client> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()),
    );
    let service = tokio::time::timeout(EXCHANGE_TIMEOUT, Answerer.serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize");
    Arc::new(Client(service))
}

/// What the clients saw.
#[derive(Default, Debug)]
struct Tally {
    /// `tools/call`s sent.
    sent: usize,
    /// `tools/call`s answered (the others were cancelled or dropped).
    answered: usize,
    /// Every answered call's latency.
    latencies: Vec<Duration>,
    /// Results not as their call must answer, by class: count and first.
    unexpected: BTreeMap<String, (usize, String)>,
    /// Turns by kind.
    turns: BTreeMap<&'static str, usize>,
}

impl Tally {
    fn note(&mut self, class: &str, example: String) {
        let e = self.unexpected.entry(class.to_owned()).or_default();
        e.0 += 1;
        if e.1.is_empty() {
            e.1 = example;
        }
    }

    fn merge(&mut self, other: Tally) {
        self.sent += other.sent;
        self.answered += other.answered;
        self.latencies.extend(other.latencies);
        for (class, (n, example)) in other.unexpected {
            let e = self.unexpected.entry(class).or_default();
            e.0 += n;
            if e.1.is_empty() {
                e.1 = example;
            }
        }
        for (kind, n) in other.turns {
            *self.turns.entry(kind).or_default() += n;
        }
    }
}

/// Calls `tool` and checks `isError` and, when given, the text's start.
async fn checked(
    client: &Client,
    tally: &mut Tally,
    tool: &str,
    args: Value,
    error: bool,
    starts: Option<&str>,
) {
    tally.sent += 1;
    let t = Instant::now();
    match client.call_tool(tool, args.clone()).await {
        Ok(r) => {
            tally.answered += 1;
            tally.latencies.push(t.elapsed());
            let text = result_text(&r);
            if is_error(&r) != error || starts.is_some_and(|s| !text.starts_with(s)) {
                tally.note(tool, format!("{args}: {text}"));
            }
        }
        Err(e) => tally.note("protocol error", format!("{tool} {args}: {e:#}")),
    }
}

/// Client `n`'s turns until `until` (at least one of each kind).
async fn client_turns(url: String, addr: String, n: usize, until: Instant) -> Tally {
    let mut tally = Tally::default();
    let mut client = connect(&url).await;
    let mut turn = 0usize;
    loop {
        match turn % 5 {
            0 | 1 => {
                *tally.turns.entry("mix").or_default() += 1;
                match round(&client, &MIX).await {
                    Ok(r) => {
                        tally.sent += r.calls_made;
                        tally.answered += r.calls_made;
                        tally.latencies.extend(r.latencies);
                        for (class, (count, example)) in r.unexpected {
                            let e = tally.unexpected.entry(class).or_default();
                            e.0 += count;
                            if e.1.is_empty() {
                                e.1 = example;
                            }
                        }
                        if r.expected_errors != MIX.timeouts {
                            tally.note(
                                "time-outs",
                                format!("{} of {} failed", r.expected_errors, MIX.timeouts),
                            );
                        }
                    }
                    Err(e) => tally.note("round", format!("{e:#}")),
                }
            }
            2 => {
                *tally.turns.entry("questions").or_default() += 1;
                let tag = format!("{n}-{turn}");
                checked(
                    &client,
                    &mut tally,
                    "bash",
                    json!({"command": format!("touch ask-allow-{tag} && echo made")}),
                    false,
                    Some("made"),
                )
                .await;
                checked(
                    &client,
                    &mut tally,
                    "bash",
                    json!({"command": format!("touch ask-reject-{tag}")}),
                    true,
                    None,
                )
                .await;
                checked(
                    &client,
                    &mut tally,
                    "bash",
                    json!({"command": format!("touch ask-ignore-{tag}"),
                           "timeout_ms": UNANSWERED_MS}),
                    true,
                    None,
                )
                .await;
            }
            3 => {
                // Cancelled by the client: rmcp sends notifications/cancelled
                // when its own time-out passes.
                *tally.turns.entry("cancel").or_default() += 1;
                tally.sent += 1;
                let request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                    call("bash", json!({"command": "sleep 30"})),
                ));
                let sent = client
                    .0
                    .peer()
                    .send_request_with_option(
                        request,
                        PeerRequestOptions::with_timeout(Duration::from_millis(300)),
                    )
                    .await;
                match sent {
                    Ok(handle) => match handle.await_response().await {
                        Err(ServiceError::Timeout { .. }) => {}
                        other => tally.note("cancel", format!("{other:?}")),
                    },
                    Err(e) => tally.note("cancel", format!("{e:?}")),
                }
            }
            _ => {
                // A call whose stream the client drops mid-call, on a raw
                // session it then deletes; then this client closes its
                // session and comes back as a new one.
                *tally.turns.entry("disconnect").or_default() += 1;
                let session = open_session(&addr, &[]).await;
                let mut headers = post_headers(&[]);
                headers.push(("mcp-session-id", &session));
                let reply = send(
                    &addr,
                    "POST",
                    "/mcp",
                    &headers,
                    json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
                           "params":{"name":"bash","arguments":{"command":"sleep 2"}}})
                    .to_string(),
                )
                .await;
                tally.sent += 1;
                if reply.status != 200 {
                    tally.note("disconnect", format!("status {}", reply.status));
                }
                drop(reply);
                let delete = send(
                    &addr,
                    "DELETE",
                    "/mcp",
                    &[("mcp-session-id", session.as_str())],
                    "",
                )
                .await;
                if !(200..300).contains(&delete.status) {
                    tally.note("delete", format!("status {}", delete.status));
                }
                let old = Arc::into_inner(client).expect("no other holder");
                if let Err(e) = old.0.cancel().await {
                    tally.note("close", format!("{e:?}"));
                }
                client = connect(&url).await;
            }
        }
        turn += 1;
        // At least one turn of each kind.
        if Instant::now() >= until && turn >= 5 {
            break;
        }
    }
    if let Some(c) = Arc::into_inner(client) {
        let _ = c.0.cancel().await;
    }
    tally
}

/// Every client's turns, all at once, until `until`.
async fn run_clients(serve: &HttpServe, until: Instant) -> Tally {
    let mut set = tokio::task::JoinSet::new();
    for n in 0..CLIENTS {
        set.spawn(client_turns(serve.url(), serve.addr.clone(), n, until));
    }
    let mut all = Tally::default();
    while let Some(t) = set.join_next().await {
        all.merge(t.expect("a client panicked"));
    }
    all
}

/// The serve process's resident memory (KiB) and open descriptors.
fn usage(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    (rss, fds)
}

/// Waits (at most [`SETTLE_LIMIT`]) until the server's descriptor count has
/// not changed for 2 s and `done` holds of its usage; returns that usage.
async fn settle(pid: u32, done: impl Fn((u64, usize)) -> bool) -> (u64, usize) {
    let deadline = Instant::now() + SETTLE_LIMIT;
    let mut last = usage(pid);
    let mut steady = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = usage(pid);
        steady = if now.1 == last.1 { steady + 1 } else { 0 };
        last = now;
        if (steady >= 8 && done(now)) || Instant::now() >= deadline {
            return now;
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_http_clients_leak_nothing_lose_no_event_and_leave_no_process() {
    let secs: u64 = std::env::var("TOOLHOST_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECS);
    let (ws, state) = dirs();
    let policy = state.path().join("soak-policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let mut serve = HttpServe::start_logging(
        ws.path(),
        state.path(),
        Some(policy.to_str().unwrap()),
        &["--http", "127.0.0.1:0", "--max-sessions", "512"],
        "warn",
    );
    let pid = serve.child.id();

    // Warm-up: every client one round, again until the host-session log's
    // in-memory window is full (`MEMORY_EVENTS`, 4,096 events,
    // host/host-session/src/memory.rs): a cache bounded by design that a
    // longer run fills, not a leak; then idle.
    let mut warm = run_clients(&serve, Instant::now()).await;
    for _ in 0..WARM_UP_ROUNDS_MAX {
        let logged = toolhost_test_support::host_log::events(state.path())
            .map(|e| e.len())
            .unwrap_or(0);
        if logged > LOG_MEMORY_EVENTS {
            break;
        }
        warm.merge(run_clients(&serve, Instant::now()).await);
    }
    assert!(
        warm.unexpected.is_empty(),
        "warm-up: {:#?}",
        warm.unexpected
    );
    let start = settle(pid, |_| true).await;

    let t0 = Instant::now();
    let mut tally = run_clients(&serve, t0 + Duration::from_secs(secs)).await;
    let ran = t0.elapsed();
    let limit = (
        (start.0 as f64 * SLACK) as u64,
        (start.1 as f64 * SLACK) as usize,
    );
    let end = settle(pid, |(rss, fds)| rss <= limit.0 && fds <= limit.1).await;

    tally.merge(warm);
    tally.latencies.sort();
    let l = &tally.latencies;
    eprintln!(
        "soak: {CLIENTS} clients for {:.1} s: {} calls sent, {} answered; turns {:?}; \
         latency p50 {:?} p99 {:?} max {:?}; RSS {} -> {} KiB, fds {} -> {}",
        ran.as_secs_f64(),
        tally.sent,
        tally.answered,
        tally.turns,
        percentile(l, 0.50),
        percentile(l, 0.99),
        l.last().copied().unwrap_or_default(),
        start.0,
        end.0,
        start.1,
        end.1,
    );
    assert!(tally.unexpected.is_empty(), "{:#?}", tally.unexpected);
    assert!(
        end.0 <= limit.0,
        "RSS grew: {} KiB after the warm-up, {} KiB idle after the soak",
        start.0,
        end.0
    );
    assert!(
        end.1 <= limit.1,
        "descriptors grew: {} after the warm-up, {} idle after the soak",
        start.1,
        end.1
    );

    // No process left, while the host still serves.
    let (processes, leftover, _) = wait_reaped(state.path()).await.unwrap();
    assert_eq!(leftover, 0, "{leftover} of {processes} processes left");

    // The log, once the host has stopped.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = serve.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    let events = toolhost_test_support::host_log::events(state.path()).unwrap();
    let check = check_log_allowing(
        &events,
        &["permission_requested", "permission_resolved", "omitted"],
    );
    assert_eq!(
        (check.lost, &check.lost_examples),
        (0, &Vec::new()),
        "the log lost or misplaced events"
    );
    assert!(
        (tally.answered..=tally.sent).contains(&check.calls),
        "{} calls in the log; {} sent, {} answered",
        check.calls,
        tally.sent,
        tally.answered
    );
    assert!(
        events
            .last()
            .is_some_and(|e| e["kind"] == "lifecycle" && e["state"] == "stopped"),
        "the log does not end with `stopped`"
    );
}
