//! `toolhost serve`: an MCP server over stdio (ARCHITECTURE.md, "Front doors"), built on rmcp, the
//! official Rust SDK, following the MCP specification revision 2025-06-18
//! (<https://modelcontextprotocol.io/specification/2025-06-18>).
//!
//! - `initialize` answers with the `tools` capability and `listChanged: true`
//!   (a `notifications/tools/list_changed` is sent whenever
//!   [`Host::tools_changed`] fires; the set is fixed at start-up for now).
//! - `tools/list`: every loaded plugin's tools with their description, JSON
//!   Schema (the plugin's `input-schema`) and annotations from its hints.
//! - `tools/call`: text content, `structuredContent` and `isError`. An unknown
//!   tool or arguments the plugin refuses are JSON-RPC errors `-32602`
//!   (Invalid params), as the spec's tools section shows; a plugin trap or
//!   limit is a result with `isError: true` so the agent can read it.
//! - A call whose `_meta.progressToken` is set gets `notifications/progress`
//!   with `progress` = output bytes its foreground processes wrote so far
//!   (sent when it grows, at most every [`PROGRESS_INTERVAL`]).
//! - `notifications/cancelled` for a call in progress cancels it
//!   ([`Host::cancel_call`]: the process group of the call's foreground runs
//!   is killed) and no response is sent, as the spec's cancellation section
//!   requires.
//! - Calls run concurrently (each request is its own task).
//! - A client that disappears (stdin closes) does not stop calls in
//!   progress: they run to their end and are recorded in the event log;
//!   [`serve_stdio`] returns once they have settled.
//!
//! The transport is ours ([`StdioTransport`]) rather than rmcp's, because
//! JSON-RPC 2.0 §5.1 asks for error responses rmcp's stdio transport does not
//! send: unparsable JSON gets `-32700` (Parse error, id `null`), a message that
//! is not a valid request object (a batch, a wrong `jsonrpc`, a line longer
//! than [`MAX_MESSAGE_BYTES`]) gets `-32600` (Invalid Request), an unknown
//! method `-32601` (rmcp), a known method with malformed params `-32602`.
//! The server keeps serving after each. stdout carries protocol messages
//! only; logs go to stderr.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId, ServerCapabilities, Tool,
    ToolAnnotations,
};
use rmcp::service::{
    NotificationContext, Peer, RequestContext, RxJsonRpcMessage, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use toolhost_runtime::host_session::HostEventKind;
use toolhost_runtime::{Host, HostError};

use crate::jsonrpc::{self, Line, LineReader};

/// Longest message line the server reads: 4 MiB. A longer line is discarded
/// (never buffered whole) and answered with `-32600`.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Shortest time between two progress notifications of one call: 100 ms.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// The MCP revision this server implements; `initialize` negotiates down to it.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_06_18;

pub use crate::jsonrpc::codes;

/// The client-to-server request methods of MCP 2025-06-18.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

/// Ids (as compact JSON text) of requests the client cancelled, shared by the
/// transport (which sees `notifications/cancelled` first) and the handler.
type CancelledSet = Arc<Mutex<HashSet<String>>>;

fn id_key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// Counts calls in progress so `serve` can wait for them after the client left.
#[derive(Clone)]
struct Inflight(watch::Sender<usize>);

struct InflightGuard(watch::Sender<usize>);

impl Inflight {
    fn enter(&self) -> InflightGuard {
        self.0.send_modify(|n| *n += 1);
        InflightGuard(self.0.clone())
    }
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// The MCP request handler: tools of a [`Host`].
#[derive(Clone)]
pub struct McpServer {
    host: Arc<Host>,
    cancelled: CancelledSet,
    inflight: Inflight,
    elicitation: Arc<ElicitationApprover>,
}

impl McpServer {
    /// A handler for `host`. Registers the MCP client as a permission
    /// approver (through elicitation, when the client declares it); it is
    /// asked after any attached control client.
    fn new(host: Arc<Host>, cancelled: CancelledSet) -> McpServer {
        let elicitation = Arc::new(ElicitationApprover::default());
        host.permissions().add_approver(elicitation.clone());
        McpServer {
            host,
            cancelled,
            inflight: Inflight(watch::channel(0).0),
            elicitation,
        }
    }

    /// The MCP tool list (name, description, input schema, annotations).
    pub fn tool_list(host: &Host) -> Vec<Tool> {
        host.tools()
            .iter()
            .map(|t| {
                let schema: JsonObject =
                    serde_json::from_str(&t.spec.input_schema).unwrap_or_else(|_| {
                        let mut o = JsonObject::new();
                        o.insert("type".into(), json!("object"));
                        o
                    });
                let hints = &t.spec.hints;
                Tool::new(t.name.clone(), t.spec.description.clone(), Arc::new(schema))
                    .with_annotations(
                        ToolAnnotations::new()
                            .read_only(hints.read_only)
                            .destructive(hints.destructive)
                            .idempotent(hints.idempotent)
                            .open_world(hints.open_world),
                    )
            })
            .collect()
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> InitializeResult {
        let capabilities: ServerCapabilities =
            serde_json::from_value(json!({"tools": {"listChanged": true}})).unwrap_or_default();
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
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL_VERSION))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changed = self.host.tools_changed();
        let peer = context.peer;
        self.elicitation.connect(&peer);
        tokio::spawn(async move {
            while changed.changed().await.is_ok() {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(McpServer::tool_list(
            &self.host,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        if !self.host.tools().iter().any(|t| t.name == name) {
            let available: Vec<_> = self.host.tools().iter().map(|t| t.name.clone()).collect();
            return Err(McpError::invalid_params(
                format!("Unknown tool: {name}"),
                Some(json!({ "available": available })),
            ));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let host = self.host.clone();
        let tool_call_id = host.new_call_id();
        let cursor = host.events().last_seq();
        let cancel = Arc::new(tokio::sync::Notify::new());
        let (tx, rx) = tokio::sync::oneshot::channel();
        {
            let guard = self.inflight.enter();
            let host = host.clone();
            let id = tool_call_id.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let result = host
                    .call_tool_as(&id, &name, &arguments, "mcp", cancel)
                    .await;
                drop(guard);
                let _ = tx.send(result);
            });
        }
        let progress = context.meta.get_progress_token().map(|token| {
            tokio::spawn(progress_pump(
                host.clone(),
                tool_call_id.clone(),
                cursor,
                token,
                context.peer.clone(),
            ))
        });
        let outcome = tokio::select! {
            r = rx => r.map_err(|_| McpError::internal_error("the tool call task ended without a result", None)),
            () = context.ct.cancelled() => {
                let key = id_key(&context.id);
                let by_client = self.cancelled.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
                if by_client {
                    tracing::info!(%tool_call_id, "cancelled by the client");
                    cancel.notify_one();
                } else {
                    tracing::info!(%tool_call_id, "the client went away; the call keeps running");
                }
                Err(McpError::internal_error("request cancelled", None))
            }
        };
        if let Some(p) = progress {
            p.abort();
        }
        let result = outcome?;
        match result {
            Ok(r) => {
                let mut out = if r.is_error {
                    CallToolResult::error(vec![ContentBlock::text(r.text)])
                } else {
                    CallToolResult::success(vec![ContentBlock::text(r.text)])
                };
                out.structured_content = r.structured;
                out.is_error = Some(r.is_error);
                Ok(out.into())
            }
            Err(e @ (HostError::UnknownTool { .. } | HostError::InvalidArguments { .. })) => {
                Err(McpError::invalid_params(e.to_string(), None))
            }
            Err(e @ (HostError::Plugin(_) | HostError::Cancelled(_))) => {
                let mut out = CallToolResult::error(vec![ContentBlock::text(e.to_string())]);
                out.is_error = Some(true);
                Ok(out.into())
            }
            Err(e) => Err(McpError::internal_error(e.to_string(), None)),
        }
    }
}

/// Sends `notifications/progress` for `tool_call_id`: progress = output bytes
/// of its processes so far (from the event log, after `cursor`).
async fn progress_pump(
    host: Arc<Host>,
    tool_call_id: String,
    mut cursor: u64,
    token: ProgressToken,
    peer: Peer<RoleServer>,
) {
    let mut changes = host.events().subscribe();
    let mut bytes = 0u64;
    let mut sent = 0u64;
    loop {
        let replay = host
            .events()
            .replay(cursor, toolhost_runtime::host_session::MAX_REPLAY_EVENTS);
        for recorded in &replay.events {
            cursor = recorded.seq;
            // Most events belong to other calls: skip them undecoded.
            if !recorded.json().contains(tool_call_id.as_str()) {
                continue;
            }
            let Ok(event) = recorded.event() else {
                continue;
            };
            if event.kind.tool_call_id() != Some(tool_call_id.as_str()) {
                continue;
            }
            if let HostEventKind::ProcessOutput { len, .. }
            | HostEventKind::PayloadOmitted { len, .. } = &event.kind
            {
                bytes += len;
            }
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
        if !replay.history_complete {
            continue;
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

/// A newline-delimited JSON-RPC transport over any reader/writer pair (stdin
/// and stdout for `serve`) that answers malformed input with JSON-RPC errors
/// (see the module docs) and records `notifications/cancelled` before rmcp
/// sees it. Writes go through one writer task, so a message is never
/// interleaved with another or cut by a cancelled future.
pub struct StdioTransport<R> {
    reader: LineReader<R>,
    out: mpsc::UnboundedSender<Vec<u8>>,
    cancelled: CancelledSet,
}

/// The task writing a [`StdioTransport`]'s messages; await it to be sure
/// every queued message was written once the transport is dropped.
pub type WriterTask = tokio::task::JoinHandle<()>;

impl<R: AsyncRead + Unpin + Send + 'static> StdioTransport<R> {
    fn new<W: AsyncWrite + Unpin + Send + 'static>(
        read: R,
        mut write: W,
        cancelled: CancelledSet,
    ) -> (StdioTransport<R>, WriterTask) {
        let (out, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if let Err(e) = async {
                    write.write_all(&line).await?;
                    write.flush().await
                }
                .await
                {
                    tracing::warn!("writing to the MCP client failed: {e}");
                    break;
                }
            }
        });
        (
            StdioTransport {
                reader: LineReader::new(read, MAX_MESSAGE_BYTES),
                out,
                cancelled,
            },
            writer,
        )
    }

    fn reply_error(&self, id: Value, code: i32, message: String) {
        tracing::debug!(code, "answering a malformed message: {message}");
        let _ = self
            .out
            .send(jsonrpc::encode_line(&jsonrpc::error(&id, code, message)));
    }

    /// Classifies one line: a message for rmcp, or `None` after answering it.
    fn parse(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        let value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                self.reply_error(Value::Null, codes::PARSE_ERROR, format!("Parse error: {e}"));
                return None;
            }
        };
        let Value::Object(obj) = &value else {
            let what = if value.is_array() {
                "batches are not supported (MCP 2025-06-18 removed JSON-RPC batching)"
            } else {
                "a message must be a JSON object"
            };
            self.reply_error(
                Value::Null,
                codes::INVALID_REQUEST,
                format!("Invalid Request: {what}"),
            );
            return None;
        };
        let id = obj.get("id").cloned();
        let reply_id = match &id {
            Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
            _ => Value::Null,
        };
        if obj.get("jsonrpc") != Some(&json!("2.0")) {
            self.reply_error(
                reply_id,
                codes::INVALID_REQUEST,
                "Invalid Request: `jsonrpc` must be \"2.0\"".into(),
            );
            return None;
        }
        let method = obj.get("method");
        if method.is_some_and(|m| !m.is_string()) {
            self.reply_error(
                reply_id,
                codes::INVALID_REQUEST,
                "Invalid Request: `method` must be a string".into(),
            );
            return None;
        }
        if method.and_then(Value::as_str) == Some("notifications/cancelled")
            && let Some(request_id) = obj.get("params").and_then(|p| p.get("requestId"))
        {
            self.cancelled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(request_id.to_string());
        }
        match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value.clone()) {
            Ok(rmcp::model::JsonRpcMessage::Request(r))
                if matches!(&r.request, rmcp::model::ClientRequest::CustomRequest(c)
                    if KNOWN_METHODS.contains(&c.method.as_str())) =>
            {
                // rmcp falls back to a custom request when a known method's
                // params do not fit; that is Invalid params, not an unknown method.
                let method = r.request.method().to_string();
                self.reply_error(
                    reply_id,
                    codes::INVALID_PARAMS,
                    format!("Invalid params for `{method}`"),
                );
                None
            }
            Ok(message) => Some(message),
            Err(e) => {
                match (method.and_then(Value::as_str), &id) {
                    (Some(method), Some(_)) => self.reply_error(
                        reply_id,
                        codes::INVALID_PARAMS,
                        format!("Invalid params for `{method}`: {e}"),
                    ),
                    (None, Some(_)) if obj.contains_key("result") || obj.contains_key("error") => {
                        tracing::warn!("ignoring a malformed response from the client: {e}");
                    }
                    (Some(method), None) => {
                        tracing::warn!("ignoring a malformed `{method}` notification: {e}");
                    }
                    _ => self.reply_error(
                        reply_id,
                        codes::INVALID_REQUEST,
                        format!("Invalid Request: {e}"),
                    ),
                }
                None
            }
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for StdioTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let line = serde_json::to_vec(&item)
            .map_err(std::io::Error::other)
            .map(|mut l| {
                l.push(b'\n');
                l
            });
        let out = self.out.clone();
        async move {
            out.send(line?)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "writer closed"))
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = match self.reader.next_line().await {
                Ok(Line::Eof) => return None,
                Err(e) => {
                    tracing::warn!("reading from the MCP client failed: {e}");
                    return None;
                }
                Ok(Line::TooLong) => {
                    self.reply_error(
                        Value::Null,
                        codes::INVALID_REQUEST,
                        format!("Invalid Request: message longer than {MAX_MESSAGE_BYTES} bytes"),
                    );
                    continue;
                }
                Ok(Line::Message(line)) => line,
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(message) = self.parse(&line) {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Why [`serve_stdio`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeEnd {
    /// The client closed the connection (stdin reached end of file) and every
    /// call in progress settled.
    ClientClosed,
    /// `stop` was requested (the control API); calls in progress were left to
    /// the caller to end.
    Stopped,
}

/// Errors of [`serve_stdio`].
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The MCP handshake failed (the client sent no valid `initialize`, or
    /// the connection broke during it).
    #[error("MCP initialization failed: {0}")]
    Initialize(String),
}

/// Serves MCP on `read`/`write` (stdin/stdout for `toolhost serve`) until the
/// client goes away and every call has settled, or `stop` fires.
///
/// Errors: [`ServeError::Initialize`].
pub async fn serve_stdio<R, W>(
    host: Arc<Host>,
    read: R,
    write: W,
    mut stop: watch::Receiver<bool>,
) -> Result<ServeEnd, ServeError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    use rmcp::ServiceExt;
    let cancelled = CancelledSet::default();
    let (transport, writer) = StdioTransport::new(read, write, cancelled.clone());
    let server = McpServer::new(host, cancelled);
    let inflight = server.inflight.0.subscribe();
    let running = tokio::select! {
        r = server.serve(transport) => r.map_err(|e| ServeError::Initialize(e.to_string()))?,
        _ = stop.wait_for(|s| *s) => return Ok(ServeEnd::Stopped),
    };
    let cancel = running.cancellation_token();
    let mut waiting = Box::pin(running.waiting());
    tokio::select! {
        _ = &mut waiting => {}
        _ = stop.wait_for(|s| *s) => {
            cancel.cancel();
            return Ok(ServeEnd::Stopped);
        }
    }
    drop(waiting);
    let mut inflight = inflight;
    let calls = inflight.borrow().to_owned();
    if calls > 0 {
        tracing::info!(
            calls,
            "the MCP client went away; waiting for calls in progress"
        );
    }
    tokio::select! {
        _ = inflight.wait_for(|n| *n == 0) => {}
        _ = stop.wait_for(|s| *s) => return Ok(ServeEnd::Stopped),
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    Ok(ServeEnd::ClientClosed)
}

/// The MCP client as a permission approver (step 4 of the permission pipeline, ARCHITECTURE.md, "The path of one tool call"): when the
/// client declared the `elicitation` capability (form mode, MCP 2025-06-18
/// `elicitation/create`), a policy `ask` becomes an elicitation whose form
/// has one required field, `decision`, an enum of the ACP option kinds
/// (`allow_once`, `allow_always`, `reject_once`, `reject_always`).
///
/// `accept` answers with that decision, `decline` is `reject_once`,
/// `cancel` is `cancelled`. A client without the capability, a failed request
/// or a malformed answer leaves the question to the next approver (none:
/// deny). An unanswered elicitation times out after
/// [`ELICITATION_TIMEOUT`].
#[derive(Default)]
pub struct ElicitationApprover {
    peer: std::sync::Mutex<Option<Peer<RoleServer>>>,
}

/// How long an elicitation waits for the person at the MCP client (5 min).
pub const ELICITATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

impl ElicitationApprover {
    /// Uses `peer` for asks if it declared form elicitation.
    fn connect(&self, peer: &Peer<RoleServer>) {
        if peer
            .supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Form)
        {
            *self.peer.lock().unwrap_or_else(|e| e.into_inner()) = Some(peer.clone());
        }
    }

    fn schema() -> Option<rmcp::model::ElicitationSchema> {
        serde_json::from_value(json!({
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "enum": ["allow_once", "allow_always", "reject_once", "reject_always"],
                    "enumNames": ["Allow once", "Allow always", "Reject once", "Reject always"]
                }
            },
            "required": ["decision"]
        }))
        .ok()
    }
}

impl toolhost_runtime::permissions::Approver for ElicitationApprover {
    fn name(&self) -> &str {
        "mcp-elicitation"
    }

    fn ask<'a>(
        &'a self,
        request: &'a toolhost_runtime::permissions::ApprovalRequest,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<Output = Option<toolhost_runtime::permissions::ApprovalOutcome>>
                + Send
                + 'a,
        >,
    > {
        use rmcp::model::{ElicitRequestParams, ElicitationAction};
        use toolhost_runtime::permissions::ApprovalOutcome;
        Box::pin(async move {
            let peer = self
                .peer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()?;
            let message = format!(
                "{}\n\ncommand: {}\ncwd: {}\n(tool `{}` of plugin `{}`)",
                request.prompt, request.command, request.cwd, request.tool, request.plugin
            );
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: Self::schema()?,
            };
            let result = match peer
                .create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT))
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("elicitation failed; trying the next approver: {e}");
                    return None;
                }
            };
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
        })
    }
}
