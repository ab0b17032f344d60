//! How `toolhost serve` stops: the drain (docs/operations.md#stopping-and-draining).
//!
//! The first stop (SIGTERM, SIGINT, or the control socket's `stop`) begins
//! the drain ([`Drain::run`]), on both doors:
//!
//! 1. The drain is marked begun before anything else: `/ready` answers `503`
//!    (`accepting: false`, `health.rs`), and each door refuses what would
//!    start new work ([`Drain::admit`]): a `tools/call` or `prompts/get`
//!    (but a 2026-07-28 retry carrying `requestState`, which resumes a call
//!    already running), a `resources/read`, an `initialize`. HTTP answers
//!    them `503 Service Unavailable` with `Retry-After` (RFC 9110 §15.6.4,
//!    §10.2.3) and a JSON-RPC error [`codes::STOPPING`]; stdio answers the
//!    same error. Everything else is served as usual: `ping`, the lists,
//!    `completion/complete`, `server/discover`, notifications (a client's
//!    `notifications/cancelled` still cancels), answers to the questions of
//!    calls in progress, the probes and `/metrics`.
//! 2. `lifecycle` `draining` is recorded, naming the cause and the calls
//!    in progress.
//! 3. It waits until nothing is in progress: no call (the handler's count,
//!    a call that outlived its request or waits for a 2026-07-28 answer
//!    included) and no work request whose response is still on its way
//!    (HTTP: its body not yet sent; stdio: its response not yet written);
//!    at most the drain timeout (`--drain-timeout`, [`DEFAULT_TIMEOUT`]).
//! 4. Past the timeout, or at a second stop, each call still running is
//!    cancelled as [`Host::cancel_call`] does (its processes get SIGTERM,
//!    then SIGKILL after the kill grace; the call settles `cancelled`,
//!    and its client gets that result), recorded first as a second
//!    `draining` event naming them; the drain waits at most the kill grace
//!    plus [`CANCEL_SETTLE_EXTRA`] for them to settle.
//! 5. The drain closes ([`Drain::closed`]): the doors stop, `serve` ends
//!    every background process session (`host-shutdown`), records
//!    `stopped` with [`DrainReport::message`] and exits 0, at most
//!    [`STOP_AFTER_DRAIN_MAX`] after the drain window.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::RxJsonRpcMessage;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use toolhost_runtime::{Host, HostEventKind, HostSessionLog, Lifecycle};

use crate::jsonrpc::{self, codes};

/// `--drain-timeout`'s default: 20 s. With [`STOP_AFTER_DRAIN_MAX`] (10 s)
/// it makes Kubernetes' default `terminationGracePeriodSeconds` (30 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// Longest `--drain-timeout`: 1 hour.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long past the kill grace (`SessionsConfig::kill_grace`, 2 s by
/// default) the drain waits for the calls it cancelled to settle: 1 s.
pub const CANCEL_SETTLE_EXTRA: Duration = Duration::from_secs(1);

/// Longest time from the end of the drain window (the drain timeout, or a
/// second stop) to the exit, with the default kill grace: 10 s. It adds up
/// the calls cancelled settling (the 2 s kill grace + [`CANCEL_SETTLE_EXTRA`])
/// and then, side by side, the HTTP door closing its connections
/// (`http::SHUTDOWN_GRACE`, 5 s) and the background sessions ending
/// (`Sessions::shutdown`: the kill grace + 1 s), with room to spare; so a
/// supervisor's grace (Kubernetes' `terminationGracePeriodSeconds`, systemd's
/// `TimeoutStopSec`) should be at least `--drain-timeout` plus this.
pub const STOP_AFTER_DRAIN_MAX: Duration = Duration::from_secs(10);

/// The `data.reason` of a refusal during the drain.
pub const REFUSAL_REASON: &str = "draining";

/// Counts things in progress (calls, responses on their way); each
/// [`Counted`] holds one until dropped.
#[derive(Clone)]
pub(crate) struct Counter(watch::Sender<usize>);

/// One thing a [`Counter`] counts, until dropped.
pub(crate) struct Counted(watch::Sender<usize>);

impl Counter {
    fn new() -> Counter {
        Counter(watch::channel(0).0)
    }

    /// Counts one more until the guard is dropped.
    pub(crate) fn enter(&self) -> Counted {
        self.0.send_modify(|n| *n += 1);
        Counted(self.0.clone())
    }

    /// Follows the count.
    pub(crate) fn subscribe(&self) -> watch::Receiver<usize> {
        self.0.subscribe()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// Where the drain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Serving: nothing refused.
    Serving,
    /// Draining since a stop of `cause` (`SIGTERM`, ...), until `deadline`
    /// at the latest.
    Draining {
        cause: &'static str,
        deadline: Instant,
    },
    /// The drain is over: the doors stop.
    Closed,
}

/// What [`Drain::admit`] says of one incoming message.
pub(crate) enum Admission {
    /// Serve it, uncounted (no work, or work that is not counted).
    Pass,
    /// Serve it, and hold this until its response is out.
    Count(Counted),
    /// Refuse it: the JSON-RPC error response, and the seconds to give as
    /// `Retry-After`.
    Refuse { response: Value, retry_after: u64 },
}

/// Which door a message came through (the refusal's `data` differs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    /// Streamable HTTP: the refusal carries `retryAfterSeconds`.
    Http,
    /// stdio: no retry on this process, which is about to exit.
    Stdio,
}

/// The drain state one `serve` run shares between its door, its readiness
/// and its stop ([`Drain::run`]).
pub struct Drain {
    timeout: Duration,
    phase: watch::Sender<Phase>,
    /// Calls (and resource reads, prompt gets) in progress in the handler.
    calls: Counter,
    /// Work requests a door passed on whose response is not out yet.
    responses: Counter,
}

impl Default for Drain {
    /// A drain of [`DEFAULT_TIMEOUT`].
    fn default() -> Drain {
        Drain::with_timeout(DEFAULT_TIMEOUT)
    }
}

/// Why the drain window ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainEnd {
    /// Nothing was left in progress.
    Drained,
    /// The drain timeout passed first.
    TimedOut,
    /// A second stop came first, of this cause.
    Again(&'static str),
}

/// What [`Drain::run`] did.
#[derive(Debug, Clone)]
pub struct DrainReport {
    /// The first stop's cause: `SIGTERM`, `SIGINT` or `a stop request`.
    pub cause: &'static str,
    /// Why the drain window ended.
    pub end: DrainEnd,
    /// The timeout it had.
    pub timeout: Duration,
    /// The calls it cancelled (`tc_…`), oldest first.
    pub cancelled: Vec<String>,
}

impl DrainReport {
    /// The `stopped` lifecycle message: `SIGTERM: stopped after the drain,
    /// nothing left running`; `SIGTERM: stopped after the drain timeout
    /// (2s), 1 call cancelled (tc_…)`; `SIGTERM, then SIGTERM again during
    /// the drain: stopped at once, 1 call cancelled (tc_…)`.
    pub fn message(&self) -> String {
        let cancelled = match self.cancelled.len() {
            0 => "no call cancelled".to_string(),
            n => format!("{} cancelled ({})", calls(n), self.cancelled.join(", ")),
        };
        match &self.end {
            DrainEnd::Drained => format!(
                "{}: stopped after the drain, nothing left running",
                self.cause
            ),
            DrainEnd::TimedOut => format!(
                "{}: stopped after the drain timeout ({}), {cancelled}",
                self.cause,
                show(self.timeout)
            ),
            DrainEnd::Again(again) => format!(
                "{}, then {again} during the drain: stopped at once, {cancelled}",
                self.cause
            ),
        }
    }
}

/// `n call(s)`.
fn calls(n: usize) -> String {
    match n {
        1 => "1 call".to_string(),
        n => format!("{n} calls"),
    }
}

/// A duration as `--drain-timeout` takes it: `20s`, `1500ms`, `0s`.
pub fn show(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Parses `--drain-timeout`: `0`, or a whole number followed by `ms`, `s`,
/// `m` or `min` (`500ms`, `20s`, `2m`), at most [`MAX_TIMEOUT`]. `0`: calls
/// still running are cancelled at once.
///
/// Errors: the text, for clap.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..end]
        .parse()
        .map_err(|_| format!("`{s}` is not a duration such as 20s, 500ms or 2m"))?;
    let d = match &s[end..] {
        "" if n == 0 => Duration::ZERO,
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
        _ => return Err(format!("`{s}` is not a duration such as 20s, 500ms or 2m")),
    };
    if d > MAX_TIMEOUT {
        return Err(format!("`{s}` is longer than {}", show(MAX_TIMEOUT)));
    }
    Ok(d)
}

/// What an incoming message asks of the host, for the drain.
enum Work {
    /// Nothing a drain refuses or waits for.
    None,
    /// `initialize`: a new session.
    Opens,
    /// New work: a `tools/call` or `prompts/get` without `requestState`, a
    /// `resources/read`.
    New,
    /// A 2026-07-28 retry (`requestState`) of a call already running.
    Resumes,
}

fn work_of(message: &RxJsonRpcMessage<RoleServer>) -> (Work, Value, &str) {
    let JsonRpcMessage::Request(request) = message else {
        return (Work::None, Value::Null, "");
    };
    let work = match &request.request {
        ClientRequest::CallToolRequest(r) if r.params.request_state.is_some() => Work::Resumes,
        ClientRequest::GetPromptRequest(r) if r.params.request_state.is_some() => Work::Resumes,
        ClientRequest::CallToolRequest(_)
        | ClientRequest::GetPromptRequest(_)
        | ClientRequest::ReadResourceRequest(_) => Work::New,
        ClientRequest::InitializeRequest(_) => Work::Opens,
        _ => Work::None,
    };
    let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
    (work, id, request.request.method())
}

impl Drain {
    /// A drain whose window is at most `timeout` (`--drain-timeout`).
    pub fn with_timeout(timeout: Duration) -> Drain {
        Drain {
            timeout,
            phase: watch::channel(Phase::Serving).0,
            calls: Counter::new(),
            responses: Counter::new(),
        }
    }

    /// The drain timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether a stop has begun (the drain, or after it).
    pub fn is_draining(&self) -> bool {
        !matches!(*self.phase.borrow(), Phase::Serving)
    }

    /// Resolves once the drain is over and the doors should stop.
    pub async fn closed(&self) {
        let mut phase = self.phase.subscribe();
        let _ = phase.wait_for(|p| *p == Phase::Closed).await;
    }

    /// Follows whether the drain is over (`true`), for a door that takes a
    /// stop flag.
    pub(crate) fn closed_flag(self: &Arc<Drain>) -> watch::Receiver<bool> {
        let (tx, rx) = watch::channel(false);
        let drain = self.clone();
        tokio::spawn(async move {
            drain.closed().await;
            let _ = tx.send(true);
        });
        rx
    }

    /// The count of calls in progress in the handler (`Shared::inflight`).
    pub(crate) fn calls(&self) -> Counter {
        self.calls.clone()
    }

    /// Whether `message` is served, counted until its response is out, or
    /// refused (the module docs, step 1). A request is counted before the
    /// phase is read, so one counted is never missed by the drain's wait.
    pub(crate) fn admit(&self, message: &RxJsonRpcMessage<RoleServer>, door: Door) -> Admission {
        let (work, id, method) = work_of(message);
        let counted = match work {
            Work::None => return Admission::Pass,
            Work::Resumes => return Admission::Count(self.responses.enter()),
            Work::New => Some(self.responses.enter()),
            Work::Opens => None,
        };
        let Phase::Draining { cause, deadline } = *self.phase.borrow() else {
            return match counted {
                Some(counted) => Admission::Count(counted),
                None => Admission::Pass,
            };
        };
        drop(counted);
        let retry_after = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
            .ceil()
            .max(1.0) as u64;
        tracing::info!(method, "refused during the drain");
        Admission::Refuse {
            response: refusal(
                &id,
                method,
                cause,
                (door == Door::Http).then_some(retry_after),
            ),
            retry_after,
        }
    }

    /// Runs the stop of one `serve` run (the module docs): waits for the
    /// first of `triggers` (a stop's cause: `SIGTERM`, `SIGINT`, `a stop
    /// request`), drains `host`'s calls, recording `draining` in `log`, and
    /// closes. Never returns if no stop ever comes.
    pub async fn run(
        &self,
        host: &Host,
        log: &HostSessionLog,
        triggers: &mut mpsc::UnboundedReceiver<&'static str>,
    ) -> DrainReport {
        let Some(cause) = triggers.recv().await else {
            return std::future::pending().await;
        };
        let pid = std::process::id();
        let deadline = Instant::now() + self.timeout;
        self.phase.send_replace(Phase::Draining { cause, deadline });
        let running = host.running_calls().len();
        let begun = format!(
            "{cause}: draining {} in progress (at most {}); new calls are refused",
            calls(running),
            show(self.timeout)
        );
        log.append(HostEventKind::Lifecycle {
            state: Lifecycle::Draining,
            pid,
            message: Some(begun.clone()),
        });
        crate::errln!("toolhost: {begun}");
        let end = tokio::select! {
            // Nothing left is `Drained` even when the timeout (`0`) is due too.
            biased;
            () = self.idle() => DrainEnd::Drained,
            () = tokio::time::sleep_until(deadline.into()) => DrainEnd::TimedOut,
            Some(again) = triggers.recv() => DrainEnd::Again(again),
        };
        let mut cancelled = Vec::new();
        if end != DrainEnd::Drained {
            cancelled = host
                .running_calls()
                .into_iter()
                .map(|c| c.tool_call_id)
                .collect();
            let why = match &end {
                DrainEnd::Again(again) => format!("{again} again"),
                _ => format!("the drain timeout ({}) passed", show(self.timeout)),
            };
            let what = match cancelled.len() {
                0 => "no call left to cancel".to_string(),
                n => format!(
                    "cancelling {} still running ({})",
                    calls(n),
                    cancelled.join(", ")
                ),
            };
            let message = format!("{why}: {what}");
            log.append(HostEventKind::Lifecycle {
                state: Lifecycle::Draining,
                pid,
                message: Some(message.clone()),
            });
            crate::errln!("toolhost: {message}");
            for id in &cancelled {
                host.cancel_call(id);
            }
            let settle = host.config().sessions.kill_grace + CANCEL_SETTLE_EXTRA;
            if tokio::time::timeout(settle, self.idle()).await.is_err() {
                tracing::warn!(
                    "requests still in progress {settle:?} after the drain cancelled them"
                );
            }
        }
        self.phase.send_replace(Phase::Closed);
        DrainReport {
            cause,
            end,
            timeout: self.timeout,
            cancelled,
        }
    }

    /// Resolves when no call is in progress and no counted response is on
    /// its way, both at once.
    async fn idle(&self) {
        let mut calls = self.calls.subscribe();
        let mut responses = self.responses.subscribe();
        loop {
            let _ = calls.wait_for(|n| *n == 0).await;
            let _ = responses.wait_for(|n| *n == 0).await;
            if *calls.borrow() == 0 {
                return;
            }
        }
    }
}

/// The JSON-RPC error a refused request `id` of `method` gets during a drain
/// begun by `cause`: code [`codes::STOPPING`], `data` `{"reason":
/// "draining"}` plus `retryAfterSeconds` when given (HTTP).
pub(crate) fn refusal(id: &Value, method: &str, cause: &str, retry_after: Option<u64>) -> Value {
    let mut data = json!({"reason": REFUSAL_REASON});
    if let Some(seconds) = retry_after {
        data["retryAfterSeconds"] = json!(seconds);
    }
    let mut response = jsonrpc::error(
        id,
        codes::STOPPING,
        format!(
            "Server stopping: toolhost is draining ({cause}) and takes no new `{method}`; \
             requests already running finish. Retry once it has restarted, or on another server"
        ),
    );
    response["error"]["data"] = data;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_timeouts_parse_as_documented() {
        assert_eq!(parse_timeout("0"), Ok(Duration::ZERO));
        assert_eq!(parse_timeout("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_timeout("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_timeout("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_timeout("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_timeout("60min"), Ok(MAX_TIMEOUT));
        for bad in ["", "s", "20", "-1s", "1.5s", "2h", "61m"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
        assert_eq!(show(Duration::from_secs(20)), "20s");
        assert_eq!(show(Duration::from_millis(1500)), "1500ms");
        assert_eq!(show(Duration::ZERO), "0s");
    }

    #[test]
    fn a_report_says_how_the_drain_ended() {
        let mut report = DrainReport {
            cause: "SIGTERM",
            end: DrainEnd::Drained,
            timeout: Duration::from_secs(2),
            cancelled: vec![],
        };
        assert_eq!(
            report.message(),
            "SIGTERM: stopped after the drain, nothing left running"
        );
        report.end = DrainEnd::TimedOut;
        report.cancelled = vec!["tc_000000000002".into()];
        assert_eq!(
            report.message(),
            "SIGTERM: stopped after the drain timeout (2s), 1 call cancelled (tc_000000000002)"
        );
        report.end = DrainEnd::Again("SIGINT");
        assert_eq!(
            report.message(),
            "SIGTERM, then SIGINT during the drain: stopped at once, 1 call cancelled \
             (tc_000000000002)"
        );
    }
}
