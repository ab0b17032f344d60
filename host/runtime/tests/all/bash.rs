//! The bash plugin's tools end to end through the Rust API: the real embedded
//! wasm plugin, the real host `sessions` implementation, real processes.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_runtime::{Host, ToolResult};

use crate::support::{allow_all_config, dirs};

/// A host over a fresh workspace whose policy allows everything (these tests
/// are about the bash tools, not the policy).
pub struct Fixture {
    pub ws: tempfile::TempDir,
    pub _state: tempfile::TempDir,
    pub host: Host,
}

pub async fn fixture() -> Fixture {
    let (ws, state) = dirs();
    let host = Host::new(allow_all_config(ws.path(), state.path()))
        .await
        .expect("host starts");
    Fixture {
        ws,
        _state: state,
        host,
    }
}

impl Fixture {
    pub async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.host
            .call_tool(tool, args.clone())
            .await
            .unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
    }
}

fn structured(r: &ToolResult) -> &Value {
    r.structured.as_ref().expect("structured content")
}

fn session_id(r: &ToolResult) -> String {
    structured(r)["session_id"]
        .as_str()
        .expect("session_id")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_success_and_failure() {
    let f = fixture().await;
    let ok = f.call("bash", json!({"command": "echo hello"})).await;
    assert_eq!(ok.text(), "hello");
    assert!(!ok.is_error);
    assert_eq!(structured(&ok)["exit_code"], 0);
    assert_eq!(structured(&ok)["output_bytes"], 6);

    let fail = f
        .call("bash", json!({"command": "echo oops >&2; exit 3"}))
        .await;
    assert_eq!(fail.text(), "oops\n\n[exit code 3]");
    assert!(fail.is_error);
    assert_eq!(structured(&fail)["exit_code"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_and_timeout_are_errors_with_status_lines() {
    let f = fixture().await;
    let killed = f.call("bash", json!({"command": "kill -KILL $$"})).await;
    assert!(killed.is_error);
    assert!(
        killed.text().ends_with("[killed by SIGKILL]"),
        "{}",
        killed.text()
    );
    assert_eq!(structured(&killed)["signal"], "SIGKILL");
    assert_eq!(structured(&killed)["exit_code"], Value::Null);

    let started = Instant::now();
    let timed_out = f
        .call(
            "bash",
            json!({"command": "echo begin; sleep 30", "timeout_ms": 300}),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "timeout did not fire"
    );
    assert!(timed_out.is_error);
    assert_eq!(
        timed_out.text(),
        "begin\n\n[timed out after 300 ms; process group killed]"
    );
    assert_eq!(structured(&timed_out)["timed_out"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ansi_and_carriage_returns_are_cleaned_and_long_output_is_cut_in_the_middle() {
    let f = fixture().await;
    let r = f
        .call(
            "bash",
            json!({"command": r"printf '\033[31mred\033[0m\n10%%\r50%%\r100%%\n'"}),
        )
        .await;
    assert_eq!(r.text(), "red\n100%");

    // 100,000 'é' (2 bytes each): cut to at most 30000 characters, never
    // inside a character, with a marker naming the full log.
    let r = f
        .call(
            "bash",
            json!({"command": "yes é | head -n 50000 | tr -d '\\n'"}),
        )
        .await;
    assert!(!r.is_error);
    assert!(
        r.text().chars().count() <= 30_000 + 200,
        "{}",
        r.text().chars().count()
    );
    assert!(
        r.text()
            .contains("characters omitted from bytes 0-100000 of the output; bash_output "),
        "{}",
        &r.text()[..100]
    );
    let path = structured(&r)["output_path"].as_str().unwrap().to_string();
    // The host's path of the log, which sandboxed commands cannot read, is in
    // the structured result only.
    assert!(!r.text().contains(&path));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 100_000);
    assert_eq!(structured(&r)["truncated"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_task_output_and_kill() {
    let f = fixture().await;
    let started = f
        .call("bash", json!({"command": "echo first; sleep 0.3; echo second; sleep 60", "run_in_background": true}))
        .await;
    assert!(!started.is_error, "{}", started.text());
    let id = session_id(&started);
    assert!(id.starts_with("bg_") && id.len() == 15, "{id}");

    // Wait until both lines are there, then read them once.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    while !seen.contains("second") {
        assert!(Instant::now() < deadline, "never saw `second`: {seen:?}");
        let out = f
            .call("bash_output", json!({"session_id": id, "wait_ms": 200}))
            .await;
        seen.push_str(out.text().split("\n\n[").next().unwrap_or_default());
        seen.push('\n');
    }
    assert_eq!(
        seen.matches("first").count(),
        1,
        "output repeated: {seen:?}"
    );

    let listed = f.call("list_shells", json!({})).await;
    assert!(listed.text().contains(&id), "{}", listed.text());

    let killed = f.call("kill_shell", json!({"session_id": id})).await;
    assert!(!killed.is_error, "{}", killed.text());
    let snapshot = f
        .host
        .sessions()
        .check(&toolhost_process::Caller::Host, &id)
        .unwrap();
    assert_eq!(snapshot.status, toolhost_process::SessionStatus::Killed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yield_ms_detaches_a_foreground_run_into_a_background_task() {
    let f = fixture().await;
    let r = f
        .call(
            "bash",
            json!({"command": "echo early; sleep 2; echo late", "yield_ms": 300}),
        )
        .await;
    assert!(!r.is_error, "{}", r.text());
    let id = session_id(&r);
    assert_eq!(
        r.text(),
        format!("early\n\n[Detached to background task {id}: yield_ms elapsed]")
    );
    // The run keeps going after the call returned; its output stays retrievable.
    let later = f
        .call("bash_output", json!({"session_id": id, "wait_ms": 20000}))
        .await;
    assert!(later.text().starts_with("late"), "{}", later.text());
    assert!(!later.text().contains("early"), "{}", later.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_session_takes_stdin() {
    let f = fixture().await;
    let r = f
        .call(
            "bash",
            json!({"command": "read name; echo hello $name", "interactive": true, "yield_ms": 200}),
        )
        .await;
    let id = session_id(&r);
    let w = f
        .call(
            "write_stdin",
            json!({"session_id": id, "input": "world\n", "yield_ms": 5000}),
        )
        .await;
    assert!(w.text().starts_with("hello world"), "{}", w.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_closed_so_cat_returns_at_once() {
    let f = fixture().await;
    let r = f
        .call("bash", json!({"command": "cat; read x; echo rc=$?"}))
        .await;
    assert_eq!(r.text(), "rc=1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backgrounded_grandchild_does_not_hold_the_call() {
    let f = fixture().await;
    let started = Instant::now();
    let r = f
        .call("bash", json!({"command": "sleep 30 & echo started"}))
        .await;
    // The leftover `sleep` is ended after the drain grace, and the result says so
    // (docs/processes.md#process-tracking).
    assert!(r.text().starts_with("started\n"), "{}", r.text());
    assert!(
        r.text()
            .contains("1 process was still running after the shell exited"),
        "{}",
        r.text()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_errors() {
    let f = fixture().await;
    for (args, needle) in [
        (json!({"command": "true", "timeout_ms": 0}), "timeout_ms"),
        (
            json!({"command": "true", "timeout_ms": 600001}),
            "timeout_ms",
        ),
        (json!({"command": "true", "bogus": 1}), "bogus"),
        (json!({}), "command"),
    ] {
        match f.host.call_tool("bash", args.clone()).await {
            Err(toolhost_runtime::ToolCallError::InvalidArguments { message, .. }) => {
                assert!(message.contains(needle), "{args}: {message}")
            }
            other => panic!("{args}: expected invalid arguments, got {other:?}"),
        }
    }
    let r = f.call("bash", json!({"command": "true", "cwd": "/"})).await;
    assert!(
        r.is_error && r.text().contains("outside the workspace"),
        "{}",
        r.text()
    );
    let r = f
        .call("bash", json!({"command": "true", "cwd": "no/such/dir"}))
        .await;
    assert!(
        r.is_error && r.text().contains("no/such/dir"),
        "{}",
        r.text()
    );
    let r = f
        .call("bash_output", json!({"session_id": "bg_00000000ffff"}))
        .await;
    assert!(
        r.is_error && r.text().contains("no session bg_00000000ffff"),
        "{}",
        r.text()
    );
    let r = f
        .call("bash", json!({"command": "printf '\\377\\376ok'"}))
        .await;
    assert!(!r.is_error);
    assert!(r.text().ends_with("ok"), "{:?}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_is_relative_to_the_workspace() {
    let f = fixture().await;
    std::fs::create_dir(f.ws.path().join("sub")).unwrap();
    let r = f
        .call("bash", json!({"command": "pwd", "cwd": "sub"}))
        .await;
    let expected = f.ws.path().canonicalize().unwrap().join("sub");
    assert_eq!(Path::new(&r.text()), expected);
}

/// A command that prints now and then for seconds keeps the plugin waiting in
/// `poll` most of the time: that wait is not CPU time, and the call succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_slow_output_is_not_charged_as_cpu() {
    let f = fixture().await;
    let r = f
        .call(
            "bash",
            json!({"command": "for i in $(seq 1 150); do echo line $i; sleep 0.02; done"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.text());
    assert!(
        r.text().starts_with("line 1\n") && r.text().ends_with("line 150"),
        "{}",
        r.text()
    );
}

/// Through the library [`toolhost_runtime::Host`]: a background task refused by the
/// sandbox gets the hint when `bash_output` reports its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_denial_is_reported_by_bash_output() {
    let (ws, state) = dirs();
    let outside = tempfile::tempdir().unwrap();
    let host = toolhost_runtime::Host::new(allow_all_config(ws.path(), state.path()))
        .await
        .unwrap();
    let command = format!("touch '{}/x'", outside.path().display());
    let started = host
        .call_tool(
            "bash",
            serde_json::json!({ "command": command, "run_in_background": true }),
        )
        .await
        .unwrap();
    assert!(!started.is_error, "{started:?}");
    assert!(!started.text().contains("sandbox denial"), "{started:?}");
    let id = started.structured.as_ref().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = host
        .call_tool(
            "bash_output",
            serde_json::json!({ "session_id": id, "wait_ms": 10_000 }),
        )
        .await
        .unwrap();
    assert!(result.is_error, "{result:?}");
    assert!(
        result
            .text()
            .contains("workspace-write sandbox; ask the operator for --sandbox full-access]"),
        "{result:?}"
    );
    assert!(!outside.path().join("x").exists());
}

/// Two calls at once, each with its own progress sink
/// (`CallRequest::progress`): each sink receives exactly its own call's
/// output bytes, never the other's. Each command writes its bytes, then waits
/// until the other has written its own, so the two calls' processes overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_calls_progress_sink_counts_only_its_own_output() {
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
    use toolhost_runtime::{CallProgress, CallRequest};
    let f = fixture().await;
    let request = |command: &str| {
        let (sink, events) = unbounded_channel();
        let arguments = serde_json::Map::from_iter([("command".into(), json!(command))]);
        let request = CallRequest {
            tool_call_id: f.host.new_call_id(),
            tool: f.host.tool("bash").expect("bash"),
            arguments,
            source: "api",
            cancel: Default::default(),
            client: None,
            progress: Some(sink),
            actor: None,
            principal: None,
        };
        (request, events)
    };
    let (a, mut a_events) =
        request("printf '%01000d' 0; touch a; until test -e b; do sleep 0.01; done");
    let (b, mut b_events) =
        request("printf '%02345d' 0; touch b; until test -e a; do sleep 0.01; done");
    let (a, b) = tokio::join!(f.host.call(a), f.host.call(b));
    let (a, b) = (a.expect("a"), b.expect("b"));
    assert!(!a.is_error && !b.is_error, "{a:?} {b:?}");
    assert_eq!(structured(&a)["output_bytes"], 1000);
    assert_eq!(structured(&b)["output_bytes"], 2345);
    // The sinks closed with their calls: everything they got is queued.
    let total = |events: &mut UnboundedReceiver<CallProgress>| {
        let mut sum = 0;
        while let Ok(CallProgress::Output { bytes }) = events.try_recv() {
            sum += bytes;
        }
        assert!(events.is_closed(), "the sink outlived its call");
        sum
    };
    assert_eq!(total(&mut a_events), 1000);
    assert_eq!(total(&mut b_events), 2345);
}
