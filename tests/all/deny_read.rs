//! The reads the CLI denies every confined command (docs/sandbox.md#denied-reads)
//! through the real binary: the built-in list (`default_read_denied`, set by
//! `main.rs` for `call`, `serve`, `tools` and `doctor`) and `serve`'s own token
//! file, which a command could otherwise read and hand to anyone.

use serde_json::{Value, json};

use crate::mcp_http::{HttpServe, open_session, request};
use crate::support::{allow_all_policy, describe, dirs, toolhost};

#[test]
fn the_built_in_deny_list_masks_the_systems_secrets() {
    if !toolhost_process::probe_kernel().mount_namespace {
        println!("SKIPPED: no mount namespace here, so nothing can be masked");
        return;
    }
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let args = json!({"command": "head -c 4 /etc/shadow; echo rc=$?"}).to_string();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "--json", "--policy", &policy, "bash", &args],
    );
    let result: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    let text = result["text"].as_str().unwrap();
    assert!(
        text.starts_with("head: cannot open '/etc/shadow' for reading: Permission denied\nrc=1"),
        "{result}"
    );
    let sandbox = result["structured"]["sandbox"].as_str().unwrap();
    assert!(sandbox.contains(" reads denied"), "{sandbox}");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_denies_commands_its_token_file() {
    if !toolhost_process::probe_kernel().mount_namespace {
        println!("SKIPPED: no mount namespace here, so nothing can be masked");
        return;
    }
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let token = "t0ken-file-0123456789abcdef-SECRET";
    // In the workspace, readable by the host user: only the mask hides it. A
    // symlink, as a Kubernetes Secret's file is: what it names is masked.
    let token_file = ws.path().join("token");
    std::fs::create_dir(ws.path().join("..data")).unwrap();
    std::fs::write(ws.path().join("..data/token"), format!("{token}\n")).unwrap();
    // Private to the host's user, as `serve` requires (docs/operations.md#identities).
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(ws.path().join("..data/token"), private).unwrap();
    std::os::unix::fs::symlink("..data/token", &token_file).unwrap();
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&policy),
        &[
            "--http",
            "127.0.0.1:0",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    );
    let bearer = format!("Bearer {token}");
    let auth = [("authorization", bearer.as_str())];
    let session = open_session(&serve.addr, &auth).await;
    let reply = request(
        &serve.addr,
        &session,
        &json!(1),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "cat token ..data/token; echo rc=$?"}}}),
        &auth,
    )
    .await;
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "cat: token: Permission denied\ncat: ..data/token: Permission denied\nrc=1"
        ),
        "{reply}"
    );
    assert!(!text.contains(token), "{reply}");
    // The workspace itself stays writable around the mask.
    assert!(token_file.exists());
}
