//! Logs and traces through the real binary (docs/operations.md#traces-and-logs):
//! `--log-format json` makes every stderr line one JSON object with the
//! documented fields and no token in it; OpenTelemetry spans reach an
//! OTLP/HTTP receiver on loopback (`tests/otlp_receiver.py`, which decodes
//! them with the OpenTelemetry protobuf definitions of the `opentelemetry-proto`
//! Python package, apart from the Rust code that encoded them) with the
//! names, parents and attributes the semantic conventions give them, the
//! client's `traceparent` as the parent; nothing is exported without the
//! `OTEL_*` variables.
//!
//! Every child's output is drained by a thread of its own while the test
//! waits for the child (a full pipe would otherwise stall it).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_http::{open_session, post_headers, request, send};
use crate::support::dirs;

/// The client's trace: W3C `traceparent` fields as the MCP semantic
/// conventions' example has them.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const TRACESTATE: &str = "rojo=00f067aa0ba902b7";
/// A second trace, sent as HTTP headers instead of `_meta`.
const HEADER_TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const HEADER_SPAN: &str = "b7ad6b7169203331";

const TOKEN: &str = "tr4ces-and-l0gs-token-0123456789";
const WRONG_TOKEN: &str = "not-the-token-but-secret-too-42";

/// Lines a child prints on one of its pipes, drained by a thread.
struct Lines {
    lines: Arc<Mutex<Vec<String>>>,
    done: mpsc::Receiver<()>,
}

impl Lines {
    fn drain(pipe: impl std::io::Read + Send + 'static) -> Lines {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
            let _ = tx.send(());
        });
        Lines { lines, done }
    }

    fn snapshot(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits (at most 90 s: a first start compiles the built-in plugins, on a
    /// loaded machine) for a line `pick` accepts; returns what it gave.
    fn wait_for<T>(&self, what: &str, pick: impl Fn(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(found) = self.snapshot().iter().find_map(|l| pick(l)) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no line {what}: {:?}",
                self.snapshot()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (at most 30 s) for the pipe to close; returns every line.
    fn until_closed(&self) -> Vec<String> {
        self.done
            .recv_timeout(Duration::from_secs(30))
            .expect("the pipe did not close");
        self.snapshot()
    }
}

/// Removes every `OTEL_*` variable this test process may have from `cmd`.
fn clean_env(cmd: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") {
            cmd.env_remove(&name);
        }
    }
    cmd.env_remove("TOOLHOST_LOG")
}

/// The OTLP receiver (`tests/otlp_receiver.py`) and the spans it printed.
struct Receiver {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Lines,
    endpoint: String,
    marks: usize,
}

impl Receiver {
    fn start() -> Receiver {
        let python = crate::support::venv_python("the OTLP receiver (opentelemetry-proto)");
        let script = crate::repo::root().join("tests/otlp_receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = Lines::drain(child.stdout.take().unwrap());
        let port = out.wait_for("announcing the port", |l| {
            l.strip_prefix("listening ").map(str::to_string)
        });
        Receiver {
            child,
            stdin,
            out,
            endpoint: format!("http://127.0.0.1:{port}"),
            marks: 0,
        }
    }

    /// Every span received so far: once the receiver has answered a marker
    /// request sent after them, so nothing it got before is still unread.
    async fn spans(&mut self) -> Vec<Value> {
        self.marks += 1;
        let path = format!("/mark-{}", self.marks);
        let addr = self.endpoint.trim_start_matches("http://").to_string();
        assert_eq!(send(&addr, "GET", &path, &[], "").await.status, 404);
        let marker = format!("refused GET {path}");
        self.out
            .wait_for("for the marker", |l| (l == marker).then_some(()));
        self.out
            .snapshot()
            .iter()
            .filter_map(|l| l.strip_prefix("span "))
            .map(|s| serde_json::from_str(s).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `toolhost serve --http 127.0.0.1:0` with `extra` arguments and `env`,
/// its stderr drained.
struct Serve {
    child: Child,
    stderr: Lines,
    addr: String,
}

impl Serve {
    fn start(ws: &Path, state: &Path, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        clean_env(&mut cmd)
            .arg("serve")
            .args(["--http", "127.0.0.1:0"])
            .args(extra)
            .arg("--workspace")
            .arg(ws)
            .arg("--state-dir")
            .arg(state)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = Lines::drain(child.stderr.take().unwrap());
        let addr = stderr.wait_for("announcing the endpoint", |l| {
            let text = serde_json::from_str::<Value>(l)
                .ok()
                .and_then(|v| v["fields"]["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| l.to_string());
            let url = text.strip_prefix("toolhost: serving MCP over HTTP at http://")?;
            Some(url.trim_end_matches("/mcp").to_string())
        });
        Serve {
            child,
            stderr,
            addr,
        }
    }

    /// The names of this server's threads (`/proc/PID/task/*/comm`).
    fn threads(&self) -> Vec<String> {
        std::fs::read_dir(format!("/proc/{}/task", self.child.id()))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|c| c.trim().to_string())
            .collect()
    }

    /// SIGTERM, then its exit status (within 30 s) and every stderr line.
    fn stop(mut self) -> (ExitStatus, Vec<String>) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "serve did not exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        let lines = self.stderr.until_closed();
        (status, lines)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn private_file(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(path, mode).unwrap();
}

fn policy(state: &Path) -> String {
    let path = state.join("policy.toml");
    std::fs::write(&path, "default = \"allow\"\ndeny = [\"rm *\"]\n").unwrap();
    path.to_str().unwrap().to_string()
}

fn bash_call(id: Value, command: &str, meta: Option<Value>) -> Value {
    let mut params = json!({"name": "bash", "arguments": {"command": command}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

#[tokio::test(flavor = "multi_thread")]
async fn json_logs_are_one_object_per_stderr_line_with_the_documented_fields_and_no_token() {
    let (ws, state) = dirs();
    let tokens = state.path().join("tokens.toml");
    private_file(
        &tokens,
        &format!("[[token]]\nname = \"alice\"\ntoken = \"{TOKEN}\"\n"),
    );
    let p = policy(state.path());
    let serve = Serve::start(
        ws.path(),
        state.path(),
        &[
            "--log-format",
            "json",
            "--policy",
            &p,
            "--tokens-file",
            tokens.to_str().unwrap(),
        ],
        // The host's, rmcp's and hyper's debug lines too (not the compiler's:
        // cranelift's debug records would slow the first start for nothing).
        &[(
            "TOOLHOST_LOG",
            "info,toolhost=debug,rmcp=debug,hyper=debug,hyper_util=debug",
        )],
    );
    let auth = format!("Bearer {TOKEN}");
    let headers = [("authorization", auth.as_str())];
    let session = open_session(&serve.addr, &headers).await;
    let reply = request(
        &serve.addr,
        &session,
        &json!(1),
        &bash_call(json!(1), "echo logged", None),
        &headers,
    )
    .await;
    assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
    let wrong = format!("Bearer {WRONG_TOKEN}");
    let refused = send(
        &serve.addr,
        "POST",
        "/mcp",
        &post_headers(&[("authorization", wrong.as_str())]),
        bash_call(json!(2), "echo no", None).to_string(),
    )
    .await;
    assert_eq!(refused.status, 401);
    let (status, lines) = serve.stop();
    assert_eq!(status.code(), Some(0), "{lines:#?}");

    assert!(lines.len() > 5, "{lines:#?}");
    let levels = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"];
    let mut messages = Vec::new();
    for line in &lines {
        let value: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a stderr line is not JSON ({e}): {line}"));
        let object = value
            .as_object()
            .unwrap_or_else(|| panic!("not an object: {line}"));
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["fields", "level", "target", "timestamp"], "{line}");
        let ts = value["timestamp"].as_str().unwrap();
        assert!(
            ts.len() == "2026-12-04T18:40:50.123456Z".len()
                && ts.ends_with('Z')
                && ts.as_bytes()[10] == b'T',
            "{line}"
        );
        assert!(levels.contains(&value["level"].as_str().unwrap()), "{line}");
        assert!(!value["target"].as_str().unwrap().is_empty(), "{line}");
        assert!(value["fields"].is_object(), "{line}");
        if let Some(m) = value["fields"]["message"].as_str() {
            messages.push(m.to_string());
        }
        assert!(
            !line.contains(TOKEN) && !line.contains(WRONG_TOKEN),
            "{line}"
        );
    }
    // The lines serve prints for a person are records too, and the host's
    // own log events are there.
    for expected in [
        "toolhost: host session hs_",
        "toolhost: serving MCP over HTTP at http://",
    ] {
        assert!(
            messages.iter().any(|m| m.starts_with(expected)),
            "no {expected:?} in {messages:#?}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"target\":\"toolhost") && l.contains("\"level\":\"DEBUG\"")),
        "{lines:#?}"
    );
}

/// The attributes of `span` (`attributes`), as an ordered map.
fn attributes(span: &Value) -> BTreeMap<String, Value> {
    serde_json::from_value(span["attributes"].clone()).unwrap()
}

fn one<'a>(spans: &'a [Value], name: &str, trace: &str) -> &'a Value {
    let found: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == name && s["trace_id"] == trace)
        .collect();
    assert_eq!(found.len(), 1, "{name} in trace {trace}: {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_reach_an_otlp_receiver_under_the_clients_trace_with_the_semantic_attributes() {
    let mut receiver = Receiver::start();
    let (ws, state) = dirs();
    let p = policy(state.path());
    let serve = Serve::start(
        ws.path(),
        state.path(),
        &["--policy", &p],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "toolhost-under-test"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment.name=test",
            ),
            // Exported soon after each span ends, not every 5 s.
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    assert!(
        serve
            .threads()
            .iter()
            .any(|t| t.starts_with("OpenTelemetry")),
        "{:?}",
        serve.threads()
    );
    let session = open_session(&serve.addr, &[]).await;
    // The client's context in `_meta` (MCP 2026-07-28's unprefixed keys).
    let meta = json!({
        "traceparent": format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"),
        "tracestate": TRACESTATE,
    });
    let reply = request(
        &serve.addr,
        &session,
        &json!(7),
        &bash_call(json!(7), "echo traced", Some(meta)),
        &[],
    )
    .await;
    assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
    // ... and in the HTTP headers, for a call the policy refuses.
    let traceparent = format!("00-{HEADER_TRACE_ID}-{HEADER_SPAN}-01");
    let reply = request(
        &serve.addr,
        &session,
        &json!("call-8"),
        &bash_call(json!("call-8"), "rm -f nothing", None),
        &[("traceparent", traceparent.as_str())],
    )
    .await;
    assert_eq!(reply["result"]["isError"], json!(true), "{reply}");
    let (status, stderr) = serve.stop();
    assert_eq!(status.code(), Some(0), "{stderr:#?}");
    // Exported before the exit (the shutdown flushes).
    let spans = receiver.spans().await;

    let server = one(&spans, "tools/call bash", TRACE_ID);
    assert_eq!(server["kind"], "SPAN_KIND_SERVER");
    assert_eq!(server["parent_span_id"], CLIENT_SPAN);
    assert_eq!(server["trace_state"], TRACESTATE);
    assert_eq!(server["status"], "STATUS_CODE_UNSET");
    assert_eq!(server["scope"], "toolhost");
    assert_eq!(server["content_type"], "application/x-protobuf");
    assert_eq!(server["resource"]["service.name"], "toolhost-under-test");
    assert_eq!(server["resource"]["deployment.environment.name"], "test");
    assert_eq!(
        server["resource"]["service.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(server["events"], 0);
    let mut attrs = attributes(server);
    let port = attrs.remove("client.port").unwrap();
    assert!(port.as_i64().is_some_and(|p| p > 0 && p < 65536), "{port}");
    assert_eq!(
        attrs,
        serde_json::from_value::<BTreeMap<String, Value>>(json!({
            "mcp.method.name": "tools/call",
            "mcp.protocol.version": "2025-11-25",
            "mcp.session.id": session,
            "jsonrpc.request.id": "7",
            "gen_ai.tool.name": "bash",
            "gen_ai.operation.name": "execute_tool",
            "network.transport": "tcp",
            "network.protocol.name": "http",
            "network.protocol.version": "1.1",
            "client.address": "127.0.0.1",
        }))
        .unwrap()
    );

    let plugin = one(&spans, "plugin.call bash", TRACE_ID);
    assert_eq!(plugin["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(plugin["parent_span_id"], server["span_id"]);
    let mut attrs = attributes(plugin);
    let call_id = attrs.remove("toolhost.tool_call.id").unwrap();
    assert!(call_id.as_str().unwrap().starts_with("tc_"), "{call_id}");
    assert_eq!(
        attrs,
        serde_json::from_value::<BTreeMap<String, Value>>(json!({
            "toolhost.plugin.id": "bash",
            "gen_ai.tool.name": "bash",
        }))
        .unwrap()
    );

    let start = one(&spans, "process.start", TRACE_ID);
    assert_eq!(start["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(start["parent_span_id"], plugin["span_id"]);
    assert_eq!(start["status"], "STATUS_CODE_UNSET");
    let mut attrs = attributes(start);
    let session_id = attrs.remove("toolhost.process.session.id").unwrap();
    assert!(!session_id.as_str().unwrap().is_empty());
    assert_eq!(attrs.remove("toolhost.tool_call.id"), Some(call_id.clone()));
    assert_eq!(
        attrs,
        serde_json::from_value::<BTreeMap<String, Value>>(json!({
            "toolhost.plugin.id": "bash",
        }))
        .unwrap()
    );

    let decide = one(&spans, "permission.decide", TRACE_ID);
    assert_eq!(decide["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(decide["parent_span_id"], start["span_id"]);
    assert_eq!(
        attributes(decide),
        serde_json::from_value::<BTreeMap<String, Value>>(json!({
            "toolhost.plugin.id": "bash",
            "toolhost.permission.source": "policy",
            "toolhost.permission.decision": "allow",
        }))
        .unwrap()
    );
    // Every span of the trace is one of these four.
    let in_trace = spans.iter().filter(|s| s["trace_id"] == TRACE_ID).count();
    assert_eq!(in_trace, 4, "{spans:#?}");

    // The refused call: its parent from the HTTP headers; the tool error and
    // the refusal as `error.type`.
    let server = one(&spans, "tools/call bash", HEADER_TRACE_ID);
    assert_eq!(server["parent_span_id"], HEADER_SPAN);
    assert_eq!(server["status"], "STATUS_CODE_ERROR");
    let attrs = attributes(server);
    assert_eq!(attrs["error.type"], "tool_error");
    assert_eq!(attrs["jsonrpc.request.id"], "call-8");
    let start = one(&spans, "process.start", HEADER_TRACE_ID);
    assert_eq!(start["status"], "STATUS_CODE_ERROR");
    assert_eq!(attributes(start)["error.type"], "policy");
    assert!(!attributes(start).contains_key("toolhost.process.session.id"));
    let decide = one(&spans, "permission.decide", HEADER_TRACE_ID);
    assert_eq!(decide["parent_span_id"], start["span_id"]);
    assert_eq!(attributes(decide)["toolhost.permission.decision"], "deny");
    // No span has log events, and no other trace was made (a request with no
    // context starts its own; `initialize` has no span).
    assert!(spans.iter().all(|s| s["events"] == 0), "{spans:#?}");
}

/// `toolhost call bash '{"command":"true"}'` with `env`, to its end.
fn call(ws: &Path, state: &Path, env: &[(&str, &str)]) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    let out = clean_env(&mut cmd)
        .args(["call", "bash", r#"{"command":"true"}"#])
        .arg("--workspace")
        .arg(ws)
        .arg("--state-dir")
        .arg(state)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::support::describe(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_exported_unless_the_variables_ask_and_call_flushes_on_exit() {
    let mut receiver = Receiver::start();
    let endpoint = receiver.endpoint.clone();
    let (ws, state) = dirs();
    // No variable: no exporter thread at all in serve.
    let serve = Serve::start(ws.path(), state.path(), &[], &[]);
    let threads = serve.threads();
    assert!(
        !threads.iter().any(|t| t.starts_with("OpenTelemetry")),
        "{threads:?}"
    );
    let (status, _) = serve.stop();
    assert_eq!(status.code(), Some(0));
    // The endpoint set, but the SDK disabled or the exporter `none`: nothing
    // reaches the receiver (a call's spans are flushed before it exits).
    for off in [
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SDK_DISABLED", "true"),
        ],
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_TRACES_EXPORTER", "none"),
        ],
    ] {
        call(ws.path(), state.path(), &off);
    }
    assert_eq!(receiver.spans().await, Vec::<Value>::new());
    // The endpoint alone: `call`'s spans arrive, the plugin call the root.
    call(
        ws.path(),
        state.path(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())],
    );
    let spans = receiver.spans().await;
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 3, "{spans:#?}");
    for name in ["plugin.call bash", "process.start", "permission.decide"] {
        assert!(names.contains(&name), "{names:?}");
    }
    let root = spans
        .iter()
        .find(|s| s["name"] == "plugin.call bash")
        .unwrap();
    assert_eq!(root["parent_span_id"], "");
    assert!(spans.iter().all(|s| s["trace_id"] == root["trace_id"]));
    assert_eq!(root["resource"]["service.name"], "toolhost");
}
