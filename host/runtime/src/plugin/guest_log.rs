//! Guest stdout/stderr: each line goes to the host's log (tracing), tagged
//! with the plugin id, never to the host's own stdout (which may carry the MCP
//! protocol).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Longest line logged (bytes); longer lines are cut with a marker.
const MAX_LINE: usize = 4096;
/// Most bytes one plugin call may log; the rest is dropped with one notice.
const MAX_BYTES_PER_CALL: usize = 256 * 1024;
/// How many of the last lines a stream keeps for [`GuestLog::recent`].
pub const RECENT_LINES: usize = 8;
/// Longest line kept for [`GuestLog::recent`] (bytes; longer lines are cut).
const RECENT_LINE_MAX: usize = 240;

/// A guest output stream that logs lines through `tracing`.
#[derive(Clone)]
pub struct GuestLog {
    inner: Arc<Mutex<LineBuffer>>,
}

struct LineBuffer {
    plugin: Arc<str>,
    stream: &'static str,
    line: Vec<u8>,
    total: usize,
    /// The last [`RECENT_LINES`] complete lines, for error reports.
    recent: std::collections::VecDeque<String>,
}

impl GuestLog {
    /// A log stream for `plugin`'s `stream` ("stdout" or "stderr").
    pub fn new(plugin: Arc<str>, stream: &'static str) -> GuestLog {
        GuestLog {
            inner: Arc::new(Mutex::new(LineBuffer {
                plugin,
                stream,
                line: Vec::new(),
                total: 0,
                recent: std::collections::VecDeque::new(),
            })),
        }
    }

    /// The last lines written (at most [`RECENT_LINES`], each cut at 240 bytes),
    /// the unfinished one included: what a trap report shows of the guest's
    /// stderr (a Rust panic message, a Python traceback's last lines).
    pub fn recent(&self) -> Vec<String> {
        let buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut lines: Vec<String> = buf.recent.iter().cloned().collect();
        if !buf.line.is_empty() {
            lines.push(cut_line(&buf.line));
            if lines.len() > RECENT_LINES {
                lines.remove(0);
            }
        }
        lines
    }

    /// Forgets the recent lines and an unfinished one, so what [`GuestLog::recent`]
    /// shows next is only what a new call on the same instance writes (a policy
    /// plugin's reused instance, `plugin/policy.rs`). The byte budget
    /// (`MAX_BYTES_PER_CALL`) starts again too: it is per call, and a trap
    /// report of a later call must show that call's lines.
    pub(crate) fn forget_recent(&self) {
        let mut buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        buf.recent.clear();
        buf.line.clear();
        buf.total = 0;
    }

    fn write_bytes(&self, bytes: &[u8]) {
        let mut buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        buf.write(bytes);
    }
}

impl LineBuffer {
    fn write(&mut self, bytes: &[u8]) {
        let before = self.total;
        self.total = self.total.saturating_add(bytes.len());
        if before >= MAX_BYTES_PER_CALL {
            return;
        }
        for &b in bytes {
            if b == b'\n' {
                self.emit();
            } else if self.line.len() < MAX_LINE {
                self.line.push(b);
            }
        }
        if self.total >= MAX_BYTES_PER_CALL {
            self.emit();
            tracing::warn!(plugin = %self.plugin, stream = self.stream, "plugin output over {MAX_BYTES_PER_CALL} bytes in one call; the rest is dropped");
        }
    }

    fn emit(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.line);
        tracing::info!(target: "toolhost::plugin", plugin = %self.plugin, stream = self.stream, "{text}");
        if self.recent.len() == RECENT_LINES {
            self.recent.pop_front();
        }
        self.recent.push_back(cut_line(&self.line));
        self.line.clear();
    }
}

/// `line` as text, cut at [`RECENT_LINE_MAX`] bytes (on a char boundary).
fn cut_line(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    if text.len() <= RECENT_LINE_MAX {
        return text.into_owned();
    }
    let mut end = RECENT_LINE_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl Drop for LineBuffer {
    fn drop(&mut self) {
        self.emit();
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestLog {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestLog {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.write_bytes(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestLog {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.write_bytes(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
