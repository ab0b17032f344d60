//! What the integration tests (`tests/all`, a test target of `host/toolhost`)
//! and the benchmark harness (`host/bench`) share to drive a real `toolhost
//! serve`, so each exists once:
//!
//! - [`serve_command`]: the `toolhost serve` command line over a workspace
//!   and a state dir;
//! - [`StdioClient`]: an MCP client speaking raw line-delimited JSON-RPC over
//!   a child's stdio (MCP "Transports", stdio), for concurrent calls, exact
//!   bytes and malformed input; [`rmcp_client`]: the official Rust SDK's
//!   client over the same pipes;
//! - [`host_log`]: the host-session event log a run leaves in the state dir;
//! - [`load`]: the burst of concurrent mixed tool calls that figure L1
//!   (`host/bench/src/load.rs`) and `tests/all/load.rs` run at two sizes,
//!   and the checks of what it leaves behind;
//! - [`registry`]: a real OCI registry on loopback, and the tools no one here
//!   wrote that push to it (oras-py) and sign for it (sigstore-js).
//!
//! Everything returns [`anyhow::Result`]: a test unwraps, the harness reports.

pub mod host_log;
pub mod load;
pub mod registry;
mod stdio;

pub use stdio::{
    ANSWER_TIMEOUT, EXIT_TIMEOUT, RmcpClient, StdioClient, is_error, result_text, rmcp_client,
};

use std::path::Path;

/// `toolhost serve` (the binary `bin`) over `workspace` and `state`
/// (`--workspace`, `--state-dir`), with `TOOLHOST_LOG` unset so the server
/// writes no log to stderr. Add `--policy`, `--plugin` and the like with
/// `.arg`; spawn it with [`StdioClient::spawn`] or [`rmcp_client`].
pub fn serve_command(bin: &Path, workspace: &Path, state: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg("serve")
        .arg("--workspace")
        .arg(workspace)
        .arg("--state-dir")
        .arg(state)
        .env_remove("TOOLHOST_LOG");
    cmd
}
