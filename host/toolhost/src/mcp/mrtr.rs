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
//! once), is `-32602` and runs nothing. At most [`MAX_PENDING_QUESTIONS`]
//! wait at once (past that an ask is refused); a question nobody answers
//! within [`QUESTION_TTL`] is refused too. Declining (`decline` is
//! `reject_once`, `cancel` is `cancelled`) never runs the command; a retry
//! without the answer is asked again, with a new `requestState`.
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
    ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult, InputResponses,
    RequestStateCodec, SealOptions,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use toolhost_runtime::{ApprovalOutcome, ApprovalRequest, ToolCallError, ToolResult};

/// The `inputRequests` key of the permission question.
pub const INPUT_KEY: &str = "permission";

/// How long a question waits for its answer, and how long its
/// `requestState` is valid (5 min, as an elicitation waits).
pub const QUESTION_TTL: Duration = super::ELICITATION_TIMEOUT;

/// Most questions pending at once (256); an ask past it is refused.
pub const MAX_PENDING_QUESTIONS: usize = 256;

/// The key file in the state dir: `mcp-request-state.key`.
pub const KEY_FILE: &str = "mcp-request-state.key";

/// One `ask` of a call, on its way to the `tools/call` handler.
pub(crate) struct Ask {
    /// The form's message.
    message: String,
    /// Where the answer goes (`None`: refused).
    answer: oneshot::Sender<Option<ApprovalOutcome>>,
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
    answer: oneshot::Sender<Option<ApprovalOutcome>>,
    expires: Instant,
}

/// The modern calls that can ask, and the questions waiting for a retry;
/// also the approver that turns an `ask` into a question.
pub(crate) struct Questions {
    codec: RequestStateCodec,
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
    /// process only (logged).
    pub(crate) fn new(state_dir: &Path) -> Arc<Questions> {
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
        self.park(running, ask.message, ask.answer)
    }

    fn park(
        &self,
        running: Running,
        message: String,
        answer: oneshot::Sender<Option<ApprovalOutcome>>,
    ) -> Result<InputRequiredResult, Running> {
        let now = Instant::now();
        let mut pending = lock(&self.pending);
        pending.retain(|_, p| p.expires > now && !p.answer.is_closed());
        if pending.len() >= MAX_PENDING_QUESTIONS {
            tracing::warn!("{MAX_PENDING_QUESTIONS} permission questions pending; refusing one");
            let _ = answer.send(None);
            return Err(running);
        }
        let Ok(handle) = random_bytes(16).map(hex) else {
            let _ = answer.send(None);
            return Err(running);
        };
        let state = self.codec.seal_with(
            handle.as_bytes(),
            &SealOptions::new()
                .associated_data(running.tool.as_bytes())
                .ttl(QUESTION_TTL),
        );
        let result = InputRequiredResult::new(Some(input_requests(&message)), Some(state));
        pending.insert(
            handle,
            Pending {
                running,
                message,
                answer,
                expires: now + QUESTION_TTL,
            },
        );
        Ok(result)
    }

    /// The retry of a `tools/call` of `tool` with `state` and `responses`:
    /// the answer goes to the pending question and its call is returned to
    /// be waited on (`Ok(Ok(_))`); without an answer the question is asked
    /// again (`Ok(Err(_))`, a new `input_required` result).
    ///
    /// Errors: `-32602` for a state that fails verification, has expired,
    /// was made for another tool, or names no pending question (answered
    /// already, refused, or from another process).
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
        let handle = self.codec.open_with(state, tool.as_bytes()).map_err(|e| {
            tracing::info!("refused a requestState: {e}");
            invalid()
        })?;
        let handle = String::from_utf8_lossy(&handle).into_owned();
        let Some(pending) = lock(&self.pending).remove(&handle) else {
            tracing::info!("refused a requestState: no pending question (answered already?)");
            return Err(invalid());
        };
        match responses.and_then(|r| r.get(INPUT_KEY)).and_then(outcome) {
            Some(answer) => {
                let _ = pending.answer.send(Some(answer));
                Ok(Ok(pending.running))
            }
            None => match self.park(pending.running, pending.message, pending.answer) {
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

/// An `ElicitResult` as an answer: `accept` with a known `decision`,
/// `decline` (`reject_once`) or `cancel` (`cancelled`); anything else is
/// no answer.
fn outcome(response: &Value) -> Option<ApprovalOutcome> {
    match response.get("action")?.as_str()? {
        "accept" => response
            .get("content")?
            .get("decision")?
            .as_str()
            .and_then(ApprovalOutcome::parse),
        "decline" => Some(ApprovalOutcome::RejectOnce),
        "cancel" => Some(ApprovalOutcome::Cancelled),
        _ => None,
    }
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
        Box::pin(async move {
            let route = lock(&self.routes).get(&request.tool_call_id).cloned()?;
            let (answer, answered) = oneshot::channel();
            let ask = Ask {
                message: super::ElicitationApprover::message(request),
                answer,
            };
            route.send(ask).ok()?;
            match tokio::time::timeout(QUESTION_TTL, answered).await {
                Ok(Ok(answer)) => answer,
                // Unanswered in time, or the question was dropped: no run.
                _ => Some(ApprovalOutcome::RejectOnce),
            }
        })
    }
}
