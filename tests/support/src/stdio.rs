//! MCP clients over a child's stdio (MCP "Transports", stdio: one JSON-RPC
//! message a line on stdin and stdout).

use std::collections::HashMap;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

/// How long [`StdioClient::next_message`] waits for a line before it fails.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// How long [`StdioClient::close`] waits for the server to exit.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Responses awaited by [`StdioClient::request`], by JSON-RPC id.
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// An MCP server child spoken to with raw JSON-RPC lines.
///
/// [`request`](StdioClient::request) numbers its requests 0, 1, ... (so a
/// first [`initialize`](StdioClient::initialize) is id 0) and hands
/// each its response, so requests from many tasks run concurrently. Every
/// other line the server writes (notifications, server requests, answers to
/// what [`send`](StdioClient::send) wrote, lines that are not JSON) waits in
/// order for [`next_message`](StdioClient::next_message). A message written
/// with `send` should not use the id of a `request` still waiting.
///
/// The child's stderr is discarded; it is killed if the client is dropped
/// before [`close`](StdioClient::close).
pub struct StdioClient {
    child: Child,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Pending,
    others: tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>,
    next: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
}

impl StdioClient {
    /// Spawns `cmd` (e.g. [`serve_command`](crate::serve_command)) with its
    /// stdin and stdout piped to this client. Nothing is sent: call
    /// [`initialize`](StdioClient::initialize), or `send` what a test needs.
    /// Must run inside a tokio runtime.
    ///
    /// Errors: the spawn failed.
    pub fn spawn(mut cmd: Command) -> Result<StdioClient> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("spawning the MCP server")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let pending: Pending = Arc::default();
        let (others_tx, others) = mpsc::unbounded_channel();
        let p = pending.clone();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let message: Option<Value> = serde_json::from_str(&line).ok();
                match message.and_then(|m| Some((waiting(&p, &m)?, m))) {
                    // The request's task may have given up waiting.
                    Some((tx, m)) => drop(tx.send(m)),
                    None => {
                        if others_tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Ok(StdioClient {
            child,
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending,
            others: tokio::sync::Mutex::new(others),
            next: AtomicU64::new(0),
            reader,
        })
    }

    /// The child's process id (`None` once it has been waited for).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the child has exited, without waiting (`None`: still running).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// `initialize` at `protocol_version`, then `notifications/initialized`
    /// (MCP "Lifecycle"); returns the whole `initialize` response, which may
    /// be a JSON-RPC error.
    pub async fn initialize(&self, protocol_version: &str) -> Result<Value> {
        let response = self
            .request(
                "initialize",
                json!({"protocolVersion": protocol_version, "capabilities": {},
                       "clientInfo": {"name": "toolhost-test-support", "version": "1"}}),
            )
            .await?;
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await?;
        Ok(response)
    }

    /// Writes `line` (any bytes: a message, or not even JSON) and a newline.
    ///
    /// Errors: stdin is closed or the server stopped reading.
    pub async fn send(&self, line: impl AsRef<[u8]>) -> Result<()> {
        let mut stdin = self.stdin.lock().await;
        let stdin = stdin.as_mut().context("stdin closed")?;
        stdin.write_all(line.as_ref()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Sends request `method` with `params` and waits for its response, the
    /// whole message (`result` or `error`), however long it takes.
    ///
    /// Errors: the write failed, or the server closed stdout first.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(serde_json::to_vec(&message)?).await?;
        rx.await
            .with_context(|| format!("the server closed stdout before answering {method}"))
    }

    /// `tools/call` of `tool` with `args`; its `result` (a `CallToolResult`:
    /// `content`, `structuredContent`, `isError`).
    ///
    /// Errors: as [`request`](StdioClient::request), or a JSON-RPC error
    /// (the whole message in the text).
    pub async fn call_tool(&self, tool: &str, args: Value) -> Result<Value> {
        let msg = self
            .request("tools/call", json!({"name": tool, "arguments": args}))
            .await?;
        match msg.get("result") {
            Some(r) => Ok(r.clone()),
            None => bail!("JSON-RPC error: {msg}"),
        }
    }

    /// The next line the server wrote that answers no
    /// [`request`](StdioClient::request), parsed.
    ///
    /// Errors: none within [`ANSWER_TIMEOUT`], stdout closed, or a line that
    /// is not a JSON-RPC 2.0 message (`"jsonrpc": "2.0"`).
    pub async fn next_message(&self) -> Result<Value> {
        let mut others = self.others.lock().await;
        let line = match tokio::time::timeout(ANSWER_TIMEOUT, others.recv()).await {
            Ok(Some(line)) => line,
            Ok(None) => bail!("the server closed stdout"),
            Err(_) => bail!("no message from the server in {ANSWER_TIMEOUT:?}"),
        };
        let message: Value =
            serde_json::from_str(&line).map_err(|e| anyhow!("not JSON ({e}): {line:?}"))?;
        if message["jsonrpc"] != "2.0" {
            bail!("not a JSON-RPC 2.0 message: {message}");
        }
        Ok(message)
    }

    /// Reads [`next_message`](StdioClient::next_message)s until the response
    /// with `id` (a message without `method`), skipping notifications and
    /// server requests.
    pub async fn response(&self, id: &Value) -> Result<Value> {
        loop {
            let message = self.next_message().await?;
            if &message["id"] == id && message.get("method").is_none() {
                return Ok(message);
            }
        }
    }

    /// Closes stdin (the client goes away; `toolhost serve` then ends its
    /// calls and stops) and waits at most [`EXIT_TIMEOUT`] for the exit.
    ///
    /// Errors: no exit in time (the child is then killed on drop).
    pub async fn close(mut self) -> Result<ExitStatus> {
        self.stdin.lock().await.take();
        let status = tokio::time::timeout(EXIT_TIMEOUT, self.child.wait())
            .await
            .with_context(|| {
                format!("the server did not exit within {EXIT_TIMEOUT:?} of its stdin closing")
            })??;
        Ok(status)
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The waiting [`StdioClient::request`] that `message` answers, taken out of
/// `pending`: a response (no `method`) whose id is one of theirs.
fn waiting(pending: &Pending, message: &Value) -> Option<oneshot::Sender<Value>> {
    if message.get("method").is_some() {
        return None;
    }
    let id = message.get("id")?.as_u64()?;
    pending.lock().unwrap().remove(&id)
}

/// The text of a `CallToolResult`'s first content block (`""` when it has
/// none or it is not text).
pub fn result_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// Whether a `CallToolResult` is a failed call (`"isError": true`).
pub fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

/// An rmcp (the official Rust SDK) client session with handler `H`.
pub type RmcpClient<H = ()> = RunningService<RoleClient, H>;

/// Spawns `cmd` (an MCP server on stdio, stderr discarded) and initialises
/// an rmcp client session with it, `handler` answering the server's requests
/// and notifications (`()` for none); returns the session and the server's pid.
///
/// Errors: the spawn or `initialize` failed.
pub async fn rmcp_client<H: ClientHandler>(
    handler: H,
    cmd: Command,
) -> Result<(RmcpClient<H>, u32)> {
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .context("spawning the MCP server")?;
    let pid = transport.id().context("the MCP server has no pid")?;
    let client = handler.serve(transport).await.context("MCP initialize")?;
    Ok((client, pid))
}
