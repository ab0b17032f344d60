//! JSON-RPC 2.0 as both front doors speak it: one message per line (MCP's
//! stdio transport and the control API), the standard error codes, and a
//! bounded, cancel-safe line reader. Shared by [`crate::mcp`] and
//! [`crate::control`].

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// JSON-RPC 2.0 error codes (JSON-RPC 2.0 specification, §5.1).
pub mod codes {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i32 = -32700;
    /// The JSON sent is not a valid Request object.
    pub const INVALID_REQUEST: i32 = -32600;
    /// The method does not exist.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// Invalid method parameters (MCP: also an unknown tool).
    pub const INVALID_PARAMS: i32 = -32602;
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: i32 = -32603;
    /// A well-formed request whose action failed (the first of the range
    /// -32000..-32099 the specification leaves to servers).
    pub const ACTION_FAILED: i32 = -32000;
    /// The request's identity lacks the scope the method needs (MCP over
    /// HTTP answers it with `403`; docs/operations.md#identities).
    pub const FORBIDDEN: i32 = -32003;
    /// The server is stopping (draining) and takes no new work
    /// (docs/operations.md#stopping-and-draining). Outside the range JSON-RPC
    /// reserves (-32768..-32000), where MCP 2026-07-28 ("Error Codes") asks
    /// new implementation codes to be.
    pub const STOPPING: i32 = -31000;
}

/// An error response: `{"jsonrpc":"2.0","id":id,"error":{"code","message"}}`.
pub fn error(id: &Value, code: i32, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// A success response: `{"jsonrpc":"2.0","id":id,"result":result}`.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A request: `{"jsonrpc":"2.0","id":id,"method","params"}`.
pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// `message` as one line: its JSON and `\n`.
pub fn encode_line(message: &impl serde::Serialize) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

/// What [`LineReader::next_line`] read.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// One line, without its `\n` (and `\r`).
    Message(Vec<u8>),
    /// A line longer than the reader's limit, read and discarded whole.
    TooLong,
    /// End of input (a last line without `\n` is dropped: it was never finished).
    Eof,
}

/// Reads `\n`-delimited lines of at most `max_bytes` each, never buffering
/// more than that (a longer line is skipped to its end and reported as
/// [`Line::TooLong`]). Cancel-safe: a partial line stays buffered, so the read
/// can sit inside a `select!` or a timeout.
pub struct LineReader<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    discarding: bool,
    max_bytes: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of lines up to `max_bytes` bytes (the `\n` not counted).
    pub fn new(read: R, max_bytes: usize) -> LineReader<R> {
        LineReader {
            reader: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            max_bytes,
        }
    }

    /// The next line.
    ///
    /// Errors: the underlying read error.
    pub async fn next_line(&mut self) -> std::io::Result<Line> {
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                return Ok(Line::Eof);
            }
            let (n, found) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if !self.discarding {
                if self.line.len() + n > self.max_bytes + 1 {
                    self.discarding = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(&buf[..n]);
                }
            }
            self.reader.consume(n);
            if found {
                if self.discarding {
                    self.discarding = false;
                    return Ok(Line::TooLong);
                }
                let mut line = std::mem::take(&mut self.line);
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(Line::Message(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_split_exactly() {
        let input: &[u8] = b"{\"a\":1}\r\n0123456789ABCDEF\nok\npartial";
        let mut r = LineReader::new(input, 10);
        assert_eq!(
            r.next_line().await.unwrap(),
            Line::Message(b"{\"a\":1}".to_vec())
        );
        assert_eq!(r.next_line().await.unwrap(), Line::TooLong);
        assert_eq!(r.next_line().await.unwrap(), Line::Message(b"ok".to_vec()));
        assert_eq!(r.next_line().await.unwrap(), Line::Eof);
    }

    #[test]
    fn responses_have_the_standard_shape() {
        let e = error(&json!(7), codes::INVALID_PARAMS, "bad");
        assert_eq!(
            e,
            json!({"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad"}})
        );
        assert_eq!(
            encode_line(&result(&json!("x"), json!(1))).last(),
            Some(&b'\n')
        );
    }
}
