//! Questions asked as 2026-07-28 `input_required` results (docs/mcp.md, its
//! MRTR section), through the real `toolhost serve` on stdio with raw JSON
//! lines: the bounds of permission questions (parked questions per plugin,
//! questions withdrawn at end of input, the stateless lifecycle opened only
//! by a modern version, an oversized `requestState`), and a contract 0.2.0
//! plugin's elicitation and sampling (the conformance plugin): their
//! `inputRequests` keys, a tampered state refused, the suspended call
//! resumed once with the answer, and a missing capability.

use serde_json::{Value, json};
use toolhost_test_support::StdioClient;

use crate::support::{dirs, exchange, modern_meta};

/// The `_meta` of a 2026-07-28 request whose client answers elicitations.
fn meta() -> Value {
    modern_meta("2026-07-28", json!({"elicitation": {}}))
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
            "Could not start the command: permission denied.\nrefused without asking: 12 calls \
             of plugin `bash` are already waiting for answers to their questions, the most that \
             may wait at once (12: each holds one of the plugin's calls in flight). Answer or let \
             expire one of them, or allow the command in the --policy file"
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

/// `serve` on stdio with the conformance plugin (contract 0.2.0, granted
/// elicitation and sampling).
fn serve_conformance(ws: &std::path::Path, state: &std::path::Path) -> StdioClient {
    let wasm = crate::conformance::conformance_plugin();
    let mut cmd = crate::support::serve(ws, state);
    cmd.args(["--plugin", wasm.to_str().unwrap()]);
    StdioClient::spawn(cmd).unwrap()
}

/// A modern `tools/call` of the conformance plugin's `tool` (no arguments)
/// with client capabilities `caps` and `extra` params.
async fn call(s: &StdioClient, id: u64, tool: &str, caps: Value, extra: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": {},
        "_meta": modern_meta("2026-07-28", caps)});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    exchange(s, json!(id), "tools/call", params).await
}

/// The `kind` events of every host session under `state` for `tool`'s
/// calls, as parsed lines (`tool_call_started` names the tool; a settled
/// call is matched by its id).
fn call_events(state: &std::path::Path, kind: &str, tool: &str) -> Vec<Value> {
    let mut events = Vec::new();
    for host in std::fs::read_dir(state.join("hosts")).unwrap() {
        let log = host.unwrap().path().join("events.jsonl");
        let Ok(text) = std::fs::read_to_string(log) else {
            continue;
        };
        let all: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let ids: Vec<&Value> = all
            .iter()
            .filter(|e| e["kind"] == "tool_call_started" && e["tool"] == tool)
            .map(|e| &e["tool_call_id"])
            .collect();
        events.extend(
            all.iter()
                .filter(|e| e["kind"] == kind && ids.contains(&&e["tool_call_id"]))
                .cloned(),
        );
    }
    events
}

/// The `inputRequests` keys of an `input_required` response, in order.
fn keys(response: &Value) -> Vec<String> {
    assert_eq!(
        response["result"]["resultType"],
        json!("input_required"),
        "{response}"
    );
    response["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// A plugin's two elicitations in a row are two rounds keyed by the call's
/// question number (`elicitation-1`, then `elicitation-2`) with the
/// plugin's own form, each under a new `requestState`; a retry answering
/// under another key is asked again (the same question, a new state); the
/// last answer completes the one call (started once, settled once) with
/// both answers in its text.
#[tokio::test]
async fn plugin_elicitations_are_rounds_keyed_per_question() {
    let (ws, state) = dirs();
    let s = serve_conformance(ws.path(), state.path());
    let caps = json!({"elicitation": {}});
    let tool = "test_input_required_result_multi_round";
    let r1 = call(&s, 1, tool, caps.clone(), json!({})).await;
    assert_eq!(keys(&r1), ["elicitation-1"], "{r1}");
    assert_eq!(
        r1["result"]["inputRequests"]["elicitation-1"],
        json!({"method": "elicitation/create", "params": {
            "mode": "form",
            "message": "plugin `conformance` asks (this is not a toolhost permission request):\n| Step 1: What is your name?",
            "requestedSchema": {"type": "object",
                "properties": {"name": {"type": "string"}}, "required": ["name"]}}}),
        "{r1}"
    );
    let state1 = r1["result"]["requestState"].clone();
    let wrong = json!({"requestState": state1,
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Alice"}}}});
    let again = call(&s, 2, tool, caps.clone(), wrong).await;
    assert_eq!(keys(&again), ["elicitation-1"], "{again}");
    assert_ne!(again["result"]["requestState"], state1, "{again}");
    let answer = json!({"requestState": again["result"]["requestState"],
        "inputResponses": {"elicitation-1": {"action": "accept", "content": {"name": "Alice"}}}});
    let r2 = call(&s, 3, tool, caps.clone(), answer).await;
    assert_eq!(keys(&r2), ["elicitation-2"], "{r2}");
    assert_eq!(
        r2["result"]["inputRequests"]["elicitation-2"]["params"]["message"],
        json!(
            "plugin `conformance` asks (this is not a toolhost permission request):\n| Step 2: What is your favorite color?"
        ),
        "{r2}"
    );
    let last = json!({"requestState": r2["result"]["requestState"],
        "inputResponses": {"elicitation-2": {"action": "accept", "content": {"color": "blue"}}}});
    let done = call(&s, 4, tool, caps, last).await;
    assert_eq!(done["id"], json!(4), "{done}");
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    assert_eq!(done["result"]["isError"], json!(false), "{done}");
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "Alice likes blue"}]),
        "{done}"
    );
    s.close().await.unwrap();
    assert_eq!(
        call_events(state.path(), "tool_call_started", tool).len(),
        1
    );
    let settled = call_events(state.path(), "tool_call_settled", tool);
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["text"], json!("Alice likes blue"), "{settled:?}");
}

/// A tampered `requestState` of a plugin's question is `-32602` and resumes
/// nothing; the untampered one then resumes the suspended call exactly once
/// (its result carries the answer), and replaying it is `-32602` again.
#[tokio::test]
async fn a_tampered_state_resumes_nothing_and_the_answer_resumes_the_call_once() {
    let (ws, state) = dirs();
    let s = serve_conformance(ws.path(), state.path());
    let caps = json!({"elicitation": {}});
    let tool = "test_input_required_result_elicitation";
    let r1 = call(&s, 1, tool, caps.clone(), json!({})).await;
    assert_eq!(keys(&r1), ["elicitation-1"], "{r1}");
    let good = r1["result"]["requestState"].as_str().unwrap().to_string();
    let answer = json!({"elicitation-1": {"action": "accept", "content": {"name": "Alice"}}});
    // One character of the tag changed (not the last, whose low bits a
    // base64 decoder may ignore).
    let mut tampered = good.clone().into_bytes();
    let at = tampered.len() - 5;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let refused = call(
        &s,
        2,
        tool,
        caps.clone(),
        json!({"requestState": tampered, "inputResponses": answer}),
    )
    .await;
    assert_eq!(refused["id"], json!(2), "{refused}");
    assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
    assert_eq!(
        refused["error"]["message"],
        json!(
            "invalid requestState: tampered, expired, for another tool, or made by another server"
        ),
        "{refused}"
    );
    assert!(call_events(state.path(), "tool_call_settled", tool).is_empty());
    let done = call(
        &s,
        3,
        tool,
        caps.clone(),
        json!({"requestState": good, "inputResponses": answer}),
    )
    .await;
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "Hello, Alice!"}]),
        "{done}"
    );
    let replay = call(
        &s,
        4,
        tool,
        caps,
        json!({"requestState": good, "inputResponses": answer}),
    )
    .await;
    assert_eq!(replay["error"]["code"], json!(-32602), "{replay}");
    s.close().await.unwrap();
    assert_eq!(
        call_events(state.path(), "tool_call_started", tool).len(),
        1
    );
    assert_eq!(
        call_events(state.path(), "tool_call_settled", tool).len(),
        1
    );
}

/// Only declared kinds are asked: with `sampling` alone the plugin's
/// elicitation fails `unsupported` and its sampling is the one input
/// request (`sampling-1`, `sampling/createMessage`); answered, the call
/// completes with the sampled text. Without `sampling`, a plugin call that
/// needs it and fails is `-32021` naming `sampling`.
#[tokio::test]
async fn only_declared_kinds_are_asked_and_a_failed_call_names_the_missing_one() {
    let (ws, state) = dirs();
    let s = serve_conformance(ws.path(), state.path());
    let tool = "test_input_required_result_capabilities";
    let r1 = call(&s, 1, tool, json!({"sampling": {}}), json!({})).await;
    assert_eq!(keys(&r1), ["sampling-1"], "{r1}");
    assert_eq!(
        r1["result"]["inputRequests"]["sampling-1"],
        json!({"method": "sampling/createMessage", "params": {"maxTokens": 100, "messages": [
            {"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}]}}),
        "{r1}"
    );
    let sampled = json!({"sampling-1": {"role": "assistant", "model": "m", "stopReason": "endTurn",
        "content": {"type": "text", "text": "Paris"}}});
    let done = call(
        &s,
        2,
        tool,
        json!({"sampling": {}}),
        json!({"requestState": r1["result"]["requestState"], "inputResponses": sampled}),
    )
    .await;
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("name: (no elicitation: "), "{text}");
    assert!(text.ends_with("; capital: Paris"), "{text}");
    let missing = call(&s, 3, "test_missing_capability", json!({}), json!({})).await;
    assert_eq!(missing["id"], json!(3), "{missing}");
    assert_eq!(missing["error"]["code"], json!(-32021), "{missing}");
    assert_eq!(
        missing["error"]["data"],
        json!({"requiredCapabilities": {"sampling": {}}}),
        "{missing}"
    );
    s.close().await.unwrap();
}

/// The TypeScript SDK v2 client pinned to 2026-07-28, on stdio and on
/// HTTP, answers a plugin's elicitation through MRTR: its handler is asked
/// the plugin's own message once, and its retry resumes the call, whose
/// result carries the answer it gave (`decision`, no `name`).
#[test]
fn the_typescript_client_answers_a_plugin_elicitation_through_mrtr() {
    let (ws, state) = dirs();
    let wasm = crate::conformance::conformance_plugin();
    let wasm = wasm.to_str().unwrap();
    let serve = crate::mcp_http::HttpServe::start(
        ws.path(),
        state.path(),
        None,
        &["--http", "127.0.0.1:0", "--plugin", wasm],
    );
    let (ws2, state2) = dirs();
    let stdio = json!({
        "transport": "stdio",
        "command": env!("CARGO_BIN_EXE_toolhost"),
        "args": ["serve", "--plugin", wasm, "--workspace", ws2.path(), "--state-dir", state2.path()],
    });
    for mut spec in [stdio, json!({"transport": "http", "url": serve.url()})] {
        spec["mode"] = json!("2026-07-28");
        spec["elicitation"] = json!("accept");
        spec["steps"] =
            json!([{"tool": "test_input_required_result_elicitation", "arguments": {}}]);
        let report = crate::mcp_modern::ts_client(spec);
        assert_eq!(report["era"], json!("modern"), "{report}");
        assert_eq!(
            report["asked"],
            json!([
                "plugin `conformance` asks (this is not a toolhost permission request):\n| What is your name?"
            ]),
            "{report}"
        );
        assert_eq!(
            report["results"][0],
            json!({"text": "No name given: action=accept, content={\"decision\":\"allow_once\"}",
                "structured": null, "isError": false, "resultType": null}),
            "{report}"
        );
    }
}

/// A modern `prompts/get` of a plugin prompt that elicits is an
/// `input_required` result too (`elicitation-1`); the retry's answer
/// resumes the prompt, whose message carries it.
#[tokio::test]
async fn a_plugin_prompt_asks_through_mrtr_on_prompts_get() {
    let (ws, state) = dirs();
    let s = serve_conformance(ws.path(), state.path());
    let name = "test_input_required_result_prompt";
    let m = modern_meta("2026-07-28", json!({"elicitation": {}}));
    let r1 = exchange(
        &s,
        json!(1),
        "prompts/get",
        json!({"name": name, "_meta": m}),
    )
    .await;
    assert_eq!(keys(&r1), ["elicitation-1"], "{r1}");
    let retry = json!({"name": name, "_meta": m, "requestState": r1["result"]["requestState"],
        "inputResponses": {"elicitation-1": {"action": "accept", "content": {"context": "tests"}}}});
    let done = exchange(&s, json!(2), "prompts/get", retry).await;
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    assert_eq!(
        done["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Use this context: tests"}}]),
        "{done}"
    );
    s.close().await.unwrap();
}
