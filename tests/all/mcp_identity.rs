//! Identities on `toolhost serve --http` (docs/operations.md#identities),
//! through the real binary over loopback with raw HTTP/1.1: named tokens and
//! their scopes, the `actor` each call leaves in the event log, background
//! sessions invisible to other identities, SIGHUP re-reading the tokens file
//! with a job running, and token files other users could read refused.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_http::{HttpServe, initialize_body, open_session, post_headers, request, send};
use crate::support::{allow_all_policy, dirs};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const CAROL: &str = "carol-token-0123456789abcdef";
const OPS: &str = "ops-token-0123456789abcdef";
const DAVE: &str = "dave-token-0123456789abcdef";

/// The SHA-256 of `token` as 64 lowercase hex digits.
fn sha256_hex(token: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `text` to `dir/name` with mode `mode`.
fn write_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// alice (default scopes), bob (`call`, by digest), carol (`answer` only),
/// ops (`admin`).
fn four_identities() -> String {
    format!(
        "[[token]]\nname = \"alice\"\ntoken = \"{ALICE}\"\n\n\
         [[token]]\nname = \"bob\"\nsha256 = \"{}\"\nscopes = [\"call\"]\n\n\
         [[token]]\nname = \"carol\"\ntoken = \"{CAROL}\"\nscopes = [\"answer\"]\n\n\
         [[token]]\nname = \"ops\"\ntoken = \"{OPS}\"\nscopes = [\"admin\"]\n",
        sha256_hex(BOB)
    )
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `tools/call` of `tool` with `arguments` as request `id` in `session`,
/// with `token`; the JSON-RPC response.
async fn call(
    addr: &str,
    session: &str,
    token: &str,
    id: u64,
    tool: &str,
    arguments: Value,
) -> Value {
    let auth = bearer(token);
    request(
        addr,
        session,
        &json!(id),
        &json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":tool,"arguments":arguments}}),
        &[("authorization", &auth)],
    )
    .await
}

/// The text of a `tools/call` response's first content block.
fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {response}"))
        .to_string()
}

/// The `session_id` a background start reported.
fn session_id(response: &Value) -> String {
    response["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_id: {response}"))
        .to_string()
}

/// The ids `list_shells` lists.
fn listed(response: &Value) -> Vec<String> {
    response["result"]["structuredContent"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions: {response}"))
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_string())
        .collect()
}

/// A 2026-07-28 `tools/call` of `bash` running `command` as request `id`
/// with `auth`, naming `client` in `_meta` when given; the JSON-RPC
/// response (the HTTP status asserted 200).
async fn modern_bash(
    addr: &str,
    auth: &str,
    id: &str,
    command: &str,
    client: Option<Value>,
) -> Value {
    let mut meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities":{}});
    if let Some(client) = client {
        meta["io.modelcontextprotocol/clientInfo"] = client;
    }
    let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"bash","arguments":{"command":command},"_meta":meta}});
    let mut reply = send(
        addr,
        "POST",
        "/mcp",
        &post_headers(&[
            ("authorization", auth),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "bash"),
        ]),
        body.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    reply.message(&json!(id)).await
}

fn serve_with_tokens(ws: &Path, state: &Path, tokens: &Path) -> HttpServe {
    let policy = allow_all_policy(state);
    HttpServe::start(
        ws,
        state,
        Some(&policy),
        &[
            "--http",
            "127.0.0.1:0",
            "--tokens-file",
            tokens.to_str().unwrap(),
        ],
    )
}

/// Waits (at most 20 s) for a stderr line of `serve` containing `needle`,
/// after the first `skip` lines.
fn wait_stderr(serve: &HttpServe, skip: usize, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(line) = serve
            .stderr
            .lock()
            .unwrap()
            .iter()
            .skip(skip)
            .find(|l| l.contains(needle))
        {
            return line.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no stderr line with {needle:?}: {:?}",
            serve.stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sighup(serve: &HttpServe) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.child.id() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn scopes_are_enforced_and_each_call_records_who_made_it() {
    let (ws, state) = dirs();
    let tokens = write_file(state.path(), "tokens.toml", &four_identities(), 0o600);
    let serve = serve_with_tokens(ws.path(), state.path(), &tokens);
    let addr = serve.addr.clone();

    let alice = open_session(&addr, &[("authorization", &bearer(ALICE))]).await;
    let r = call(
        &addr,
        &alice,
        ALICE,
        1,
        "bash",
        json!({"command": "echo by-alice"}),
    )
    .await;
    assert_eq!(text(&r).trim_end(), "by-alice", "{r}");

    // carol has no `call`: 403, the scope challenge, a JSON-RPC error with the id.
    let carol_auth = bearer(CAROL);
    let carol = open_session(&addr, &[("authorization", &carol_auth)]).await;
    let mut headers = post_headers(&[("authorization", &carol_auth)]);
    headers.push(("mcp-session-id", &carol));
    let refused = send(
        &addr,
        "POST",
        "/mcp",
        &headers,
        json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
               "params":{"name":"bash","arguments":{"command":"echo no"}}})
        .to_string(),
    )
    .await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.headers["www-authenticate"],
        "Bearer realm=\"toolhost\", error=\"insufficient_scope\", scope=\"call\""
    );
    assert_eq!(
        refused.json().await,
        json!({"jsonrpc":"2.0","id":7,"error":{"code":-32003,
            "message":"Forbidden: the identity `carol` lacks the `call` scope, which `tools/call` needs"}})
    );
    // Listing needs no scope.
    let list = request(
        &addr,
        &carol,
        &json!(8),
        &json!({"jsonrpc":"2.0","id":8,"method":"tools/list"}),
        &[("authorization", &carol_auth)],
    )
    .await;
    assert!(
        list["result"]["tools"].as_array().unwrap().len() >= 5,
        "{list}"
    );

    // bob (a digest in the file, `call` only) calls as a 2026-07-28 client
    // naming itself in `_meta`.
    let bob_auth = bearer(BOB);
    let client = json!({"name":"modern-client","version":"9.1"});
    let r = modern_bash(&addr, &bob_auth, "b-1", "echo by-bob", Some(client)).await;
    assert_eq!(text(&r).trim_end(), "by-bob", "{r}");
    // A 2026-07-28 request that names no client has none in the log (not
    // the server's own MCP library).
    let r = modern_bash(&addr, &bob_auth, "b-2", "echo unnamed", None).await;
    assert_eq!(text(&r).trim_end(), "unnamed", "{r}");
    // `GET /metrics` needs `metrics`: carol and bob lack it, alice has it.
    let metrics = send(
        &addr,
        "GET",
        "/metrics",
        &[("authorization", &bob_auth)],
        "",
    )
    .await;
    assert_eq!(metrics.status, 403);
    assert_eq!(
        metrics.headers["www-authenticate"],
        "Bearer realm=\"toolhost\", error=\"insufficient_scope\", scope=\"metrics\""
    );
    let alice_auth = bearer(ALICE);
    let metrics = send(
        &addr,
        "GET",
        "/metrics",
        &[("authorization", &alice_auth)],
        "",
    )
    .await;
    assert_eq!(metrics.status, 200);
    // A wrong token is still 401.
    let wrong = send(
        &addr,
        "POST",
        "/mcp",
        &post_headers(&[("authorization", "Bearer nobody-0123456789")]),
        initialize_body("2025-11-25"),
    )
    .await;
    assert_eq!(wrong.status, 401);

    // The event log: each call's actor, and its process's.
    let events = toolhost_test_support::host_log::events(state.path()).unwrap();
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_call_started")
        .collect();
    assert_eq!(started.len(), 3, "{started:?}");
    let actor = |e: &Value| {
        let mut a = e["actor"].clone();
        let remote = a["remote"].as_str().unwrap().to_string();
        let (ip, port) = remote.rsplit_once(':').unwrap();
        assert_eq!(ip, "127.0.0.1");
        assert!(port.parse::<u16>().unwrap() > 0);
        a["remote"] = json!("127.0.0.1:PORT");
        a
    };
    assert_eq!(
        actor(started[0]),
        json!({"identity":"alice","transport":"http","remote":"127.0.0.1:PORT",
               "client":{"name":"raw-http","version":"1"},"plugin":"bash"})
    );
    assert_eq!(
        actor(started[1]),
        json!({"identity":"bob","transport":"http","remote":"127.0.0.1:PORT",
               "client":{"name":"modern-client","version":"9.1"},"plugin":"bash"})
    );
    assert_eq!(
        actor(started[2]),
        json!({"identity":"bob","transport":"http","remote":"127.0.0.1:PORT","plugin":"bash"})
    );
    let processes: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "process_started")
        .collect();
    assert_eq!(processes.len(), 3, "{processes:?}");
    for (p, s) in processes.iter().zip(&started) {
        assert_eq!(p["tool_call_id"], s["tool_call_id"]);
        assert_eq!(p["actor"], s["actor"]);
    }
    // No token, nor its digest, in the log or on stderr.
    let log = serde_json::to_string(&events).unwrap();
    let stderr = serve.stderr.lock().unwrap().join("\n");
    for secret in [
        ALICE.to_string(),
        BOB.to_string(),
        CAROL.to_string(),
        sha256_hex(BOB),
    ] {
        assert!(!log.contains(&secret) && !stderr.contains(&secret));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_identity_cannot_list_read_or_kill_a_background_session_but_admin_can() {
    let (ws, state) = dirs();
    let tokens = write_file(state.path(), "tokens.toml", &four_identities(), 0o600);
    let serve = serve_with_tokens(ws.path(), state.path(), &tokens);
    let addr = serve.addr.clone();
    let alice = open_session(&addr, &[("authorization", &bearer(ALICE))]).await;
    let bob = open_session(&addr, &[("authorization", &bearer(BOB))]).await;
    let ops = open_session(&addr, &[("authorization", &bearer(OPS))]).await;

    let started = call(
        &addr,
        &alice,
        ALICE,
        1,
        "bash",
        json!({"command": "echo alice-secret-output; sleep 300", "run_in_background": true}),
    )
    .await;
    let id = session_id(&started);

    // bob: not listed, unknown to bash_output and kill_shell.
    let r = call(&addr, &bob, BOB, 2, "list_shells", json!({})).await;
    assert_eq!(listed(&r), Vec::<String>::new(), "{r}");
    for (n, tool) in [(3, "bash_output"), (4, "kill_shell")] {
        let r = call(&addr, &bob, BOB, n, tool, json!({"session_id": id})).await;
        assert_eq!(r["result"]["isError"], json!(true), "{r}");
        let t = text(&r);
        assert!(
            t.contains(&format!("no session {id} is visible")),
            "{tool}: {t}"
        );
        assert!(!t.contains("alice-secret-output"), "{tool}: {t}");
    }
    // alice sees and reads it.
    let r = call(&addr, &alice, ALICE, 5, "list_shells", json!({})).await;
    assert_eq!(listed(&r), std::slice::from_ref(&id), "{r}");
    let r = call(
        &addr,
        &alice,
        ALICE,
        6,
        "bash_output",
        json!({"session_id": id, "wait_ms": 0}),
    )
    .await;
    assert!(text(&r).contains("alice-secret-output"), "{r}");
    // ops (admin) sees it and kills it.
    let r = call(&addr, &ops, OPS, 7, "list_shells", json!({})).await;
    assert_eq!(listed(&r), std::slice::from_ref(&id), "{r}");
    let r = call(&addr, &ops, OPS, 8, "kill_shell", json!({"session_id": id})).await;
    assert_ne!(r["result"]["isError"], json!(true), "{r}");
    let r = call(&addr, &alice, ALICE, 9, "list_shells", json!({})).await;
    assert_eq!(r["result"]["structuredContent"]["running"], json!(0), "{r}");
    // The session's start records alice, though bob and ops touched it.
    let events = toolhost_test_support::host_log::events(state.path()).unwrap();
    let p = events
        .iter()
        .find(|e| e["kind"] == "process_started" && e["session_id"] == json!(id))
        .unwrap();
    assert_eq!(p["actor"]["identity"], "alice");
    assert_eq!(p["tool_call_id"], Value::Null, "a background start: {p}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_rereads_the_tokens_file_and_keeps_sessions_and_jobs() {
    let (ws, state) = dirs();
    let tokens = write_file(state.path(), "tokens.toml", &four_identities(), 0o600);
    let mut serve = serve_with_tokens(ws.path(), state.path(), &tokens);
    let addr = serve.addr.clone();
    let alice = open_session(&addr, &[("authorization", &bearer(ALICE))]).await;
    let started = call(
        &addr,
        &alice,
        ALICE,
        1,
        "bash",
        json!({"command": "sleep 300", "run_in_background": true}),
    )
    .await;
    let id = session_id(&started);

    // bob removed, dave added; alice kept.
    let before = serve.stderr.lock().unwrap().len();
    let next = format!(
        "[[token]]\nname = \"alice\"\ntoken = \"{ALICE}\"\n\n\
         [[token]]\nname = \"dave\"\ntoken = \"{DAVE}\"\n"
    );
    write_file(state.path(), "tokens.toml", &next, 0o600);
    sighup(&serve);
    let line = wait_stderr(&serve, before, "toolhost: re-read");
    assert_eq!(
        line,
        format!(
            "toolhost: re-read {}: 2 identities (alice, dave)",
            tokens.display()
        )
    );
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "SIGHUP stopped serve"
    );
    let removed = send(
        &addr,
        "POST",
        "/mcp",
        &post_headers(&[("authorization", &bearer(BOB))]),
        initialize_body("2025-11-25"),
    )
    .await;
    assert_eq!(removed.status, 401);
    let dave = open_session(&addr, &[("authorization", &bearer(DAVE))]).await;
    let r = call(
        &addr,
        &dave,
        DAVE,
        2,
        "bash",
        json!({"command": "echo by-dave"}),
    )
    .await;
    assert_eq!(text(&r).trim_end(), "by-dave", "{r}");
    // alice's session and job are still there.
    let r = call(&addr, &alice, ALICE, 3, "list_shells", json!({})).await;
    assert_eq!(listed(&r), std::slice::from_ref(&id), "{r}");
    assert_eq!(r["result"]["structuredContent"]["running"], json!(1), "{r}");

    // A bad file (a loose mode, then an unknown scope) keeps dave and alice.
    for (text, mode, why) in [
        (next.clone(), 0o644, "its mode is 0644"),
        (
            format!("{next}scopes = [\"root\"]\n"),
            0o600,
            "unknown scope `root`",
        ),
    ] {
        let before = serve.stderr.lock().unwrap().len();
        write_file(state.path(), "tokens.toml", &text, mode);
        sighup(&serve);
        let line = wait_stderr(&serve, before, "keeping the identities in force");
        assert!(line.contains(why), "{line}");
        assert!(!line.contains(DAVE), "{line}");
    }
    let r = call(
        &addr,
        &dave,
        DAVE,
        4,
        "bash",
        json!({"command": "echo still-dave"}),
    )
    .await;
    assert_eq!(text(&r).trim_end(), "still-dave", "{r}");
    let r = call(&addr, &alice, ALICE, 5, "list_shells", json!({})).await;
    assert_eq!(r["result"]["structuredContent"]["running"], json!(1), "{r}");

    // SIGTERM still stops it, with exit 0.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(serve.wait_exit(Duration::from_secs(20)).success());
}

/// A tokens file in a directory of its own is hidden from commands with its
/// directory: a new file renamed over it (a rotation) while a command runs
/// is as hidden from that command as the old one was.
#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_tokens_file_stays_hidden_from_a_command_already_running() {
    let (ws, state) = dirs();
    let secrets = tempfile::tempdir().unwrap();
    let tokens = write_file(secrets.path(), "tokens.toml", &four_identities(), 0o600);
    let serve = serve_with_tokens(ws.path(), state.path(), &tokens);
    let addr = serve.addr.clone();
    let alice = open_session(&addr, &[("authorization", &bearer(ALICE))]).await;
    let path = tokens.display().to_string();
    let command = format!("while ! test -e go; do sleep 0.02; done; cat {path}; echo end");
    let started = call(
        &addr,
        &alice,
        ALICE,
        1,
        "bash",
        json!({"command": command, "run_in_background": true}),
    )
    .await;
    let id = session_id(&started);
    // The rotation: a new file renamed over the old one, then SIGHUP.
    let before = serve.stderr.lock().unwrap().len();
    let next = format!(
        "[[token]]\nname = \"alice\"\ntoken = \"{ALICE}\"\n\n\
         [[token]]\nname = \"dave\"\ntoken = \"{DAVE}\"\n"
    );
    let staged = write_file(secrets.path(), "tokens.toml.new", &next, 0o600);
    std::fs::rename(&staged, &tokens).unwrap();
    sighup(&serve);
    wait_stderr(&serve, before, "toolhost: re-read");
    std::fs::write(ws.path().join("go"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut output = String::new();
    for n in 2.. {
        let r = call(
            &addr,
            &alice,
            ALICE,
            n,
            "bash_output",
            json!({"session_id": id, "wait_ms": 2000}),
        )
        .await;
        output.push_str(&text(&r));
        if output.contains("end") {
            break;
        }
        assert!(Instant::now() < deadline, "no end: {output}");
    }
    assert!(
        output.contains(&format!("cat: {path}: Permission denied")),
        "{output}"
    );
    assert!(
        !output.contains(DAVE) && !output.contains(ALICE),
        "{output}"
    );
    // No warning: the directory is the token's own.
    let stderr = serve.stderr.lock().unwrap().join("\n");
    assert!(!stderr.contains("only the file is hidden"), "{stderr}");
}

#[test]
fn a_token_file_other_users_can_read_is_refused() {
    let (ws, state) = dirs();
    std::fs::create_dir_all(state.path()).unwrap();
    let single = write_file(state.path(), "token", &format!("{ALICE}\n"), 0o644);
    let named = write_file(state.path(), "tokens.toml", &four_identities(), 0o660);
    let bad_scope = write_file(
        state.path(),
        "scopes.toml",
        &format!("[[token]]\nname = \"x\"\ntoken = \"{ALICE}\"\nscopes = [\"call\", \"sudo\"]\n"),
        0o600,
    );
    for (flag, file, message) in [
        (
            "--token-file",
            &single,
            format!(
                "toolhost: refusing the token file {0}: its mode is 0644, so other users of \
                 this machine can read or change it; make it private to its owner: chmod 600 {0}",
                single.display()
            ),
        ),
        (
            "--tokens-file",
            &named,
            format!(
                "toolhost: refusing the token file {0}: its mode is 0660, so other users of \
                 this machine can read or change it; make it private to its owner: chmod 600 {0}",
                named.display()
            ),
        ),
        (
            "--tokens-file",
            &bad_scope,
            format!(
                "toolhost: the tokens file {}: token `x`: unknown scope `sudo` (scopes: call, \
                 answer, metrics, admin)",
                bad_scope.display()
            ),
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["serve", "--http", "127.0.0.1:0", flag])
            .arg(file)
            .arg("--workspace")
            .arg(ws.path())
            .arg("--state-dir")
            .arg(state.path())
            .env_remove("TOOLHOST_LOG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim_end(), message);
        assert!(!stderr.contains(ALICE));
    }
}

/// An `initialize` in the 2025-11-25 era whose client answers form
/// elicitations, with `token`; the new session's id.
async fn open_eliciting_session(addr: &str, token: &str) -> String {
    let auth = bearer(token);
    let mut reply = send(
        addr,
        "POST",
        "/mcp",
        &post_headers(&[("authorization", &auth)]),
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},
            "clientInfo":{"name":"raw-http","version":"1"}}})
        .to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    let session = reply.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    reply.message(&json!(0)).await;
    let mut headers = post_headers(&[("authorization", &auth)]);
    headers.push(("mcp-session-id", &session));
    let ack = send(
        addr,
        "POST",
        "/mcp",
        &headers,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(ack.status, 202);
    session
}

/// `method` `body` with `token` in `session`: status and body text.
async fn in_session(
    addr: &str,
    method: &str,
    token: &str,
    session: &str,
    body: &str,
) -> (u16, String) {
    let auth = bearer(token);
    let mut headers = post_headers(&[("authorization", &auth)]);
    headers.push(("mcp-session-id", session));
    let reply = send(addr, method, "/mcp", &headers, body.to_string()).await;
    (reply.status, reply.text().await)
}

/// A legacy session belongs to the identity whose `initialize` made it
/// (mcp/http.rs, step 4): another identity naming it, `admin` included,
/// is answered exactly as for a session that does not exist (`404` for
/// `POST` and `GET`, `202` for `DELETE`, which ends nothing), so it can
/// neither call in it, answer its pending elicitation nor end it; the owner
/// goes on and answers.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_serves_only_the_identity_that_made_it() {
    let (ws, state) = dirs();
    let tokens = write_file(state.path(), "tokens.toml", &four_identities(), 0o600);
    // The built-in default policy asks before `touch`.
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        None,
        &[
            "--http",
            "127.0.0.1:0",
            "--tokens-file",
            tokens.to_str().unwrap(),
        ],
    );
    let addr = serve.addr.clone();
    let alice = open_eliciting_session(&addr, ALICE).await;
    let unknown = "0b5e2d3c-1111-4222-8333-944455556666";
    let call = |id: u64, command: &str| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
               "params":{"name":"bash","arguments":{"command":command}}})
        .to_string()
    };
    let not_found = (404, "Not Found: Session not found".to_string());
    for token in [BOB, OPS] {
        let body = call(1, "touch by-intruder");
        for (method, body, expected) in [
            ("POST", body.as_str(), not_found.clone()),
            ("GET", "", not_found.clone()),
            ("DELETE", "", (202, String::new())),
        ] {
            let foreign = in_session(&addr, method, token, &alice, body).await;
            assert_eq!(foreign, expected, "{method} in alice's session");
            let none = in_session(&addr, method, token, unknown, body).await;
            assert_eq!(foreign, none, "{method}: unlike an unknown session");
        }
    }
    assert!(!ws.path().join("by-intruder").exists());

    // alice's session lives on: her call is asked on its own stream.
    let auth = bearer(ALICE);
    let mut headers = post_headers(&[("authorization", &auth)]);
    headers.push(("mcp-session-id", &alice));
    let mut asking = send(&addr, "POST", "/mcp", &headers, call(2, "touch by-alice")).await;
    assert_eq!(asking.status, 200);
    let ask = loop {
        let (_, _, data) = asking.event().await.expect("the call's stream ended first");
        if !data.is_empty() {
            break serde_json::from_str::<Value>(&data).unwrap();
        }
    };
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let answer = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"action":"accept",
        "content":{"decision":"allow_once"}}})
    .to_string();
    // bob's and ops's answers, posted into alice's session, answer nothing.
    for token in [BOB, OPS] {
        assert_eq!(
            in_session(&addr, "POST", token, &alice, &answer).await,
            not_found
        );
    }
    assert!(!ws.path().join("by-alice").exists());
    let (status, _) = in_session(&addr, "POST", ALICE, &alice, &answer).await;
    assert_eq!(status, 202);
    let result = asking.message(&json!(2)).await;
    assert_eq!(result["result"]["isError"], json!(false), "{result}");
    assert!(ws.path().join("by-alice").exists());
    // alice ends her session; then it is gone for her too.
    let (status, _) = in_session(&addr, "DELETE", ALICE, &alice, "").await;
    assert_eq!(status, 202);
    assert_eq!(
        in_session(&addr, "POST", ALICE, &alice, &call(3, "echo late")).await,
        not_found
    );
    let stderr = serve.stderr.lock().unwrap().join("\n");
    assert!(
        stderr.contains("a request named an MCP session this identity did not make"),
        "{stderr}"
    );
}

/// A 2026-07-28 request `method` (of the tool or prompt `name`) with
/// `params` (its `_meta` added: the client answers elicitations) as `id`,
/// with `token`: the HTTP status and the JSON-RPC response.
async fn modern(
    addr: &str,
    token: &str,
    id: &str,
    method: &str,
    name: &str,
    mut params: Value,
) -> (u16, Value) {
    params["_meta"] = crate::support::modern_meta("2026-07-28", json!({"elicitation": {}}));
    params["name"] = json!(name);
    let auth = bearer(token);
    let mut reply = send(
        addr,
        "POST",
        "/mcp",
        &post_headers(&[
            ("authorization", &auth),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
            ("mcp-name", name),
        ]),
        json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string(),
    )
    .await;
    let status = reply.status;
    let json = reply
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let message = if json {
        reply.json().await
    } else {
        reply.message(&json!(id)).await
    };
    (status, message)
}

/// The questions of a 2026-07-28 call or prompt belong to the identity that
/// made it: another identity's retry with its `requestState` and answers is
/// `-32602` and runs nothing, and the owner still answers it afterwards
/// (`tools/call` and `prompts/get`). An identity without `answer` is asked
/// nothing: its `touch` is denied at once without a question, its prompt's
/// elicitation fails `unsupported`, and a legacy session of it gets no
/// `elicitation/create`.
#[tokio::test(flavor = "multi_thread")]
async fn a_question_is_answered_only_by_the_identity_that_asked_it() {
    let (ws, state) = dirs();
    let tokens = write_file(
        state.path(),
        "tokens.toml",
        &format!(
            "[[token]]\nname = \"alice\"\ntoken = \"{ALICE}\"\n\n\
             [[token]]\nname = \"mallory\"\ntoken = \"{DAVE}\"\n\n\
             [[token]]\nname = \"bob\"\ntoken = \"{BOB}\"\nscopes = [\"call\"]\n"
        ),
        0o600,
    );
    let plugin = crate::conformance::conformance_plugin();
    // The built-in default policy asks before `touch`.
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        None,
        &[
            "--http",
            "127.0.0.1:0",
            "--tokens-file",
            tokens.to_str().unwrap(),
            "--plugin",
            plugin.to_str().unwrap(),
        ],
    );
    let addr = serve.addr.clone();
    let invalid = json!({"code": -32602, "message":
        "invalid requestState: tampered, expired, for another tool, or made by another server"});

    // tools/call: alice is asked; mallory's retry is refused; alice answers.
    let touch = json!({"arguments": {"command": "touch by-alice"}});
    let (_, asked) = modern(&addr, ALICE, "a1", "tools/call", "bash", touch.clone()).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let mut retry = touch.clone();
    retry["requestState"] = asked["result"]["requestState"].clone();
    retry["inputResponses"] = json!({"permission": {"action": "accept",
        "content": {"decision": "allow_once"}}});
    let (_, stolen) = modern(&addr, DAVE, "m1", "tools/call", "bash", retry.clone()).await;
    assert_eq!(stolen["error"], invalid, "{stolen}");
    assert!(!ws.path().join("by-alice").exists());
    let (_, done) = modern(&addr, ALICE, "a2", "tools/call", "bash", retry).await;
    assert_eq!(done["result"]["isError"], json!(false), "{done}");
    assert!(ws.path().join("by-alice").exists());

    // prompts/get: the same.
    let prompt = "test_input_required_result_prompt";
    let (_, asked) = modern(&addr, ALICE, "a3", "prompts/get", prompt, json!({})).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let retry = json!({"requestState": asked["result"]["requestState"],
        "inputResponses": {"elicitation-1": {"action": "accept",
            "content": {"context": "tests"}}}});
    let (_, stolen) = modern(&addr, DAVE, "m2", "prompts/get", prompt, retry.clone()).await;
    assert_eq!(stolen["error"], invalid, "{stolen}");
    let (_, done) = modern(&addr, ALICE, "a4", "prompts/get", prompt, retry.clone()).await;
    assert_eq!(
        done["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Use this context: tests"}}]),
        "{done}"
    );

    // bob (no `answer`) is asked nothing, in either era.
    let (_, denied) = modern(
        &addr,
        BOB,
        "b1",
        "tools/call",
        "bash",
        json!({"arguments": {"command": "touch by-bob"}}),
    )
    .await;
    let not_asked = "Could not start the command: permission denied.\nthe policy asks before \
        running this, and no approver is available (no TTY, attached control client or MCP \
        client that answers elicitations). To allow it without asking, add a matching pattern \
        to the `allow` list of the --policy file. The policy's question:\nRun `touch by-bob`?\n\
        - `touch by-bob` matches no allow rule";
    assert_eq!(
        denied["result"],
        json!({"content": [{"type": "text", "text": not_asked}], "isError": true,
               "resultType": "complete"}),
        "{denied}"
    );
    let (_, unasked) = modern(&addr, BOB, "b2", "prompts/get", prompt, json!({})).await;
    assert_eq!(
        unasked["error"],
        json!({"code": -32603, "message": "plugin `conformance` failed: elicitation: \
            unsupported: the identity `bob` lacks the `answer` scope, so it is asked nothing"}),
        "{unasked}"
    );
    // Answers of his are refused before anything reads them.
    let (status, refused) = modern(&addr, BOB, "b3", "prompts/get", prompt, retry).await;
    assert_eq!(status, 403, "{refused}");
    let bob = open_eliciting_session(&addr, BOB).await;
    let auth = bearer(BOB);
    let mut headers = post_headers(&[("authorization", &auth)]);
    headers.push(("mcp-session-id", &bob));
    let mut reply = send(
        &addr,
        "POST",
        "/mcp",
        &headers,
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call",
            "params":{"name":"bash","arguments":{"command":"touch by-bob"}}})
        .to_string(),
    )
    .await;
    let first = loop {
        let (_, _, data) = reply.event().await.expect("the call's stream ended first");
        if !data.is_empty() {
            break serde_json::from_str::<Value>(&data).unwrap();
        }
    };
    assert_eq!(first["id"], json!(5), "asked: {first}");
    assert_eq!(
        first["result"],
        json!({"content": [{"type": "text", "text": not_asked}], "isError": true}),
        "{first}"
    );
    assert!(!ws.path().join("by-bob").exists());
}
