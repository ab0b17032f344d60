//! What the test modules share: one way to run the real `toolhost` binary
//! (and, through `toolhost_test_support`, what the benchmark harness shares
//! with the tests: `toolhost serve`'s command line, MCP clients over stdio,
//! the host-session log), one allow-all policy and host configuration (for
//! tests about something other than the policy), and one pair of fresh
//! directories.

use std::path::Path;
use std::process::{Command, Output};

use toolhost_runtime::HostConfig;

/// A policy text that allows every command.
pub const ALLOW_ALL: &str = "default = \"allow\"\n";

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

/// A host configuration over `ws` and `state` whose policy allows everything.
pub fn allow_all_config(ws: &Path, state: &Path) -> HostConfig {
    let mut config = HostConfig::new(ws, state);
    config.policy_rules = ALLOW_ALL.into();
    config
}

/// A fresh (workspace, state dir) pair, removed when dropped (the process
/// crate's test helper).
pub use crate::process_support::dirs;

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

/// A component importing an interface the host does not link
/// (`wasi:http/outgoing-handler`) and re-exporting it as the tool interface.
pub fn component_importing_http() -> Vec<u8> {
    use wasm_encoder::{
        Component, ComponentExportKind, ComponentExportSection, ComponentImportSection,
        ComponentTypeRef, ComponentTypeSection, InstanceType,
    };
    let mut component = Component::new();
    let mut types = ComponentTypeSection::new();
    types.instance(&InstanceType::new());
    component.section(&types);
    let mut imports = ComponentImportSection::new();
    imports.import(
        "wasi:http/outgoing-handler@0.2.0",
        ComponentTypeRef::Instance(0),
    );
    component.section(&imports);
    let mut exports = ComponentExportSection::new();
    exports.export(
        "toolhost:plugin/tool@0.1.0",
        ComponentExportKind::Instance,
        0,
        None,
    );
    component.section(&exports);
    component.finish()
}
