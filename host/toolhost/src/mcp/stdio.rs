//! MCP over stdio (MCP 2025-11-25, "Transports", "stdio"): newline-delimited
//! JSON-RPC on a reader/writer pair, one client per `toolhost serve` run.
//!
//! The transport is ours ([`StdioTransport`]) rather than rmcp's, because it
//! answers malformed input with JSON-RPC errors ([`super::classify`]), bounds
//! each line to [`MAX_MESSAGE_BYTES`], records `notifications/cancelled`
//! before rmcp sees it, and holds the lifecycle gate: until the client's
//! `initialize` arrives ("Lifecycle", "Initialization"), a `ping` is answered
//! with `{}`, notifications and responses are dropped, and any other request
//! gets `-32600` (the client "SHOULD NOT send requests other than pings
//! before the server has responded to the initialize request"). rmcp itself
//! would end the connection on the first notification there. stdout carries
//! protocol messages only; logs go to stderr.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use toolhost_runtime::Host;

use super::{
    CancelledSet, Incoming, MAX_MESSAGE_BYTES, McpServer, Shared, classify, codes, record_cancel,
};
use crate::jsonrpc::{self, Line, LineReader};

/// A newline-delimited JSON-RPC transport over any reader/writer pair (stdin
/// and stdout for `serve`) that answers malformed input with JSON-RPC errors
/// (see the module docs) and records `notifications/cancelled` before rmcp
/// sees it. Writes go through one writer task, so a message is never
/// interleaved with another or cut by a cancelled future.
pub struct StdioTransport<R> {
    reader: LineReader<R>,
    out: mpsc::UnboundedSender<Vec<u8>>,
    cancelled: CancelledSet,
    /// Whether the client's `initialize` was passed on to rmcp.
    initialize_seen: bool,
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
                initialize_seen: false,
            },
            writer,
        )
    }

    fn reply(&self, message: &Value) {
        let _ = self.out.send(jsonrpc::encode_line(message));
    }

    /// The lifecycle gate before `initialize` (module docs): `Some` for the
    /// message rmcp should see, `None` after answering or dropping it.
    fn before_initialize(
        &mut self,
        message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        match &message {
            JsonRpcMessage::Request(r) => match &r.request {
                ClientRequest::InitializeRequest(_) => {
                    self.initialize_seen = true;
                    Some(message)
                }
                ClientRequest::PingRequest(_) => {
                    let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
                    self.reply(&jsonrpc::result(&id, json!({})));
                    None
                }
                other => {
                    let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
                    let method = other.method().to_string();
                    tracing::debug!(%method, "a request before `initialize`");
                    self.reply(&jsonrpc::error(
                        &id,
                        codes::INVALID_REQUEST,
                        format!(
                            "Invalid Request: `{method}` before `initialize`; the server is not \
                             initialized yet (MCP lifecycle: only `ping` may precede it)"
                        ),
                    ));
                    None
                }
            },
            _ => {
                tracing::debug!("dropping a notification or response sent before `initialize`");
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
                    self.reply(&jsonrpc::error(
                        &Value::Null,
                        codes::INVALID_REQUEST,
                        format!("Invalid Request: message longer than {MAX_MESSAGE_BYTES} bytes"),
                    ));
                    continue;
                }
                Ok(Line::Message(line)) => line,
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message = match classify(&line) {
                Incoming::Message(m) => *m,
                Incoming::Reject { response, .. } => {
                    self.reply(&response);
                    continue;
                }
                Incoming::Ignore(why) => {
                    tracing::warn!("ignoring {why}");
                    continue;
                }
            };
            record_cancel(&self.cancelled, "", &message);
            if !self.initialize_seen {
                match self.before_initialize(message) {
                    Some(m) => return Some(m),
                    None => continue,
                }
            }
            return Some(message);
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
    /// `stop` was requested (the control API, a signal); calls in progress
    /// were left to the caller to end.
    Stopped,
}

/// Errors of [`serve_stdio`].
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The MCP handshake failed (the connection broke during it, or rmcp
    /// refused the `initialize` the gate let through).
    #[error("MCP initialization failed: {0}")]
    Initialize(String),
}

/// Serves MCP on `read`/`write` (stdin/stdout for `toolhost serve`) until the
/// client goes away and every call has settled, or `stop` fires. A client
/// that closes the connection before `initialize` is
/// [`ServeEnd::ClientClosed`], not an error.
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
    let shared = Shared::new(host, cancelled);
    let mut inflight = shared.inflight();
    let server = McpServer::new(shared);
    let running = tokio::select! {
        r = server.serve(transport) => match r {
            Ok(running) => running,
            // End of input before `initialize`: the client left; nothing ran.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
                return Ok(ServeEnd::ClientClosed);
            }
            Err(e) => return Err(ServeError::Initialize(e.to_string())),
        },
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
