//! `toolhost serve` driven over stdio by real MCP clients: rmcp's client
//! (the official Rust SDK), raw JSON-RPC lines for malformed input
//! (`toolhost_test_support::StdioClient`), and the official Python SDK
//! (`tests/python`, from `.venv`).

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use serde_json::{Value, json};
use toolhost_test_support::host_log::events;
use toolhost_test_support::{StdioClient, result_text, rmcp_client};

/// `toolhost serve` over `ws` and `state`, with a policy that allows every
/// command (these tests are about the protocol; the policy has its own).
fn serve_command(ws: &Path, state: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut cmd = crate::support::serve(ws, state);
    cmd.arg("--policy")
        .arg(crate::support::allow_all_policy(state))
        .args(extra);
    cmd
}

/// Records progress notifications.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

pub(crate) async fn client(
    ws: &Path,
    state: &Path,
) -> (RunningService<RoleClient, Recorder>, Recorder) {
    let recorder = Recorder::default();
    let (running, _) = rmcp_client(recorder.clone(), serve_command(ws, state, &[]))
        .await
        .expect("initialize");
    (running, recorder)
}

pub(crate) fn call(name: &str, args: Value) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_string());
    p.arguments = args.as_object().cloned();
    p
}

use crate::support::dirs;

pub(crate) fn text_of(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn assert_seqs_contiguous(events: &[Value]) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(i as u64 + 1), "event {i}: {e}");
    }
}

#[tokio::test]
async fn lists_tools_with_schemas_and_annotations() {
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    let info = client.peer_info().expect("server info");
    let caps = serde_json::to_value(&info.capabilities).unwrap();
    assert_eq!(caps["tools"]["listChanged"], json!(true));
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    for expected in [
        "bash",
        "bash_output",
        "kill_shell",
        "write_stdin",
        "list_shells",
    ] {
        assert!(names.contains(&expected.to_string()), "{names:?}");
    }
    let bash = tools.iter().find(|t| t.name == "bash").unwrap();
    assert_eq!(bash.input_schema["type"], json!("object"));
    assert!(bash.input_schema["properties"]["command"].is_object());
    assert!(bash.description.as_deref().unwrap_or("").len() > 20);
    let ann = serde_json::to_value(bash.annotations.as_ref().unwrap()).unwrap();
    assert_eq!(ann["destructiveHint"], json!(true));
    let list_shells = tools.iter().find(|t| t.name == "list_shells").unwrap();
    let ann = serde_json::to_value(list_shells.annotations.as_ref().unwrap()).unwrap();
    assert_eq!(ann["readOnlyHint"], json!(true));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn call_bash_reports_is_error_and_structured_content() {
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    let ok = client
        .call_tool(call("bash", json!({"command": "echo hello"})))
        .await
        .unwrap();
    assert_eq!(ok.is_error, Some(false));
    assert_eq!(text_of(&ok).trim_end(), "hello");
    assert_eq!(
        ok.structured_content.as_ref().unwrap()["exit_code"],
        json!(0)
    );

    let bad = client
        .call_tool(call("bash", json!({"command": "echo before; exit 3"})))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert!(text_of(&bad).contains("exit code 3"), "{}", text_of(&bad));
    assert_eq!(bad.structured_content.unwrap()["exit_code"], json!(3));

    // Unknown tool: JSON-RPC -32602 (MCP 2025-06-18, tools: error handling).
    let err = client
        .call_tool(call("no_such_tool", json!({})))
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("-32602"), "{err:?}");
    // Arguments the plugin refuses: -32602 too.
    let err = client
        .call_tool(call("bash", json!({"command": 5})))
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("-32602"), "{err:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn progress_notifications_arrive_for_a_long_call() {
    let (ws, state) = dirs();
    let (client, recorder) = client(ws.path(), state.path()).await;
    let result = client
        .call_tool(call(
            "bash",
            json!({"command": "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done"}),
        ))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false));
    let progress = recorder.progress.lock().unwrap().clone();
    assert!(!progress.is_empty(), "no progress notification");
    let values: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert!(values.windows(2).all(|w| w[1] > w[0]), "{values:?}");
    assert!(*values.last().unwrap() <= 35.0, "{values:?}");
    client.cancel().await.unwrap();
}

/// True while process group `pgid` has a live member. Zombies do not count:
/// an orphaned grandchild that died waits for whoever is pid 1 here to reap
/// it, which can take a while and says nothing about the kill.
fn alive(pgid: i32) -> bool {
    !toolhost_process::group_members(pgid as u32).is_empty()
}

#[tokio::test]
async fn cancellation_kills_the_process_group_and_the_server_keeps_serving() {
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    let pid_file = ws.path().join("pid");
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(call(
        "bash",
        json!({"command": "echo $$ > pid; sleep 300 & sleep 300"}),
    )));
    let handle = client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = text.trim().parse::<i32>()
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(alive(pid));
    handle.cancel(Some("test".into())).await.unwrap();
    // A generous bound (hang detection, not timing): TERM, a 2 s grace, then
    // KILL, on a machine that may be busy compiling other tests' plugins.
    let deadline = Instant::now() + Duration::from_secs(40);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "process group {pid} survived the cancel"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Still serving.
    let r = client
        .call_tool(call("bash", json!({"command": "echo still here"})))
        .await
        .unwrap();
    assert_eq!(text_of(&r).trim_end(), "still here");
    client.cancel().await.unwrap();
    let events = events(state.path()).unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "tool_call_failed" && e["cancelled"] == json!(true)),
        "{events:#?}"
    );
}

#[tokio::test]
async fn concurrent_calls_run_concurrently() {
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    // Warm up (first call compiles nothing, but instantiates the plugin).
    client
        .call_tool(call("bash", json!({"command": "true"})))
        .await
        .unwrap();
    let start = Instant::now();
    let c = |i: u32| {
        client.call_tool(call(
            "bash",
            json!({"command": format!("sleep 1; echo {i}")}),
        ))
    };
    let (a, b, d) = tokio::join!(c(0), c(1), c(2));
    let elapsed = start.elapsed();
    for (i, r) in [a, b, d].into_iter().enumerate() {
        assert_eq!(text_of(&r.unwrap()).trim_end(), i.to_string());
    }
    assert!(elapsed < Duration::from_millis(2500), "took {elapsed:?}");
    client.cancel().await.unwrap();
}

/// A `toolhost serve` spoken to with raw JSON-RPC lines, initialised at
/// `2025-06-18`.
async fn raw_serve(ws: &Path, state: &Path, extra: &[&str]) -> StdioClient {
    let raw = StdioClient::spawn(serve_command(ws, state, extra)).unwrap();
    let init = raw.initialize("2025-06-18").await.unwrap();
    assert_eq!(
        init["result"]["protocolVersion"],
        json!("2025-06-18"),
        "{init}"
    );
    raw
}

/// `bash` with `command` through `raw`; the `CallToolResult`.
async fn bash(raw: &StdioClient, command: &str) -> Value {
    raw.call_tool("bash", json!({ "command": command }))
        .await
        .unwrap()
}

#[tokio::test]
async fn malformed_input_gets_json_rpc_errors_and_the_server_keeps_serving() {
    let (ws, state) = dirs();
    let raw = raw_serve(ws.path(), state.path(), &[]).await;
    raw.send("{this is not json").await.unwrap();
    let e = raw.next_message().await.unwrap();
    assert_eq!(e["error"]["code"], json!(-32700), "{e}");
    assert_eq!(e["id"], Value::Null);

    raw.send(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .await
        .unwrap();
    assert_eq!(
        raw.next_message().await.unwrap()["error"]["code"],
        json!(-32600)
    );

    raw.send(r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#)
        .await
        .unwrap();
    let e = raw.next_message().await.unwrap();
    assert_eq!(
        (e["error"]["code"].clone(), e["id"].clone()),
        (json!(-32600), json!(2))
    );

    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"no/such/method"}"#)
        .await
        .unwrap();
    assert_eq!(
        raw.response(&json!(3)).await.unwrap()["error"]["code"],
        json!(-32601)
    );

    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"nme":"bash"}}"#)
        .await
        .unwrap();
    assert_eq!(
        raw.response(&json!(4)).await.unwrap()["error"]["code"],
        json!(-32602)
    );

    raw.send(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope","arguments":{}}}"#,
    )
    .await
    .unwrap();
    assert_eq!(
        raw.response(&json!(5)).await.unwrap()["error"]["code"],
        json!(-32602)
    );

    // An oversized message (more than 4 MiB) is discarded and answered.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "a".repeat(4 * 1024 * 1024 + 10)
    );
    raw.send(&big).await.unwrap();
    let e = raw.next_message().await.unwrap();
    assert_eq!(e["error"]["code"], json!(-32600), "{e}");

    // Still serving.
    raw.send(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#)
        .await
        .unwrap();
    let list = raw.response(&json!(7)).await.unwrap();
    assert!(list["result"]["tools"].as_array().unwrap().len() >= 5);
    let r = bash(&raw, "echo fine").await;
    assert_eq!(result_text(&r).trim_end(), "fine", "{r}");
    assert!(raw.close().await.unwrap().success());
}

#[tokio::test]
async fn a_client_that_vanishes_does_not_stop_the_run() {
    let (ws, state) = dirs();
    let raw = raw_serve(ws.path(), state.path(), &[]).await;
    raw.send(
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"bash","arguments":{"command":"sleep 1; echo done > marker"}}})
        .to_string(),
    )
    .await
    .unwrap();
    // Let the call start, then go away.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = raw.close().await.unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("marker")).unwrap(),
        "done\n"
    );
    let events = events(state.path()).unwrap();
    assert_seqs_contiguous(&events);
    let kinds: Vec<_> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let settled = kinds
        .iter()
        .position(|k| *k == "tool_call_settled")
        .unwrap();
    let stopped = kinds.iter().rposition(|k| *k == "lifecycle").unwrap();
    assert!(settled < stopped, "{kinds:?}");
    assert_eq!(events[stopped]["state"], json!("stopped"));
}

#[tokio::test]
async fn restart_with_the_same_host_session_replays_history_and_continues_seq() {
    let (ws, state) = dirs();
    let raw = raw_serve(ws.path(), state.path(), &[]).await;
    bash(&raw, "echo first").await;
    assert!(raw.close().await.unwrap().success());
    let first = events(state.path()).unwrap();
    assert_seqs_contiguous(&first);
    let id = std::fs::read_dir(state.path().join("hosts"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();

    let raw = raw_serve(ws.path(), state.path(), &["--host-session", &id]).await;
    bash(&raw, "echo second").await;
    assert!(raw.close().await.unwrap().success());
    let all = events(state.path()).unwrap();
    assert_seqs_contiguous(&all);
    assert_eq!(&all[..first.len()], &first[..], "history was rewritten");
    let lifecycle: Vec<_> = all
        .iter()
        .filter(|e| e["kind"] == "lifecycle")
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(lifecycle, ["running", "stopped", "running", "stopped"]);
    let outputs: Vec<_> = all
        .iter()
        .filter(|e| e["kind"] == "process_output")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["first\n", "second\n"]);
}

/// The official Python SDK (`tests/python/test_mcp.py`), from `.venv`
/// (`python3 -m venv .venv && .venv/bin/pip install mcp pytest`).
#[test]
fn python_sdk_client() {
    let root = crate::repo::root();
    let python = crate::support::venv_python("the official MCP Python SDK");
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "tests/python"])
        .current_dir(root)
        .env("TOOLHOST_BIN", env!("CARGO_BIN_EXE_toolhost"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pytest failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An MCP client that declares form elicitation and answers every
/// elicitation with `decision`, recording the messages it was shown (the
/// stdio tests here and the Streamable HTTP ones in `mcp_http`).
#[derive(Clone)]
pub(crate) struct Elicitor {
    decision: &'static str,
    /// The messages of the elicitations so far, in order.
    pub(crate) asked: Arc<Mutex<Vec<String>>>,
}

impl Elicitor {
    /// Answers every elicitation with `{"decision": decision}`.
    pub(crate) fn new(decision: &'static str) -> Elicitor {
        Elicitor {
            decision,
            asked: Arc::default(),
        }
    }
}

impl ClientHandler for Elicitor {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.capabilities = serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
        info
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        if let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
                .with_content(json!({ "decision": self.decision })),
        )
    }
}

/// MCP elicitation as an approver (docs/permissions.md#approvers): with no control
/// client attached, the policy's `ask`
/// goes to the MCP client through elicitation, and its answer decides.
#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_client_answers_a_policy_ask_through_elicitation() {
    for (decision, runs) in [("allow_once", true), ("reject_once", false)] {
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let elicitor = Elicitor::new(decision);
        // The built-in default policy (no --policy) asks before `touch`.
        let cmd = crate::support::serve(ws.path(), state.path());
        let (client, _) = rmcp_client(elicitor.clone(), cmd)
            .await
            .expect("initialize");
        let result = client
            .call_tool(call("bash", json!({"command": "touch elicited"})))
            .await
            .expect("tools/call");
        let asked = elicitor.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(asked[0].contains("touch elicited"), "{asked:?}");
        assert_eq!(
            ws.path().join("elicited").exists(),
            runs,
            "{decision}: {result:?}"
        );
        assert_eq!(result.is_error, Some(!runs), "{decision}: {result:?}");
        client.cancel().await.unwrap();
    }
}

/// Calls `name` and returns its text, structured content (`null` when there is
/// none) and `isError`.
async fn tool(
    client: &RunningService<RoleClient, Recorder>,
    name: &str,
    args: Value,
) -> (String, Value, Option<bool>) {
    let r = client
        .call_tool(call(name, args.clone()))
        .await
        .unwrap_or_else(|e| panic!("{name} {args}: {e:?}"));
    let structured = r.structured_content.clone().unwrap_or_default();
    (text_of(&r), structured, r.is_error)
}

/// A write never waits for the program to read. Bytes the pipe
/// cannot take yet wait in the host's per-session queue (at most 8 MiB) and reach
/// the program in order; `close_stdin` closes after them; past the bound a write
/// is refused whole, saying how much is queued.
#[tokio::test(flavor = "multi_thread")]
async fn write_stdin_to_a_program_not_reading_returns_at_once_and_delivers_in_order() {
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    // The program reads nothing until the test creates `go`.
    let gated = |file: &str| {
        json!({"command": format!("until test -e {file}; do sleep 0.02; done; wc -c"),
               "run_in_background": true, "interactive": true})
    };
    let (_, started, _) = tool(&client, "bash", gated("go")).await;
    let id = started["session_id"].as_str().unwrap().to_owned();

    // One byte more than a pipe holds.
    let (text, s, is_error) = tool(
        &client,
        "write_stdin",
        json!({"session_id": id, "input": "x".repeat(65_537), "yield_ms": 250, "close_stdin": true}),
    )
    .await;
    assert_eq!(is_error, Some(false), "{text}");
    // Returned while the program still waits for `go`: the write held nothing up.
    assert_eq!(s["status"], json!("running"), "{text}");
    assert_eq!(s["stdin_accepted_bytes"], json!(65_537));
    assert!(
        text.starts_with(
            "(no new output)\n\n[stdin: accepted 65537 bytes (queued for delivery: the host \
             writes them in order as the program reads); stdin closes after them]\n\
             [still running after "
        ),
        "{text}"
    );
    std::fs::write(ws.path().join("go"), "").unwrap();
    let (text, s, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "wait_ms": 60_000}),
    )
    .await;
    assert_eq!(text, "65537\n\n[exit code 0]");
    assert_eq!(s["output_bytes"], json!(6));

    // The bound: 3 MiB writes to a program not reading; the third would take the
    // queue past 8 MiB and is refused whole.
    let (_, started, _) = tool(&client, "bash", gated("go2")).await;
    let id = started["session_id"].as_str().unwrap().to_owned();
    let chunk = "y".repeat(3 << 20);
    for _ in 0..2 {
        let (text, s, is_error) = tool(
            &client,
            "write_stdin",
            json!({"session_id": id, "input": chunk, "yield_ms": 0}),
        )
        .await;
        assert_eq!(is_error, Some(false), "{text}");
        assert_eq!(s["status"], json!("running"), "{text}");
    }
    let (text, _, is_error) = tool(
        &client,
        "write_stdin",
        json!({"session_id": id, "input": chunk, "yield_ms": 0, "close_stdin": true}),
    )
    .await;
    assert_eq!(is_error, Some(true), "{text}");
    let queued: u64 = text
        .split_once("bytes (8 MiB) that the process has not read yet; ")
        .and_then(|(_, rest)| {
            rest.split_once(" byte(s) are queued now, so these 3145728 byte(s) were refused whole")
        })
        .map(|(n, _)| n.parse().unwrap())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        text.starts_with(&format!(
            "Could not write to stdin: a host resource limit was reached: the stdin queue of \
             session {id} holds at most 8388608 bytes"
        )),
        "{text}"
    );
    // All of both writes but what the pipe itself took.
    assert!(
        ((6 << 20) - (1 << 20)..=(6 << 20) - 4096).contains(&queued),
        "{queued}"
    );
    // Close (after the queue), let the program read: it gets both writes, whole.
    let (text, _, is_error) = tool(
        &client,
        "write_stdin",
        json!({"session_id": id, "input": "", "yield_ms": 0, "close_stdin": true}),
    )
    .await;
    assert_eq!(is_error, Some(false), "{text}");
    assert!(
        text.contains("[stdin: closed (after any bytes still queued)]"),
        "{text}"
    );
    std::fs::write(ws.path().join("go2"), "").unwrap();
    let (text, _, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "wait_ms": 60_000}),
    )
    .await;
    assert_eq!(text, format!("{}\n\n[exit code 0]", 6 << 20));
    client.cancel().await.unwrap();
}

/// A read that omits the middle of a flood moves the cursor
/// past it, so later reads repeat neither the tail nor the status line; a read
/// that stops at its budget leaves the rest, unread, for the next one.
#[tokio::test(flavor = "multi_thread")]
async fn bash_output_never_serves_the_same_output_or_status_twice() {
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    let (_, started, _) = tool(
        &client,
        "bash",
        json!({"command": "seq 1 2000000", "run_in_background": true}),
    )
    .await;
    let id = started["session_id"].as_str().unwrap().to_owned();
    let (first, s, is_error) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "wait_ms": 60_000}),
    )
    .await;
    assert_eq!(is_error, Some(false));
    assert_eq!(s["output_bytes"], json!(14_888_896));
    assert_eq!(s["truncated"], json!(true));
    assert!(first.starts_with("1\n2\n3\n"), "{}", &first[..100]);
    assert!(first.contains(&format!(
        " bytes omitted from bytes 0-14888896 of the output; bash_output {{\"session_id\": \
         \"{id}\", \"offset\": 0, \"length\": 20000}}"
    )));
    assert!(
        first.ends_with("1999999\n2000000\n\n[exit code 0]"),
        "{}",
        &first[first.len() - 100..]
    );
    assert!(first.chars().count() <= 30_000);
    let ended = format!("(no new output; session {id} ended earlier: exit code 0)");
    for _ in 0..2 {
        let (again, s, is_error) = tool(&client, "bash_output", json!({"session_id": id})).await;
        assert_eq!(again, ended);
        assert_eq!(is_error, Some(false));
        assert_eq!(s["exit_code"], json!(0));
    }

    // More than one read's budget (128 MiB): the first read stops there, the
    // second reads the rest and brings the status, the third has nothing new.
    let (_, started, _) = tool(
        &client,
        "bash",
        json!({"command": "head -c 140000000 /dev/zero | tr '\\0' x; echo; echo END",
               "run_in_background": true}),
    )
    .await;
    let id = started["session_id"].as_str().unwrap().to_owned();
    let (first, _, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "wait_ms": 120_000}),
    )
    .await;
    let left = 140_000_000 + 5 - (128 << 20);
    assert!(
        first.ends_with(&format!(
            "\n\n[{left} more bytes of output (5.5 MiB) not read yet: call bash_output again to read on]"
        )),
        "{}",
        &first[first.len() - 200..]
    );
    let (second, _, _) = tool(&client, "bash_output", json!({"session_id": id})).await;
    assert!(
        second.ends_with("xxxx\nEND\n\n[exit code 0]"),
        "{}",
        &second[second.len() - 200..]
    );
    assert!(!second.contains("not read yet"), "{second}");
    let (third, _, _) = tool(&client, "bash_output", json!({"session_id": id})).await;
    assert_eq!(
        third,
        format!("(no new output; session {id} ended earlier: exit code 0)")
    );
    client.cancel().await.unwrap();
}

/// `seq 1 N`'s output.
fn seq_text(from: u32, to: u32) -> String {
    (from..=to).map(|i| format!("{i}\n")).collect()
}

/// The words of a cut marker after its counts: the bytes `start..end` of
/// session `id`'s output the result covers, the bytes `dropped` its capped
/// log dropped, and the `bash_output` call that reads any range.
fn marker_words(id: &str, start: u64, end: u64, dropped: Option<(u64, u64)>) -> String {
    let (dropped, rest) = match dropped {
        Some((from, to)) => (
            format!(
                " (bytes {from}-{to} were dropped from the log at its size cap and cannot be \
                 read)"
            ),
            "reads any other range",
        ),
        None => (String::new(), "reads any range of it"),
    };
    format!(
        " from bytes {start}-{end} of the output{dropped}; bash_output {{\"session_id\": \
         \"{id}\", \"offset\": {start}, \"length\": 20000}} or {{\"session_id\": \"{id}\", \
         \"line\": 1, \"lines\": 200}} {rest}] ..."
    )
}

/// The line that closes a range read of `total` bytes of output.
fn range_line(start: usize, end: usize, lines: &str, total: usize) -> String {
    format!(
        "[bytes {start}-{end}{lines} of {total} bytes of output; a range read leaves the read \
         cursor where it was]"
    )
}

/// A cut names the bytes it covers and the `bash_output` call that reads any
/// range of them (the host's log path is hidden from sandboxed commands);
/// `bash_output` with `line`/`lines` or `offset`/`length` reads exactly that
/// range again and leaves the read cursor where it was.
#[tokio::test(flavor = "multi_thread")]
async fn bash_output_reads_any_range_the_cut_names() {
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    let all = seq_text(1, 20_000);
    assert_eq!(all.len(), 108_894);
    let (text, s, _) = tool(&client, "bash", json!({"command": "seq 1 20000"})).await;
    let id = s["session_id"].as_str().unwrap().to_owned();
    let marker = format!(
        "\n\n... [{} characters omitted{}\n\n",
        all.len() - 29_000,
        marker_words(&id, 0, all.len() as u64, None)
    );
    assert_eq!(
        text,
        format!(
            "{}{marker}{}",
            &all[..14_500],
            all[all.len() - 14_500..].trim_end()
        )
    );
    let line = seq_text(1, 9_999).len();
    let (text, s, is_error) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "line": 10_000, "lines": 3}),
    )
    .await;
    assert_eq!(
        text,
        format!(
            "10000\n10001\n10002\n\n{}",
            range_line(line, line + 18, " (lines 10000-10002)", all.len())
        )
    );
    assert_eq!(is_error, Some(false));
    assert_eq!(
        s["range"],
        json!({"offset": line, "length": 18, "first_line": 10_000, "last_line": 10_002})
    );
    let (text, _, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "offset": line + 1, "length": 8}),
    )
    .await;
    assert_eq!(
        text,
        format!(
            "0000\n100\n\n{}",
            range_line(line + 1, line + 9, "", all.len())
        )
    );
    // Past the end, and a line the output does not have.
    let (text, _, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "offset": all.len()}),
    )
    .await;
    assert_eq!(
        text,
        format!(
            "(no output at byte {0}: session {id} has {0} bytes of output so far, bytes 0-{0})",
            all.len()
        )
    );
    let (text, _, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "line": 20_002}),
    )
    .await;
    assert_eq!(
        text,
        format!(
            "Session {id}'s output has no line 20002: it has 20000 line(s) so far (108894 bytes)."
        )
    );
    // The cursor stayed at the end the `bash` call read to.
    let (text, _, _) = tool(&client, "bash_output", json!({"session_id": id})).await;
    assert_eq!(
        text,
        format!("(no new output; session {id} ended earlier: exit code 0)")
    );
    client.cancel().await.unwrap();
}

/// The text a read shows of `full[from..]` after a dropped middle: from the
/// first line that starts in it, and the log offset that line starts at.
fn tail_after(full: &str, from: usize) -> (usize, &str) {
    let at = from + full[from..].find('\n').unwrap() + 1;
    (at, full[at..].trim_end_matches('\n'))
}

/// A capped log's dropped middle is counted, never passed over in silence:
/// under `--output-cap 4KiB` (head 1 KiB, tail 3 KiB) a read that crosses the
/// dropped middle says how many bytes it left out, and a read whose cursor the
/// dropped middle overtook while the command ran (the cursor was at 23893, the
/// log then kept only its last 3 KiB) starts with that count instead of text
/// that seems to follow the last read. Every byte the cursor passes is shown
/// or counted: shown + omitted = the output read.
#[tokio::test(flavor = "multi_thread")]
async fn bash_output_counts_what_a_capped_log_dropped() {
    let (ws, state) = dirs();
    let (client, _) = rmcp_client(
        Recorder::default(),
        serve_command(ws.path(), state.path(), &["--output-cap", "4KiB"]),
    )
    .await
    .expect("initialize");
    let (_, started, _) = tool(
        &client,
        "bash",
        json!({"command": "seq 1 5000; until test -e go; do sleep 0.02; done; seq 5001 10000",
               "run_in_background": true}),
    )
    .await;
    let id = started["session_id"].as_str().unwrap().to_owned();
    let first = seq_text(1, 5000);
    assert_eq!(first.len(), 23_893);
    // Wait (without reading) until the host has all of the first part.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, listed, _) = tool(&client, "list_shells", json!({})).await;
        if listed["sessions"][0]["output_bytes"] == json!(first.len()) {
            break;
        }
        assert!(Instant::now() < deadline, "{listed}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The log keeps [0, 1024) and [23893 - 3072, 23893).
    let (text, s, _) = tool(&client, "bash_output", json!({"session_id": id})).await;
    let (at, tail) = tail_after(&first, first.len() - 3072);
    let body = text
        .split_once("\n\n[still running after ")
        .unwrap_or_else(|| panic!("{text}"))
        .0;
    let dropped = Some((1024, first.len() as u64 - 3072));
    assert_eq!(
        body,
        format!(
            "{}\n\n... [{} bytes omitted{}\n\n{tail}",
            &first[..1024],
            at - 1024,
            marker_words(&id, 0, first.len() as u64, dropped)
        )
    );
    assert_eq!(s["truncated"], json!(true));
    // A range read inside the dropped middle says which bytes are gone; line
    // numbers past it cannot be counted; lines before it read as usual.
    let (text, _, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "offset": 2000, "length": 100}),
    )
    .await;
    assert_eq!(
        text,
        format!(
            "... [100 bytes omitted{}\n\n{}",
            marker_words(&id, 2000, 2100, Some((2000, 2100))),
            range_line(2000, 2100, "", first.len())
        )
    );
    let (text, _, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "line": 4000}),
    )
    .await;
    assert_eq!(
        text,
        format!(
            "Line 4000 cannot be found: bytes 1024-20821 of session {id}'s output were dropped \
             from the log at its size cap, so the lines after byte 1024 cannot be counted. Read \
             by `offset` instead (bytes from 20821 on are kept)."
        )
    );
    let (text, _, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "line": 2, "lines": 2}),
    )
    .await;
    assert_eq!(
        text,
        format!("2\n3\n\n{}", range_line(2, 6, " (lines 2-3)", first.len()))
    );

    // The second part overtakes the cursor: the log now keeps [0, 1024) and
    // [48894 - 3072, 48894); the read from 23893 shows the rest after a count.
    std::fs::write(ws.path().join("go"), "").unwrap();
    let all = seq_text(1, 10_000);
    assert_eq!(all.len(), 48_894);
    let (text, s, _) = tool(
        &client,
        "bash_output",
        json!({"session_id": id, "wait_ms": 60_000}),
    )
    .await;
    let (at, tail) = tail_after(&all, all.len() - 3072);
    let dropped = Some((first.len() as u64, all.len() as u64 - 3072));
    assert_eq!(
        text,
        format!(
            "... [{} bytes omitted{}\n\n{tail}\n\n[exit code 0]",
            at - first.len(),
            marker_words(&id, first.len() as u64, all.len() as u64, dropped)
        )
    );
    assert_eq!(s["output_bytes"], json!(all.len()));
    let (again, _, _) = tool(&client, "bash_output", json!({"session_id": id})).await;
    assert_eq!(
        again,
        format!("(no new output; session {id} ended earlier: exit code 0)")
    );
    client.cancel().await.unwrap();
}

/// `list_shells` lists the running sessions and the 20 most
/// recent finished ones, says how many it leaves out, and stays within the cap.
#[tokio::test(flavor = "multi_thread")]
async fn list_shells_is_bounded_and_says_what_it_leaves_out() {
    let (ws, state) = dirs();
    let (client, _) = client(ws.path(), state.path()).await;
    let mut finished = Vec::new();
    for i in 0..25 {
        let (_, s, _) = tool(
            &client,
            "bash",
            json!({"command": format!("echo {i} # {}", "z".repeat(300)), "run_in_background": true}),
        )
        .await;
        finished.push(s["session_id"].as_str().unwrap().to_owned());
    }
    for id in &finished {
        let (_, s, _) = tool(
            &client,
            "bash_output",
            json!({"session_id": id, "wait_ms": 60_000}),
        )
        .await;
        assert_eq!(s["status"], json!("exited"));
    }
    let (_, s, _) = tool(
        &client,
        "bash",
        json!({"command": "sleep 600", "run_in_background": true}),
    )
    .await;
    let running = s["session_id"].as_str().unwrap().to_owned();

    let (text, s, is_error) = tool(&client, "list_shells", json!({})).await;
    assert_eq!(is_error, Some(false));
    assert!(text.chars().count() <= 30_000, "{}", text.chars().count());
    assert!(
        text.starts_with("26 session(s), 1 running (oldest first):\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "\n[5 older finished session(s) not listed: the list shows every running session \
             and at most 20 finished ones, the most recent]\n"
        ),
        "{text}"
    );
    for id in &finished[..5] {
        assert!(!text.contains(id.as_str()), "{id} listed:\n{text}");
    }
    for id in finished[5..].iter().chain([&running]) {
        assert!(text.contains(id.as_str()), "{id} missing:\n{text}");
    }
    assert_eq!(s["sessions"].as_array().unwrap().len(), 21);
    assert_eq!(
        (s["total"].clone(), s["finished_not_listed"].clone()),
        (json!(26), json!(5))
    );
    client.cancel().await.unwrap();
}

/// Two calls in progress at once on one connection, each with its own
/// progress token: each token's notifications count only its own call's
/// output (1,000 and 2,345 bytes), never the other's. Each command writes its
/// bytes and waits for the test's go-ahead, given once both counts arrived.
#[tokio::test]
async fn concurrent_calls_each_get_only_their_own_progress() {
    let (ws, state) = dirs();
    let (client, recorder) = client(ws.path(), state.path()).await;
    let start = |bytes: u32| {
        let command = format!("printf '%0{bytes}d' 0; until test -e go; do sleep 0.01; done");
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(call(
            "bash",
            json!({"command": command}),
        )));
        client.send_cancellable_request(request, PeerRequestOptions::no_options())
    };
    let a = start(1000).await.unwrap();
    let b = start(2345).await.unwrap();
    let seen = |token: &rmcp::model::ProgressToken| -> Vec<(f64, Option<String>)> {
        recorder
            .progress
            .lock()
            .unwrap()
            .iter()
            .filter(|p| &p.progress_token == token)
            .map(|p| (p.progress, p.message.clone()))
            .collect()
    };
    let done = |token, bytes: f64| seen(token).last().is_some_and(|(p, _)| *p == bytes);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(done(&a.progress_token, 1000.0) && done(&b.progress_token, 2345.0)) {
        assert!(
            Instant::now() < deadline,
            "progress never reached the output: {:?} {:?}",
            seen(&a.progress_token),
            seen(&b.progress_token)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::write(ws.path().join("go"), "").unwrap();
    for (handle, bytes) in [(a, 1000.0), (b, 2345.0)] {
        let token = handle.progress_token.clone();
        match handle.await_response().await.unwrap() {
            rmcp::model::ServerResult::CallToolResult(r) => assert_eq!(r.is_error, Some(false)),
            other => panic!("not a tool result: {other:?}"),
        }
        let seen = seen(&token);
        assert!(seen.iter().all(|(p, _)| *p <= bytes), "{seen:?}");
        assert_eq!(
            seen.last().unwrap(),
            &(bytes, Some(format!("{bytes} bytes of output")))
        );
    }
    client.cancel().await.unwrap();
}
