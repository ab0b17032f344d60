//! `toolhost serve --http` driven over loopback: rmcp's Streamable HTTP client
//! (the official Rust SDK) and raw HTTP/1.1 (hyper's client) for exact
//! headers, status codes and SSE resumption (MCP 2025-11-25, "Transports",
//! "Streamable HTTP").

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

use crate::mcp::{Elicitor, call, text_of};
use crate::support::dirs;

/// How long any single HTTP exchange may take before the test fails.
pub(crate) const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `toolhost serve --http 127.0.0.1:0` (or the given address).
pub(crate) struct HttpServe {
    pub child: Child,
    /// Where it listens, e.g. `127.0.0.1:41234`.
    pub addr: String,
    /// Every stderr line so far (a thread keeps draining the pipe).
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl HttpServe {
    /// Starts `serve` with `extra` arguments (which must include `--http`) and
    /// waits (at most 60 s) for the line announcing the bound endpoint.
    pub fn start(ws: &Path, state: &Path, policy: Option<&str>, extra: &[&str]) -> HttpServe {
        HttpServe::start_logging(ws, state, policy, extra, "debug")
    }

    /// [`HttpServe::start`] with `TOOLHOST_LOG` = `log` (e.g. `warn` for a
    /// long run).
    pub fn start_logging(
        ws: &Path,
        state: &Path,
        policy: Option<&str>,
        extra: &[&str],
        log: &str,
    ) -> HttpServe {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        cmd.arg("serve");
        if let Some(p) = policy {
            cmd.arg("--policy").arg(p);
        }
        let mut child = cmd
            .args(extra)
            .arg("--workspace")
            .arg(ws)
            .arg("--state-dir")
            .arg(state)
            .env("TOOLHOST_LOG", log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let lines = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("toolhost: serving MCP over HTTP at http://") {
                    let _ = tx.send(url.trim_end_matches("/mcp").to_string());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!(
                    "serve announced no endpoint; stderr: {:?}",
                    stderr.lock().unwrap()
                )
            });
        HttpServe {
            child,
            addr,
            stderr,
        }
    }

    /// `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The port bound.
    pub fn port(&self) -> &str {
        self.addr.rsplit(':').next().unwrap()
    }

    /// Waits (at most `limit`) for the server to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "serve did not exit in {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP response: status, headers and the body as it arrives.
pub(crate) struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: hyper::body::Incoming,
    /// SSE text read but not yet split into events.
    buffer: String,
}

impl Reply {
    /// The whole body as text (fails the test after [`EXCHANGE_TIMEOUT`]).
    pub async fn text(self) -> String {
        let bytes = tokio::time::timeout(EXCHANGE_TIMEOUT, self.body.collect())
            .await
            .expect("the body did not end in time")
            .unwrap()
            .to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The whole body as JSON.
    pub async fn json(self) -> Value {
        let text = self.text().await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
    }

    /// The next SSE event, as (id, retry, data); `None` at the end of the
    /// stream. Fails the test after [`EXCHANGE_TIMEOUT`].
    pub async fn event(&mut self) -> Option<(Option<String>, Option<u64>, String)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut retry, mut data) = (None, None, Vec::new());
                for line in raw.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("retry:") {
                        retry = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                    }
                }
                if id.is_none() && retry.is_none() && data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some((id, retry, data.join("\n")));
            }
            let frame = tokio::time::timeout(EXCHANGE_TIMEOUT, self.body.frame())
                .await
                .expect("no SSE event in time");
            match frame {
                None => return None,
                Some(Err(e)) => panic!("reading the SSE stream: {e}"),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer
                            .push_str(&String::from_utf8_lossy(&data).replace("\r\n", "\n"));
                    }
                }
            }
        }
    }

    /// Reads SSE events until the JSON-RPC message whose `id` is `id`.
    pub async fn message(&mut self, id: &Value) -> Value {
        loop {
            let (_, _, data) = self.event().await.expect("the stream ended first");
            if data.is_empty() {
                continue;
            }
            let message: Value = serde_json::from_str(&data).unwrap();
            if &message["id"] == id {
                return message;
            }
        }
    }
}

/// Sends one HTTP/1.1 request to `addr` with exactly these `headers` (a
/// `Host` among them unless `host` is `None`, which sends `Host: addr`).
pub(crate) async fn send(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Reply {
    let stream = tokio::time::timeout(EXCHANGE_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut request = http::Request::builder().method(method).uri(path);
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request = request.header("host", addr);
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request.body(Full::new(body.into())).unwrap();
    let response = tokio::time::timeout(EXCHANGE_TIMEOUT, sender.send_request(request))
        .await
        .expect("a response in time")
        .expect("a response");
    let (parts, body) = response.into_parts();
    Reply {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
        buffer: String::new(),
    }
}

/// The headers of an MCP `POST` (JSON body, both response kinds accepted),
/// plus `extra`.
pub(crate) fn post_headers<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    h.extend_from_slice(extra);
    h
}

/// An `initialize` request body with id 0, asking for `version`.
pub(crate) fn initialize_body(version: &str) -> String {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion": version, "capabilities":{},
        "clientInfo":{"name":"raw-http","version":"1"}}})
    .to_string()
}

/// Opens a session with raw HTTP: `initialize` (answered on SSE), then
/// `notifications/initialized` (202). Returns the `Mcp-Session-Id`.
pub(crate) async fn open_session(addr: &str, extra: &[(&str, &str)]) -> String {
    let mut reply = send(
        addr,
        "POST",
        "/mcp",
        &post_headers(extra),
        initialize_body("2025-11-25"),
    )
    .await;
    assert_eq!(reply.status, 200);
    let session = reply.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let init = reply.message(&json!(0)).await;
    assert_eq!(
        init["result"]["protocolVersion"],
        json!("2025-11-25"),
        "{init}"
    );
    let mut with_session = extra.to_vec();
    with_session.push(("mcp-session-id", &session));
    let ack = send(
        addr,
        "POST",
        "/mcp",
        &post_headers(&with_session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(ack.status, 202);
    session
}

/// Sends request `body` (whose id is `id`) in `session` and returns the
/// JSON-RPC response.
pub(crate) async fn request(
    addr: &str,
    session: &str,
    id: &Value,
    body: &Value,
    extra: &[(&str, &str)],
) -> Value {
    let mut headers = post_headers(extra);
    headers.push(("mcp-session-id", session));
    let mut reply = send(addr, "POST", "/mcp", &headers, body.to_string()).await;
    assert_eq!(reply.status, 200, "{body}");
    reply.message(id).await
}

/// An rmcp client over Streamable HTTP, with `token` as bearer token.
async fn http_client<H: ClientHandler>(
    url: &str,
    token: Option<&str>,
    handler: H,
) -> RunningService<RoleClient, H> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(t) = token {
        config = config.auth_header(t.to_string());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    tokio::time::timeout(EXCHANGE_TIMEOUT, handler.serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize")
}

fn policy(state: &Path) -> String {
    crate::support::allow_all_policy(state)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_concurrent_sessions_have_their_own_ids_and_run_tools_concurrently() {
    let (ws, state) = dirs();
    let p = policy(state.path());
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&p),
        &["--http", "127.0.0.1:0"],
    );
    let (a, b) = tokio::join!(
        open_session(&serve.addr, &[]),
        open_session(&serve.addr, &[])
    );
    assert_ne!(a, b);
    assert!(a.len() >= 16 && b.len() >= 16, "{a} {b}");

    let url = serve.url();
    let (one, two) = tokio::join!(http_client(&url, None, ()), http_client(&url, None, ()));
    let info = one.peer_info().unwrap();
    assert_eq!(info.protocol_version.as_str(), "2025-11-25");
    let tools = one.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "bash"));
    let start = Instant::now();
    let (r1, r2) = tokio::join!(
        one.call_tool(call("bash", json!({"command": "sleep 1; echo one"}))),
        two.call_tool(call("bash", json!({"command": "sleep 1; echo two"})))
    );
    assert_eq!(text_of(&r1.unwrap()).trim_end(), "one");
    assert_eq!(text_of(&r2.unwrap()).trim_end(), "two");
    assert!(
        start.elapsed() < Duration::from_millis(1900),
        "{:?}",
        start.elapsed()
    );
    one.cancel().await.unwrap();
    two.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_stream_resumes_with_last_event_id() {
    let (ws, state) = dirs();
    let p = policy(state.path());
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&p),
        &["--http", "127.0.0.1:0"],
    );
    let session = open_session(&serve.addr, &[]).await;
    let mut headers = post_headers(&[]);
    headers.push(("mcp-session-id", &session));
    let mut reply = send(
        &serve.addr,
        "POST",
        "/mcp",
        &headers,
        json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
            "params":{"name":"bash","arguments":{"command":"sleep 1; echo resumed"}}})
        .to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "text/event-stream");
    // The priming event: an id to resume from, a retry hint, no message.
    let (id, retry, data) = reply.event().await.unwrap();
    let id = id.expect("the priming event has an id");
    assert_eq!(retry, Some(3000));
    assert_eq!(data, "");
    // The connection breaks before the result.
    drop(reply);
    let mut resumed = send(
        &serve.addr,
        "GET",
        "/mcp",
        &[
            ("accept", "text/event-stream"),
            ("mcp-session-id", &session),
            ("last-event-id", &id),
        ],
        Bytes::new(),
    )
    .await;
    assert_eq!(resumed.status, 200);
    let result = resumed.message(&json!(7)).await;
    assert_eq!(
        result["result"]["content"][0]["text"]
            .as_str()
            .map(str::trim_end),
        Some("resumed"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn host_and_origin_must_be_loopback() {
    let (ws, state) = dirs();
    let p = policy(state.path());
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&p),
        &["--http", "127.0.0.1:0"],
    );
    let port = serve.port().to_string();
    let init = initialize_body("2025-06-18");
    let status = |host: String, origin: Option<&'static str>| {
        let addr = serve.addr.clone();
        let init = init.clone();
        async move {
            let mut h = post_headers(&[]);
            h.push(("host", host.as_str()));
            if let Some(o) = origin {
                h.push(("origin", o));
            }
            let reply = send(&addr, "POST", "/mcp", &h, init).await;
            let status = reply.status;
            let _ = reply.text().await;
            status
        }
    };
    assert_eq!(status("evil.example".into(), None).await, 403);
    assert_eq!(status(format!("evil.example:{port}"), None).await, 403);
    assert_eq!(status(format!("127.0.0.1.nip.io:{port}"), None).await, 403);
    assert_eq!(status(format!("localhost:{port}"), None).await, 200);
    assert_eq!(status(format!("127.0.0.1:{port}"), None).await, 200);
    assert_eq!(status(format!("[::1]:{port}"), None).await, 200);
    assert_eq!(status("localhost".into(), None).await, 200);
    let here = format!("127.0.0.1:{port}");
    assert_eq!(status(here.clone(), Some("http://evil.example")).await, 403);
    assert_eq!(status(here.clone(), Some("null")).await, 403);
    assert_eq!(
        status(here.clone(), Some("http://localhost:3000")).await,
        200
    );
    assert_eq!(status(here.clone(), Some("http://[::1]:5173")).await, 200);
    // Only /mcp is served.
    let reply = send(
        &serve.addr,
        "POST",
        "/other",
        &post_headers(&[]),
        init.clone(),
    )
    .await;
    assert_eq!(reply.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_loopback_bind_needs_a_bearer_token() {
    let (ws, state) = dirs();
    let p = policy(state.path());
    // Refused at start-up, with a message saying what to do.
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--http", "0.0.0.0:0", "--policy", &p])
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
    assert!(stderr.contains("--token-file"), "{stderr}");

    let token = "t0ken-0123456789abcdef-SECRET";
    let token_file = state.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    // A token file must be private (docs/operations.md#identities).
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&token_file, private).unwrap();
    let mut serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&p),
        &[
            "--http",
            "0.0.0.0:0",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    );
    // Connect over loopback; Host names the wildcard's loopback side.
    let addr = format!("127.0.0.1:{}", serve.port());
    let init = initialize_body("2025-11-25");
    let none = send(&addr, "POST", "/mcp", &post_headers(&[]), init.clone()).await;
    assert_eq!(none.status, 401);
    assert_eq!(
        none.headers["www-authenticate"],
        "Bearer realm=\"toolhost\""
    );
    let wrong = send(
        &addr,
        "POST",
        "/mcp",
        &post_headers(&[("authorization", "Bearer t0ken-0123456789abcdef-SECRET2")]),
        init.clone(),
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert!(
        wrong.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let bearer = format!("Bearer {token}");
    let session = open_session(&addr, &[("authorization", &bearer)]).await;
    let list = request(
        &addr,
        &session,
        &json!(1),
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
        &[("authorization", &bearer)],
    )
    .await;
    assert!(list["result"]["tools"].as_array().unwrap().len() >= 5);
    // A session id is no substitute for the token.
    let mut headers = post_headers(&[]);
    headers.push(("mcp-session-id", &session));
    let stolen = send(
        &addr,
        "POST",
        "/mcp",
        &headers,
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    )
    .await;
    assert_eq!(stolen.status, 401);
    // The rmcp client with the token works end to end.
    let client = http_client(&format!("http://{addr}/mcp"), Some(token), ()).await;
    let r = client
        .call_tool(call("bash", json!({"command": "echo authed"})))
        .await
        .unwrap();
    assert_eq!(text_of(&r).trim_end(), "authed");
    client.cancel().await.unwrap();
    // The token never reaches the logs (TOOLHOST_LOG=debug).
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(serve.wait_exit(Duration::from_secs(20)).success());
    let logs = serve.stderr.lock().unwrap().join("\n");
    assert!(!logs.contains(token), "the token leaked into stderr");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_ends_running_commands_and_exits() {
    let (ws, state) = dirs();
    let p = policy(state.path());
    let mut serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&p),
        // No drain: the call is cancelled at once (tests/all/drain.rs drains).
        &["--http", "127.0.0.1:0", "--drain-timeout", "0"],
    );
    let session = open_session(&serve.addr, &[]).await;
    let mut headers = post_headers(&[]);
    headers.push(("mcp-session-id", &session));
    let reply = send(
        &serve.addr,
        "POST",
        "/mcp",
        &headers,
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
            "params":{"name":"bash","arguments":{"command":"echo $$ > pgid; exec sleep 60"}}})
        .to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    let pid_file = ws.path().join("pgid");
    let deadline = Instant::now() + EXCHANGE_TIMEOUT;
    let pgid: i32 = loop {
        if let Some(p) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!toolhost_process::group_members(pgid as u32).is_empty());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = serve.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    assert_eq!(
        toolhost_process::group_members(pgid as u32),
        Vec::<u32>::new(),
        "processes survived the server"
    );
    drop(reply);
}

/// Step 4 of the permission pipeline per HTTP session: the policy's `ask`
/// goes to the session whose call asked, and only to it.
#[tokio::test(flavor = "multi_thread")]
async fn elicitation_goes_to_the_session_that_made_the_call() {
    let (ws, state) = dirs();
    // The built-in default policy (no --policy) asks before `touch`.
    let serve = HttpServe::start(ws.path(), state.path(), None, &["--http", "127.0.0.1:0"]);
    let allow = Elicitor::new("allow_once");
    let reject = Elicitor::new("reject_once");
    let a = http_client(&serve.url(), None, allow.clone()).await;
    let b = http_client(&serve.url(), None, reject.clone()).await;
    let (ra, rb) = tokio::join!(
        a.call_tool(call("bash", json!({"command": "touch from_a"}))),
        b.call_tool(call("bash", json!({"command": "touch from_b"})))
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.is_error, Some(false), "{ra:?}");
    assert_eq!(rb.is_error, Some(true), "{rb:?}");
    assert!(ws.path().join("from_a").exists());
    assert!(!ws.path().join("from_b").exists());
    let asked_a = allow.asked.lock().unwrap().clone();
    let asked_b = reject.asked.lock().unwrap().clone();
    assert_eq!(asked_a.len(), 1, "{asked_a:?}");
    assert_eq!(asked_b.len(), 1, "{asked_b:?}");
    assert!(asked_a[0].contains("touch from_a"), "{asked_a:?}");
    assert!(asked_b[0].contains("touch from_b"), "{asked_b:?}");
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// A plugin's elicitation during a call travels on that call's own POST SSE
/// stream (MCP "Transports": messages on it relate to the request), so a
/// client that never opens the optional GET stream still gets it, answers
/// it, and gets the call's result on the same stream.
#[tokio::test(flavor = "multi_thread")]
async fn elicitation_rides_the_calls_own_stream() {
    let (ws, state) = dirs();
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/compat/v0.2.0/conformance.wasm");
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        None,
        &[
            "--http",
            "127.0.0.1:0",
            "--plugin",
            plugin.to_str().unwrap(),
        ],
    );
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},
        "clientInfo":{"name":"no-get-stream","version":"1"}}});
    let mut reply = send(
        &serve.addr,
        "POST",
        "/mcp",
        &post_headers(&[]),
        init.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    let session = reply.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    reply.message(&json!(0)).await;
    let with_session = post_headers(&[("mcp-session-id", &session)]);
    let ack = send(
        &serve.addr,
        "POST",
        "/mcp",
        &with_session,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(ack.status, 202);

    let mut call = send(
        &serve.addr,
        "POST",
        "/mcp",
        &with_session,
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call",
            "params":{"name":"test_elicitation","arguments":{"message":"Who are you?"}}})
        .to_string(),
    )
    .await;
    assert_eq!(call.status, 200);
    // The first message on the call's stream is the elicitation.
    let ask = loop {
        let (_, _, data) = call.event().await.expect("the call's stream ended first");
        if !data.is_empty() {
            break serde_json::from_str::<Value>(&data).unwrap();
        }
    };
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    // Attributed to its plugin, in a shape no permission question takes.
    assert_eq!(
        ask["params"]["message"],
        "plugin `conformance` asks (this is not a toolhost permission request):\n| Who are you?",
        "{ask}"
    );
    let answer = send(
        &serve.addr,
        "POST",
        "/mcp",
        &with_session,
        json!({"jsonrpc":"2.0","id":ask["id"],"result":{"action":"accept",
            "content":{"username":"ada","email":"ada@example.com"}}})
        .to_string(),
    )
    .await;
    assert_eq!(answer.status, 202);
    let result = call.message(&json!(5)).await;
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("accept") && text.contains("ada@example.com"),
        "{result}"
    );
}

/// Bound to another loopback address, the server accepts that address in
/// `Host` (an IP literal cannot be rebound by DNS) and still refuses names.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_on_another_loopback_address_accepts_its_own_host() {
    let (ws, state) = dirs();
    let p = policy(state.path());
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&p),
        &["--http", "127.0.0.2:0"],
    );
    let port = serve.port().to_string();
    for (host, expected) in [
        (format!("127.0.0.2:{port}"), 200),
        (format!("localhost:{port}"), 200),
        (format!("evil.example:{port}"), 403),
    ] {
        let mut h = post_headers(&[]);
        h.push(("host", host.as_str()));
        let reply = send(
            &serve.addr,
            "POST",
            "/mcp",
            &h,
            initialize_body("2025-11-25"),
        )
        .await;
        let status = reply.status;
        let _ = reply.text().await;
        assert_eq!(status, expected, "Host: {host}");
    }
}

/// When commands may use the network, a command could open its own MCP
/// session to a tokenless loopback server and answer its own permission
/// prompts: `serve` refuses to start that way, naming the flag that opened
/// the network and `--token-file`.
#[test]
fn loopback_without_a_token_is_refused_when_commands_have_network() {
    let (ws, state) = dirs();
    for open in [["--allow-network", ""], ["--sandbox", "full-access"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(open.iter().filter(|a| !a.is_empty()))
            .arg("--workspace")
            .arg(ws.path())
            .arg("--state-dir")
            .arg(state.path())
            .env_remove("TOOLHOST_LOG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{open:?}: {stderr}");
        assert!(
            stderr.contains("--token-file") && stderr.contains(open.join(" ").trim()),
            "{open:?}: {stderr}"
        );
    }
}

/// `resources/subscribe` refuses URIs that are too long or carry control
/// characters (`-32602`), and the session keeps working.
#[tokio::test(flavor = "multi_thread")]
async fn subscribe_refuses_oversized_and_control_character_uris() {
    let (ws, state) = dirs();
    let p = policy(state.path());
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&p),
        &["--http", "127.0.0.1:0"],
    );
    let session = open_session(&serve.addr, &[]).await;
    let long = format!("test://{}", "a".repeat(5000));
    for (id, uri) in [
        (1, long.as_str()),
        (2, "test://x\u{1b}[2J"),
        (3, "test://ok"),
    ] {
        let body =
            json!({"jsonrpc":"2.0","id":id,"method":"resources/subscribe","params":{"uri":uri}});
        let reply = request(&serve.addr, &session, &json!(id), &body, &[]).await;
        if id == 3 {
            assert_eq!(reply["result"], json!({}), "{reply}");
        } else {
            assert_eq!(reply["error"]["code"], -32602, "{reply}");
        }
    }
}
