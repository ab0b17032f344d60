//! What the test modules share: one way to run the real `toolhost` binary
//! (and, through `toolhost_test_support`, what the benchmark harness shares
//! with the tests: `toolhost serve`'s command line, MCP clients over stdio,
//! the host-session log), the allow-all policy as a `--policy` file, and the
//! runtime's helpers they use too (`runtime_support`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the built `toolhost` binary with `args` and `--workspace`,
/// `--state-dir` appended (so they must come after the subcommand), with
/// `TOOLHOST_LOG` unset.
pub fn toolhost(workspace: &Path, state: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .arg("--workspace")
        .arg(workspace)
        .arg("--state-dir")
        .arg(state)
        .env_remove("TOOLHOST_LOG")
        .output()
        .expect("running toolhost")
}

/// `toolhost serve` of the built binary over `workspace` and `state`
/// ([`toolhost_test_support::serve_command`]), the built-in default policy
/// unless a `--policy` is added; spawn it with
/// [`toolhost_test_support::StdioClient::spawn`] or
/// [`toolhost_test_support::rmcp_client`].
pub fn serve(workspace: &Path, state: &Path) -> tokio::process::Command {
    toolhost_test_support::serve_command(
        Path::new(env!("CARGO_BIN_EXE_toolhost")),
        workspace,
        state,
    )
}

/// Writes [`ALLOW_ALL`] to `dir/allow-all.toml` and returns the file's path, for
/// `--policy`.
pub fn allow_all_policy(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("allow-all.toml");
    std::fs::write(&path, ALLOW_ALL).unwrap();
    path.to_str().unwrap().to_string()
}

/// The runtime's test helpers these tests use too: a fresh (workspace, state
/// dir) pair, the allow-all policy text and host configuration, a component
/// the host cannot link.
pub use crate::runtime_support::{ALLOW_ALL, allow_all_config, component_importing_http, dirs};

/// A process's stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Exit status, stdout and stderr, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The `_meta` of a modern request naming protocol `version`, with client
/// capabilities `capabilities` (MCP 2026-07-28 "Overview", `_meta`).
pub fn modern_meta(version: &str, capabilities: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    })
}

/// One raw JSON-RPC request line to `s` with `id`, and its response.
pub async fn exchange(
    s: &toolhost_test_support::StdioClient,
    id: serde_json::Value,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let request =
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    s.send(request.to_string()).await.unwrap();
    s.response(&id).await.unwrap()
}

/// The Python of the repository's `.venv` (`tests/setup.sh` makes it), for a
/// test that drives `what` with it (a Python package it installed). Panics,
/// naming the setup command, when `.venv` is missing.
pub fn venv_python(what: &str) -> PathBuf {
    let root = crate::repo::root();
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: {what} runs from it. Create it with\n  tests/setup.sh\n(in {}); \
         README's test command runs it.",
        python.display(),
        root.display()
    );
    python
}
