//! MCP over stdio (MCP 2025-11-25, "Transports", "stdio"): newline-delimited
//! JSON-RPC on a reader/writer pair, one client per `toolhost serve` run.
//!
//! The transport is ours ([`StdioTransport`]) rather than rmcp's, because it
//! answers malformed input with JSON-RPC errors ([`super::classify`]), bounds
//! each line to [`MAX_MESSAGE_BYTES`], records `notifications/cancelled`
//! before rmcp sees it, and holds the lifecycle gate (`era::open_stdio`):
//! until a lifecycle is open (the client's `initialize`, 2025-11-25
//! "Lifecycle", "Initialization"; or a 2026-07-28 request with complete
//! `_meta` that rmcp accepts), a `ping` is answered with `{}`, notifications
//! and responses are dropped, `server/discover` and requests naming a
//! protocol version in `_meta` go to rmcp, and any other request gets
//! `-32600` (the client "SHOULD NOT send requests other than pings before
//! the server has responded to the initialize request"). rmcp itself would
//! end the connection on the first notification there. stdout carries
//! protocol messages only; logs go to stderr.
//!
//! `toolhost serve` ([`serve_process_stdio`]) does not read and write its
//! stdio through tokio's `Stdin`/`Stdout`, which run every `read`, `write` and
//! `flush` on the blocking pool (two thread hand-offs each): when fd 0 or 1 is
//! a pipe or a socket ([`ProcessStdio::take`]), it is put in non-blocking mode
//! and driven by the reactor (tokio's `pipe` or `UnixStream`), and each message is written with
//! one `write` from the task that sends it, queued for a drain task only when
//! the pipe is full. Terminals, regular
//! files and anything else keep tokio's path.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;
use tokio::sync::{Notify, mpsc};

use toolhost_runtime::Host;

use super::drain::{Admission, Counted, Door, Drain};
use super::era::{self, Opening};
use super::{
    CancelledSet, Incoming, MAX_MESSAGE_BYTES, McpServer, Shared, cancel_key, classify, codes,
    record_cancel,
};
use crate::jsonrpc::{self, Line, LineReader};

/// A newline-delimited JSON-RPC transport over any reader/writer pair (stdin
/// and stdout for `serve`) that answers malformed input with JSON-RPC errors
/// (see the module docs) and records `notifications/cancelled` before rmcp
/// sees it. A message is written whole, in the order `send` was called, and
/// never interleaved with another or cut by a cancelled future: on a pipe or
/// socket by one non-blocking `write` in `send` itself (the rest, if the pipe
/// is full, by a drain task), on any other writer through one writer task.
/// During a stop it refuses new work ([`Drain::admit`]) and counts each work
/// request until its response is sent or the client cancels it.
pub struct StdioTransport<R> {
    reader: LineReader<R>,
    out: Out,
    cancelled: CancelledSet,
    drain: Arc<Drain>,
    /// The work requests passed on whose response is not sent yet, by
    /// [`cancel_key`], each counted for the drain.
    open: std::collections::HashMap<String, Counted>,
    /// Whether rmcp left its pre-lifecycle loop: the client's `initialize`,
    /// or a complete 2026-07-28 request, was passed on to it.
    lifecycle_open: bool,
}

/// The task writing a [`StdioTransport`]'s messages; await it to be sure
/// every queued message was written once the transport is dropped.
pub type WriterTask = tokio::task::JoinHandle<()>;

/// Where a [`StdioTransport`] writes.
enum Out {
    /// Lines for the writer task of an `AsyncWrite`.
    Task(mpsc::UnboundedSender<Vec<u8>>),
    /// Non-blocking writes on a pipe or socket.
    Direct(Arc<DirectOut>),
}

impl Out {
    /// Writes or queues `line` (one whole message with its `\n`).
    fn send(&self, line: Vec<u8>) -> std::io::Result<()> {
        match self {
            Out::Task(tx) => tx
                .send(line)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "writer closed")),
            Out::Direct(out) => out.send(&line),
        }
    }
}

impl<R> Drop for StdioTransport<R> {
    fn drop(&mut self) {
        // The drain task ends once what is queued is written.
        if let Out::Direct(out) = &self.out {
            out.close();
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> StdioTransport<R> {
    fn new<W: AsyncWrite + Unpin + Send + 'static>(
        read: R,
        mut write: W,
        cancelled: CancelledSet,
        drain: Arc<Drain>,
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
            StdioTransport::with_out(read, Out::Task(out), cancelled, drain),
            writer,
        )
    }

    /// A transport writing straight to `write` (a pipe or socket in
    /// non-blocking mode), with its drain task.
    fn direct(
        read: R,
        write: FdOut,
        cancelled: CancelledSet,
        drain: Arc<Drain>,
    ) -> (StdioTransport<R>, WriterTask) {
        let out = Arc::new(DirectOut {
            fd: write,
            pending: Mutex::default(),
            wake: Notify::new(),
        });
        let writer = tokio::spawn(DirectOut::drain(out.clone()));
        (
            StdioTransport::with_out(read, Out::Direct(out), cancelled, drain),
            writer,
        )
    }

    fn with_out(
        read: R,
        out: Out,
        cancelled: CancelledSet,
        drain: Arc<Drain>,
    ) -> StdioTransport<R> {
        StdioTransport {
            reader: LineReader::new(read, MAX_MESSAGE_BYTES),
            out,
            cancelled,
            drain,
            open: std::collections::HashMap::new(),
            lifecycle_open: false,
        }
    }

    /// The drain's say on `message` ([`Drain::admit`]): `false` when it was
    /// refused (and answered); a counted request is held in `open`, a
    /// cancelled one no longer (no response will come for it).
    fn admit(&mut self, message: &RxJsonRpcMessage<RoleServer>) -> bool {
        use rmcp::model::{ClientNotification, JsonRpcMessage};
        if let JsonRpcMessage::Notification(n) = message
            && let ClientNotification::CancelledNotification(c) = &n.notification
            && let Some(id) = &c.params.request_id
        {
            self.open.remove(&cancel_key("", id));
        }
        match self.drain.admit(message, Door::Stdio) {
            Admission::Pass => true,
            Admission::Count(counted) => {
                if let JsonRpcMessage::Request(r) = message {
                    self.open.insert(cancel_key("", &r.id), counted);
                }
                true
            }
            Admission::Refuse { response, .. } => {
                self.reply(&response);
                false
            }
        }
    }

    fn reply(&self, message: &Value) {
        let _ = self.out.send(jsonrpc::encode_line(message));
    }

    /// The lifecycle gate (module docs, `era::open_stdio`): `Some`
    /// for the message rmcp should see, `None` after answering or dropping
    /// it.
    fn before_lifecycle(
        &mut self,
        message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        match era::open_stdio(&message) {
            Opening::Pass { opens } => {
                self.lifecycle_open = opens;
                Some(message)
            }
            Opening::Answer(response) => {
                self.reply(&response);
                None
            }
            Opening::Drop => {
                tracing::debug!("dropping a notification or response sent before a lifecycle");
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
        // Written (or queued, in order) now rather than when rmcp polls the
        // future: the future only reports the outcome.
        let sent = serde_json::to_vec(&item)
            .map_err(std::io::Error::other)
            .and_then(|mut line| {
                line.push(b'\n');
                self.out.send(line)
            });
        // The response is out: the drain stops counting its request.
        let answered = match &item {
            rmcp::model::JsonRpcMessage::Response(r) => Some(&r.id),
            rmcp::model::JsonRpcMessage::Error(e) => e.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered {
            self.open.remove(&cancel_key("", id));
        }
        std::future::ready(sent)
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
            let was_open = self.lifecycle_open;
            let message = match was_open {
                true => message,
                false => match self.before_lifecycle(message) {
                    Some(m) => m,
                    None => continue,
                },
            };
            // After the gate: what it answered itself is never counted. A
            // refused `initialize` opens nothing.
            if !self.admit(&message) {
                self.lifecycle_open = was_open;
                continue;
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

/// Serves MCP on `read`/`write` until the client goes away and every call
/// has settled, or `drain` closes (a stop drained it: [`Drain::run`]). A
/// client that closes the connection before `initialize` is
/// [`ServeEnd::ClientClosed`], not an error. `toolhost serve` uses
/// [`serve_process_stdio`], which avoids tokio's blocking stdio.
///
/// Errors: [`ServeError::Initialize`].
pub async fn serve_stdio<R, W>(
    host: Arc<Host>,
    read: R,
    write: W,
    drain: Arc<Drain>,
) -> Result<ServeEnd, ServeError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let cancelled = CancelledSet::default();
    let (transport, writer) = StdioTransport::new(read, write, cancelled.clone(), drain.clone());
    serve_transport(host, transport, writer, cancelled, drain).await
}

/// Serves MCP on this process's stdin and stdout, as [`serve_stdio`] does,
/// through the descriptors `stdio` took ([`ProcessStdio::take`]): a pipe or
/// socket is read and written in non-blocking mode on the reactor, anything
/// else through tokio's `Stdin`/`Stdout`.
///
/// Errors: [`ServeError::Initialize`].
pub async fn serve_process_stdio(
    host: Arc<Host>,
    stdio: ProcessStdio,
    drain: Arc<Drain>,
) -> Result<ServeEnd, ServeError> {
    let input = match stdio.input {
        Some(fd) => Input::Fd(fd),
        None => Input::Tokio(tokio::io::stdin()),
    };
    let cancelled = CancelledSet::default();
    let (transport, writer) = match stdio.output {
        Some(fd) => StdioTransport::direct(input, fd, cancelled.clone(), drain.clone()),
        None => StdioTransport::new(input, tokio::io::stdout(), cancelled.clone(), drain.clone()),
    };
    serve_transport(host, transport, writer, cancelled, drain).await
}

async fn serve_transport<R: AsyncRead + Unpin + Send + 'static>(
    host: Arc<Host>,
    transport: StdioTransport<R>,
    writer: WriterTask,
    cancelled: CancelledSet,
    drain: Arc<Drain>,
) -> Result<ServeEnd, ServeError> {
    use rmcp::ServiceExt;
    let mut stop = drain.closed_flag();
    let shared = Shared::new(host, cancelled, &drain);
    let mut inflight = shared.inflight();
    let questions = shared.questions.clone();
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
            drop(waiting);
            // What was sent (the drained calls' responses) reaches the client.
            let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
            return Ok(ServeEnd::Stopped);
        }
    }
    drop(waiting);
    // End of input: nobody can answer a parked permission question (MRTR,
    // `mrtr.rs`) any more, so each is refused now rather than at its deadline.
    let withdrawn = questions.withdraw_all();
    if withdrawn > 0 {
        tracing::info!(
            withdrawn,
            "the MCP client went away; its permission questions are withdrawn"
        );
    }
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

/// This process's stdin and stdout for [`serve_process_stdio`]: each that is
/// a pipe or a socket, duplicated, in non-blocking mode and registered with
/// the reactor; `None` for a terminal, a regular file, `/dev/null`, a
/// descriptor that is also stderr's (logs must never see `EAGAIN`) or one
/// that could not be set up, which then keep tokio's blocking-pool stdio.
pub struct ProcessStdio {
    input: Option<FdIn>,
    output: Option<FdOut>,
}

/// Clears `O_NONBLOCK` again, when dropped, on the descriptions
/// [`ProcessStdio::take`] set it on (only those that were blocking before).
/// The flag is shared with every holder of the description (the client that
/// passed the pipe, for one), so keep this until the process exits; drop it
/// explicitly before `std::process::exit`, which runs no destructors. A
/// process killed by a signal leaves the flag set.
#[must_use = "dropping it at once puts stdio back in blocking mode under the transport"]
pub struct RestoreBlocking {
    files: Vec<File>,
}

impl Drop for RestoreBlocking {
    fn drop(&mut self) {
        for file in &self.files {
            let _ = toolhost_process::set_nonblocking(file, false);
        }
    }
}

impl ProcessStdio {
    /// Takes fds 0 and 1 as the type's docs say, and the guard that restores
    /// their blocking mode. Call it from within the tokio runtime (the
    /// descriptors are registered with its reactor; it panics outside one).
    pub fn take() -> (ProcessStdio, RestoreBlocking) {
        let stderr = identity(std::io::stderr().as_fd());
        let mut restore = RestoreBlocking { files: Vec::new() };
        let input = nonblocking(std::io::stdin().as_fd(), stderr, &mut restore, FdIn::new);
        let output = nonblocking(std::io::stdout().as_fd(), stderr, &mut restore, FdOut::new);
        tracing::debug!(
            direct_input = input.is_some(),
            direct_output = output.is_some(),
            "MCP stdio"
        );
        (ProcessStdio { input, output }, restore)
    }
}

/// The device and inode `fd` refers to.
fn identity(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    let meta = File::from(fd.try_clone_to_owned().ok()?).metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

/// A duplicate of `fd` in non-blocking mode on the reactor (`register`: a
/// pipe or a Unix socket), if it is a pipe or socket that is not also
/// stderr's; its description is added to `restore` when it was blocking
/// before.
fn nonblocking<T>(
    fd: BorrowedFd<'_>,
    stderr: Option<(u64, u64)>,
    restore: &mut RestoreBlocking,
    register: fn(OwnedFd, bool) -> std::io::Result<T>,
) -> Option<T> {
    let file = File::from(fd.try_clone_to_owned().ok()?);
    let meta = file.metadata().ok()?;
    let kind = meta.file_type();
    if !(kind.is_fifo() || kind.is_socket()) || stderr == Some((meta.dev(), meta.ino())) {
        return None;
    }
    let was_nonblocking = toolhost_process::set_nonblocking(&file, true).ok()?;
    let undo = |file: &File| {
        if !was_nonblocking {
            let _ = toolhost_process::set_nonblocking(file, false);
        }
    };
    // What restores the flag later: a duplicate, as `register` takes `file`.
    let keep = match file.try_clone() {
        Ok(dup) => dup,
        Err(_) => {
            undo(&file);
            return None;
        }
    };
    match register(file.into(), kind.is_fifo()) {
        Ok(io) => {
            if !was_nonblocking {
                restore.files.push(keep);
            }
            Some(io)
        }
        Err(e) => {
            tracing::debug!("stdio stays on the blocking pool: {e}");
            undo(&keep);
            None
        }
    }
}

/// A Unix stream socket from `fd`; an error for another kind of socket.
fn unix_socket(fd: OwnedFd) -> std::io::Result<UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    // A TCP or UDP socket has no Unix address.
    socket.local_addr()?;
    socket.set_nonblocking(true)?;
    UnixStream::from_std(socket)
}

/// stdin as a pipe or Unix socket on the reactor.
enum FdIn {
    Pipe(pipe::Receiver),
    Socket(UnixStream),
}

impl FdIn {
    fn new(fd: OwnedFd, fifo: bool) -> std::io::Result<FdIn> {
        Ok(if fifo {
            FdIn::Pipe(pipe::Receiver::from_owned_fd(fd)?)
        } else {
            FdIn::Socket(unix_socket(fd)?)
        })
    }
}

/// stdout as a pipe or Unix socket on the reactor.
enum FdOut {
    Pipe(pipe::Sender),
    Socket(UnixStream),
}

impl FdOut {
    fn new(fd: OwnedFd, fifo: bool) -> std::io::Result<FdOut> {
        Ok(if fifo {
            FdOut::Pipe(pipe::Sender::from_owned_fd(fd)?)
        } else {
            FdOut::Socket(unix_socket(fd)?)
        })
    }

    /// One non-blocking `write` (`WouldBlock` when full).
    fn try_write(&self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            FdOut::Pipe(p) => p.try_write(bytes),
            FdOut::Socket(s) => s.try_write(bytes),
        }
    }

    /// Waits until the reactor says the descriptor is writable.
    async fn writable(&self) -> std::io::Result<()> {
        match self {
            FdOut::Pipe(p) => p.writable().await,
            FdOut::Socket(s) => s.writable().await,
        }
    }
}

/// stdin as [`serve_process_stdio`] reads it.
enum Input {
    /// A pipe or socket on the reactor.
    Fd(FdIn),
    /// tokio's stdin (reads on the blocking pool).
    Tokio(tokio::io::Stdin),
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Input::Tokio(stdin) => Pin::new(stdin).poll_read(cx, buf),
            Input::Fd(FdIn::Pipe(p)) => Pin::new(p).poll_read(cx, buf),
            Input::Fd(FdIn::Socket(s)) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

/// stdout as a pipe or socket in non-blocking mode: messages are written by
/// the sender, and only what a full pipe did not take waits in `pending` for
/// [`DirectOut::drain`].
struct DirectOut {
    fd: FdOut,
    pending: Mutex<Pending>,
    wake: Notify,
}

#[derive(Default)]
struct Pending {
    /// Bytes accepted but not written yet, in order.
    bytes: Vec<u8>,
    /// Set when the transport is dropped: the drain task ends once `bytes`
    /// is empty.
    closed: bool,
    /// The first write error; every later send fails with its kind.
    failed: Option<std::io::ErrorKind>,
}

impl DirectOut {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `line` now if nothing is queued before it; queues what the
    /// pipe does not take.
    fn send(&self, line: &[u8]) -> std::io::Result<()> {
        let mut pending = self.lock();
        if let Some(kind) = pending.failed {
            return Err(kind.into());
        }
        if !pending.bytes.is_empty() {
            pending.bytes.extend_from_slice(line);
            return Ok(());
        }
        let mut written = 0;
        while written < line.len() {
            match self.fd.try_write(&line[written..]) {
                Ok(0) => return Err(fail(&mut pending, std::io::ErrorKind::WriteZero.into())),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(fail(&mut pending, e)),
            }
        }
        if written < line.len() {
            pending.bytes.extend_from_slice(&line[written..]);
            drop(pending);
            self.wake.notify_one();
        }
        Ok(())
    }

    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// Writes what `send` queued once the pipe takes it again; ends when the
    /// transport is gone and nothing is queued, or on a write error.
    async fn drain(out: Arc<DirectOut>) {
        loop {
            let notified = out.wake.notified();
            let waiting = {
                let pending = out.lock();
                if pending.failed.is_some() || (pending.bytes.is_empty() && pending.closed) {
                    return;
                }
                pending.bytes.is_empty()
            };
            if waiting {
                notified.await;
                continue;
            }
            if let Err(e) = out.fd.writable().await {
                fail(&mut out.lock(), e);
                return;
            }
            let mut pending = out.lock();
            match out.fd.try_write(&pending.bytes) {
                Ok(0) => {
                    fail(&mut pending, std::io::ErrorKind::WriteZero.into());
                    return;
                }
                Ok(n) => {
                    pending.bytes.drain(..n);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    fail(&mut pending, e);
                    return;
                }
            }
        }
    }
}

/// Records `e` as the output's failure (logged once) and returns it.
fn fail(pending: &mut Pending, e: std::io::Error) -> std::io::Error {
    if pending.failed.is_none() {
        tracing::warn!("writing to the MCP client failed: {e}");
        pending.failed = Some(e.kind());
        pending.bytes = Vec::new();
    }
    e
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    /// One end of a socket pair as stdio takes it, the other as a tokio stream.
    fn pair<T>(register: fn(OwnedFd, bool) -> std::io::Result<T>) -> (T, UnixStream) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let a = register(OwnedFd::from(a), false).unwrap();
        (a, UnixStream::from_std(b).unwrap())
    }

    #[tokio::test]
    async fn direct_output_keeps_order_past_a_full_buffer_and_drains_on_close() {
        let (fd, mut peer) = pair(FdOut::new);
        let (transport, writer) = StdioTransport::direct(
            tokio::io::empty(),
            fd,
            CancelledSet::default(),
            Arc::default(),
        );
        // Far more than a socket buffer holds, sent before anything is read.
        let mut expected = Vec::new();
        for i in 0..2000 {
            let line = format!("{{\"n\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i % 700));
            expected.extend_from_slice(line.as_bytes());
            transport.out.send(line.into_bytes()).unwrap();
        }
        drop(transport);
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap_or_default();
        // read_to_end ends when the drain task has written everything and
        // the last descriptor (the transport's) is closed.
        tokio::time::timeout(Duration::from_secs(10), writer)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "bytes out of order");
    }

    #[tokio::test]
    async fn direct_output_reports_a_closed_peer() {
        let (fd, peer) = pair(FdOut::new);
        let (transport, writer) = StdioTransport::direct(
            tokio::io::empty(),
            fd,
            CancelledSet::default(),
            Arc::default(),
        );
        drop(peer);
        // The first send may be queued (the reactor has not reported the
        // socket writable yet); the drain task then meets the error and ends.
        let first = transport.out.send(b"{}\n".to_vec());
        if first.is_ok() {
            tokio::time::timeout(Duration::from_secs(10), writer)
                .await
                .unwrap()
                .unwrap();
        }
        assert!(transport.out.send(b"{}\n".to_vec()).is_err());
    }

    #[tokio::test]
    async fn fd_input_reads_lines_as_they_arrive() {
        use tokio::io::AsyncWriteExt;
        let (fd, mut peer) = pair(FdIn::new);
        let mut lines = LineReader::new(Input::Fd(fd), 1024);
        peer.write_all(b"{\"a\":1}\n{\"b\"").await.unwrap();
        assert_eq!(
            lines.next_line().await.unwrap(),
            Line::Message(b"{\"a\":1}".to_vec())
        );
        peer.write_all(b":2}\n").await.unwrap();
        assert_eq!(
            lines.next_line().await.unwrap(),
            Line::Message(b"{\"b\":2}".to_vec())
        );
        drop(peer);
        assert_eq!(lines.next_line().await.unwrap(), Line::Eof);
    }
}
