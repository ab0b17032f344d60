//! `toolhost serve`: an MCP server (docs/mcp.md), built on
//! rmcp, the official Rust SDK. It is dual-era (MCP 2026-07-28,
//! "Versioning and Compatibility", <https://modelcontextprotocol.io/specification/2026-07-28>):
//!
//! - *modern* clients (2026-07-28) send no handshake: every request carries
//!   its protocol version and client capabilities in `_meta` and is served
//!   on its own; `server/discover` lists [`SUPPORTED_PROTOCOL_VERSIONS`],
//!   and a request naming any other version gets `-32022`
//!   (`UnsupportedProtocolVersionError`, data `{supported, requested}`).
//!   Results carry `resultType`; `initialize`, `ping`, `logging/setLevel` and
//!   `resources/subscribe`/`unsubscribe` (removed in 2026-07-28) are
//!   `-32601`, and `subscriptions/listen` carries tool-list and resource
//!   notices instead; arguments a tool refuses are a tool error (`isError: true`,
//!   "Tools", "Error Handling"); a policy `ask`, and a plugin's elicitation
//!   or sampling, are not sent to the client (no server-to-client requests
//!   in 2026-07-28) but returned as an `input_required` result whose retry
//!   resumes the call (`mrtr.rs`), when the request declares the capability.
//! - *legacy* clients (2025-11-25, and 2024-11-05, 2025-03-26, 2025-06-18
//!   as asked) open with `initialize` and are served as before, following
//!   2025-11-25 (<https://modelcontextprotocol.io/specification/2025-11-25>).
//!
//! The era of each request is rmcp's decision (the request's own `_meta`
//! first, then the session's `initialize`; `era.rs`); on stdio
//! `era::open_stdio` gates what comes before either lifecycle.
//!
//! Two transports share one request handler, [`McpServer`]:
//!
//! - [`stdio`]: newline-delimited JSON-RPC on stdin/stdout ([`serve_stdio`]),
//!   one client per process ("Transports", "stdio").
//! - [`http`]: Streamable HTTP ([`http::HttpServer`]), many concurrent
//!   sessions, each with its own `Mcp-Session-Id` and its own [`McpServer`]
//!   over the one shared [`Host`] ("Transports", "Streamable HTTP").
//!
//! What the handler does:
//!
//! - `initialize` (legacy) answers with the `tools` capability and `listChanged: true`
//!   (a `notifications/tools/list_changed` is sent whenever
//!   [`Host::tools_changed`] fires; the set is fixed at start-up for now). A
//!   client asking for a version we do not support gets our latest
//!   ([`PROTOCOL_VERSION`]), as "Lifecycle", "Version Negotiation" requires; a
//!   second `initialize` on the same connection or session is `-32600`.
//! - `tools/list`: every loaded plugin's tools with their description, JSON
//!   Schema (the plugin's `input-schema`) and annotations from its hints.
//! - `tools/call`: content, `structuredContent` and `isError`. An unknown
//!   tool or arguments the plugin refuses are JSON-RPC errors `-32602`
//!   (Invalid params), as the spec's tools section shows; a plugin trap or
//!   limit is a result with `isError: true` so the agent can read it.
//! - A call whose `_meta.progressToken` is set gets `notifications/progress`
//!   with `progress` = output bytes its foreground processes wrote so far,
//!   counted from the call's own sink (`CallRequest::progress`), sent when it
//!   grows, at most every [`PROGRESS_INTERVAL`].
//! - `notifications/cancelled` for a call in progress cancels it
//!   ([`Host::cancel_call`]: the process group of the call's foreground runs
//!   is killed) and no response is sent, as the spec's cancellation section
//!   requires.
//! - Calls run concurrently (each request is its own task).
//! - A client that disappears (stdin closes, an HTTP session ends) does not
//!   stop calls in progress: they run to their end and are recorded in the
//!   event log.
//! - A policy `ask` during a call goes to the client that made the call,
//!   through elicitation ([`ElicitationApprover`]) for a legacy request and
//!   MRTR (`mrtr.rs`) for a modern one, on either transport.
//!
//! Input is checked before rmcp sees it ([`classify`]), because JSON-RPC 2.0
//! §5.1 asks for error responses rmcp does not send: unparsable JSON gets
//! `-32700` (Parse error, id `null`), a message that is not a valid request
//! object (a batch, a wrong `jsonrpc`, a non-string `method`, an id that is
//! neither a string nor a number) gets `-32600` (Invalid Request), an unknown
//! method `-32601` (rmcp; and ours for a method 2026-07-28 removed, sent with
//! modern `_meta`), a known method with malformed params `-32602`. The
//! server keeps serving after each.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[allow(deprecated)] // rmcp marks logging deprecated (SEP-2577); MCP 2025-11-25 has it.
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, SetLevelRequestParams, SubscribeRequestParams, Tool,
    ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;
use tokio::sync::watch;
use tracing::Instrument as _;

use toolhost_runtime::CallProgress;
use toolhost_runtime::{Host, ToolCallError, echo_name};

mod approver;
mod client;
pub mod drain;
mod era;
pub mod health;
pub mod http;
pub mod identity;
mod incoming;
pub mod metrics;
mod mrtr;
mod offers;
mod spans;
pub mod stdio;

pub use client::{
    CLIENT_REQUEST_TIMEOUT, MAX_SUBSCRIBE_URI_BYTES, MAX_SUBSCRIPTIONS_PER_SESSION, NOTICE_TIMEOUT,
};
use client::{McpClient, SessionState, Subscriptions};

pub use approver::{ELICITATION_TIMEOUT, ElicitationApprover};
pub(crate) use incoming::{CancelledSet, Incoming, cancel_key, classify, record_cancel};

pub use crate::jsonrpc::codes;
pub use stdio::{
    ProcessStdio, RestoreBlocking, ServeEnd, ServeError, StdioTransport, WriterTask,
    serve_process_stdio, serve_stdio,
};

/// Longest message the server reads, on either transport: 4 MiB. A longer
/// stdio line is discarded (never buffered whole) and answered with
/// `-32600`; a longer HTTP body is answered `413 Payload Too Large`.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Shortest time between two progress notifications of one call: 100 ms.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// The newest legacy revision (2025-11-25): what `initialize` answers with
/// when the client asks for a version it does not support, or for a modern
/// one (which has no handshake); every earlier revision rmcp knows is
/// accepted as asked.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The modern revision served without a handshake (2026-07-28: protocol
/// version and client capabilities in every request's `_meta`).
pub const MODERN_PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// Every revision `serve` answers, newest first, as `server/discover`'s
/// `supportedVersions` and the `supported` list of an
/// `UnsupportedProtocolVersionError` name them: 2026-07-28 (stateless) and
/// 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05 (through `initialize`).
pub const SUPPORTED_PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2026_07_28,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2024_11_05,
];

/// What every [`McpServer`] of one `serve` run shares: the host, the cancelled requests, the
/// count of calls in progress (the drain's, [`drain::Drain`]) and the one elicitation approver
/// (registered with the host once).
pub(crate) struct Shared {
    host: Arc<Host>,
    cancelled: CancelledSet,
    /// Calls (and resource reads, prompt gets) in progress, counted until
    /// they settle: what the client leaving and the drain wait for.
    inflight: drain::Counter,
    elicitation: Arc<ElicitationApprover>,
    /// The permission questions of modern calls (MRTR, `mrtr.rs`).
    questions: Arc<mrtr::Questions>,
    /// Every session, for `notifications/resources/updated`.
    subscriptions: Arc<Subscriptions>,
}

impl Shared {
    /// State for serving `host`, its calls counted by `drain`. Registers the
    /// MCP clients as a permission approver (through elicitation, for clients
    /// that declare it); it is asked after any attached control client
    /// (registered earlier).
    pub(crate) fn new(
        host: Arc<Host>,
        cancelled: CancelledSet,
        drain: &drain::Drain,
    ) -> Arc<Shared> {
        let elicitation = Arc::new(ElicitationApprover::default());
        host.permissions().add_approver(elicitation.clone());
        let questions = mrtr::Questions::new(host.config());
        host.permissions().add_approver(questions.clone());
        Arc::new(Shared {
            host,
            cancelled,
            inflight: drain.calls(),
            elicitation,
            questions,
            subscriptions: Arc::default(),
        })
    }

    /// Follows the number of calls in progress.
    pub(crate) fn inflight(&self) -> watch::Receiver<usize> {
        self.inflight.subscribe()
    }
}

/// The MCP request handler of one client connection (stdio) or one HTTP
/// session: tools of a shared [`Host`].
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
    /// Set by the first `initialize`; a second one is refused.
    initialized: Arc<AtomicBool>,
    /// Dropped with the last clone of this handler (the session ended): ends
    /// its `tools/list_changed` forwarder.
    alive: Arc<watch::Sender<()>>,
    /// The session's log level, subscriptions and peer, for its plugins'
    /// client requests ([`client`]).
    session: Arc<SessionState>,
}

impl McpServer {
    /// A handler for one connection or session over `shared`.
    pub(crate) fn new(shared: Arc<Shared>) -> McpServer {
        let session = SessionState::new();
        shared.subscriptions.register(&session);
        McpServer {
            shared,
            initialized: Arc::default(),
            alive: Arc::new(watch::channel(()).0),
            session,
        }
    }

    /// The client behind one request of this session, for the plugin's
    /// `client` import.
    fn client_for(
        &self,
        context: &RequestContext<RoleServer>,
        asker: Option<mrtr::Asker>,
    ) -> Arc<McpClient> {
        self.session.set_peer(&context.peer);
        let client = McpClient::new(
            context.peer.clone(),
            context.id.clone(),
            context.meta.get_progress_token(),
            self.session.clone(),
            self.shared.subscriptions.clone(),
        );
        let client = if era::is_modern(context) {
            client.for_modern_request(context.meta.log_level(), asker)
        } else {
            client
        };
        let identity = identity::who(context).identity;
        Arc::new(match identity.allows(identity::Scope::Answer) {
            true => client,
            false => client.asking_nothing(&identity),
        })
    }

    /// Whether the end of request `context` (its token fired) is a
    /// cancellation: a `notifications/cancelled` for it, or, for a `modern`
    /// request on HTTP, its response stream closed (MCP 2026-07-28
    /// "Streamable HTTP", "Cancellation").
    fn cancelled_by_client(&self, context: &RequestContext<RoleServer>, modern: bool) -> bool {
        let key = cancel_key(&session_of(context), &context.id);
        let by_client = self
            .shared
            .cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        by_client || (modern && context.extensions.get::<::http::request::Parts>().is_some())
    }

    /// The MCP tool list (name, description, input schema, annotations), in
    /// the host's order (fixed at start-up: the same on every call, as MCP
    /// 2026-07-28 asks of `tools/list`).
    pub fn tool_list(host: &Host) -> Vec<Tool> {
        host.tools()
            .iter()
            .map(|t| McpServer::mcp_tool(t))
            .collect()
    }

    /// One host tool as MCP describes it.
    fn mcp_tool(t: &toolhost_runtime::ToolEntry) -> Tool {
        let schema: JsonObject = serde_json::from_str(&t.spec.input_schema).unwrap_or_else(|_| {
            let mut o = JsonObject::new();
            o.insert("type".into(), json!("object"));
            o
        });
        let hints = &t.spec.hints;
        let mut tool = Tool::new(t.name.clone(), t.spec.description.clone(), Arc::new(schema))
            .with_annotations(
                ToolAnnotations::new()
                    .read_only(hints.read_only)
                    .destructive(hints.destructive)
                    .idempotent(hints.idempotent)
                    .open_world(hints.open_world),
            );
        // Contract 0.2.0: `title` and `outputSchema` (checked to be a
        // JSON object at load).
        if let Some(title) = &t.spec.title {
            tool = tool.with_title(title.clone());
        }
        if let Some(Ok(schema)) = t
            .spec
            .output_schema
            .as_deref()
            .map(serde_json::from_str::<JsonObject>)
        {
            tool = tool.with_raw_output_schema(Arc::new(schema));
        }
        tool
    }

    /// [`ServerHandler::call_tool`]'s work; the call runs in `span`.
    async fn serve_tool_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        span: &tracing::Span,
    ) -> Result<CallToolResponse, McpError> {
        let host = self.shared.host.clone();
        let modern = era::is_modern(&context);
        let who = identity::who(&context);
        // A retry that answers a permission question resumes its call.
        if modern && let Some(state) = &request.request_state {
            let running = match self.shared.questions.resume(
                mrtr::TOOLS_CALL,
                &request.name,
                state,
                request.input_responses.as_ref(),
                &who.identity,
            )? {
                Ok(running) => running,
                Err(asked_again) => return Ok(asked_again.into()),
            };
            return mrtr::tool_response(self.wait_modern(running, &context).await?);
        }
        // The one lookup of the tool: the entry travels with the call.
        let Some(tool) = host.tool(&request.name) else {
            let available: Vec<_> = host.tools().iter().map(|t| t.name.clone()).collect();
            return Err(McpError::invalid_params(
                format!("Unknown tool: {}", echo_name(&request.name)),
                Some(json!({ "available": available })),
            ));
        };
        // rmcp's parse gave the arguments as an object; they move, uncopied.
        let arguments = request.arguments.unwrap_or_default();
        let tool_call_id = host.new_call_id();
        // The call's own progress sink, when the client asked for progress.
        let (progress_sink, progress) = match context.meta.get_progress_token() {
            Some(token) => {
                let (sink, events) = tokio::sync::mpsc::unbounded_channel();
                (Some(sink), Some((token, events)))
            }
            None => (None, None),
        };
        let cancel = Arc::new(tokio::sync::Notify::new());
        // A modern call's questions (its permission asks, and its plugin's
        // elicitations and samplings) go to the call's handler, as an
        // `input_required` result (`mrtr.rs`).
        let may_ask = who.identity.allows(identity::Scope::Answer);
        let (question_route, modern_asks) = match modern {
            true => {
                let (route, asks) = self.shared.questions.route(&tool_call_id, may_ask);
                (Some(route), Some(asks))
            }
            false => (None, None),
        };
        let asker = question_route.as_ref().map(|r| r.asker(tool.plugin.id()));
        let client = self.client_for(&context, asker);
        let plugin_reports_progress = client.plugin_reports_progress.clone();
        // The call, holding what it needs until it settles. A legacy call runs
        // in this request's task, so its result is written by the task that
        // got it, with no hand-off to another task (which the scheduler may
        // give to another worker thread); a call outliving its request (a
        // cancel, the client gone, a 2026-07-28 `input_required`) moves to a
        // task of its own.
        let mut call = {
            let guard = self.shared.inflight.enter();
            // Asks go to the next approver for a 2026-07-28 request (it has no
            // server-to-client `elicitation/create`) and an identity without `answer`.
            let route = if modern || !may_ask {
                approver::Route::none()
            } else {
                self.shared
                    .elicitation
                    .route(&tool_call_id, &context.peer, &context.id)
            };
            // ... but to the call's handler (`question_route`).
            let host = host.clone();
            let request = toolhost_runtime::CallRequest {
                tool_call_id: tool_call_id.clone(),
                tool,
                arguments,
                source: "mcp",
                cancel: cancel.clone(),
                client: Some(client),
                progress: progress_sink,
                principal: Some(who.identity.principal()),
                actor: Some(who.actor),
            };
            Box::pin(
                async move {
                    let result = host.call(request).await;
                    drop(route);
                    drop(question_route);
                    drop(guard);
                    result
                }
                .instrument(span.clone()),
            )
        };
        let progress = progress.map(|(token, events)| {
            tokio::spawn(progress_pump(
                events,
                token,
                context.peer.clone(),
                plugin_reports_progress,
            ))
        });
        if let Some(asks) = modern_asks {
            // A retry of the request may be the one to get the result.
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let _ = tx.send(mrtr::Outcome::Tool(call.await));
            });
            let running =
                mrtr::Running::new(rx, asks, mrtr::TOOLS_CALL, &request.name, tool_call_id)
                    .with_cancel(cancel)
                    .with_owner(who.identity);
            let response = self
                .wait_modern(running, &context)
                .await
                .and_then(mrtr::tool_response);
            if let Some(p) = progress {
                p.abort();
            }
            return response;
        }
        let outcome = tokio::select! {
            // A panic in the call still answers the request (an internal
            // error), as when the call had a task of its own.
            r = std::future::poll_fn(|cx| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.as_mut().poll(cx).map(Ok)))
                    .unwrap_or_else(|_| std::task::Poll::Ready(Err(McpError::internal_error(
                        "the tool call panicked and has no result",
                        None,
                    ))))
            }) => r,
            () = context.ct.cancelled() => {
                if self.cancelled_by_client(&context, false) {
                    tracing::info!(%tool_call_id, "cancelled by the client");
                    cancel.notify_one();
                } else {
                    tracing::info!(%tool_call_id, "the client went away; the call keeps running");
                }
                // Either way the call goes on without its request: to its
                // end, or until it has seen the cancel and settled.
                tokio::spawn(call);
                Err(McpError::internal_error("request cancelled", None))
            }
        };
        if let Some(p) = progress {
            p.abort();
        }
        to_mcp_result(outcome?, modern)
    }
}

/// The `Mcp-Session-Id` of the HTTP request `context` came with (`""` on
/// stdio, where rmcp attaches no HTTP parts).
fn session_of(context: &RequestContext<RoleServer>) -> String {
    context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|p| p.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> InitializeResult {
        // Resources (with subscriptions), prompts and completions come from
        // contract 0.2.0 plugins (`Host::resources`, `Host::prompts`);
        // logging carries their `client.log` messages.
        let capabilities: ServerCapabilities = serde_json::from_value(json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": false},
            "prompts": {"listChanged": false},
            "completions": {},
            "logging": {},
        }))
        .unwrap_or_default();
        InitializeResult::new(capabilities)
            .with_protocol_version(PROTOCOL_VERSION)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "toolhost runs tools from sandboxed WebAssembly plugins. `bash` runs shell \
                 commands in the workspace; long runs can be moved to the background and \
                 followed with `bash_output`.",
            )
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(SUPPORTED_PROTOCOL_VERSIONS)
    }

    /// What a 2026-07-28 `subscriptions/listen` gets ("Subscriptions"):
    /// `toolsListChanged` when asked, and the `resourceSubscriptions` URIs
    /// asked for that `resources/subscribe` would accept (at most
    /// [`MAX_SUBSCRIPTIONS_PER_SESSION`], each at most
    /// [`MAX_SUBSCRIBE_URI_BYTES`] without control characters); prompts and
    /// the resource list never change, so their list-changed kinds are not
    /// offered. rmcp then keeps only what the capabilities advertise.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut accepted = rmcp::model::SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed.filter(|on| *on);
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            uris.iter()
                .filter(|u| u.len() <= MAX_SUBSCRIBE_URI_BYTES && !u.chars().any(char::is_control))
                .take(MAX_SUBSCRIPTIONS_PER_SESSION)
                .cloned()
                .collect()
        });
        Some(accepted)
    }

    /// Runs one `subscriptions/listen` stream until the client closes it
    /// (or the server stops): `notifications/tools/list_changed` when
    /// [`Host::tools_changed`] fires, `notifications/resources/updated` for
    /// the accepted URIs (a plugin's `client.resource-updated`), each tagged
    /// with the subscription id (rmcp's sink).
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let sink = context.sink().clone();
        let accepted = context.accepted().clone();
        let _listener = self.shared.subscriptions.listen(
            accepted.resource_subscriptions.clone().unwrap_or_default(),
            sink.clone(),
        );
        let mut tools = accepted.tools_list_changed == Some(true);
        let mut changed = self.shared.host.tools_changed();
        loop {
            tokio::select! {
                c = changed.changed(), if tools => {
                    if c.is_err() {
                        tools = false;
                    } else if sink.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                }
                () = context.cancelled() => break,
            }
        }
        Ok(())
    }

    /// The tool `name` (for rmcp's `Mcp-Param-*` header checks on HTTP,
    /// MCP 2026-07-28 "Streamable HTTP", "Custom Headers from Tool
    /// Parameters").
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.host.tool(name).map(|t| McpServer::mcp_tool(&t))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if self.initialized.swap(true, Ordering::SeqCst) {
            return Err(McpError::invalid_request(
                "Invalid Request: already initialized (send `initialize` once per connection \
                 or session)",
                None,
            ));
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changed = self.shared.host.tools_changed();
        let mut alive = self.alive.subscribe();
        let peer = context.peer;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    c = changed.changed() => if c.is_err() { break },
                    // Only fires (with an error) once the session's handler is gone.
                    _ = alive.changed() => break,
                }
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    /// An unknown method: `-32601` naming it as [`echo_name`] does (rmcp's default: raw).
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, McpError> {
        let text = format!("Method not found: `{}`", echo_name(&request.method));
        let code = rmcp::model::ErrorCode::METHOD_NOT_FOUND;
        Err(McpError::new(code, text, None))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        no_cursor(request.as_ref())?;
        Ok(ListToolsResult::with_all_items(McpServer::tool_list(
            &self.shared.host,
        )))
    }

    /// A `tools/call` under its SERVER span (`spans.rs`): the call's own
    /// spans are its children, the outcome recorded on it.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let span = spans::tools_call(&context, &request.name);
        let result = self.serve_tool_call(request, context, &span).await;
        spans::record_tools_call(&span, &result);
        result
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        no_cursor(request.as_ref())?;
        self.session.set_peer(&context.peer);
        offers::list_resources(&self.shared.host)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        no_cursor(request.as_ref())?;
        offers::list_resource_templates(&self.shared.host)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let client: Arc<dyn toolhost_runtime::CallClient> = self.client_for(&context, None);
        let _guard = self.shared.inflight.enter();
        let contents = self
            .shared
            .host
            .read_resource(&request.uri, Some(client))
            .await
            .map_err(offers::mcp_error)?;
        Ok(offers::read_result(&contents)?.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session.set_peer(&context.peer);
        if request.uri.len() > MAX_SUBSCRIBE_URI_BYTES || request.uri.chars().any(char::is_control)
        {
            return Err(McpError::invalid_params(
                format!(
                    "invalid resource URI: at most {MAX_SUBSCRIBE_URI_BYTES} bytes, no control \
                     characters"
                ),
                None,
            ));
        }
        if self.session.subscription_count() >= MAX_SUBSCRIPTIONS_PER_SESSION {
            return Err(McpError::invalid_params(
                format!(
                    "too many subscriptions: at most {MAX_SUBSCRIPTIONS_PER_SESSION} per session"
                ),
                None,
            ));
        }
        self.session.subscribe(&request.uri, true);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session.subscribe(&request.uri, false);
        Ok(())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        no_cursor(request.as_ref())?;
        offers::list_prompts(&self.shared.host)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if era::is_modern(&context) {
            return self.get_prompt_modern(request, context).await;
        }
        let arguments = offers::string_arguments(request.arguments.as_ref())?;
        let client: Arc<dyn toolhost_runtime::CallClient> = self.client_for(&context, None);
        let _guard = self.shared.inflight.enter();
        let result = self
            .shared
            .host
            .get_prompt(&request.name, arguments, Some(client))
            .await
            .map_err(offers::mcp_error)?;
        Ok(offers::prompt_result(&result)?.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        offers::complete(&self.shared.host, request).await
    }

    #[allow(deprecated)] // rmcp marks logging deprecated (SEP-2577); MCP 2025-11-25 has it.
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // MCP 2026-07-28 removed `logging/setLevel` (the level travels in
        // each request's `_meta`).
        if era::is_modern(&context) {
            return Err(McpError::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        }
        self.session.set_peer(&context.peer);
        self.session.set_log_level(request.level);
        Ok(())
    }
}

/// Every list is one page (toolhost mints no cursor), so a request carrying
/// a `cursor` names none of ours: `-32602`, never a silent full list
/// ("Pagination": invalid cursors SHOULD be `-32602`, both revisions).
fn no_cursor(request: Option<&PaginatedRequestParams>) -> Result<(), McpError> {
    match request.and_then(|r| r.cursor.as_deref()) {
        Some(cursor) => Err(McpError::invalid_params(
            format!("unknown cursor {cursor:?}: this server's lists have one page and no cursors"),
            None,
        )),
        None => Ok(()),
    }
}

/// A settled host call as MCP answers it: a `CallToolResult`, or `-32602`
/// for an unknown tool ("Tools", "Error Handling"). Arguments the plugin
/// refuses are `-32602` too for a legacy request (as toolhost always
/// answered them), and a tool execution error (`isError: true`) for a
/// `modern` one: MCP 2026-07-28 "Tools", "Error Handling" lists input
/// validation errors among them, so the model can correct its call.
fn to_mcp_result(
    result: Result<toolhost_runtime::ToolResult, ToolCallError>,
    modern: bool,
) -> Result<CallToolResponse, McpError> {
    match result {
        Ok(r) => Ok(crate::content::call_tool_result(&r).into()),
        Err(e @ ToolCallError::InvalidArguments { .. }) if modern => {
            let mut out = CallToolResult::error(vec![ContentBlock::text(e.to_string())]);
            out.is_error = Some(true);
            Ok(out.into())
        }
        Err(e @ (ToolCallError::UnknownTool { .. } | ToolCallError::InvalidArguments { .. })) => {
            Err(McpError::invalid_params(e.to_string(), None))
        }
        Err(e @ (ToolCallError::Plugin(_) | ToolCallError::Cancelled(_))) => {
            let mut out = CallToolResult::error(vec![ContentBlock::text(e.to_string())]);
            out.is_error = Some(true);
            Ok(out.into())
        }
    }
}

/// Sends `notifications/progress` for one call: progress = output bytes of
/// its processes so far, summed from the call's own sink
/// ([`toolhost_runtime::CallRequest::progress`]), at most one notification
/// every [`PROGRESS_INTERVAL`]. Ends when the call does (the sink closes) or
/// a contract 0.2.0 plugin reports its own progress.
async fn progress_pump(
    mut events: tokio::sync::mpsc::UnboundedReceiver<CallProgress>,
    token: ProgressToken,
    peer: Peer<RoleServer>,
    plugin_reports_progress: Arc<AtomicBool>,
) {
    let mut bytes = 0u64;
    let mut sent = 0u64;
    while let Some(first) = events.recv().await {
        // Everything that arrived while the last notification waited out
        // its interval counts in this one.
        let mut next = Some(first);
        while let Some(event) = next {
            match event {
                CallProgress::Output { bytes: n } => bytes += n,
            }
            next = events.try_recv().ok();
        }
        // A plugin that reports its own progress (contract 0.2.0) owns the
        // token from then on: mixing in output bytes would not grow.
        if plugin_reports_progress.load(Ordering::Relaxed) {
            return;
        }
        if bytes > sent {
            let mut param = ProgressNotificationParam::new(token.clone(), bytes as f64);
            param.message = Some(format!("{bytes} bytes of output"));
            if peer.notify_progress(param).await.is_err() {
                return;
            }
            sent = bytes;
            tokio::time::sleep(PROGRESS_INTERVAL).await;
        }
    }
}
