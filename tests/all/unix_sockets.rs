//! UNIX sockets need both grants: the operator's (`--allow-unix-sockets`) and the
//! plugin manifest's (`unix_sockets = true`), through the real binary and the
//! runtime's manifests (docs/sandbox.md#unix-sockets). What the sandbox does with the
//! grant is tested with the process crate (`host/process/tests/all/unix_sockets.rs`).

use std::path::Path;

use toolhost_process::SandboxPolicy;
use toolhost_runtime::manifest::Manifest;

use crate::process_support::{connect_command, listen, received, seccomp_or_skip};
use crate::support::{allow_all_policy, describe, dirs, stdout, toolhost};

/// The real binary: `--allow-unix-sockets` is the operator's half of the grant
/// (the built-in bash plugin's manifest asks for it), the summary line says which
/// holds, and the denial names the flag.
#[test]
fn toolhost_call_needs_allow_unix_sockets() {
    if !seccomp_or_skip() {
        return;
    }
    let (ws, state) = dirs();
    let elsewhere = tempfile::tempdir().unwrap();
    let sock = elsewhere.path().join("agent.sock");
    let listener = listen(&sock);
    let policy = allow_all_policy(state.path());
    let bash = |extra: &[&str]| {
        let args = serde_json::json!({ "command": connect_command(&sock) }).to_string();
        let mut all = vec!["call", "bash", args.as_str(), "--policy", policy.as_str()];
        all.extend_from_slice(extra);
        toolhost(ws.path(), state.path(), &all)
    };

    let out = bash(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(text.contains("Operation not permitted"), "{text}");
    assert!(
        text.contains("[sandbox denial (likely): ") && text.contains("--allow-unix-sockets"),
        "{text}"
    );
    assert!(!received(&listener));
    // The network grant alone does not open it.
    let out = bash(&["--allow-network"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(!received(&listener));

    let out = bash(&["--allow-unix-sockets"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(received(&listener), "{}", describe(&out));

    let out = bash(&["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["structured"]["sandbox"]
            .as_str()
            .unwrap()
            .contains("unix sockets blocked"),
        "{v}"
    );
    let out = bash(&["--json", "--allow-unix-sockets"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["structured"]["sandbox"]
            .as_str()
            .unwrap()
            .contains("unix sockets allowed"),
        "{v}"
    );
    assert!(received(&listener));
}

/// Both must agree: a manifest that does not ask for UNIX sockets keeps them
/// blocked under `--allow-unix-sockets`, and one that asks gets them only with it.
#[test]
fn the_manifest_and_the_operator_must_both_grant_unix_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let parse = |extra: &str| {
        let text = format!("id = \"p\"\ncontract = \"0.1.0\"\n{extra}");
        Manifest::parse(&text, Path::new("p.toml"), dir.path(), &|_| None).unwrap()
    };
    let operator = |unix_sockets| SandboxPolicy {
        unix_sockets,
        ..SandboxPolicy::default()
    };
    let silent = parse("");
    assert!(!silent.unix_sockets);
    assert_eq!(silent.to_json()["unix_sockets"], false);
    let asks = parse("unix_sockets = true\n");
    assert!(asks.unix_sockets);
    assert_eq!(asks.to_json()["unix_sockets"], true);
    for (manifest, op, want) in [
        (&silent, true, false),
        (&asks, false, false),
        (&asks, true, true),
    ] {
        let combined = manifest.sandbox_policy().stricter(&operator(op));
        assert_eq!(combined.unix_sockets, want, "{combined:?}");
    }
    // The network grant never implies it.
    let network_only = parse("network = true\n");
    let combined = network_only.sandbox_policy().stricter(&SandboxPolicy {
        network: true,
        unix_sockets: true,
        ..SandboxPolicy::default()
    });
    assert!(combined.network && !combined.unix_sockets, "{combined:?}");
    assert!(toolhost_runtime::builtin::bash_manifest().unix_sockets);
}
