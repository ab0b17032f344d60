//! The control API: a Unix socket for humans and tools attached to a running
//! host session (docs/attach.md#the-control-socket).
//!
//! Where: `<state-dir>/hosts/<host-session-id>/control.sock`, mode 0600 inside
//! a 0700 directory; a connection from another uid is closed at once (checked
//! with `SO_PEERCRED`).
//!
//! Protocol: JSON-RPC 2.0, one message per line (UTF-8 JSON, `\n`-terminated),
//! requests answered in the order they arrive on a connection. Methods (params → result):
//!
//! | method | params | result |
//! | --- | --- | --- |
//! | `hello` | — | `{protocol, host_session, pid, workspace, last_seq, heartbeat_interval_ms}` |
//! | `attach` | `{cursor, client?}` | `{host_session, snapshot_seq, pending_permissions, running_calls}`; then `events` notifications (see below) and this client becomes an approver |
//! | `events` | `{cursor, max?}` | `{first_retained_seq, snapshot_seq, history_complete, events}` ([`toolhost_runtime::Replay`]) |
//! | `heartbeat` | — | `{last_seq, now_ms}` |
//! | `sessions.list` | — | `{host_session, calls, processes}` (running tool calls; process session snapshots) |
//! | `hosts.list` | — | `[{id, state, pid, last_seq, live}]`: every host session in the state dir |
//! | `permission.pending` | — | the unanswered approval requests, oldest first: [`PendingPermission`] (`text` is the whole question, escaped) |
//! | `permission.resolve` | `{request_id, outcome}` | `{}`; outcome is an ACP name: `allow_once`, `allow_always`, `reject_once`, `reject_always`, `cancelled` |
//! | `call.cancel` | `{tool_call_id}` | `{}`: kills the call's foreground process groups; the call ends cancelled |
//! | `call.detach` | `{tool_call_id, reason?}` | `{id, reason, output_bytes, tool_call_id}`: the run becomes a background task |
//! | `session.kill` | `{session_id, signal?}` | `{signalled}` |
//! | `session.write_stdin` | `{session_id, data, close?}` | `{}` |
//! | `detach` | `{mode}` (`graceful` or `abrupt`) | `{}`; the host then closes the connection |
//! | `stop` | — | `{}`; the host drains and stops as on SIGTERM (`lifecycle draining`, then `stopped`); a second `stop` during the drain cancels what still runs at once (docs/operations.md#stopping-and-draining) |
//!
//! After `attach`, the host sends `{"jsonrpc":"2.0","method":"events","params":Replay}`
//! notifications whenever there are events after the last one it sent. A client
//! applies only events right after its cursor (see [`crate::attach::Follower`]);
//! on a gap it asks `events` from its cursor again.
//!
//! Heartbeats: a client sends any message at least every
//! [`HEARTBEAT_INTERVAL`] (`heartbeat` when idle); a connection silent for
//! [`HEARTBEAT_TIMEOUT`] is closed as lost. While at least one attached client
//! is connected, permission requests wait for an answer from one of them; when
//! the last attached client leaves, requests still waiting are resolved
//! `cancelled` (which rejects the command).
//!
//! Errors: JSON-RPC codes `-32700` (parse), `-32600` (invalid request),
//! `-32601` (unknown method), `-32602` (bad params, unknown id, already
//! answered), `-32000` (the action failed; `message` says why).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, watch};

use toolhost_runtime::Host;

use crate::jsonrpc::{self, Line, LineReader, codes};
use toolhost_process::Caller;
use toolhost_runtime::{ApprovalOutcome, ApprovalRequest, Approver};
use toolhost_runtime::{HostEventKind, Lifecycle, hosts_dir};

/// The socket's file name in the host session's directory.
pub const SOCKET_FILE: &str = "control.sock";

/// The protocol name `hello` reports.
pub const PROTOCOL: &str = "toolhost-control/1";

/// How often a client should send something (a `heartbeat` when idle): 5 s.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// A connection silent this long is closed as lost: 20 s.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(20);

/// Longest request line accepted: 8 MiB (a `session.write_stdin` payload).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// `<state_dir>/hosts/<id>/control.sock`.
pub fn socket_path(state_dir: &Path, host_session: &str) -> PathBuf {
    hosts_dir(state_dir).join(host_session).join(SOCKET_FILE)
}

/// Errors of the control API (server and client side).
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The socket could not be created, connected to, read or written.
    #[error("control socket {path}: {message}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The host answered a request with a JSON-RPC error.
    #[error("{message} (code {code})")]
    Rpc {
        /// The JSON-RPC error code.
        code: i32,
        /// The message.
        message: String,
    },
    /// The host closed the connection.
    #[error("the host closed the connection")]
    Closed,
}

/// An unanswered approval request, as `attach` and `permission.pending` list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingPermission {
    /// The id to answer with.
    pub request_id: String,
    /// The short identifier the question shows (`#N`,
    /// `toolhost_runtime::short_id`), which an attached person's answer names.
    pub short_id: String,
    /// The question as a person is shown it, whole and escaped
    /// (`toolhost_runtime::permission_text`).
    pub text: String,
    /// The plugin asking.
    pub plugin: String,
    /// The tool call asking.
    pub tool_call_id: String,
    /// The tool.
    pub tool: String,
    /// The command line.
    pub command: String,
    /// The working directory.
    pub cwd: String,
    /// The policy's prompt.
    pub prompt: String,
}

impl From<&ApprovalRequest> for PendingPermission {
    fn from(r: &ApprovalRequest) -> Self {
        PendingPermission {
            request_id: r.request_id.clone(),
            short_id: toolhost_runtime::short_id(&r.request_id),
            text: toolhost_runtime::permission_text(r),
            plugin: r.plugin.clone(),
            tool_call_id: r.tool_call_id.clone(),
            tool: r.tool.clone(),
            command: r.command.clone(),
            cwd: r.cwd.clone(),
            prompt: r.prompt.clone(),
        }
    }
}

/// A host session as `hosts.list` and `toolhost host-sessions` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSessionInfo {
    /// The id (`hs_...`).
    pub id: String,
    /// `running` (its socket answers; `draining` when its last lifecycle
    /// state is), else the last lifecycle state in its log (`stopped`,
    /// `failed`, `interrupted`; `running` or `draining` in the log but no
    /// socket answering shows as `interrupted`), or `unknown`.
    pub state: String,
    /// Pid of the host process that last recorded a lifecycle event.
    pub pid: Option<u32>,
    /// The newest seq in its log.
    pub last_seq: u64,
    /// True when its control socket accepts connections.
    pub live: bool,
}

/// Lists the host sessions under `<state_dir>/hosts`, newest id last.
pub async fn list_host_sessions(state_dir: &Path) -> Vec<HostSessionInfo> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(hosts_dir(state_dir)) else {
        return out;
    };
    let mut ids: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|id| toolhost_runtime::validate_host_session_id(id).is_ok())
        .collect();
    ids.sort();
    for id in ids {
        let events = hosts_dir(state_dir)
            .join(&id)
            .join(toolhost_runtime::EVENTS_FILE);
        let (last_seq, lifecycle) = scan_log(&events);
        let live = UnixStream::connect(socket_path(state_dir, &id))
            .await
            .is_ok();
        let state = match (live, lifecycle) {
            (true, Some((Lifecycle::Draining, _))) => "draining".to_string(),
            (true, _) => "running".to_string(),
            // The host died before it recorded `stopped`.
            (false, Some((Lifecycle::Running | Lifecycle::Draining, _))) => {
                "interrupted".to_string()
            }
            (false, Some((state, _))) => serde_json::to_value(state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            (false, None) => "unknown".to_string(),
        };
        out.push(HostSessionInfo {
            id,
            state,
            pid: lifecycle.map(|(_, pid)| pid),
            last_seq,
            live,
        });
    }
    out
}

/// The last seq and the last lifecycle `(state, pid)` of a log file.
fn scan_log(path: &Path) -> (u64, Option<(Lifecycle, u32)>) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (0, None);
    };
    let mut last = 0;
    let mut lifecycle = None;
    for line in text.lines() {
        if let Ok(e) = serde_json::from_str::<toolhost_runtime::HostEvent>(line) {
            last = e.seq;
            if let HostEventKind::Lifecycle { state, pid, .. } = e.kind {
                lifecycle = Some((state, pid));
            }
        }
    }
    (last, lifecycle)
}

struct PendingAsk {
    request: ApprovalRequest,
    answer: oneshot::Sender<ApprovalOutcome>,
}

struct Shared {
    host: Arc<Host>,
    stop: watch::Sender<bool>,
    attached: Mutex<BTreeMap<u64, String>>,
    pending: Mutex<BTreeMap<String, PendingAsk>>,
    next_conn: AtomicU64,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, BTreeMap<String, PendingAsk>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn attached(&self) -> MutexGuard<'_, BTreeMap<u64, String>> {
        self.attached.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn detach_client(&self, conn: u64) {
        let mut attached = self.attached();
        if attached.remove(&conn).is_some() && attached.is_empty() {
            drop(attached);
            let asks = std::mem::take(&mut *self.pending());
            for (_, ask) in asks {
                let _ = ask.answer.send(ApprovalOutcome::Cancelled);
            }
        }
    }
}

/// The control-socket server of one host session. Also the [`Approver`] for
/// attached clients (registered by [`ControlServer::start`]).
pub struct ControlServer {
    shared: Arc<Shared>,
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The approver that asks attached control clients.
struct ControlApprover(Arc<Shared>);

impl Approver for ControlApprover {
    fn name(&self) -> &str {
        "control-client"
    }

    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<ApprovalOutcome>> + Send + 'a>>
    {
        Box::pin(async move {
            if self.0.attached().is_empty() {
                return None;
            }
            let (tx, rx) = oneshot::channel();
            self.0.pending().insert(
                request.request_id.clone(),
                PendingAsk {
                    request: request.clone(),
                    answer: tx,
                },
            );
            struct Remove<'s>(&'s Shared, &'s str);
            impl Drop for Remove<'_> {
                fn drop(&mut self) {
                    self.0.pending().remove(self.1);
                }
            }
            let _remove = Remove(&self.0, &request.request_id);
            Some(rx.await.unwrap_or(ApprovalOutcome::Cancelled))
        })
    }
}

impl ControlServer {
    /// Binds `<state_dir>/hosts/<id>/control.sock` for `host` (replacing a
    /// stale socket file), registers attached clients as an approver, and
    /// serves connections on the current tokio runtime. Setting `stop` to
    /// true is how the `stop` method asks the host to stop.
    ///
    /// Errors: [`ControlError::Io`] (path too long for a Unix socket — 107
    /// bytes —, another host serving the same session, permissions).
    pub fn start(
        host: Arc<Host>,
        stop: watch::Sender<bool>,
    ) -> Result<ControlServer, ControlError> {
        let id = host.events().id().to_string();
        let path = socket_path(&host.config().sessions.state_dir, &id);
        let io = |e: std::io::Error| ControlError::Io {
            path: path.clone(),
            message: e.to_string(),
        };
        if let Some(dir) = path.parent() {
            toolhost_process::create_private_dir_all(dir).map_err(io)?;
        }
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            return Err(ControlError::Io {
                path,
                message: format!("another host is already serving host session {id}"),
            });
        }
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(io)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        let shared = Arc::new(Shared {
            host: host.clone(),
            stop,
            attached: Mutex::new(BTreeMap::new()),
            pending: Mutex::new(BTreeMap::new()),
            next_conn: AtomicU64::new(1),
        });
        host.permissions()
            .add_approver(Arc::new(ControlApprover(shared.clone())));
        let accept = shared.clone();
        let task = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(serve_connection(accept.clone(), stream));
                    }
                    Err(e) => {
                        tracing::warn!("control socket accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok(ControlServer { shared, path, task })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The approver asking attached clients (already registered with the
    /// host's permission pipeline; exposed for embedders and tests).
    pub fn approver(&self) -> Arc<dyn Approver> {
        Arc::new(ControlApprover(self.shared.clone()))
    }

    /// How many clients are attached.
    pub fn attached_clients(&self) -> usize {
        self.shared.attached().len()
    }
}

/// What a request handler tells the connection loop to do after answering.
enum After {
    Continue,
    Close,
}

async fn serve_connection(shared: Arc<Shared>, stream: UnixStream) {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == toolhost_process::current_uid() => {
            // Same user, but maybe one of our own commands: a sandboxed
            // command must not answer its own permission prompts (AF_UNIX
            // connects are not blocked by the exec sandbox).
            if let Some(why) = cred
                .pid()
                .and_then(|pid| shared.host.sessions().command_peer(pid))
            {
                tracing::warn!(pid = cred.pid(), "refusing a control connection from {why}");
                return;
            }
        }
        Ok(cred) => {
            tracing::warn!(
                uid = cred.uid(),
                "refusing a control connection from another user"
            );
            return;
        }
        Err(e) => {
            tracing::warn!("cannot check a control client's credentials: {e}");
            return;
        }
    }
    let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let (read, mut write) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            if write.write_all(&jsonrpc::encode_line(&msg)).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    let mut reader = LineReader::new(read, MAX_LINE_BYTES);
    let mut pusher: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let line = match tokio::time::timeout(HEARTBEAT_TIMEOUT, reader.next_line()).await {
            Err(_) => {
                tracing::info!(
                    conn,
                    "control client silent past the heartbeat timeout; closing"
                );
                break;
            }
            Ok(Err(_)) | Ok(Ok(Line::Eof)) => break,
            Ok(Ok(Line::TooLong)) => {
                let _ = tx.send(jsonrpc::error(
                    &Value::Null,
                    codes::INVALID_REQUEST,
                    format!("Invalid Request: line longer than {MAX_LINE_BYTES} bytes"),
                ));
                break;
            }
            Ok(Ok(Line::Message(line))) => line,
        };
        let message: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                let _ = tx.send(jsonrpc::error(
                    &Value::Null,
                    codes::PARSE_ERROR,
                    format!("Parse error: {e}"),
                ));
                continue;
            }
        };
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            let _ = tx.send(jsonrpc::error(
                &id,
                codes::INVALID_REQUEST,
                "Invalid Request: no method",
            ));
            continue;
        };
        let params = message.get("params").cloned().unwrap_or(json!({}));
        let is_notification = message.get("id").is_none();
        let (reply, after) = handle(&shared, conn, method, params, &tx, &mut pusher).await;
        if !is_notification {
            let _ = tx.send(match reply {
                Ok(result) => jsonrpc::result(&id, result),
                Err((code, msg)) => jsonrpc::error(&id, code, msg),
            });
        }
        if let After::Close = after {
            break;
        }
    }
    if let Some(p) = pusher {
        p.abort();
    }
    shared.detach_client(conn);
    drop(tx);
    let _ = writer.await;
}

type Reply = Result<Value, (i32, String)>;

fn param<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, (i32, String)> {
    serde_json::from_value(params.clone()).map_err(|e| {
        let e = toolhost_runtime::echo_message(&e.to_string());
        (codes::INVALID_PARAMS, format!("invalid params: {e}"))
    })
}

async fn handle(
    shared: &Arc<Shared>,
    conn: u64,
    method: &str,
    params: Value,
    tx: &mpsc::UnboundedSender<Value>,
    pusher: &mut Option<tokio::task::JoinHandle<()>>,
) -> (Reply, After) {
    let host = &shared.host;
    let log = host.events();
    let failed = |e: &dyn std::fmt::Display| (codes::ACTION_FAILED, e.to_string());
    let reply = match method {
        "hello" => Ok(json!({
            "protocol": PROTOCOL,
            "host_session": log.id(),
            "pid": std::process::id(),
            "workspace": host.config().sessions.workspace,
            "last_seq": log.last_seq(),
            "heartbeat_interval_ms": HEARTBEAT_INTERVAL.as_millis() as u64,
        })),
        "heartbeat" => {
            Ok(json!({"last_seq": log.last_seq(), "now_ms": toolhost_runtime::now_ms()}))
        }
        "events" => {
            #[derive(Deserialize)]
            struct P {
                cursor: u64,
                max: Option<usize>,
            }
            param::<P>(&params).map(|p| {
                json!(log.replay(
                    p.cursor,
                    p.max.unwrap_or(toolhost_runtime::MAX_REPLAY_EVENTS)
                ))
            })
        }
        "attach" => {
            #[derive(Deserialize)]
            struct P {
                cursor: u64,
                #[serde(default)]
                client: Option<String>,
            }
            match param::<P>(&params) {
                Err(e) => Err(e),
                Ok(p) => {
                    shared
                        .attached()
                        .insert(conn, p.client.unwrap_or_else(|| "attach".into()));
                    if let Some(old) = pusher.take() {
                        old.abort();
                    }
                    *pusher = Some(tokio::spawn(push_events(
                        shared.clone(),
                        p.cursor,
                        tx.clone(),
                    )));
                    let pending: Vec<PendingPermission> = shared
                        .pending()
                        .values()
                        .map(|a| (&a.request).into())
                        .collect();
                    Ok(json!({
                        "host_session": log.id(),
                        "snapshot_seq": log.last_seq(),
                        "pending_permissions": pending,
                        "running_calls": host.running_calls(),
                    }))
                }
            }
        }
        "sessions.list" => Ok(json!({
            "host_session": {
                "id": log.id(),
                "pid": std::process::id(),
                "workspace": host.config().sessions.workspace,
                "last_seq": log.last_seq(),
                "attached_clients": shared.attached().len(),
            },
            "calls": host.running_calls(),
            "processes": host.sessions().list(&Caller::Host),
        })),
        "hosts.list" => Ok(json!(
            list_host_sessions(&host.config().sessions.state_dir).await
        )),
        "permission.pending" => {
            let pending: Vec<PendingPermission> = shared
                .pending()
                .values()
                .map(|a| (&a.request).into())
                .collect();
            Ok(json!(pending))
        }
        "permission.resolve" => {
            #[derive(Deserialize)]
            struct P {
                request_id: String,
                outcome: String,
            }
            match param::<P>(&params) {
                Err(e) => Err(e),
                Ok(p) => match ApprovalOutcome::parse(&p.outcome) {
                    None => Err((
                        codes::INVALID_PARAMS,
                        format!(
                            "unknown outcome `{}`; use allow_once, allow_always, reject_once, reject_always or cancelled",
                            toolhost_runtime::echo_name(&p.outcome)
                        ),
                    )),
                    Some(outcome) => match shared.pending().remove(&p.request_id) {
                        Some(ask) => {
                            let _ = ask.answer.send(outcome);
                            Ok(json!({}))
                        }
                        None => Err((
                            codes::INVALID_PARAMS,
                            format!(
                                "no pending permission request `{}` (already answered, withdrawn, or unknown)",
                                toolhost_runtime::echo_name(&p.request_id)
                            ),
                        )),
                    },
                },
            }
        }
        "call.cancel" => {
            #[derive(Deserialize)]
            struct P {
                tool_call_id: String,
            }
            match param::<P>(&params) {
                Err(e) => Err(e),
                Ok(p) if host.cancel_call(&p.tool_call_id) => Ok(json!({})),
                Ok(p) => Err((
                    codes::INVALID_PARAMS,
                    format!(
                        "no tool call `{}` is in progress",
                        toolhost_runtime::echo_name(&p.tool_call_id)
                    ),
                )),
            }
        }
        "call.detach" => {
            #[derive(Deserialize)]
            struct P {
                tool_call_id: String,
                #[serde(default)]
                reason: Option<String>,
            }
            match param::<P>(&params) {
                Err(e) => Err(e),
                Ok(p) => host
                    .sessions()
                    .detach_call(
                        &p.tool_call_id,
                        p.reason
                            .as_deref()
                            .unwrap_or("detached by an attached client"),
                    )
                    .map(|info| json!(info))
                    .map_err(|e| failed(&e)),
            }
        }
        "session.kill" => {
            #[derive(Deserialize)]
            struct P {
                session_id: String,
                #[serde(default)]
                signal: Option<String>,
            }
            match param::<P>(&params) {
                Err(e) => Err(e),
                Ok(p) => {
                    let signal = match p.signal.as_deref().map(toolhost_process::parse_signal) {
                        Some(Err(e)) => {
                            return (Err((codes::INVALID_PARAMS, e.to_string())), After::Continue);
                        }
                        Some(Ok(s)) => Some(s),
                        None => None,
                    };
                    host.sessions()
                        .kill(
                            &Caller::Host,
                            &p.session_id,
                            signal,
                            toolhost_process::KilledBy::ControlClient,
                        )
                        .await
                        .map(|k| json!(k))
                        .map_err(|e| failed(&e))
                }
            }
        }
        "session.write_stdin" => {
            #[derive(Deserialize)]
            struct P {
                session_id: String,
                #[serde(default)]
                data: String,
                #[serde(default)]
                close: bool,
            }
            match param::<P>(&params) {
                Err(e) => Err(e),
                Ok(p) => {
                    let sessions = host.sessions();
                    let mut r = Ok(());
                    if !p.data.is_empty() {
                        r = sessions
                            .write_stdin(&Caller::Host, &p.session_id, p.data.as_bytes())
                            .await;
                    }
                    if r.is_ok() && p.close {
                        r = sessions.close_stdin(&Caller::Host, &p.session_id).await;
                    }
                    r.map(|()| json!({})).map_err(|e| failed(&e))
                }
            }
        }
        "detach" => {
            // Requests on a connection are answered in order, so every action
            // a graceful client sent before `detach` has been applied.
            shared.detach_client(conn);
            return (Ok(json!({})), After::Close);
        }
        "stop" => {
            let _ = shared.stop.send(true);
            Ok(json!({}))
        }
        other => Err((
            codes::METHOD_NOT_FOUND,
            format!("Method not found: `{}`", toolhost_runtime::echo_name(other)),
        )),
    };
    (reply, After::Continue)
}

/// Sends `events` notifications to an attached client from `cursor` on.
async fn push_events(shared: Arc<Shared>, mut cursor: u64, tx: mpsc::UnboundedSender<Value>) {
    let log = shared.host.events().clone();
    let mut changes = log.subscribe();
    loop {
        let replay = log.replay(cursor, toolhost_runtime::MAX_REPLAY_EVENTS);
        if let Some(last) = replay.events.last() {
            cursor = last.seq;
            if tx
                .send(json!({"jsonrpc": "2.0", "method": "events", "params": replay}))
                .is_err()
            {
                return;
            }
        } else if !replay.history_complete {
            // Nothing returned but history is incomplete (lost events):
            // report once and jump to what exists.
            let _ = tx.send(json!({"jsonrpc": "2.0", "method": "events", "params": replay}));
            cursor = replay.snapshot_seq;
        }
        if replay.history_complete && changes.changed().await.is_err() {
            return;
        }
    }
}

/// The sending half of a control-API connection.
pub struct ControlWriter {
    path: PathBuf,
    writer: tokio::net::unix::OwnedWriteHalf,
    next_id: u64,
}

impl ControlWriter {
    /// Sends a request and returns its id.
    ///
    /// Errors: [`ControlError::Io`].
    pub async fn send(&mut self, method: &str, params: Value) -> Result<u64, ControlError> {
        let id = self.next_id;
        self.next_id += 1;
        self.writer
            .write_all(&jsonrpc::encode_line(&jsonrpc::request(id, method, params)))
            .await
            .map_err(|e| ControlError::Io {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        Ok(id)
    }

    /// Closes the write side.
    pub async fn close(mut self) {
        let _ = self.writer.shutdown().await;
    }
}

/// The reading half of a [`ControlClient`]: one JSON-RPC message per line.
pub struct ControlReader {
    lines: LineReader<tokio::net::unix::OwnedReadHalf>,
    path: PathBuf,
}

impl ControlReader {
    /// Reads the next message (response or notification).
    ///
    /// Errors: [`ControlError::Closed`] at end of stream; [`ControlError::Io`]
    /// for a read error, a line longer than [`MAX_LINE_BYTES`] or invalid JSON.
    pub async fn next_message(&mut self) -> Result<Value, ControlError> {
        let io = |message: String| ControlError::Io {
            path: self.path.clone(),
            message,
        };
        match self.lines.next_line().await {
            Err(e) => Err(io(e.to_string())),
            Ok(Line::Eof) => Err(ControlError::Closed),
            Ok(Line::TooLong) => Err(io(format!(
                "the host sent a line longer than {MAX_LINE_BYTES} bytes"
            ))),
            Ok(Line::Message(line)) => serde_json::from_slice(&line)
                .map_err(|e| io(format!("the host sent invalid JSON: {e}"))),
        }
    }
}

/// A minimal control-API client: requests and the notifications that arrive
/// meanwhile.
pub struct ControlClient {
    reader: ControlReader,
    writer: ControlWriter,
    /// Notifications received while waiting for a response, oldest first.
    pub notifications: std::collections::VecDeque<Value>,
}

impl ControlClient {
    /// Connects to a host's control socket.
    ///
    /// Errors: [`ControlError::Io`] (no such socket, host not running).
    pub async fn connect(path: &Path) -> Result<ControlClient, ControlError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|e| ControlError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        let (r, w) = stream.into_split();
        Ok(ControlClient {
            reader: ControlReader {
                lines: LineReader::new(r, MAX_LINE_BYTES),
                path: path.to_path_buf(),
            },
            writer: ControlWriter {
                path: path.to_path_buf(),
                writer: w,
                next_id: 1,
            },
            notifications: Default::default(),
        })
    }

    /// Splits into the reading half and the writer.
    pub fn into_split(self) -> (ControlReader, ControlWriter) {
        (self.reader, self.writer)
    }

    /// Sends a request and returns its id (read the answer with [`ControlClient::next_message`]).
    ///
    /// Errors: [`ControlError::Io`].
    pub async fn send(&mut self, method: &str, params: Value) -> Result<u64, ControlError> {
        self.writer.send(method, params).await
    }

    /// Reads the next message (response or notification).
    ///
    /// Errors: [`ControlError::Closed`] at end of stream; [`ControlError::Io`].
    pub async fn next_message(&mut self) -> Result<Value, ControlError> {
        self.reader.next_message().await
    }

    /// Sends a request and waits for its result; notifications arriving
    /// meanwhile are queued in [`ControlClient::notifications`].
    ///
    /// Errors: [`ControlError::Rpc`] for an error answer, [`ControlError::Closed`], [`ControlError::Io`].
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, ControlError> {
        let id = self.send(method, params).await?;
        loop {
            let msg = self.next_message().await?;
            if msg.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(err) = msg.get("error") {
                    return Err(ControlError::Rpc {
                        code: err.get("code").and_then(Value::as_i64).unwrap_or(0) as i32,
                        message: err
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    });
                }
                return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
            }
            self.notifications.push_back(msg);
        }
    }

    /// Closes the write side (an abrupt detach, as far as the host can tell).
    pub async fn close(self) {
        self.writer.close().await;
    }
}
