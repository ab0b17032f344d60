//! The MCP client behind a request, as a contract 0.2.0 plugin reaches it
//! through `toolhost:plugin/client@0.2.0`: [`McpClient`] implements the
//! runtime's [`CallClient`] over the
//! rmcp [`Peer`] of the connection (stdio) or HTTP session that made the
//! request. The runtime has already applied the manifest grants and the
//! per-call limits; this module maps each request onto MCP 2025-11-25:
//!
//! - progress → `notifications/progress` with the request's `progressToken`
//!   ("Basic", "Utilities", "Progress"); none without a token;
//! - log → `notifications/message` when the session's `logging/setLevel`
//!   ([`SessionState::log_level`], default `info`) lets it through; for a
//!   2026-07-28 request, its own `_meta` `io.modelcontextprotocol/logLevel`
//!   does, and without one nothing is sent
//!   ("Server Features", "Utilities", "Logging");
//! - elicit → `elicitation/create`, form mode ("Client Features",
//!   "Elicitation"), only when the client declared it;
//! - sample → `sampling/createMessage` ("Client Features", "Sampling"), only
//!   when the client declared it;
//! - for a 2026-07-28 `tools/call`, elicit and sample are questions of the
//!   call instead ([`super::mrtr::Asker`]): an `input_required` result whose
//!   retry brings the answer back to the waiting plugin;
//! - resource updated → `notifications/resources/updated` to every session
//!   subscribed to the URI ([`Subscriptions`]; "Server Features",
//!   "Resources", "Subscriptions"), each connection (session or listen
//!   stream) holding at most [`MAX_QUEUED_NOTICE_BYTES`] of them not yet
//!   taken by its transport: past it a notice is dropped for that
//!   connection, counted, and logged (at the first drop and each power of
//!   two), so a client that does not read costs bounded memory and holds up
//!   nobody.
//!
//! Elicitation and sampling wait at most [`CLIENT_REQUEST_TIMEOUT`] (the
//! call's own wall-time limit ends them earlier). Over Streamable HTTP they
//! travel on the SSE stream of the request that caused them (MCP
//! "Transports": messages on a POST's stream SHOULD relate to that request;
//! [`request_on_call_stream`]), so a client that never opens the optional
//! GET stream still sees them. Log notifications follow rmcp's routing: on
//! HTTP they go to the session's GET stream.

#![allow(deprecated)] // rmcp marks logging and sampling deprecated (SEP-2577); MCP 2025-11-25 has them.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use base64::Engine as _;
use rmcp::RoleServer;
use rmcp::model::{
    ClientResult, CreateMessageRequestParams, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, GetExtensions, InputRequest, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken, RequestId, ServerRequest,
};
use rmcp::service::{
    ElicitationMode, OriginatingRequestId, Peer, PeerRequestOptions, ServiceError,
};
use serde::Deserialize;
use serde_json::{Value, json};

use toolhost_runtime::CallClient;
use toolhost_runtime::{
    ClientError, ClientFuture, ElicitAction, ElicitRequest, ElicitResponse, LogLevel,
    SamplingRequest, SamplingResponse,
};
use toolhost_runtime::{ContentBlock, Media, Role};

/// How long an elicitation or a sampling request waits for the client
/// (5 min); the plugin then gets `client-error::failed`.
pub const CLIENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// A log level's rank, least severe first (RFC 5424 order, as MCP lists
/// them): `debug` 0 … `emergency` 7.
fn rank(level: LogLevel) -> u8 {
    match level {
        LogLevel::Debug => 0,
        LogLevel::Info => 1,
        LogLevel::Notice => 2,
        LogLevel::Warning => 3,
        LogLevel::Error => 4,
        LogLevel::Critical => 5,
        LogLevel::Alert => 6,
        LogLevel::Emergency => 7,
    }
}

/// The rank of an MCP `LoggingLevel` (as [`rank`]).
pub(crate) fn mcp_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

/// What one MCP connection or HTTP session keeps for its plugins' client
/// requests: its peer, its `logging/setLevel` and its resource
/// subscriptions.
pub(crate) struct SessionState {
    /// The client, once a request has come in (set by every handler call).
    peer: Mutex<Option<Peer<RoleServer>>>,
    /// The least severe level passed on, as a [`rank`]; `info` (1) until the
    /// client sets one.
    log_level: AtomicU8,
    /// URIs subscribed with `resources/subscribe`.
    subscribed: Mutex<HashSet<String>>,
    /// Its resource-updated notices not yet sent.
    notices: Arc<NoticeBudget>,
}

/// Most bytes of `notifications/resources/updated` (the URI plus
/// [`NOTICE_OVERHEAD_BYTES`] each) queued for one connection (an MCP session
/// or a `subscriptions/listen` stream) and not yet taken by its transport
/// (256 KiB); past it a notice for that connection is dropped.
pub const MAX_QUEUED_NOTICE_BYTES: usize = 256 << 10;

/// What one queued notice is counted as beyond its URI: the JSON-RPC frame
/// and the task that sends it (256 bytes).
pub const NOTICE_OVERHEAD_BYTES: usize = 256;

/// The queued notices of one connection ([`MAX_QUEUED_NOTICE_BYTES`]).
#[derive(Default)]
pub(crate) struct NoticeBudget {
    queued: AtomicUsize,
    dropped: AtomicU64,
}

impl NoticeBudget {
    /// Takes `bytes` of the budget for one notice; `false` (the notice
    /// dropped, counted and logged) when they do not fit.
    fn reserve(&self, bytes: usize, connection: &str) -> bool {
        let fits = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                (q + bytes <= MAX_QUEUED_NOTICE_BYTES).then_some(q + bytes)
            })
            .is_ok();
        if !fits {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(
                    dropped,
                    "{connection}: {dropped} resources/updated notice(s) dropped in all: over \
                     the {MAX_QUEUED_NOTICE_BYTES} bytes one connection may have queued \
                     (MAX_QUEUED_NOTICE_BYTES)"
                );
            }
        }
        fits
    }

    /// Gives back what [`NoticeBudget::reserve`] took, once the notice was
    /// sent or given up.
    fn release(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Notices dropped so far.
    #[cfg(test)]
    fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Sends one notice with `send` on its own task, within `budget` (see
/// [`MAX_QUEUED_NOTICE_BYTES`]), giving up after [`NOTICE_TIMEOUT`].
fn spawn_notice<F, E>(budget: &Arc<NoticeBudget>, uri: &str, connection: &'static str, send: F)
where
    F: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display,
{
    let bytes = uri.len() + NOTICE_OVERHEAD_BYTES;
    if !budget.reserve(bytes, connection) {
        return;
    }
    let budget = budget.clone();
    tokio::spawn(async move {
        match tokio::time::timeout(NOTICE_TIMEOUT, send).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!("resources/updated not sent: {e}"),
            Err(_) => tracing::debug!("resources/updated dropped: the {connection} is stuck"),
        }
        budget.release(bytes);
    });
}

impl SessionState {
    pub(crate) fn new() -> Arc<SessionState> {
        Arc::new(SessionState {
            peer: Mutex::new(None),
            log_level: AtomicU8::new(1),
            subscribed: Mutex::default(),
            notices: Arc::default(),
        })
    }

    /// Remembers the session's peer (for resource-updated notices).
    pub(crate) fn set_peer(&self, peer: &Peer<RoleServer>) {
        let mut slot = self.peer.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(peer.clone());
        }
    }

    /// `logging/setLevel`.
    pub(crate) fn set_log_level(&self, level: LoggingLevel) {
        self.log_level.store(mcp_rank(level), Ordering::Relaxed);
    }

    /// `resources/subscribe` (`true`) or `resources/unsubscribe` (`false`).
    pub(crate) fn subscribe(&self, uri: &str, on: bool) {
        let mut set = self.subscribed.lock().unwrap_or_else(|e| e.into_inner());
        if on {
            set.insert(uri.to_string());
        } else {
            set.remove(uri);
        }
    }
}

/// Most URIs one session may subscribe to (1,000); more are refused with
/// `-32602`.
pub const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 1_000;

/// Longest URI `resources/subscribe` accepts, in bytes (4 KiB, as the
/// runtime's limit on the URIs plugins offer); a longer one, or one with
/// control characters, is refused with `-32602`.
pub const MAX_SUBSCRIBE_URI_BYTES: usize = 4 << 10;

/// How long one `notifications/resources/updated` may wait for a session's
/// stream (1 s) before it is dropped for that session.
pub const NOTICE_TIMEOUT: Duration = Duration::from_secs(1);

impl SessionState {
    /// How many URIs the session is subscribed to.
    pub(crate) fn subscription_count(&self) -> usize {
        self.subscribed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

/// Every live session of one `serve` run, and every open 2026-07-28
/// `subscriptions/listen` stream, for resource-updated notices.
#[derive(Default)]
pub(crate) struct Subscriptions {
    sessions: Mutex<Vec<Weak<SessionState>>>,
    listeners: Mutex<Vec<Weak<Listener>>>,
}

/// One open `subscriptions/listen` stream: the URIs it accepted and its
/// sink (which tags each notice with the subscription id). Forgotten once
/// the handle [`Subscriptions::listen`] returned is dropped.
pub(crate) struct Listener {
    uris: HashSet<String>,
    sink: rmcp::service::SubscriptionSink,
    notices: Arc<NoticeBudget>,
}

impl Subscriptions {
    /// Adds a session (dropped sessions are forgotten on the next notice).
    pub(crate) fn register(&self, session: &Arc<SessionState>) {
        let mut all = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|s| s.strong_count() > 0);
        all.push(Arc::downgrade(session));
    }

    /// Adds a listen stream for `uris`; it gets their updated notices until
    /// the returned handle is dropped.
    pub(crate) fn listen(
        &self,
        uris: impl IntoIterator<Item = String>,
        sink: rmcp::service::SubscriptionSink,
    ) -> Arc<Listener> {
        let listener = Arc::new(Listener {
            uris: uris.into_iter().collect(),
            sink,
            notices: Arc::default(),
        });
        let mut all = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|l| l.strong_count() > 0);
        all.push(Arc::downgrade(&listener));
        listener
    }

    /// Sends `notifications/resources/updated` for `uri` to every live
    /// session and listen stream subscribed to it.
    async fn notify(&self, uri: &str) {
        let sinks: Vec<(rmcp::service::SubscriptionSink, Arc<NoticeBudget>)> = {
            let mut all = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|l| l.strong_count() > 0);
            all.iter()
                .filter_map(Weak::upgrade)
                .filter(|l| l.uris.contains(uri))
                .map(|l| (l.sink.clone(), l.notices.clone()))
                .collect()
        };
        for (sink, budget) in sinks {
            let owned = uri.to_string();
            spawn_notice(&budget, uri, "listen stream", async move {
                sink.notify_resource_updated(owned).await
            });
        }
        let peers: Vec<(Peer<RoleServer>, Arc<NoticeBudget>)> = {
            let mut all = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|s| s.strong_count() > 0);
            all.iter()
                .filter_map(Weak::upgrade)
                .filter(|s| {
                    s.subscribed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .contains(uri)
                })
                .filter_map(|s| {
                    let peer = s.peer.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    peer.map(|p| (p, s.notices.clone()))
                })
                .collect()
        };
        // Each notice is sent on its own task and given up after
        // [`NOTICE_TIMEOUT`]: a session that does not read its stream must
        // not hold up the plugin call (or the other sessions), and what it
        // has queued is bounded ([`MAX_QUEUED_NOTICE_BYTES`]).
        for (peer, budget) in peers {
            let param = rmcp::model::ResourceUpdatedNotificationParam::new(uri.to_string());
            spawn_notice(&budget, uri, "session", async move {
                peer.notify_resource_updated(param).await
            });
        }
    }
}

/// Sends `request` to the client as part of request `origin` (the tool call
/// or prompt it serves), and waits at most `timeout` for the answer. The
/// `OriginatingRequestId` marker (rmcp's SEP-2260 support) makes the
/// Streamable HTTP transport deliver it on `origin`'s SSE stream instead of
/// the optional GET stream; on stdio it changes nothing.
///
/// Errors: what rmcp reports (the client's JSON-RPC error, a timeout, a
/// closed transport).
pub(crate) async fn request_on_call_stream(
    peer: &Peer<RoleServer>,
    origin: &RequestId,
    mut request: ServerRequest,
    timeout: Duration,
) -> Result<ClientResult, ServiceError> {
    request
        .extensions_mut()
        .insert(OriginatingRequestId(origin.clone()));
    peer.send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
        .await?
        .await_response()
        .await
}

/// `elicitation/create` as part of request `origin` ([`request_on_call_stream`]).
///
/// Errors: as [`request_on_call_stream`]; an answer of another kind is
/// `UnexpectedResponse`.
pub(crate) async fn elicit_for(
    peer: &Peer<RoleServer>,
    origin: &RequestId,
    params: ElicitRequestParams,
    timeout: Duration,
) -> Result<ElicitResult, ServiceError> {
    let request = ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(params));
    match request_on_call_stream(peer, origin, request, timeout).await? {
        ClientResult::ElicitResult(r) => Ok(r),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// The client behind one request (a tool call, a prompt, a resource read).
pub(crate) struct McpClient {
    peer: Peer<RoleServer>,
    /// The id of the request this client serves (its SSE stream on HTTP).
    origin: RequestId,
    /// The request's `_meta.progressToken`, if any.
    progress_token: Option<ProgressToken>,
    session: Arc<SessionState>,
    subscriptions: Arc<Subscriptions>,
    /// Set once the plugin reported progress itself: the host's own
    /// output-bytes progress for the call stops, so `progress` keeps growing.
    pub(crate) plugin_reports_progress: Arc<AtomicBool>,
    /// For a 2026-07-28 request, the lowest rank it lets through: its
    /// `_meta` `io.modelcontextprotocol/logLevel`, or none at all without
    /// one (MCP 2026-07-28 "Key Changes": no `notifications/message` for a
    /// request without it). `None`: the session's level.
    request_log_floor: Option<u8>,
    /// For a 2026-07-28 `tools/call`: where its elicitations and samplings
    /// go, as questions of the call (`mrtr.rs`).
    asker: Option<super::mrtr::Asker>,
    /// The identity behind the request, when it lacks the `answer` scope:
    /// it is asked nothing, so elicitations and samplings are `unsupported`
    /// ([`McpClient::asking_nothing`]).
    unasked: Option<Arc<str>>,
}

impl McpClient {
    pub(crate) fn new(
        peer: Peer<RoleServer>,
        origin: RequestId,
        progress_token: Option<ProgressToken>,
        session: Arc<SessionState>,
        subscriptions: Arc<Subscriptions>,
    ) -> McpClient {
        McpClient {
            peer,
            origin,
            progress_token,
            session,
            subscriptions,
            plugin_reports_progress: Arc::default(),
            request_log_floor: None,
            asker: None,
            unasked: None,
        }
    }

    /// This client for `identity`, which lacks the `answer` scope: no
    /// question reaches it (`elicitation/create`, `sampling/createMessage`,
    /// an `input_required` entry); the plugin's `elicit` and `sample` fail
    /// `unsupported` naming the scope (docs/operations.md#identities).
    pub(crate) fn asking_nothing(mut self, identity: &super::identity::Identity) -> McpClient {
        self.asker = None;
        self.unasked = Some(identity.name_arc());
        self
    }

    /// `unsupported` when the identity may not be asked ([`McpClient::asking_nothing`]).
    fn check_askable(&self) -> Result<(), ClientError> {
        match &self.unasked {
            Some(name) => Err(ClientError::Unsupported(format!(
                "the identity `{name}` lacks the `answer` scope, so it is asked nothing"
            ))),
            None => Ok(()),
        }
    }

    /// This client for a modern request whose `_meta` log level is `level`
    /// (`None`: no log messages at all), asking its elicitations and
    /// samplings through `asker` (`None`: they are `unsupported`, there
    /// being no server-to-client requests in 2026-07-28).
    pub(crate) fn for_modern_request(
        mut self,
        level: Option<LoggingLevel>,
        asker: Option<super::mrtr::Asker>,
    ) -> McpClient {
        self.request_log_floor = Some(level.map_or(u8::MAX, mcp_rank));
        self.asker = asker;
        self
    }
}

/// A plugin's elicitation as MCP form parameters.
///
/// Errors: `failed` for a `requested-schema` that is not an MCP
/// elicitation schema.
fn elicit_params(request: ElicitRequest) -> Result<ElicitRequestParams, ClientError> {
    let schema: ElicitationSchema =
        serde_json::from_str(&request.requested_schema).map_err(|e| {
            ClientError::Failed(format!(
                "`requested-schema` is not an MCP elicitation schema (an object of primitive \
                 properties): {e}"
            ))
        })?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: request.message,
        requested_schema: schema,
    })
}

/// The client's `ElicitResult` as the plugin's answer (`content` as JSON
/// text, `{}` for an accept without one).
fn elicit_response(result: ElicitResult) -> ElicitResponse {
    let action = match result.action {
        ElicitationAction::Accept => ElicitAction::Accept,
        ElicitationAction::Decline => ElicitAction::Decline,
        _ => ElicitAction::Cancel,
    };
    let content = match (&action, result.content) {
        (ElicitAction::Accept, Some(c)) => Some(c.to_string()),
        (ElicitAction::Accept, None) => Some("{}".into()),
        _ => None,
    };
    ElicitResponse { action, content }
}

/// A plugin's sampling request as MCP `sampling/createMessage` parameters.
///
/// Errors: `failed` for content a sampling message cannot carry or
/// `model-preferences` that do not parse.
fn sampling_params(request: &SamplingRequest) -> Result<CreateMessageRequestParams, ClientError> {
    let mut messages = Vec::with_capacity(request.messages.len());
    for m in &request.messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": sampling_content(&m.content)?}));
    }
    let mut params = json!({"messages": messages, "maxTokens": request.max_tokens});
    if let Some(s) = &request.system_prompt {
        params["systemPrompt"] = json!(s);
    }
    if let Some(t) = request.temperature {
        params["temperature"] = json!(t);
    }
    if !request.stop_sequences.is_empty() {
        params["stopSequences"] = json!(request.stop_sequences);
    }
    if let Some(p) = &request.model_preferences {
        params["modelPreferences"] =
            serde_json::from_str(p).map_err(|e| failed("model-preferences", e))?;
    }
    serde_json::from_value(params).map_err(|e| failed("sampling request", e))
}

/// The client's `CreateMessageResult` (as JSON) as the plugin's answer.
///
/// Errors: `failed` for content contract 0.2.0 cannot carry.
fn sampling_response(result: &Value) -> Result<SamplingResponse, ClientError> {
    let role = match result["role"].as_str() {
        Some("assistant") => Role::Assistant,
        _ => Role::User,
    };
    // MCP 2025-11-25 lets `content` be one block or a list; the contract
    // carries one: the first.
    let content = match &result["content"] {
        Value::Array(items) => items.first().cloned().unwrap_or(Value::Null),
        one => one.clone(),
    };
    Ok(SamplingResponse {
        role,
        content: plugin_content(&content)?,
        model: result["model"].as_str().unwrap_or_default().to_string(),
        stop_reason: result["stopReason"].as_str().map(str::to_string),
    })
}

fn failed(what: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::Failed(format!("{what} failed: {e}"))
}

/// A plugin's content block as a sampling message's content (text, image or
/// audio; the runtime refuses the others before they get here).
fn sampling_content(block: &ContentBlock) -> Result<Value, ClientError> {
    let b64 = |m: &Media| base64::engine::general_purpose::STANDARD.encode(&m.data);
    Ok(match block {
        ContentBlock::Text(text) => json!({"type": "text", "text": text}),
        ContentBlock::Image(m) => json!({"type": "image", "data": b64(m), "mimeType": m.mime_type}),
        ContentBlock::Audio(m) => json!({"type": "audio", "data": b64(m), "mimeType": m.mime_type}),
        _ => {
            return Err(ClientError::Failed(
                "sampling messages carry text, image or audio content only".into(),
            ));
        }
    })
}

/// The client's sampled content as a plugin content block.
fn plugin_content(content: &Value) -> Result<ContentBlock, ClientError> {
    let decode = |v: &Value| -> Result<Media, ClientError> {
        let data = base64::engine::general_purpose::STANDARD
            .decode(v["data"].as_str().unwrap_or_default())
            .map_err(|e| failed("decoding the sampled media", e))?;
        Ok(Media {
            data,
            mime_type: v["mimeType"].as_str().unwrap_or_default().to_string(),
            annotations: None,
        })
    };
    match content["type"].as_str() {
        Some("text") => Ok(ContentBlock::Text(
            content["text"].as_str().unwrap_or_default().to_string(),
        )),
        Some("image") => Ok(ContentBlock::Image(decode(content)?)),
        Some("audio") => Ok(ContentBlock::Audio(decode(content)?)),
        other => Err(ClientError::Failed(format!(
            "the client sampled content of type {other:?}, which contract 0.2.0 cannot carry"
        ))),
    }
}

impl CallClient for McpClient {
    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> ClientFuture<'_, ()> {
        Box::pin(async move {
            let Some(token) = &self.progress_token else {
                return;
            };
            self.plugin_reports_progress.store(true, Ordering::Relaxed);
            let mut param = ProgressNotificationParam::new(token.clone(), progress);
            param.total = total;
            param.message = message;
            if let Err(e) = self.peer.notify_progress(param).await {
                tracing::debug!("progress not sent: {e}");
            }
        })
    }

    fn log(&self, level: LogLevel, logger: String, data: Value) -> ClientFuture<'_, ()> {
        Box::pin(async move {
            let floor = self
                .request_log_floor
                .unwrap_or_else(|| self.session.log_level.load(Ordering::Relaxed));
            if rank(level) < floor {
                return;
            }
            let mut param = LoggingMessageNotificationParam::new(mcp_level(level), data);
            param.logger = Some(logger);
            if let Err(e) = self.peer.notify_logging_message(param).await {
                tracing::debug!("log message not sent: {e}");
            }
        })
    }

    fn elicit(
        &self,
        request: ElicitRequest,
    ) -> ClientFuture<'_, Result<ElicitResponse, ClientError>> {
        Box::pin(async move {
            self.check_askable()?;
            if let Some(asker) = &self.asker {
                let question = super::mrtr::elicitation_request(elicit_params(request)?);
                let answer = asker.ask(super::mrtr::Kind::Elicitation, question).await?;
                let result = ElicitResult::deserialize(&answer)
                    .map_err(|e| failed("the elicitation answer", e))?;
                return Ok(elicit_response(result));
            }
            if !self
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
            {
                return Err(ClientError::Unsupported(
                    "the MCP client did not declare the `elicitation` capability (form mode)"
                        .into(),
                ));
            }
            let params = elicit_params(request)?;
            let result = elicit_for(&self.peer, &self.origin, params, CLIENT_REQUEST_TIMEOUT)
                .await
                .map_err(|e| failed("elicitation/create", e))?;
            Ok(elicit_response(result))
        })
    }

    fn sample(
        &self,
        request: SamplingRequest,
    ) -> ClientFuture<'_, Result<SamplingResponse, ClientError>> {
        Box::pin(async move {
            self.check_askable()?;
            if let Some(asker) = &self.asker {
                let params = sampling_params(&request)?;
                let question =
                    InputRequest::CreateMessage(rmcp::model::CreateMessageRequest::new(params));
                let answer = asker.ask(super::mrtr::Kind::Sampling, question).await?;
                return sampling_response(&answer);
            }
            let declared = self
                .peer
                .peer_info()
                .is_some_and(|info| info.capabilities.sampling.is_some());
            if !declared {
                return Err(ClientError::Unsupported(
                    "the MCP client did not declare the `sampling` capability".into(),
                ));
            }
            let params = sampling_params(&request)?;
            let request =
                ServerRequest::CreateMessageRequest(rmcp::model::CreateMessageRequest::new(params));
            let result = match request_on_call_stream(
                &self.peer,
                &self.origin,
                request,
                CLIENT_REQUEST_TIMEOUT,
            )
            .await
            .map_err(|e| failed("sampling/createMessage", e))?
            {
                ClientResult::CreateMessageResult(r) => r,
                _ => {
                    return Err(ClientError::Failed(
                        "sampling/createMessage: the client answered with another result".into(),
                    ));
                }
            };
            let result = serde_json::to_value(&result).map_err(|e| failed("sampling result", e))?;
            sampling_response(&result)
        })
    }

    fn resource_updated(&self, uri: String) -> ClientFuture<'_, ()> {
        Box::pin(async move { self.subscriptions.notify(&uri).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_queues_at_most_its_budget_and_counts_what_it_drops() {
        let budget = NoticeBudget::default();
        let one = 4096 + NOTICE_OVERHEAD_BYTES;
        let fit = MAX_QUEUED_NOTICE_BYTES / one;
        for _ in 0..fit {
            assert!(budget.reserve(one, "session"));
        }
        for _ in 0..10 {
            assert!(!budget.reserve(one, "session"));
        }
        assert_eq!(budget.dropped(), 10);
        // A sent notice gives its bytes back.
        budget.release(one);
        assert!(budget.reserve(one, "session"));
        assert!(!budget.reserve(one, "session"));
        assert_eq!(budget.dropped(), 11);
    }
}
