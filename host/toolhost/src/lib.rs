//! The front doors of toolhost: the MCP server (stdio and Streamable HTTP), the control API
//! (server and client) with `toolhost attach`, the TTY approver, and what CLI commands
//! print (`cli_output`). The
//! `toolhost` binary (`main.rs`) is the CLI over them; the work itself is done
//! by `toolhost-runtime` ([`toolhost_runtime::Host`]) and `toolhost-process`.

pub mod attach;
pub mod cli_output;
pub mod content;
pub mod control;
pub mod jsonrpc;
pub mod mcp;
pub mod scaffold;
pub mod tty;
