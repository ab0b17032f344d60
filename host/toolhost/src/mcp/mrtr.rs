//! Questions asked during a 2026-07-28 `tools/call` (or a plugin prompt's
//! `prompts/get`, [`PROMPTS_GET`]), as Multi Round-Trip Requests (MCP 2026-07-28, "Multi Round-Trip Requests"; the revision has
//! no server-to-client requests): the host's permission question (a policy
//! `ask`) and a contract 0.2.0 plugin's `client.elicit` and `client.sample`
//! are not sent as `elicitation/create` / `sampling/createMessage` but
//! answered with an `input_required` result whose `inputRequests` hold one
//! entry per question ([`Kind`]: `permission` for the permission form,
//! `elicitation-N` / `sampling-N` for the plugin's N-th question of the
//! call), and a `requestState`. The call itself stays suspended in the
//! host (its start waiting for the answer, or the plugin waiting inside
//! `elicit` / `sample`); the client's retry of the same `tools/call` with
//! `inputResponses` and that `requestState` resumes it, so the command runs
//! (or is refused) once and the plugin gets its answer once, never from
//! scratch. A question may be asked only when the request's `_meta` client
//! capabilities declare its kind ([`Kind::declared`]); otherwise the
//! permission question goes to the next approver and a plugin's request
//! fails `client-error::unsupported`, and a plugin call that then fails is
//! `-32021` naming the capability ([`Running::missing_capability`]).
//!
//! `requestState` is rmcp's [`RequestStateCodec`] (HMAC-SHA256) over a
//! random handle of the pending questions, bound to the method and the
//! tool (or prompt) name and expiring after [`QUESTION_TTL`]; the key, 32 random bytes, is kept in the
//! state dir ([`KEY_FILE`], mode 0600) and made on first use. A tampered,
//! expired or foreign state, or one already used (the handle is taken out
//! once), is `-32602` and runs nothing; so is one longer than
//! [`MAX_REQUEST_STATE_BYTES`], before it is decoded. Refusals are logged at
//! `warn` with the reason and the tool, never the state.
//!
//! A parked call keeps its plugin instance (the call is suspended inside the
//! plugin), so parked calls are bounded per plugin well below the
//! plugin's calls in flight ([`QuestionLimits`]: a quarter, at least 1), and
//! at most [`MAX_PENDING_QUESTIONS`] in all: an ask past a bound is refused
//! at once, the call's error naming the bound, and nothing runs. A question
//! nobody answers by its deadline ([`QUESTION_TTL`] after the ask) is
//! refused (a permission question is logged as `cancelled` by
//! `mcp-input-required-expired`, never as the user's answer); a retry
//! without an answer, or with one that is not a result of the question's
//! kind, is asked again under a new `requestState` that expires at the same
//! deadline (the timer does not restart), the questions it did answer
//! settled. Declining (`decline` is `reject_once`, `cancel` is `cancelled`)
//! never runs the command. [`Questions::withdraw_all`] refuses every parked
//! question at once (`cancelled` by `mcp-input-required-withdrawn`): stdio's
//! `serve` calls it at end of input, when nobody can answer any more.
//!
//! Pending questions live in this `serve` process: a retry reaches them over
//! any connection to it (another stdio client cannot, as it has its own
//! process), not through another process on the same state dir.

#![allow(deprecated)] // rmcp marks sampling deprecated (SEP-2577); MCP 2026-07-28 has it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResponse, GetPromptRequestParams, GetPromptResponse};
use rmcp::model::{
    ClientCapabilities, CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, RequestStateCodec,
    SealOptions,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use toolhost_runtime::{
    Answer, ApprovalOutcome, ApprovalRequest, ClientError, ToolCallError, ToolResult,
};

/// The `inputRequests` key of the permission question (`permission-N` for
/// a second one in the same round).
pub const INPUT_KEY: &str = "permission";

/// What a question asks the client for: the request kinds an
/// `inputRequests` entry may be (MCP 2026-07-28, "Multi Round-Trip
/// Requests", "Server Requirements"). Contract 0.2.0 gives plugins no way
/// to ask for roots, so `roots/list` is never asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The host's permission form (`elicitation/create`), key [`INPUT_KEY`].
    Permission,
    /// A plugin's `client.elicit` (`elicitation/create`, form mode), key
    /// `elicitation-N`.
    Elicitation,
    /// A plugin's `client.sample` (`sampling/createMessage`), key
    /// `sampling-N`.
    Sampling,
}

impl Kind {
    /// The client capability this kind needs (`elicitation`, `sampling`).
    pub(crate) fn capability(self) -> &'static str {
        match self {
            Kind::Permission | Kind::Elicitation => "elicitation",
            Kind::Sampling => "sampling",
        }
    }

    /// Whether `caps` (a request's `_meta` client capabilities) declare
    /// [`Kind::capability`]: the revision forbids asking for what the client
    /// did not declare.
    pub(crate) fn declared(self, caps: Option<&ClientCapabilities>) -> bool {
        caps.is_some_and(|c| match self {
            Kind::Permission | Kind::Elicitation => c.elicitation.is_some(),
            Kind::Sampling => c.sampling.is_some(),
        })
    }

    /// The key of the call's `n`-th question (1-based) in a round that
    /// already has `taken` keys.
    fn key(self, n: usize, taken: &[Question]) -> String {
        match self {
            Kind::Permission if !taken.iter().any(|q| q.key == INPUT_KEY) => INPUT_KEY.to_string(),
            Kind::Permission => format!("{INPUT_KEY}-{n}"),
            Kind::Elicitation => format!("elicitation-{n}"),
            Kind::Sampling => format!("sampling-{n}"),
        }
    }

    /// Whether `response` answers a question of this kind: a permission
    /// answer ([`outcome`]), an `ElicitResult`, a `CreateMessageResult`.
    fn answered_by(self, response: &Value) -> bool {
        match self {
            Kind::Permission => outcome(response).is_some(),
            Kind::Elicitation => ElicitResult::deserialize(response).is_ok(),
            Kind::Sampling => CreateMessageResult::deserialize(response).is_ok(),
        }
    }
}

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

/// How a question was settled, for the one waiting on it.
enum Settled {
    /// The client's answer: a result of the question's kind
    /// ([`Kind::answered_by`]).
    Answered(Value),
    /// Refused past a bound (the denial text).
    Refused(String),
    /// Its deadline passed.
    Expired,
    /// Nobody can answer any more.
    Withdrawn,
}

/// The key file in the state dir: `mcp-request-state.key`.
pub const KEY_FILE: &str = "mcp-request-state.key";

/// One question of a call, on its way to the `tools/call` handler.
pub(crate) struct Ask {
    kind: Kind,
    /// The `inputRequests` entry.
    request: InputRequest,
    /// The plugin that asks (its id).
    plugin: String,
    /// When the question expires.
    deadline: Instant,
    /// Where the answer goes (`None`: cannot ask; the permission question
    /// tries the next approver, a plugin's request fails `unsupported`).
    answer: oneshot::Sender<Option<Settled>>,
}

impl Ask {
    /// Answers "cannot ask".
    pub(crate) fn refuse(self) {
        let _ = self.answer.send(None);
    }
}

/// Where the questions of one modern call go ([`Questions::route`]), as the
/// MCP client of a plugin call asks them ([`Asker::ask`]).
#[derive(Clone)]
pub(crate) struct Asker {
    route: mpsc::UnboundedSender<Ask>,
    plugin: String,
}

impl Asker {
    /// Asks `request` (of `kind`) of the client behind the call and waits for
    /// the answer, at most [`QUESTION_TTL`]: the client's result, as JSON of
    /// the kind's result type.
    ///
    /// Errors: `unsupported` when the request's `_meta` does not declare the
    /// kind's capability; `failed` when the question was refused past a
    /// bound of [`QuestionLimits`] (the text names it), expired, or was
    /// withdrawn.
    pub(crate) async fn ask(
        &self,
        kind: Kind,
        request: InputRequest,
    ) -> Result<Value, ClientError> {
        let capability = kind.capability();
        match ask_on(&self.route, kind, request, &self.plugin).await {
            Some(Settled::Answered(v)) => Ok(v),
            None => Err(ClientError::Unsupported(format!(
                "the MCP client did not declare the `{capability}` capability in this \
                 request's `_meta` (io.modelcontextprotocol/clientCapabilities)"
            ))),
            Some(Settled::Refused(reason)) => Err(ClientError::Failed(reason)),
            Some(Settled::Expired) => Err(ClientError::Failed(format!(
                "the {capability} request expired unanswered ({} s after it was asked)",
                QUESTION_TTL.as_secs()
            ))),
            Some(Settled::Withdrawn) => Err(ClientError::Failed(format!(
                "the {capability} request was withdrawn unanswered: the MCP client's \
                 connection ended"
            ))),
        }
    }
}

/// Sends one question down `route` and waits for it to be settled, at most
/// [`QUESTION_TTL`] (then [`Settled::Expired`]). `None`: it could not be
/// asked (no capability, or the call's handler is gone).
async fn ask_on(
    route: &mpsc::UnboundedSender<Ask>,
    kind: Kind,
    request: InputRequest,
    plugin: &str,
) -> Option<Settled> {
    let (answer, answered) = oneshot::channel();
    let deadline = Instant::now() + QUESTION_TTL;
    let ask = Ask {
        kind,
        request,
        plugin: plugin.to_string(),
        deadline,
        answer,
    };
    route.send(ask).ok()?;
    match tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), answered).await {
        Ok(Ok(settled)) => settled,
        Err(_) => Some(Settled::Expired),
        // The question was dropped unanswered.
        Ok(Err(_)) => Some(Settled::Withdrawn),
    }
}

/// The method of a modern `tools/call`, as [`Running::method`].
pub(crate) const TOOLS_CALL: &str = "tools/call";
/// The method of a modern `prompts/get`, as [`Running::method`].
pub(crate) const PROMPTS_GET: &str = "prompts/get";

/// What a suspended request settles with.
pub(crate) enum Outcome {
    /// A `tools/call`'s host call.
    Tool(Result<ToolResult, ToolCallError>),
    /// A `prompts/get`'s plugin prompt.
    Prompt(Result<toolhost_runtime::PromptResult, toolhost_runtime::RequestError>),
}

/// A modern request in progress (a `tools/call`, or a `prompts/get`), as
/// its handler waits on it.
pub(crate) struct Running {
    /// The request's settled result.
    result: oneshot::Receiver<Outcome>,
    /// Its asks.
    asks: mpsc::UnboundedReceiver<Ask>,
    /// Its method ([`TOOLS_CALL`], [`PROMPTS_GET`]): a `requestState` is
    /// bound to it and [`Running::tool`].
    method: &'static str,
    /// The tool (or prompt) it calls.
    tool: String,
    /// The call's id, for logs.
    tool_call_id: String,
    /// Kills the call's foreground processes ([`toolhost_runtime::CallRequest::cancel`]).
    cancel: Arc<tokio::sync::Notify>,
    /// How many questions the call has asked so far (for their keys).
    asked: usize,
    /// The capabilities a plugin question needed that a request did not
    /// declare.
    missing: Vec<Kind>,
    /// The identity that made the call (`None`: any): only it (or an
    /// `admin`) may answer its questions.
    owner: Option<Arc<super::identity::Identity>>,
}

impl Running {
    /// Request `method` of `name`, with id `tool_call_id` (for logs),
    /// settling on `result`, asking on `asks` ([`Questions::route`]).
    pub(crate) fn new(
        result: oneshot::Receiver<Outcome>,
        asks: mpsc::UnboundedReceiver<Ask>,
        method: &'static str,
        name: &str,
        tool_call_id: String,
    ) -> Running {
        Running {
            result,
            asks,
            method,
            tool: name.to_string(),
            tool_call_id,
            cancel: Arc::default(),
            asked: 0,
            missing: Vec::new(),
            owner: None,
        }
    }

    /// This request, made by `owner`: another identity's retry cannot
    /// answer its questions.
    pub(crate) fn with_owner(mut self, owner: super::identity::Identity) -> Running {
        self.owner = Some(Arc::new(owner));
        self
    }

    /// This request, whose cancellation notifies `cancel`.
    pub(crate) fn with_cancel(mut self, cancel: Arc<tokio::sync::Notify>) -> Running {
        self.cancel = cancel;
        self
    }

    /// The `-32021` (MCP 2026-07-28 schema,
    /// `MissingRequiredClientCapabilityError`: a server must not rely on a
    /// capability the client did not declare) of a call that failed
    /// (`isError`, or an error) after a plugin question was not asked
    /// for want of a capability; its `data.requiredCapabilities` names
    /// those capabilities. `None` for a call that did not fail, or asked for
    /// nothing undeclared: a plugin that goes on without the answer
    /// succeeds as usual.
    pub(crate) fn missing_capability(&self, outcome: &Outcome) -> Option<McpError> {
        let failed = match outcome {
            Outcome::Tool(r) => r.as_ref().map_or(true, |r| r.is_error),
            Outcome::Prompt(r) => r.is_err(),
        };
        if !failed || self.missing.is_empty() {
            return None;
        }
        let required: serde_json::Map<String, Value> = self
            .missing
            .iter()
            .map(|k| (k.capability().to_string(), json!({})))
            .collect();
        let required: ClientCapabilities = serde_json::from_value(Value::Object(required)).ok()?;
        Some(McpError::missing_required_client_capability(required))
    }
}

/// One question of a parked call.
struct Question {
    key: String,
    kind: Kind,
    request: InputRequest,
    answer: oneshot::Sender<Option<Settled>>,
}

/// A call's questions waiting for the client's retry.
struct Pending {
    running: Running,
    questions: Vec<Question>,
    plugin: String,
    expires: Instant,
}

impl Pending {
    /// Settles every question of the call with `settled`.
    fn settle_all(&mut self, settled: impl Fn() -> Settled) {
        for q in self.questions.drain(..) {
            let _ = q.answer.send(Some(settled()));
        }
    }
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
    sender: mpsc::UnboundedSender<Ask>,
}

impl QuestionRoute {
    /// The route as plugin `plugin`'s MCP client asks through it.
    pub(crate) fn asker(&self, plugin: &str) -> Asker {
        Asker {
            route: self.sender.clone(),
            plugin: plugin.to_string(),
        }
    }
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
    /// the guard is dropped: the asks of its plugin's [`QuestionRoute::asker`],
    /// and its permission questions when `permission` (else this approver
    /// has no route for them and the next one is asked: an identity without
    /// the `answer` scope is asked nothing, docs/operations.md#identities).
    pub(crate) fn route(
        self: &Arc<Self>,
        tool_call_id: &str,
        permission: bool,
    ) -> (QuestionRoute, mpsc::UnboundedReceiver<Ask>) {
        let (tx, rx) = mpsc::unbounded_channel();
        if permission {
            lock(&self.routes).insert(tool_call_id.to_string(), tx.clone());
        }
        (
            QuestionRoute {
                questions: self.clone(),
                tool_call_id: tool_call_id.to_string(),
                sender: tx,
            },
            rx,
        )
    }

    /// Parks `running` with its question `first` and every other question
    /// it has already asked, and returns the `input_required` result that
    /// asks them. A question whose kind `caps` (the request's `_meta` client
    /// capabilities) do not declare is refused ([`Ask::refuse`]; a plugin's
    /// noted in [`Running::missing`]); when none is left, or too many calls
    /// are parked, or the questions expired, `running` is handed back to be
    /// waited on.
    pub(crate) fn suspend(
        &self,
        mut running: Running,
        first: Ask,
        caps: Option<&ClientCapabilities>,
    ) -> Result<InputRequiredResult, Box<Running>> {
        let mut asks = vec![first];
        while let Ok(more) = running.asks.try_recv() {
            asks.push(more);
        }
        let mut questions: Vec<Question> = Vec::new();
        let (mut plugin, mut expires) = (String::new(), None::<Instant>);
        for ask in asks {
            if !ask.kind.declared(caps) {
                if ask.kind != Kind::Permission && !running.missing.contains(&ask.kind) {
                    running.missing.push(ask.kind);
                }
                ask.refuse();
                continue;
            }
            running.asked += 1;
            let key = ask.kind.key(running.asked, &questions);
            plugin = ask.plugin;
            expires = Some(expires.map_or(ask.deadline, |e| e.min(ask.deadline)));
            questions.push(Question {
                key,
                kind: ask.kind,
                request: ask.request,
                answer: ask.answer,
            });
        }
        let Some(expires) = expires else {
            return Err(Box::new(running));
        };
        self.park(Pending {
            running,
            questions,
            plugin,
            expires,
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
            "refused without asking: {count} calls {what} are already waiting for answers to \
             their questions, the most that may wait at once ({limit}: each holds one of the \
             plugin's calls in flight). Answer or let expire one of them, or allow the command \
             in the --policy file"
        ))
    }

    /// Parks `p`, or settles it (refused past a bound, or expired) and hands
    /// its call back to be waited on.
    fn park(&self, mut p: Pending) -> Result<InputRequiredResult, Box<Running>> {
        let now = Instant::now();
        let mut pending = lock(&self.pending);
        pending.retain(|_, p| p.expires > now && p.questions.iter().any(|q| !q.answer.is_closed()));
        if p.expires <= now {
            p.settle_all(|| Settled::Expired);
            return Err(Box::new(p.running));
        }
        if let Some(reason) = self.over_limit(&pending, &p.plugin) {
            tracing::warn!(plugin = %p.plugin, tool_call_id = %p.running.tool_call_id, "{reason}");
            p.settle_all(|| Settled::Refused(reason.clone()));
            return Err(Box::new(p.running));
        }
        let Ok(handle) = random_bytes(16).map(hex) else {
            for q in p.questions.drain(..) {
                let _ = q.answer.send(None);
            }
            return Err(Box::new(p.running));
        };
        // Valid until the questions' own deadline, however often they are asked.
        let bound = format!("{} {}", p.running.method, p.running.tool);
        let state = self.codec.seal_with(
            handle.as_bytes(),
            &SealOptions::new()
                .associated_data(bound.as_bytes())
                .ttl(p.expires - now),
        );
        let requests: InputRequests = p
            .questions
            .iter()
            .map(|q| (q.key.clone(), q.request.clone()))
            .collect();
        let result = InputRequiredResult::new(Some(requests), Some(state));
        pending.insert(handle, p);
        Ok(result)
    }

    /// Refuses every parked question (nobody can answer them any more: the
    /// only connection ended); their calls run nothing. Returns how many.
    pub(crate) fn withdraw_all(&self) -> usize {
        let parked: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for p in &parked {
            tracing::info!(tool_call_id = %p.running.tool_call_id, "questions withdrawn: the client's connection ended");
        }
        let n = parked.len();
        for mut p in parked {
            p.settle_all(|| Settled::Withdrawn);
        }
        n
    }

    /// The retry of a request `method` (a `tools/call`, a `prompts/get`) of
    /// `tool` (the tool or prompt) with `state` and `responses`:
    /// each answer (the response under a question's key, when it is a
    /// result of the question's kind: [`Kind::answered_by`]) goes to its
    /// question, and the call is returned to be waited on (`Ok(Ok(_))`);
    /// the questions left unanswered are asked again (`Ok(Err(_))`, a new
    /// `input_required` result). Responses under other keys are ignored.
    ///
    /// Errors: `-32602` for a state longer than [`MAX_REQUEST_STATE_BYTES`]
    /// (not decoded), one that fails verification, has expired, was made
    /// for another tool (or prompt, or method), or names no pending question (answered already,
    /// refused, or from another process); each logged at `warn` with the
    /// reason and the tool name only.
    pub(crate) fn resume(
        &self,
        method: &str,
        tool: &str,
        state: &str,
        responses: Option<&InputResponses>,
        who: &super::identity::Identity,
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
        let bound = format!("{method} {tool}");
        let handle = self.codec.open_with(state, bound.as_bytes()).map_err(|e| {
            tracing::warn!(tool = %tool_name, "refused a requestState: {e}");
            invalid()
        })?;
        let handle = String::from_utf8_lossy(&handle).into_owned();
        let mut pending_map = lock(&self.pending);
        let Some(mut pending) = pending_map.remove(&handle) else {
            tracing::warn!(tool = %tool_name, "refused a requestState: no pending question (answered already?)");
            return Err(invalid());
        };
        // Another identity's question stays where it is, unanswered.
        let foreign = (pending.running.owner.as_ref()).is_some_and(|o| o.name() != who.name());
        if foreign && !who.is_admin() {
            pending_map.insert(handle, pending);
            tracing::warn!(tool = %tool_name, identity = who.name(), "refused a requestState: a question of another identity");
            return Err(invalid());
        }
        drop(pending_map);
        let mut unanswered = Vec::new();
        for q in pending.questions.drain(..) {
            match responses.and_then(|r| r.get(&q.key)) {
                Some(v) if q.kind.answered_by(v) => {
                    let _ = q.answer.send(Some(Settled::Answered(v.clone())));
                }
                _ => unanswered.push(q),
            }
        }
        if unanswered.is_empty() {
            return Ok(Ok(pending.running));
        }
        pending.questions = unanswered;
        match self.park(pending) {
            Ok(again) => Ok(Err(again)),
            Err(running) => Ok(Ok(*running)),
        }
    }
}

fn hex(bytes: Vec<u8>) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `inputRequests` entry of a form elicitation `params`.
pub(crate) fn elicitation_request(params: ElicitRequestParams) -> InputRequest {
    InputRequest::Elicitation(rmcp::model::ElicitRequest::new(params))
}

/// The `inputRequests` entry of one permission question: the form of
/// `ElicitationApprover`; `None` if its schema does not build.
fn permission_request(message: &str) -> Option<InputRequest> {
    let requested_schema = super::ElicitationApprover::schema()?;
    Some(elicitation_request(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_string(),
            requested_schema,
        },
    ))
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
            let question = permission_request(&super::ElicitationApprover::message(request))?;
            let answered = ask_on(&route, Kind::Permission, question, &request.plugin).await?;
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
            match answered {
                // Checked by `resume` (`Kind::answered_by`); never `None` here.
                Settled::Answered(v) => {
                    let outcome = outcome(&v).unwrap_or(ApprovalOutcome::Cancelled);
                    settled(outcome, self.name(), None)
                }
                Settled::Refused(reason) => {
                    settled(ApprovalOutcome::RejectOnce, BY_LIMIT, Some(reason))
                }
                Settled::Expired => expired(),
                // Also a question dropped unanswered: no run.
                Settled::Withdrawn => withdrawn(),
            }
        })
    }
}

/// How waiting on a modern request ended ([`super::McpServer::wait_modern`]).
pub(crate) enum Waited {
    /// It settled.
    Done(Outcome),
    /// It asks: the `input_required` result to answer with.
    Input(InputRequiredResult),
}

/// A modern `tools/call`'s response once waited on: its result
/// (`super::to_mcp_result`) or `input_required`.
pub(crate) fn tool_response(waited: Waited) -> Result<CallToolResponse, McpError> {
    match waited {
        Waited::Done(Outcome::Tool(r)) => super::to_mcp_result(r, true),
        Waited::Done(Outcome::Prompt(_)) => Err(McpError::internal_error(
            "a tools/call settled as a prompt",
            None,
        )),
        Waited::Input(input) => Ok(input.into()),
    }
}

impl super::McpServer {
    /// Waits for a modern request: its result, or its next questions (an
    /// `input_required` result asking those whose capability the request's
    /// `_meta` declares), or the request's cancellation (`-32603`; the call
    /// is cancelled when the client asked for it, and otherwise goes on).
    ///
    /// Errors: `-32021` for a request that failed after a question it could
    /// not ask ([`Running::missing_capability`]); `-32603` when the request's
    /// task ended without a result, or the request was cancelled.
    pub(super) async fn wait_modern(
        &self,
        mut running: Running,
        context: &RequestContext<RoleServer>,
    ) -> Result<Waited, McpError> {
        enum Next {
            Done(Outcome),
            Ask(Box<Ask>),
            Ended,
        }
        let caps = context.meta.client_capabilities();
        loop {
            let next = tokio::select! {
                r = &mut running.result => match r {
                    Ok(r) => Next::Done(r),
                    Err(_) => return Err(McpError::internal_error("the call's task ended without a result", None)),
                },
                Some(ask) = running.asks.recv() => Next::Ask(Box::new(ask)),
                () = context.ct.cancelled() => Next::Ended,
            };
            match next {
                Next::Done(r) => match running.missing_capability(&r) {
                    Some(missing) => return Err(missing),
                    None => return Ok(Waited::Done(r)),
                },
                Next::Ask(ask) => {
                    match self.shared.questions.suspend(running, *ask, caps.as_ref()) {
                        Ok(input) => return Ok(Waited::Input(input)),
                        Err(back) => running = *back,
                    }
                }
                Next::Ended => {
                    let tool_call_id = &running.tool_call_id;
                    if self.cancelled_by_client(context, true) {
                        tracing::info!(%tool_call_id, "cancelled by the client");
                        running.cancel.notify_one();
                    } else {
                        tracing::info!(%tool_call_id, "the client went away; the call keeps running");
                    }
                    return Err(McpError::internal_error("request cancelled", None));
                }
            }
        }
    }

    /// A modern `prompts/get`: the plugin's prompt runs with its
    /// elicitations and samplings asked as questions of the request, as a
    /// `tools/call`'s are; a retry with `requestState` resumes it.
    ///
    /// Errors: as `resume` for the state; the prompt's own errors as the
    /// legacy `prompts/get` maps them (`super::offers::mcp_error`).
    pub(super) async fn get_prompt_modern(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let who = super::identity::who(&context).identity;
        if let Some(state) = &request.request_state {
            let responses = request.input_responses.as_ref();
            let running = match self.shared.questions.resume(
                PROMPTS_GET,
                &request.name,
                state,
                responses,
                &who,
            )? {
                Ok(running) => running,
                Err(asked_again) => return Ok(asked_again.into()),
            };
            return prompt_response(self.wait_modern(running, &context).await?);
        }
        let arguments = super::offers::string_arguments(request.arguments.as_ref())?;
        let host = self.shared.host.clone();
        let plugin = host
            .prompts()
            .iter()
            .find(|p| p.prompt.name == request.name)
            .map(|p| p.plugin.id().to_string())
            .unwrap_or_default();
        let id = random_bytes(8)
            .map(|b| format!("prompt-{}", hex(b)))
            .map_err(|e| McpError::internal_error(format!("no random id: {e}"), None))?;
        // A prompt starts no command: it has no permission question.
        let (route, asks) = self.shared.questions.route(&id, false);
        let client: Arc<dyn toolhost_runtime::CallClient> =
            self.client_for(&context, Some(route.asker(&plugin)));
        let guard = self.shared.inflight.enter();
        let (tx, rx) = oneshot::channel();
        let name = request.name.clone();
        tokio::spawn(async move {
            let result = host.get_prompt(&name, arguments, Some(client)).await;
            drop(route);
            drop(guard);
            let _ = tx.send(Outcome::Prompt(result));
        });
        let running = Running::new(rx, asks, PROMPTS_GET, &request.name, id).with_owner(who);
        prompt_response(self.wait_modern(running, &context).await?)
    }
}

/// A modern `prompts/get`'s response once waited on.
fn prompt_response(waited: Waited) -> Result<GetPromptResponse, McpError> {
    match waited {
        Waited::Done(Outcome::Prompt(r)) => {
            let result = r.map_err(super::offers::mcp_error)?;
            Ok(super::offers::prompt_result(&result)?.into())
        }
        Waited::Done(Outcome::Tool(_)) => Err(McpError::internal_error(
            "a prompts/get settled as a tool call",
            None,
        )),
        Waited::Input(input) => Ok(input.into()),
    }
}
