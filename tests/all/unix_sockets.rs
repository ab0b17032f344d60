//! UNIX sockets need both grants: the operator's (`--allow-unix-sockets`) and the
//! plugin manifest's (`unix_sockets = true`), through the real binary
//! (docs/sandbox.md#unix-sockets). How the two combine is tested with the runtime
//! (`host/runtime/tests/all/hostile_grants.rs`), what the sandbox does with the
//! grant with the process crate (`host/process/tests/all/unix_sockets.rs`).

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
