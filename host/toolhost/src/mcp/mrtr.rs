//! Permission questions for 2026-07-28 clients as Multi Round-Trip Requests
//! (MCP 2026-07-28, "Multi Round-Trip Requests"): a policy `ask` during a
//! modern `tools/call` whose `_meta` client capabilities declare
//! `elicitation` is not sent as `elicitation/create` (the revision has no
//! server-to-client requests) but answered with an `input_required` result:
//! one form elicitation under the key [`INPUT_KEY`] (the same form as
//! `ElicitationApprover`'s) and a `requestState`. The call itself stays
//! suspended in the host, its start waiting for the answer; the client's
//! retry of the same `tools/call` with `inputResponses` and that
//! `requestState` resumes it, so the command runs (or is refused) once,
//! never from scratch.
//!
//! `requestState` is rmcp's [`RequestStateCodec`] (HMAC-SHA256) over a
//! random handle of the pending question, bound to the tool name and
//! expiring after [`QUESTION_TTL`]; the key, 32 random bytes, is kept in the
//! state dir ([`KEY_FILE`], mode 0600) and made on first use. A tampered,
//! expired or foreign state, or one already used (the handle is taken out
//! once), is `-32602` and runs nothing; so is one longer than
//! [`MAX_REQUEST_STATE_BYTES`], before it is decoded. Refusals are logged at
//! `warn` with the reason and the tool, never the state.
//!
//! A parked call keeps its plugin instance (the call is suspended inside the
//! plugin), so parked questions are bounded per plugin well below the
//! plugin's calls in flight ([`QuestionLimits`]: a quarter, at least 1), and
//! at most [`MAX_PENDING_QUESTIONS`] in all: an ask past a bound is refused
//! at once, the call's error naming the bound, and nothing runs. A question
//! nobody answers by its deadline ([`QUESTION_TTL`] after the ask) is
//! refused and logged as `cancelled` by `mcp-input-required-expired`, never
//! as the user's answer; a retry without the answer is asked again under a
//! new `requestState` that expires at the same deadline (the timer does not
//! restart). Declining (`decline` is `reject_once`, `cancel` is `cancelled`)
//! never runs the command. [`Questions::withdraw_all`] refuses every parked
//! question at once (`cancelled` by `mcp-input-required-withdrawn`): stdio's
//! `serve` calls it at end of input, when nobody can answer any more.
//!
//! Pending questions live in this `serve` process: a retry reaches them over
//! any connection to it (another stdio client cannot, as it has its own
//! process), not through another process on the same state dir.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, RequestStateCodec, SealOptions,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use toolhost_runtime::{Answer, ApprovalOutcome, ApprovalRequest, ToolCallError, ToolResult};

/// The `inputRequests` key of the permission question.
pub const INPUT_KEY: &str = "permission";

/// How long a question waits for its answer, and how long its
/// `requestState` is valid (5 min, as an elicitation waits).
pub const QUESTION_TTL: Duration = super::ELICITATION_TIMEOUT;

/// Most questions pending at once (256); an ask past it is refused.
pub const MAX_PENDING_QUESTIONS: usize = 256;

/// The longest `requestState` that is decoded (4 KiB; toolhost's own are
/// about 100 bytes); a longer one is `-32602` at once.
pub const MAX_REQUEST_STATE_BYTES: usize = 4096;

/// The `by` of a question that expired unanswered.
pub const BY_EXPIRED: &str = "mcp-input-required-expired";
/// The `by` of a question withdrawn unanswered (the client's connection ended).
pub const BY_WITHDRAWN: &str = "mcp-input-required-withdrawn";
/// The `by` of an ask refused past a bound of [`QuestionLimits`].
pub const BY_LIMIT: &str = "mcp-input-required-limit";

/// How many questions may be parked at once per plugin: a quarter of what
/// the plugin may have in flight, at least one (`EngineOptions::shares`,
/// docs/limits.md), since each parked call holds one of those slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuestionLimits {
    /// Of the built-in `bash` (of its 48 calls in flight by default: 12).
    pub builtin: usize,
    /// Of one third-party plugin (of its 16 by default: 4).
    pub per_plugin: usize,
    /// Of all third-party plugins together (of their 64 by default: 16).
    pub third_party: usize,
}

impl QuestionLimits {
    /// The bounds for a host with `engine`'s pool.
    pub fn of(engine: &toolhost_runtime::EngineOptions) -> QuestionLimits {
        let quarter = |n: u32| (n as usize / 4).max(1);
        let shares = engine.shares();
        QuestionLimits {
            builtin: quarter(shares.builtin),
            per_plugin: quarter(engine.max_calls_per_plugin),
            third_party: quarter(shares.third_party),
        }
    }
}

/// How a question was settled, for the approver waiting on it.
enum Settled {
    /// The client's answer.
    Answered(ApprovalOutcome),
    /// Refused past a bound (the denial text).
    Refused(String),
    /// Its deadline passed.
    Expired,
    /// Nobody can answer any more.
    Withdrawn,
}

/// The key file in the state dir: `mcp-request-state.key`.
pub const KEY_FILE: &str = "mcp-request-state.key";

/// One `ask` of a call, on its way to the `tools/call` handler.
pub(crate) struct Ask {
    /// The form's message.
    message: String,
    /// The plugin that asks (its id).
    plugin: String,
    /// When the question expires.
    deadline: Instant,
    /// Where the answer goes (`None`: cannot ask, try the next approver).
    answer: oneshot::Sender<Option<Settled>>,
}

impl Ask {
    /// Answers "cannot ask": the next approver is tried.
    pub(crate) fn refuse(self) {
        let _ = self.answer.send(None);
    }
}

/// A modern call in progress, as the `tools/call` handler waits on it.
pub(crate) struct Running {
    /// The call's settled result.
    pub result: oneshot::Receiver<Result<ToolResult, ToolCallError>>,
    /// Its asks.
    pub asks: mpsc::UnboundedReceiver<Ask>,
    /// The tool it calls.
    pub tool: String,
    /// The call's id, for logs.
    pub tool_call_id: String,
    /// Kills the call's foreground processes ([`toolhost_runtime::CallRequest::cancel`]).
    pub cancel: Arc<tokio::sync::Notify>,
}

/// A question waiting for the client's retry.
struct Pending {
    running: Running,
    message: String,
    plugin: String,
    answer: oneshot::Sender<Option<Settled>>,
    expires: Instant,
}

/// The modern calls that can ask, and the questions waiting for a retry;
/// also the approver that turns an `ask` into a question.
pub(crate) struct Questions {
    codec: RequestStateCodec,
    limits: QuestionLimits,
    routes: Mutex<HashMap<String, mpsc::UnboundedSender<Ask>>>,
    pending: Mutex<HashMap<String, Pending>>,
}

/// Removes a call's route when dropped (the call settled).
pub(crate) struct QuestionRoute {
    questions: Arc<Questions>,
    tool_call_id: String,
}

impl Drop for QuestionRoute {
    fn drop(&mut self) {
        lock(&self.questions.routes).remove(&self.tool_call_id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `n` random bytes from the kernel.
fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = vec![0; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// The key in `state_dir/KEY_FILE`, made (32 random bytes, mode 0600, as
/// every file of the state dir: `toolhost_process::private_open_options`)
/// when the file does not exist yet; never read or written through a
/// symbolic link.
fn load_key(state_dir: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Write};
    let path = state_dir.join(KEY_FILE);
    match toolhost_process::private_open_options()
        .read(true)
        .open(&path)
    {
        Ok(mut file) => {
            let mut key = Vec::new();
            file.read_to_end(&mut key)?;
            if key.len() < RequestStateCodec::MIN_KEY_LENGTH {
                return Err(std::io::Error::other(format!(
                    "{} is shorter than {} bytes",
                    path.display(),
                    RequestStateCodec::MIN_KEY_LENGTH
                )));
            }
            return Ok(key);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let key = random_bytes(32)?;
    let mut file = toolhost_process::private_open_options()
        .write(true)
        .create_new(true)
        .open(&path)?;
    toolhost_process::make_private(&file)?;
    file.write_all(&key)?;
    Ok(key)
}

impl Questions {
    /// Questions whose states are sealed with the key of `state_dir`
    /// ([`KEY_FILE`]); when it cannot be read or made, with a key of this
    /// process only (logged); parked at most as [`QuestionLimits::of`] the
    /// host's engine allows.
    pub(crate) fn new(config: &toolhost_runtime::HostConfig) -> Arc<Questions> {
        let state_dir: &Path = &config.sessions.state_dir;
        let limits = QuestionLimits::of(&config.engine);
        let key = load_key(state_dir).unwrap_or_else(|e| {
            tracing::warn!("MCP requestState key: {e}; using a key of this process only");
            random_bytes(32).unwrap_or_else(|_| {
                use sha2::Digest;
                let seed = format!("{:?} {}", std::time::SystemTime::now(), std::process::id());
                sha2::Sha256::digest(seed.as_bytes()).to_vec()
            })
        });
        Arc::new(Questions {
            codec: RequestStateCodec::new_unchecked(key),
            limits,
            routes: Mutex::default(),
            pending: Mutex::default(),
        })
    }

    /// Sends the asks of call `tool_call_id` to the returned receiver until
    /// the guard is dropped.
    pub(crate) fn route(
        self: &Arc<Self>,
        tool_call_id: &str,
    ) -> (QuestionRoute, mpsc::UnboundedReceiver<Ask>) {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.routes).insert(tool_call_id.to_string(), tx);
        (
            QuestionRoute {
                questions: self.clone(),
                tool_call_id: tool_call_id.to_string(),
            },
            rx,
        )
    }

    /// Parks `running` with its question `ask` and returns the
    /// `input_required` result that asks it; if too many are pending, the
    /// ask is refused and `running` handed back to be waited on.
    pub(crate) fn suspend(
        &self,
        running: Running,
        ask: Ask,
    ) -> Result<InputRequiredResult, Running> {
        self.park(Pending {
            running,
            message: ask.message,
            plugin: ask.plugin,
            answer: ask.answer,
            expires: ask.deadline,
        })
    }

    /// The bound an ask of `plugin` would pass with `pending` parked, as
    /// the denial text; `None` when it may park.
    fn over_limit(&self, pending: &HashMap<String, Pending>, plugin: &str) -> Option<String> {
        let builtin = plugin == toolhost_runtime::BASH_ID;
        let of_plugin = pending.values().filter(|p| p.plugin == plugin).count();
        let third_party = pending
            .values()
            .filter(|p| p.plugin != toolhost_runtime::BASH_ID)
            .count();
        let (count, limit, what) = if pending.len() >= MAX_PENDING_QUESTIONS {
            (pending.len(), MAX_PENDING_QUESTIONS, "in all".to_string())
        } else if builtin && of_plugin >= self.limits.builtin {
            (
                of_plugin,
                self.limits.builtin,
                format!("of plugin `{plugin}`"),
            )
        } else if !builtin && of_plugin >= self.limits.per_plugin {
            (
                of_plugin,
                self.limits.per_plugin,
                format!("of plugin `{plugin}`"),
            )
        } else if !builtin && third_party >= self.limits.third_party {
            (
                third_party,
                self.limits.third_party,
                "of third-party plugins".to_string(),
            )
        } else {
            return None;
        };
        Some(format!(
            "refused without asking: {count} permission questions {what} are already waiting \
             for answers, the most that may wait at once ({limit}: each holds one of the \
             plugin's calls in flight). Answer or let expire one of them, or allow the command \
             in the --policy file"
        ))
    }

    /// Parks `p`, or settles it (refused past a bound, or expired) and hands
    /// its call back to be waited on.
    fn park(&self, p: Pending) -> Result<InputRequiredResult, Running> {
        let now = Instant::now();
        let mut pending = lock(&self.pending);
        pending.retain(|_, p| p.expires > now && !p.answer.is_closed());
        if p.expires <= now {
            let _ = p.answer.send(Some(Settled::Expired));
            return Err(p.running);
        }
        if let Some(reason) = self.over_limit(&pending, &p.plugin) {
            tracing::warn!(plugin = %p.plugin, tool_call_id = %p.running.tool_call_id, "{reason}");
            let _ = p.answer.send(Some(Settled::Refused(reason)));
            return Err(p.running);
        }
        let Ok(handle) = random_bytes(16).map(hex) else {
            let _ = p.answer.send(None);
            return Err(p.running);
        };
        // Valid until the question's own deadline, however often it is asked.
        let state = self.codec.seal_with(
            handle.as_bytes(),
            &SealOptions::new()
                .associated_data(p.running.tool.as_bytes())
                .ttl(p.expires - now),
        );
        let result = InputRequiredResult::new(Some(input_requests(&p.message)), Some(state));
        pending.insert(handle, p);
        Ok(result)
    }

    /// Refuses every parked question (nobody can answer them any more: the
    /// only connection ended); their calls run nothing. Returns how many.
    pub(crate) fn withdraw_all(&self) -> usize {
        let parked: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for p in &parked {
            tracing::info!(tool_call_id = %p.running.tool_call_id, "permission question withdrawn: the client's connection ended");
        }
        let n = parked.len();
        for p in parked {
            let _ = p.answer.send(Some(Settled::Withdrawn));
        }
        n
    }

    /// The retry of a `tools/call` of `tool` with `state` and `responses`:
    /// the answer goes to the pending question and its call is returned to
    /// be waited on (`Ok(Ok(_))`); without an answer the question is asked
    /// again (`Ok(Err(_))`, a new `input_required` result).
    ///
    /// Errors: `-32602` for a state longer than [`MAX_REQUEST_STATE_BYTES`]
    /// (not decoded), one that fails verification, has expired, was made
    /// for another tool, or names no pending question (answered already,
    /// refused, or from another process); each logged at `warn` with the
    /// reason and the tool name only.
    pub(crate) fn resume(
        &self,
        tool: &str,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Result<Result<Running, InputRequiredResult>, McpError> {
        // One answer for every way a state fails to open (rmcp's codec asks
        // for that); the detail goes to the log.
        let invalid = || {
            McpError::invalid_params(
                "invalid requestState: tampered, expired, for another tool, or made by \
                 another server",
                None,
            )
        };
        let tool_name = toolhost_runtime::echo_name(tool);
        if state.len() > MAX_REQUEST_STATE_BYTES {
            tracing::warn!(tool = %tool_name, bytes = state.len(), "refused a requestState: longer than {MAX_REQUEST_STATE_BYTES} bytes");
            return Err(McpError::invalid_params(
                format!(
                    "invalid requestState: {} bytes, longer than the {MAX_REQUEST_STATE_BYTES} \
                     this server's states may have",
                    state.len()
                ),
                None,
            ));
        }
        let handle = self.codec.open_with(state, tool.as_bytes()).map_err(|e| {
            tracing::warn!(tool = %tool_name, "refused a requestState: {e}");
            invalid()
        })?;
        let handle = String::from_utf8_lossy(&handle).into_owned();
        let Some(pending) = lock(&self.pending).remove(&handle) else {
            tracing::warn!(tool = %tool_name, "refused a requestState: no pending question (answered already?)");
            return Err(invalid());
        };
        match responses.and_then(|r| r.get(INPUT_KEY)).and_then(outcome) {
            Some(answer) => {
                let _ = pending.answer.send(Some(Settled::Answered(answer)));
                Ok(Ok(pending.running))
            }
            None => match self.park(pending) {
                Ok(again) => Ok(Err(again)),
                Err(running) => Ok(Ok(running)),
            },
        }
    }
}

fn hex(bytes: Vec<u8>) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `inputRequests` of one permission question: a form elicitation.
fn input_requests(message: &str) -> InputRequests {
    let mut requests = InputRequests::new();
    let Some(requested_schema) = super::ElicitationApprover::schema() else {
        return requests;
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_string(),
        requested_schema,
    };
    let request = json!({"method": "elicitation/create", "params": params});
    if let Ok(r) = serde_json::from_value::<InputRequest>(request) {
        requests.insert(INPUT_KEY.to_string(), r);
    }
    requests
}

/// An elicitation's result as a permission answer: `accept` with a known
/// `decision`, `decline` (`reject_once`) or `cancel` (`cancelled`); anything
/// else (no decision, an action this host does not know) is no answer. One
/// mapping for both eras: `ElicitationApprover` (2025-11-25
/// `elicitation/create`) and a retry's `inputResponses` here.
pub(crate) fn outcome_of(result: &ElicitResult) -> Option<ApprovalOutcome> {
    match result.action {
        ElicitationAction::Accept => result
            .content
            .as_ref()
            .and_then(|c| c.get("decision"))
            .and_then(Value::as_str)
            .and_then(ApprovalOutcome::parse),
        ElicitationAction::Decline => Some(ApprovalOutcome::RejectOnce),
        ElicitationAction::Cancel => Some(ApprovalOutcome::Cancelled),
        // A newer action this host does not know: not an answer.
        _ => None,
    }
}

/// One `inputResponses` entry as an answer ([`outcome_of`]); a value that is
/// not an `ElicitResult` is no answer.
fn outcome(response: &Value) -> Option<ApprovalOutcome> {
    outcome_of(&ElicitResult::deserialize(response).ok()?)
}

impl toolhost_runtime::Approver for Questions {
    fn name(&self) -> &str {
        "mcp-input-required"
    }

    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<ApprovalOutcome>> + Send + 'a>>
    {
        Box::pin(async move { self.answer(request).await.map(|a| a.outcome) })
    }

    /// The client's answer by `mcp-input-required`; a question settled
    /// here instead is labelled apart ([`BY_EXPIRED`], [`BY_WITHDRAWN`],
    /// [`BY_LIMIT`]) with a denial text saying why.
    fn answer<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Answer>> + Send + 'a>> {
        Box::pin(async move {
            let route = lock(&self.routes).get(&request.tool_call_id).cloned()?;
            let (answer, answered) = oneshot::channel();
            let deadline = Instant::now() + QUESTION_TTL;
            let ask = Ask {
                message: super::ElicitationApprover::message(request),
                plugin: request.plugin.clone(),
                deadline,
                answer,
            };
            route.send(ask).ok()?;
            let settled = |outcome, by: &str, reason: Option<String>| {
                Some(Answer {
                    outcome,
                    by: by.to_string(),
                    reason,
                })
            };
            let withdrawn = || {
                settled(
                    ApprovalOutcome::Cancelled,
                    BY_WITHDRAWN,
                    Some(
                        "the permission question was withdrawn unanswered: the MCP client's \
                         connection ended"
                            .to_string(),
                    ),
                )
            };
            let expired = || {
                settled(
                    ApprovalOutcome::Cancelled,
                    BY_EXPIRED,
                    Some(format!(
                        "the permission question expired unanswered ({} s after it was asked)",
                        QUESTION_TTL.as_secs()
                    )),
                )
            };
            match tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), answered).await
            {
                Ok(Ok(Some(Settled::Answered(outcome)))) => settled(outcome, self.name(), None),
                Ok(Ok(Some(Settled::Refused(reason)))) => {
                    settled(ApprovalOutcome::RejectOnce, BY_LIMIT, Some(reason))
                }
                Ok(Ok(Some(Settled::Expired))) | Err(_) => expired(),
                Ok(Ok(Some(Settled::Withdrawn))) => withdrawn(),
                Ok(Ok(None)) => None,
                // The question was dropped unanswered: no run.
                Ok(Err(_)) => withdrawn(),
            }
        })
    }
}
