//! Both MCP eras on the same doors (MCP 2026-07-28, "Versioning and
//! Compatibility"): the official TypeScript SDK v2 client
//! (`@modelcontextprotocol/client`, pinned in `tests/clients/package.json`,
//! driven by `tests/clients/ts_client.mjs`) pinned to 2026-07-28, in `auto`
//! mode and in its default legacy mode, over stdio and Streamable HTTP, each
//! listing the tools and running `bash` in the foreground and the
//! background; then raw JSON lines on stdio and raw HTTP for the exact error
//! codes and ids of the modern era (an unsupported version, missing `_meta`,
//! a removed method, `server/discover` before anything else).

use std::process::Command;

use serde_json::{Value, json};
use toolhost_test_support::StdioClient;

use crate::mcp_http::{HttpServe, post_headers, send};
use crate::support::{describe, dirs, exchange};

/// The `_meta` a 2026-07-28 request carries (protocol version and client
/// capabilities are required, client info recommended), at `version`.
fn meta(version: &str) -> Value {
    crate::support::modern_meta(version, json!({}))
}

/// What `bash` is asked in every client test: `echo` in the foreground, then
/// in the background (the started session's `session_id` goes to
/// `bash_output`, which waits for its end).
fn bash_steps() -> Value {
    json!([
        {"tool": "bash", "arguments": {"command": "echo toolhost-ts"}},
        {"tool": "bash", "arguments": {"command": "echo in-background", "run_in_background": true},
         "then": "session_id"},
        {"tool": "bash_output", "arguments": {"wait_ms": 60000}},
    ])
}

/// Runs `tests/clients/ts_client.mjs` with `spec` and returns what it printed.
pub(crate) fn ts_client(spec: Value) -> Value {
    let script = crate::conformance::root().join("tests/clients/ts_client.mjs");
    let out = Command::new(crate::conformance::node())
        .arg(&script)
        .arg(spec.to_string())
        .env_remove("TOOLHOST_LOG")
        .output()
        .expect("running the TypeScript client");
    assert!(out.status.success(), "{}", describe(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the client printed no JSON ({e}): {}", describe(&out)))
}

/// The client's report checked: the era and version it settled on, the
/// built-in tools listed, `echo`'s exact output in the foreground and the
/// background. (The client consumes `resultType`; the raw tests below check
/// it on the wire.)
fn assert_report(report: &Value, era: &str, version: &str) {
    assert_eq!(report["era"], json!(era), "{report}");
    assert_eq!(report["version"], json!(version), "{report}");
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for name in [
        "bash",
        "bash_output",
        "kill_shell",
        "write_stdin",
        "list_shells",
    ] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{report}");
    assert_eq!(results[0]["text"], json!("toolhost-ts"), "{report}");
    assert_eq!(results[0]["isError"], json!(false), "{report}");
    assert!(
        results[1]["structured"]["session_id"].is_string(),
        "{report}"
    );
    assert_eq!(
        results[2]["text"],
        json!("in-background\n\n[exit code 0]"),
        "{report}"
    );
}

/// The stdio spec for `mode`: the client starts `toolhost serve` itself.
fn stdio_spec(mode: &str, ws: &std::path::Path, state: &std::path::Path) -> Value {
    let policy = crate::support::allow_all_policy(state);
    json!({
        "transport": "stdio",
        "command": env!("CARGO_BIN_EXE_toolhost"),
        "args": ["serve", "--policy", policy, "--workspace", ws, "--state-dir", state],
        "mode": mode,
        "steps": bash_steps(),
    })
}

#[test]
fn ts_client_pinned_to_2026_07_28_over_stdio() {
    let (ws, state) = dirs();
    let report = ts_client(stdio_spec("2026-07-28", ws.path(), state.path()));
    assert_report(&report, "modern", "2026-07-28");
}

#[test]
fn ts_client_in_auto_mode_selects_modern_over_stdio() {
    let (ws, state) = dirs();
    let report = ts_client(stdio_spec("auto", ws.path(), state.path()));
    assert_report(&report, "modern", "2026-07-28");
}

#[test]
fn ts_client_in_legacy_mode_stays_legacy_over_stdio() {
    let (ws, state) = dirs();
    let report = ts_client(stdio_spec("legacy", ws.path(), state.path()));
    assert_report(&report, "legacy", "2025-11-25");
}

/// The HTTP spec for `mode` against `serve`.
fn http_spec(mode: &str, serve: &HttpServe) -> Value {
    json!({"transport": "http", "url": serve.url(), "mode": mode, "steps": bash_steps()})
}

/// `serve --http 127.0.0.1:0` with the allow-all policy.
fn http_serve(ws: &std::path::Path, state: &std::path::Path) -> HttpServe {
    let policy = crate::support::allow_all_policy(state);
    HttpServe::start(ws, state, Some(&policy), &["--http", "127.0.0.1:0"])
}

#[test]
fn ts_client_in_every_mode_over_http() {
    let (ws, state) = dirs();
    let serve = http_serve(ws.path(), state.path());
    let report = ts_client(http_spec("2026-07-28", &serve));
    assert_report(&report, "modern", "2026-07-28");
    let report = ts_client(http_spec("auto", &serve));
    assert_report(&report, "modern", "2026-07-28");
    let report = ts_client(http_spec("legacy", &serve));
    assert_report(&report, "legacy", "2025-11-25");
}

/// A `serve` on stdio, spoken to line by line, nothing sent yet.
fn stdio_serve(ws: &std::path::Path, state: &std::path::Path) -> StdioClient {
    let policy = crate::support::allow_all_policy(state);
    let mut cmd = crate::support::serve(ws, state);
    cmd.args(["--policy", &policy]);
    StdioClient::spawn(cmd).unwrap()
}

/// The supported versions toolhost names, newest first.
fn supported() -> Value {
    json!([
        "2026-07-28",
        "2025-11-25",
        "2025-06-18",
        "2025-03-26",
        "2024-11-05"
    ])
}

#[tokio::test]
async fn stdio_modern_requests_get_the_revisions_errors_and_results() {
    let (ws, state) = dirs();
    let s = stdio_serve(ws.path(), state.path());
    // server/discover before anything else.
    let d = exchange(
        &s,
        json!("d-1"),
        "server/discover",
        json!({"_meta": meta("2026-07-28")}),
    )
    .await;
    assert_eq!(d["id"], json!("d-1"), "{d}");
    assert_eq!(d["result"]["supportedVersions"], supported(), "{d}");
    assert_eq!(d["result"]["resultType"], json!("complete"), "{d}");
    assert_eq!(
        d["result"]["capabilities"]["tools"]["listChanged"],
        json!(true),
        "{d}"
    );
    // An unsupported version: -32022 naming the supported ones.
    let u = exchange(
        &s,
        json!(7),
        "tools/list",
        json!({"_meta": meta("1900-01-01")}),
    )
    .await;
    assert_eq!(
        u,
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32022,
               "message": "Unsupported protocol version",
               "data": {"requested": "1900-01-01", "supported": supported()}}}),
    );
    // No `_meta` at all (and no initialize): -32600 naming both ways in.
    let n = exchange(&s, json!(8), "tools/list", json!({})).await;
    assert_eq!(n["id"], json!(8), "{n}");
    assert_eq!(n["error"]["code"], json!(-32600), "{n}");
    assert!(
        n["error"]["message"]
            .as_str()
            .unwrap()
            .contains("io.modelcontextprotocol/clientCapabilities"),
        "{n}"
    );
    // `_meta` without the client capabilities: -32602 naming the key.
    let partial = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
    let m = exchange(&s, json!(9), "tools/list", partial).await;
    assert_eq!(m["id"], json!(9), "{m}");
    assert_eq!(m["error"]["code"], json!(-32602), "{m}");
    assert!(
        m["error"]["message"]
            .as_str()
            .unwrap()
            .contains("io.modelcontextprotocol/clientCapabilities"),
        "{m}"
    );
    // `ping` was removed in 2026-07-28.
    let p = exchange(&s, json!(10), "ping", json!({"_meta": meta("2026-07-28")})).await;
    assert_eq!(p["id"], json!(10), "{p}");
    assert_eq!(p["error"]["code"], json!(-32601), "{p}");
    // A complete modern request: served, `resultType` and deterministic order.
    let l = exchange(
        &s,
        json!(11),
        "tools/list",
        json!({"_meta": meta("2026-07-28")}),
    )
    .await;
    assert_eq!(l["result"]["resultType"], json!("complete"), "{l}");
    let again = exchange(
        &s,
        json!(12),
        "tools/list",
        json!({"_meta": meta("2026-07-28")}),
    )
    .await;
    assert_eq!(again["result"]["tools"], l["result"]["tools"]);
    // One page, no cursors: a cursor is not ours, never a silent full list.
    let c = exchange(
        &s,
        json!(19),
        "tools/list",
        json!({"_meta": meta("2026-07-28"), "cursor": "bogus"}),
    )
    .await;
    assert_eq!(c["error"]["code"], json!(-32602), "{c}");
    assert_eq!(c["id"], json!(19), "{c}");
    // Removed methods once the modern lifecycle is open.
    for (id, method, params) in [
        (13, "ping", json!({})),
        (14, "logging/setLevel", json!({"level": "debug"})),
        (15, "resources/subscribe", json!({"uri": "file:///x"})),
        (18, "initialize", json!({})),
    ] {
        let mut params = params;
        params["_meta"] = meta("2026-07-28");
        let r = exchange(&s, json!(id), method, params).await;
        assert_eq!(r["id"], json!(id), "{r}");
        assert_eq!(r["error"]["code"], json!(-32601), "{method}: {r}");
    }
    // bash: exact output; a wrong argument type is a tool error the model reads.
    let call = |id: u64, args: Value| {
        exchange(
            &s,
            json!(id),
            "tools/call",
            json!({"name": "bash", "arguments": args, "_meta": meta("2026-07-28")}),
        )
    };
    let ok = call(16, json!({"command": "echo modern-stdio"})).await;
    assert_eq!(ok["result"]["resultType"], json!("complete"), "{ok}");
    assert_eq!(ok["result"]["isError"], json!(false), "{ok}");
    assert_eq!(ok["result"]["content"][0]["text"], json!("modern-stdio"));
    let wrong = call(17, json!({"command": 5})).await;
    assert_eq!(wrong["id"], json!(17), "{wrong}");
    assert_eq!(wrong["result"]["isError"], json!(true), "{wrong}");
    assert_eq!(wrong["result"]["resultType"], json!("complete"), "{wrong}");
    s.close().await.unwrap();
}

/// A legacy client on stdio is answered as before: `initialize` then
/// requests without `_meta`, no `resultType`, and arguments of the wrong
/// type still `-32602`.
#[tokio::test]
async fn stdio_legacy_clients_are_answered_as_before() {
    let (ws, state) = dirs();
    let s = stdio_serve(ws.path(), state.path());
    let init = s.initialize("2025-11-25").await.unwrap();
    assert_eq!(
        init["result"]["protocolVersion"],
        json!("2025-11-25"),
        "{init}"
    );
    let ok = exchange(
        &s,
        json!(1),
        "tools/call",
        json!({"name": "bash", "arguments": {"command": "echo legacy"}}),
    )
    .await;
    assert_eq!(ok["result"]["content"][0]["text"], json!("legacy"), "{ok}");
    assert!(ok["result"].get("resultType").is_none(), "{ok}");
    let wrong = exchange(
        &s,
        json!(2),
        "tools/call",
        json!({"name": "bash", "arguments": {"command": 5}}),
    )
    .await;
    assert_eq!(wrong["error"]["code"], json!(-32602), "{wrong}");
    let c = exchange(&s, json!(4), "prompts/list", json!({"cursor": "bogus"})).await;
    assert_eq!(c["error"]["code"], json!(-32602), "{c}");
    let ping = exchange(&s, json!(3), "ping", json!({})).await;
    assert_eq!(ping["result"], json!({}), "{ping}");
    s.close().await.unwrap();
}

/// One raw stateless POST with the revision's headers; (status, body).
async fn post_modern(addr: &str, body: Value, name: Option<&str>) -> (u16, Value) {
    let method = body["method"].as_str().unwrap().to_string();
    let version = body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        .as_str()
        .unwrap_or("2026-07-28")
        .to_string();
    let mut headers = vec![
        ("mcp-protocol-version", version.as_str()),
        ("mcp-method", method.as_str()),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    let mut reply = send(
        addr,
        "POST",
        "/mcp",
        &post_headers(&headers),
        body.to_string(),
    )
    .await;
    let status = reply.status;
    let is_sse = reply.headers.get("content-type").is_some_and(|v| {
        v.to_str()
            .unwrap_or_default()
            .starts_with("text/event-stream")
    });
    let message = if is_sse {
        reply.message(&body["id"]).await
    } else {
        reply.json().await
    };
    (status, message)
}

#[tokio::test]
async fn http_modern_requests_get_the_revisions_errors_and_results() {
    let (ws, state) = dirs();
    let serve = http_serve(ws.path(), state.path());
    let addr = serve.addr.clone();
    let (status, d) = post_modern(
        &addr,
        json!({"jsonrpc": "2.0", "id": "d-1", "method": "server/discover",
               "params": {"_meta": meta("2026-07-28")}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["result"]["supportedVersions"], supported(), "{d}");
    let (status, u) = post_modern(
        &addr,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
               "params": {"_meta": meta("1900-01-01")}}),
        None,
    )
    .await;
    assert_eq!(status, 400, "{u}");
    assert_eq!(u["id"], json!(2), "{u}");
    assert_eq!(u["error"]["code"], json!(-32022), "{u}");
    assert_eq!(u["error"]["data"]["supported"], supported(), "{u}");
    let (status, p) = post_modern(
        &addr,
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": meta("2026-07-28")}}),
        None,
    )
    .await;
    assert_eq!((status, &p["error"]["code"]), (404, &json!(-32601)), "{p}");
    assert_eq!(p["id"], json!(3), "{p}");
    let (status, l) = post_modern(
        &addr,
        json!({"jsonrpc": "2.0", "id": "lv", "method": "logging/setLevel",
               "params": {"level": "debug", "_meta": meta("2026-07-28")}}),
        None,
    )
    .await;
    assert_eq!((status, &l["error"]["code"]), (404, &json!(-32601)), "{l}");
    assert_eq!(l["id"], json!("lv"), "{l}");
    let (status, ok) = post_modern(
        &addr,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "echo modern-http"},
            "_meta": meta("2026-07-28")}}),
        Some("bash"),
    )
    .await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(
        ok["result"]["content"][0]["text"],
        json!("modern-http"),
        "{ok}"
    );
    assert_eq!(ok["result"]["resultType"], json!("complete"), "{ok}");
    // Mcp-Name must match the body: HeaderMismatch (-32020), 400.
    let (status, h) = post_modern(
        &addr,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "echo never"},
            "_meta": meta("2026-07-28")}}),
        Some("bash_output"),
    )
    .await;
    assert_eq!((status, &h["error"]["code"]), (400, &json!(-32020)), "{h}");
    assert_eq!(h["id"], json!(5), "{h}");
    // classify still answers what rmcp cannot parse (JSON-RPC §5.1).
    let reply = send(&addr, "POST", "/mcp", &post_headers(&[]), "{not json").await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json().await["error"]["code"], json!(-32700));
}

/// The permission `ask` through MRTR with the TypeScript client's
/// elicitation handler: `touch` (which the built-in policy asks about) runs
/// once when the answer is `allow_once` and never when it is declined, over
/// `transport` ("stdio" or "http"); the question names the command.
fn ask_through_mrtr(transport: &str) {
    let (ws, state) = dirs();
    let serve = (transport == "http")
        .then(|| HttpServe::start(ws.path(), state.path(), None, &["--http", "127.0.0.1:0"]));
    for (answer, file) in [("accept", "ts-accepted"), ("decline", "ts-declined")] {
        let steps = json!([{"tool": "bash", "arguments": {"command": format!("touch {file}")}}]);
        let spec = match &serve {
            Some(serve) => json!({"transport": "http", "url": serve.url()}),
            None => json!({
                "transport": "stdio",
                "command": env!("CARGO_BIN_EXE_toolhost"),
                "args": ["serve", "--workspace", ws.path(), "--state-dir", state.path()],
            }),
        };
        let mut spec = spec;
        spec["mode"] = json!("2026-07-28");
        spec["elicitation"] = json!(answer);
        spec["steps"] = steps;
        let report = ts_client(spec);
        assert_eq!(report["era"], json!("modern"), "{report}");
        let asked = report["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{report}");
        assert!(
            asked[0]
                .as_str()
                .unwrap()
                .contains(&format!("command: touch {file}")),
            "{report}"
        );
        let result = &report["results"][0];
        let exists = ws.path().join(file).exists();
        if answer == "accept" {
            assert_eq!(result["isError"], json!(false), "{report}");
            assert!(exists, "{file} was not made: {report}");
        } else {
            assert_eq!(result["isError"], json!(true), "{report}");
            assert_eq!(
                result["text"],
                json!(
                    "Could not start the command: permission denied.\nrejected by mcp-input-required (reject_once)"
                ),
                "{report}"
            );
            assert!(!exists, "{file} was made although declined");
        }
    }
}

#[test]
fn a_permission_ask_is_answered_through_mrtr_over_stdio() {
    ask_through_mrtr("stdio");
}

#[test]
fn a_permission_ask_is_answered_through_mrtr_over_http() {
    ask_through_mrtr("http");
}

/// The `requestState` of a permission question: used once (a replay is
/// `-32602`), a tampered one is `-32602` and runs nothing, a retry without
/// the answer is asked again, and the key lives in the state dir (0600).
#[tokio::test]
async fn request_state_is_single_use_and_integrity_protected() {
    let (ws, state) = dirs();
    let s = StdioClient::spawn(crate::support::serve(ws.path(), state.path())).unwrap();
    let mut m = meta("2026-07-28");
    m["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let call = |id: u64, extra: Value| {
        let mut params =
            json!({"name": "bash", "arguments": {"command": "touch once"}, "_meta": m});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        exchange(&s, json!(id), "tools/call", params)
    };
    let first = call(1, json!({})).await;
    assert_eq!(
        first["result"]["resultType"],
        json!("input_required"),
        "{first}"
    );
    let form = &first["result"]["inputRequests"]["permission"];
    assert_eq!(form["method"], json!("elicitation/create"), "{first}");
    assert_eq!(form["params"]["mode"], json!("form"), "{first}");
    let state_1 = first["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    // One character of the tag changed (not the last, whose low bits a
    // base64 decoder may ignore).
    let mut tampered: Vec<char> = state_1.chars().collect();
    let at = tampered.len() - 5;
    tampered[at] = if tampered[at] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    let allow = json!({"permission": {"action": "accept", "content": {"decision": "allow_once"}}});
    let t = call(
        2,
        json!({"requestState": tampered, "inputResponses": allow}),
    )
    .await;
    assert_eq!(t["error"]["code"], json!(-32602), "{t}");
    assert!(!ws.path().join("once").exists());
    // The same question again, under a new state; the old one is spent.
    let again = call(3, json!({"requestState": state_1})).await;
    assert_eq!(
        again["result"]["resultType"],
        json!("input_required"),
        "{again}"
    );
    let state_2 = again["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(state_2, state_1);
    let spent = call(4, json!({"requestState": state_1, "inputResponses": allow})).await;
    assert_eq!(spent["error"]["code"], json!(-32602), "{spent}");
    let done = call(5, json!({"requestState": state_2, "inputResponses": allow})).await;
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["exit_code"],
        json!(0),
        "{done}"
    );
    assert!(ws.path().join("once").exists());
    let replay = call(6, json!({"requestState": state_2, "inputResponses": allow})).await;
    assert_eq!(replay["error"]["code"], json!(-32602), "{replay}");
    use std::os::unix::fs::PermissionsExt;
    let key = std::fs::metadata(state.path().join("mcp-request-state.key")).unwrap();
    assert_eq!((key.len(), key.permissions().mode() & 0o777), (32, 0o600));
    s.close().await.unwrap();
}

/// The `notifications/message` a modern `tools/call` of the conformance
/// plugin's `test_tool_with_logging` (which logs three `info` messages)
/// gets on its stream, with `log_level` in `_meta` or without one.
async fn logs_of_a_modern_call(addr: &str, id: u64, log_level: Option<&str>) -> usize {
    let mut m = meta("2026-07-28");
    if let Some(level) = log_level {
        m["io.modelcontextprotocol/logLevel"] = json!(level);
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "test_tool_with_logging", "arguments": {}, "_meta": m}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "test_tool_with_logging"),
    ];
    let mut reply = send(
        addr,
        "POST",
        "/mcp",
        &post_headers(&headers),
        body.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    let mut logs = 0;
    loop {
        let (_, _, data) = reply.event().await.expect("the stream ended first");
        if data.is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(&data).unwrap();
        if message["method"] == "notifications/message" {
            logs += 1;
        } else if message["id"] == json!(id) {
            assert_eq!(message["result"]["isError"], json!(false), "{message}");
            return logs;
        }
    }
}

/// A modern request gets log messages only at the level its own `_meta`
/// asks for (MCP 2026-07-28: none without `io.modelcontextprotocol/logLevel`).
#[tokio::test]
async fn a_modern_request_gets_log_messages_only_when_its_meta_asks() {
    let (ws, state) = dirs();
    let wasm = crate::conformance::conformance_plugin();
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        None,
        &["--http", "127.0.0.1:0", "--plugin", wasm.to_str().unwrap()],
    );
    assert_eq!(logs_of_a_modern_call(&serve.addr, 1, None).await, 0);
    assert_eq!(logs_of_a_modern_call(&serve.addr, 2, Some("info")).await, 3);
    assert_eq!(
        logs_of_a_modern_call(&serve.addr, 3, Some("error")).await,
        0
    );
}

/// `subscriptions/listen` (2026-07-28, in place of `resources/subscribe`
/// and the GET stream): its stream opens with
/// `notifications/subscriptions/acknowledged`, tagged with the request's id
/// as `io.modelcontextprotocol/subscriptionId`, accepting tool-list changes
/// and the resource URIs asked for but not the prompt list (which never
/// changes).
#[tokio::test]
async fn subscriptions_listen_acknowledges_what_it_will_send() {
    let (ws, state) = dirs();
    let serve = http_serve(ws.path(), state.path());
    let body = json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
        "params": {"_meta": meta("2026-07-28"), "notifications": {
            "toolsListChanged": true, "promptsListChanged": true,
            "resourceSubscriptions": ["test://watched-resource"]}}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    let mut reply = send(
        &serve.addr,
        "POST",
        "/mcp",
        &post_headers(&headers),
        body.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    let ack = loop {
        let (_, _, data) = reply.event().await.expect("the stream ended first");
        if !data.is_empty() {
            break serde_json::from_str::<Value>(&data).unwrap();
        }
    };
    assert_eq!(
        ack["method"],
        json!("notifications/subscriptions/acknowledged"),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!("sub-1"),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["test://watched-resource"]}),
        "{ack}"
    );
}
