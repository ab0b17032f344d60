//! The bounds of permission questions asked as 2026-07-28 `input_required`
//! results (docs/mcp.md, its MRTR section), through the real
//! `toolhost serve` on stdio with raw JSON lines: parked questions per
//! plugin, questions withdrawn at end of input, the stateless lifecycle
//! opened only by a modern version, and an oversized `requestState`.

use serde_json::{Value, json};
use toolhost_test_support::StdioClient;

use crate::support::dirs;

/// The `_meta` of a 2026-07-28 request whose client answers elicitations.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    })
}

/// `serve` on stdio under a policy that allows `echo *` and asks about
/// everything else.
fn serve(ws: &std::path::Path, state: &std::path::Path) -> StdioClient {
    std::fs::create_dir_all(state).unwrap();
    let policy = state.join("ask.toml");
    std::fs::write(&policy, "default = \"ask\"\nallow = [\"echo *\"]\n").unwrap();
    let mut cmd = crate::support::serve(ws, state);
    cmd.args(["--policy", policy.to_str().unwrap()]);
    StdioClient::spawn(cmd).unwrap()
}

/// One raw request line with `id`, and its response.
async fn exchange(s: &StdioClient, id: Value, method: &str, params: Value) -> Value {
    s.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
        .await
        .unwrap();
    s.response(&id).await.unwrap()
}

/// A modern `tools/call` of `bash` running `command`, with `extra` params.
async fn bash(s: &StdioClient, id: u64, command: &str, extra: Value) -> Value {
    let mut params = json!({"name": "bash", "arguments": {"command": command}, "_meta": meta()});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    exchange(s, json!(id), "tools/call", params).await
}

/// The `permission_resolved` events of every host session under `state`,
/// as raw lines.
fn resolutions(state: &std::path::Path) -> Vec<String> {
    let mut lines = Vec::new();
    for host in std::fs::read_dir(state.join("hosts")).unwrap() {
        let log = host.unwrap().path().join("events.jsonl");
        if let Ok(text) = std::fs::read_to_string(log) {
            lines.extend(
                text.lines()
                    .filter(|l| l.contains("\"permission_resolved\""))
                    .map(str::to_string),
            );
        }
    }
    lines
}

/// The built-in `bash` may have 48 calls in flight (docs/limits.md), so at
/// most 12 questions of it are parked: the 13th ask is refused at once with
/// the documented error (nothing runs), and another request's allowed
/// `echo ok` is answered with its exact output while the 12 wait.
#[tokio::test]
async fn parked_questions_are_bounded_per_plugin_and_never_block_allowed_calls() {
    let (ws, state) = dirs();
    let s = serve(ws.path(), state.path());
    for i in 1..=12u64 {
        let r = bash(&s, i, &format!("touch q{i}"), json!({})).await;
        assert_eq!(
            r["result"]["resultType"],
            json!("input_required"),
            "{i}: {r}"
        );
    }
    let refused = bash(&s, 13, "touch q13", json!({})).await;
    assert_eq!(refused["id"], json!(13), "{refused}");
    assert_eq!(
        refused["result"]["resultType"],
        json!("complete"),
        "{refused}"
    );
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    assert_eq!(
        refused["result"]["content"][0]["text"],
        json!(
            "Could not start the command: permission denied.\nrefused without asking: 12 \
             permission questions of plugin `bash` are already waiting for answers, the most \
             that may wait at once (12: each holds one of the plugin's calls in flight). Answer \
             or let expire one of them, or allow the command in the --policy file"
        ),
        "{refused}"
    );
    let ok = bash(&s, 14, "echo ok", json!({})).await;
    assert_eq!(ok["result"]["resultType"], json!("complete"), "{ok}");
    assert_eq!(ok["result"]["isError"], json!(false), "{ok}");
    assert_eq!(ok["result"]["content"][0]["text"], json!("ok"), "{ok}");
    for i in 1..=13 {
        assert!(!ws.path().join(format!("q{i}")).exists(), "q{i} ran");
    }
    let status = s.close().await.unwrap();
    assert_eq!(status.code(), Some(0));
    let limit = resolutions(state.path())
        .iter()
        .filter(|l| l.contains("\"by\":\"mcp-input-required-limit\""))
        .count();
    assert_eq!(limit, 1);
}

/// End of input with a question parked: nobody can answer it, so it is
/// withdrawn at once (logged `cancelled` by `mcp-input-required-withdrawn`),
/// the command never runs, and `serve` exits 0 well within 30 s instead of
/// waiting out the 5-minute question.
#[tokio::test]
async fn end_of_input_withdraws_parked_questions_and_exits() {
    let (ws, state) = dirs();
    let s = serve(ws.path(), state.path());
    let r = bash(&s, 1, "touch parked", json!({})).await;
    assert_eq!(r["result"]["resultType"], json!("input_required"), "{r}");
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), s.close())
        .await
        .expect("serve did not exit within 30 s of end of input")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!ws.path().join("parked").exists(), "the command ran");
    let withdrawn: Vec<String> = resolutions(state.path())
        .into_iter()
        .filter(|l| l.contains("\"by\":\"mcp-input-required-withdrawn\""))
        .collect();
    assert_eq!(withdrawn.len(), 1, "{withdrawn:?}");
    assert!(
        withdrawn[0].contains("\"outcome\":\"cancelled\""),
        "{withdrawn:?}"
    );
}

/// Before `initialize`, a request whose `_meta` names a legacy version
/// (2025-11-25) gets the same `-32600` as one without `_meta`: only a
/// modern version opens the stateless lifecycle; `initialize` still opens
/// the legacy one afterwards.
#[tokio::test]
async fn a_legacy_version_in_meta_does_not_skip_initialize() {
    let (ws, state) = dirs();
    let s = serve(ws.path(), state.path());
    let legacy = json!({
        "io.modelcontextprotocol/protocolVersion": "2025-11-25",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let l = exchange(&s, json!("l-1"), "tools/list", json!({"_meta": legacy})).await;
    let n = exchange(&s, json!("l-2"), "tools/list", json!({})).await;
    assert_eq!(l["id"], json!("l-1"), "{l}");
    assert_eq!(l["error"]["code"], json!(-32600), "{l}");
    assert_eq!(l["error"]["message"], n["error"]["message"], "{l} {n}");
    assert_eq!(n["error"]["code"], json!(-32600), "{n}");
    let c = exchange(
        &s,
        json!("l-3"),
        "tools/call",
        json!({"name": "bash", "arguments": {"command": "echo legacy"}, "_meta": legacy}),
    )
    .await;
    assert_eq!(c["id"], json!("l-3"), "{c}");
    assert_eq!(c["error"]["code"], json!(-32600), "{c}");
    s.initialize("2025-11-25").await.unwrap();
    let after = exchange(&s, json!("l-4"), "tools/list", json!({})).await;
    assert!(after["result"]["tools"].is_array(), "{after}");
    s.close().await.unwrap();
}

/// A `requestState` longer than 4096 bytes is `-32602` naming the bound,
/// before it is decoded, and runs nothing; one of exactly 4096 bytes is
/// decoded (and, forged, refused as invalid).
#[tokio::test]
async fn an_oversized_request_state_is_refused_before_decoding() {
    let (ws, state) = dirs();
    let s = serve(ws.path(), state.path());
    let allow = json!({"permission": {"action": "accept", "content": {"decision": "allow_once"}}});
    let big = "A".repeat(3 << 20);
    let r = bash(
        &s,
        1,
        "touch big",
        json!({"requestState": big, "inputResponses": allow}),
    )
    .await;
    assert_eq!(
        r["id"],
        json!(1),
        "{}",
        &r.to_string()[..200.min(r.to_string().len())]
    );
    assert_eq!(r["error"]["code"], json!(-32602));
    assert_eq!(
        r["error"]["message"],
        json!(format!(
            "invalid requestState: {} bytes, longer than the 4096 this server's states may have",
            3 << 20
        ))
    );
    let at_bound = bash(
        &s,
        2,
        "touch big",
        json!({"requestState": "A".repeat(4096), "inputResponses": allow}),
    )
    .await;
    assert_eq!(at_bound["error"]["code"], json!(-32602), "{at_bound}");
    assert_eq!(
        at_bound["error"]["message"],
        json!(
            "invalid requestState: tampered, expired, for another tool, or made by another server"
        ),
        "{at_bound}"
    );
    assert!(!ws.path().join("big").exists());
    s.close().await.unwrap();
}

/// A refused `requestState` is logged at `warn` (the default filter) with
/// the reason and the tool name, and the state itself never reaches the
/// log.
#[test]
fn refused_request_states_are_logged_at_warn_without_the_state() {
    use std::io::{BufRead, Write};
    let (ws, state) = dirs();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--workspace"])
        .arg(ws.path())
        .arg("--state-dir")
        .arg(state.path())
        .env_remove("TOOLHOST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let forged = format!("forged{}", "Q".repeat(90));
    let allow = json!({"permission": {"action": "accept", "content": {"decision": "allow_once"}}});
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    for (id, state) in [(1, forged.clone()), (2, "R".repeat(5000))] {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "touch forged"}, "_meta": meta(),
            "requestState": state, "inputResponses": allow}});
        writeln!(stdin, "{request}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let response: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(response["id"], json!(id), "{response}");
        assert_eq!(response["error"]["code"], json!(-32602), "{response}");
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let log = String::from_utf8_lossy(&out.stderr);
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("refused a requestState"))
        .collect();
    assert_eq!(refusals.len(), 2, "{log}");
    for line in &refusals {
        assert!(line.contains("WARN"), "{line}");
        assert!(line.contains("tool=bash"), "{line}");
    }
    assert!(refusals[1].contains("longer than 4096 bytes"), "{log}");
    assert!(!log.contains("forgedQQ"), "{log}");
    assert!(!log.contains("RRRR"), "{log}");
    assert!(!ws.path().join("forged").exists());
}
