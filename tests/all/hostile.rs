//! The test-only hostile plugin (`tests/plugins/hostile`) through the real
//! binary: what its guest writes to stdout and stderr goes to the host's log,
//! never to `toolhost call`'s stdout, and `plugin inspect` shows its imports,
//! exports, tools and grants. Its containment under `Host` is tested with the
//! runtime (`host/runtime/tests/all/hostile.rs`).

use toolhost_test_fixtures::HOSTILE;

use crate::runtime_support::{hostile_dir, hostile_manifest};
use crate::support::dirs;

/// Runs the real binary.
fn toolhost_bin(args: &[&str], log: Option<&str>) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.args(args).env_remove("TOOLHOST_LOG");
    if let Some(level) = log {
        cmd.env("TOOLHOST_LOG", level);
    }
    cmd.output().expect("running toolhost")
}

#[test]
fn guest_stdout_goes_to_the_log_never_to_toolhost_stdout() {
    let dir = hostile_dir(None);
    let (ws, state) = dirs();
    let plugin = dir.path().join("hostile.wasm");
    let args = [
        "call",
        "hello",
        "{}",
        "--plugin",
        plugin.to_str().unwrap(),
        "--workspace",
        ws.path().to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let out = toolhost_bin(&args, Some("info"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n", "{stderr}");
    assert_eq!(out.status.code(), Some(0));
    for stream in ["stdout", "stderr"] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("hello from the hostile plugin's {stream}")))
            .unwrap_or_else(|| panic!("guest {stream} not logged: {stderr}"));
        assert!(line.contains("plugin=hostile"), "{line}");
    }
    // At the default log level the guest's output is not shown at all.
    let out = toolhost_bin(&args, None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hello from"));
}

#[test]
fn plugin_inspect_shows_imports_exports_tools_and_grants() {
    let dir = hostile_dir(Some(&hostile_manifest(
        "exec = [\"git status\"]\nmemory = \"32MiB\"\n[env]\nMODE = \"x\"\n[[preopen]]\nhost = \"granted\"\nguest = \"/data\"\nmode = \"read-only\"\n",
    )));
    let plugin = dir.path().join("hostile.wasm");
    let out = toolhost_bin(&["plugin", "inspect", plugin.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "toolhost:plugin/sessions@0.1.0",
        "toolhost:plugin/tool@0.1.0",
        "spin ",
        "exec       git status",
        "-> /data (read-only)",
        "env        MODE",
        "memory     32 MiB per call",
        &toolhost_runtime::sha256_hex(HOSTILE),
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }

    let out = toolhost_bin(
        &["plugin", "inspect", "--json", plugin.to_str().unwrap()],
        None,
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["exports"],
        serde_json::json!(["toolhost:plugin/tool@0.1.0"])
    );
    assert_eq!(json["manifest"]["id"], "hostile");
    assert_eq!(json["manifest"]["exec"], serde_json::json!(["git status"]));
    assert_eq!(json["manifest"]["env"], serde_json::json!(["MODE"]));
    assert_eq!(json["manifest"]["memory_bytes"], 32 << 20);
    assert!(
        json["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "steal")
    );

    // A policy component: listed, but no tools, and why.
    let policy = dir.path().join("policyish.wasm");
    std::fs::write(&policy, toolhost_runtime::POLICY).unwrap();
    let out = toolhost_bin(
        &["plugin", "inspect", "--json", policy.to_str().unwrap()],
        None,
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["exports"],
        serde_json::json!(["toolhost:plugin/policy@0.1.0"])
    );
    assert!(
        json["tools_error"]
            .as_str()
            .unwrap()
            .contains("does not export toolhost:plugin/tool@0.1.0")
    );
}
