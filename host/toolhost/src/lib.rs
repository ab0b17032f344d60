//! The front doors of toolhost: the MCP server (stdio and Streamable HTTP), the control API
//! (server and client) with `toolhost attach`, the TTY approver, what CLI commands
//! print (`cli_output`), logs and traces (`telemetry`), the sandbox layers a host has (`sandbox_layers`, also
//! `--require-sandbox`) and `toolhost doctor` (`doctor`). The
//! `toolhost` binary (`main.rs`) is the CLI over them; the work itself is done
//! by `toolhost-runtime` ([`toolhost_runtime::Host`]) and `toolhost-process`.

pub mod attach;
pub mod cli_output;
pub mod content;
pub mod control;
pub mod doctor;
pub mod jsonrpc;
pub mod mcp;
pub mod sandbox_layers;
pub mod scaffold;
pub mod telemetry;
pub mod tty;
