//! The control socket and `toolhost attach` against real host sessions.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost::control::{ControlClient, ControlError, ControlServer, socket_path};
use toolhost_runtime::HostSessionLog;
use toolhost_runtime::{ApprovalOutcome, ApprovalRequest};
use toolhost_runtime::{Host, HostConfig};

use crate::support::{allow_all_config, dirs};

async fn host(ws: &Path, state: &Path) -> (Arc<Host>, ControlServer) {
    let log = Arc::new(HostSessionLog::open(state, None).unwrap());
    let host = Arc::new(
        Host::new({
            let mut config = HostConfig::new(ws, state);
            config.events = Some(log);
            config
        })
        .await
        .unwrap(),
    );
    let (stop, _) = tokio::sync::watch::channel(false);
    let control = ControlServer::start(host.clone(), stop).unwrap();
    (host, control)
}

async fn connect(state: &Path, host: &Host) -> ControlClient {
    ControlClient::connect(&socket_path(state, host.events().id()))
        .await
        .unwrap()
}

/// Waits for the next `events` notification and returns its seqs.
async fn next_events(client: &mut ControlClient) -> Vec<Value> {
    loop {
        let msg = match client.notifications.pop_front() {
            Some(m) => m,
            None => tokio::time::timeout(Duration::from_secs(20), client.next_message())
                .await
                .expect("no events notification")
                .unwrap(),
        };
        if msg["method"] == "events" {
            return msg["params"]["events"].as_array().unwrap().clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn socket_is_private_and_lists_and_replays() {
    let (ws, state) = dirs();
    let (host, control) = host(ws.path(), state.path()).await;
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(control.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    host.call_tool("bash", json!({"command": "echo one"}))
        .await
        .unwrap();
    let mut c = connect(state.path(), &host).await;
    let hello = c.call("hello", json!({})).await.unwrap();
    assert_eq!(hello["host_session"], json!(host.events().id()));
    let replay = c.call("events", json!({"cursor": 0})).await.unwrap();
    assert_eq!(replay["history_complete"], json!(true));
    let events = replay["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .enumerate()
            .all(|(i, e)| e["seq"] == json!(i + 1))
    );
    assert!(events.iter().any(|e| e["kind"] == "tool_call_settled"));
    let from_2 = c.call("events", json!({"cursor": 2})).await.unwrap();
    assert_eq!(from_2["events"][0]["seq"], json!(3));

    let list = c.call("sessions.list", json!({})).await.unwrap();
    assert_eq!(list["processes"].as_array().unwrap().len(), 1);
    let err = c.call("no.such", json!({})).await.unwrap_err();
    assert!(
        matches!(err, ControlError::Rpc { code: -32601, .. }),
        "{err:?}"
    );
    let err = c
        .call("call.cancel", json!({"tool_call_id": "tc_999"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ControlError::Rpc { code: -32602, .. }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn attached_client_follows_live_and_cancels_and_detaches_calls() {
    let (ws, state) = dirs();
    let (host, _control) = host(ws.path(), state.path()).await;
    let mut c = connect(state.path(), &host).await;
    c.call("attach", json!({"cursor": 0})).await.unwrap();

    // A call to cancel from the control socket.
    let h = host.clone();
    let call = tokio::spawn(async move {
        h.call_tool("bash", json!({"command": "echo started; sleep 30"}))
            .await
    });
    let mut tc = None;
    while tc.is_none() {
        for e in next_events(&mut c).await {
            if e["kind"] == "process_output" {
                tc = e["tool_call_id"].as_str().map(str::to_string);
            }
        }
    }
    let tc = tc.unwrap();
    c.call("call.cancel", json!({"tool_call_id": tc}))
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        result,
        Err(toolhost_runtime::ToolCallError::Cancelled(_))
    ));

    // A call to detach into the background.
    let h = host.clone();
    let call = tokio::spawn(async move {
        h.call_tool("bash", json!({"command": "echo bg; sleep 2; echo later"}))
            .await
    });
    let mut tc2 = None;
    while tc2.is_none() {
        for e in next_events(&mut c).await {
            if e["kind"] == "process_output" && e["tool_call_id"] != json!(tc) {
                tc2 = e["tool_call_id"].as_str().map(str::to_string);
            }
        }
    }
    let info = c
        .call("call.detach", json!({"tool_call_id": tc2.unwrap()}))
        .await
        .unwrap();
    let session = info["id"].as_str().unwrap().to_string();
    let result = call.await.unwrap().unwrap();
    assert!(
        result.text().contains("[Detached to background task"),
        "{}",
        result.text()
    );
    // Still running in the background; the live stream shows its later output.
    let mut saw_later = false;
    while !saw_later {
        for e in next_events(&mut c).await {
            saw_later |= e["kind"] == "process_output"
                && e["session_id"] == json!(session)
                && e["text"].as_str().unwrap_or("").contains("later");
        }
    }
    c.call("detach", json!({"mode": "graceful"})).await.unwrap();
    assert!(matches!(c.next_message().await, Err(ControlError::Closed)));
}

#[tokio::test(flavor = "multi_thread")]
async fn permission_prompts_go_to_attached_clients_and_are_answered_once() {
    let (ws, state) = dirs();
    let (host, control) = host(ws.path(), state.path()).await;
    let approver = control.approver();
    let request = ApprovalRequest {
        request_id: "perm_test".into(),
        plugin: "bash".into(),
        tool: "bash".into(),
        tool_call_id: "tc_1".into(),
        command: "rm -rf build".into(),
        cwd: "/w".into(),
        prompt: "not in the allow list".into(),
        shell: "/bin/sh".into(),
        env_names: vec![],
        stdin: toolhost_runtime::StdinShown::Closed,
        program: Some("/usr/bin/rm".into()),
    };
    // Nobody attached: this approver cannot answer.
    assert_eq!(approver.ask(&request).await, None);

    let mut c = connect(state.path(), &host).await;
    c.call("attach", json!({"cursor": 0})).await.unwrap();
    let ask = {
        let approver = approver.clone();
        let request = request.clone();
        tokio::spawn(async move { approver.ask(&request).await })
    };
    let pending = loop {
        let p = c.call("permission.pending", json!({})).await.unwrap();
        if !p.as_array().unwrap().is_empty() {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(pending[0]["command"], json!("rm -rf build"));
    c.call(
        "permission.resolve",
        json!({"request_id": "perm_test", "outcome": "allow_always"}),
    )
    .await
    .unwrap();
    assert_eq!(ask.await.unwrap(), Some(ApprovalOutcome::AllowAlways));
    let again = c
        .call(
            "permission.resolve",
            json!({"request_id": "perm_test", "outcome": "reject_once"}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(again, ControlError::Rpc { code: -32602, .. }),
        "{again:?}"
    );

    // The last client leaving withdraws what is still pending.
    let ask = {
        let approver = approver.clone();
        let mut request = request.clone();
        request.request_id = "perm_two".into();
        tokio::spawn(async move { approver.ask(&request).await })
    };
    while c
        .call("permission.pending", json!({}))
        .await
        .unwrap()
        .as_array()
        .unwrap()
        .is_empty()
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.close().await;
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), ask)
            .await
            .unwrap()
            .unwrap(),
        Some(ApprovalOutcome::Cancelled)
    );
}

#[test]
fn attach_cli_prints_history_and_reattach_catches_up() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let (ws, state) = dirs();
    let bin = env!("CARGO_BIN_EXE_toolhost");
    let mut serve = Command::new(bin)
        .args(["serve", "--workspace"])
        .arg(ws.path())
        .arg("--state-dir")
        .arg(state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = serve.stdin.take().unwrap();
    let mut stdout = BufReader::new(serve.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    send(
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo first-call"}}}),
    );
    line.clear();
    stdout.read_line(&mut line).unwrap();

    let attach = |extra: &[&str]| {
        let out = Command::new(bin)
            .arg("attach")
            .args(extra)
            .arg("--state-dir")
            .arg(state.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let first = attach(&["--once"]);
    assert!(first.contains("[1] host running"), "{first}");
    assert!(first.contains("| first-call"), "{first}");

    send(
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo second-call"}}}),
    );
    line.clear();
    stdout.read_line(&mut line).unwrap();
    // Re-attaching resumes after the saved cursor: only the new events.
    let second = attach(&["--once"]);
    assert!(second.contains("| second-call"), "{second}");
    assert!(!second.contains("first-call"), "{second}");
    assert!(!second.contains("[1] "), "{second}");

    // A background command whose text carries terminal controls (an OSC title,
    // a CSI erase, CR, a bidi override): `host-sessions` shows them escaped.
    send(
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"bash","arguments":{
            "command":"sleep 30; echo '\u{1b}]0;PWNED\u{7}\u{1b}[2K\rok\u{202e}'",
            "run_in_background": true}}}),
    );
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("bg_"), "{line}");

    let listed = Command::new(bin)
        .args(["host-sessions", "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(listed.contains("running"), "{listed}");
    assert!(
        listed.contains(r"echo '\x1b]0;PWNED\x07\x1b[2K\rok\u{202e}'"),
        "{listed}"
    );
    assert!(
        !listed.contains(['\u{1b}', '\u{7}', '\r', '\u{202e}']),
        "{listed:?}"
    );
    drop(stdin);
    assert!(serve.wait().unwrap().success());
}

/// The attached client as an approver (docs/permissions.md#approvers) end to end:
/// the real policy plugin asks, the attached
/// client answers, and only then does the command run; both the request and
/// its resolution are in the event log.
#[tokio::test(flavor = "multi_thread")]
async fn an_attached_client_approves_a_policy_ask_and_the_command_runs() {
    let (ws, state) = dirs();
    let (host, _control) = host(ws.path(), state.path()).await;
    let mut c = connect(state.path(), &host).await;
    c.call("attach", json!({"cursor": 0})).await.unwrap();

    // `touch` is asked about by the built-in default policy.
    let call = {
        let host = host.clone();
        tokio::spawn(async move {
            host.call_tool("bash", json!({"command": "touch approved"}))
                .await
        })
    };
    let pending = loop {
        let p = c.call("permission.pending", json!({})).await.unwrap();
        if let Some(first) = p.as_array().unwrap().first() {
            break first.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(pending["command"], json!("touch approved"));
    assert!(!ws.path().join("approved").exists(), "ran before approval");
    c.call(
        "permission.resolve",
        json!({"request_id": pending["request_id"], "outcome": "allow_once"}),
    )
    .await
    .unwrap();
    let result = call.await.unwrap().unwrap();
    assert!(!result.is_error, "{}", result.text());
    assert!(ws.path().join("approved").exists());

    // A rejection leaves no trace.
    let call = {
        let host = host.clone();
        tokio::spawn(async move {
            host.call_tool("bash", json!({"command": "touch rejected"}))
                .await
        })
    };
    let pending = loop {
        let p = c.call("permission.pending", json!({})).await.unwrap();
        if let Some(first) = p.as_array().unwrap().first() {
            break first.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    c.call(
        "permission.resolve",
        json!({"request_id": pending["request_id"], "outcome": "reject_once"}),
    )
    .await
    .unwrap();
    let result = call.await.unwrap().unwrap();
    assert!(result.is_error);
    assert!(result.text().contains("reject_once"), "{}", result.text());
    assert!(!ws.path().join("rejected").exists());

    let kinds: Vec<String> = host
        .events()
        .replay(0, 10_000)
        .events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "permission_requested")
            .count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "permission_resolved").count(),
        2,
        "{kinds:?}"
    );
}

/// A command the host runs cannot use the control socket to approve its own
/// permission prompts, whatever its sandbox: under the default sandbox it cannot
/// create a UNIX socket at all (`EPERM`), so neither the control socket nor a
/// socket elsewhere (`/tmp/...`, as an ssh-agent's) can be reached; with
/// `--allow-unix-sockets` the control socket is still hidden with the state dir
/// (`ENOENT`) while the other one is reached; under full-access (no sandbox) the
/// control server itself closes the connection of a process that is not a human's
/// client.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_of_the_host_cannot_use_the_control_socket() {
    use toolhost_process::{SandboxMode, SandboxPolicy};
    let (ws, state) = dirs();
    let elsewhere_dir = tempfile::tempdir().unwrap();
    let elsewhere = elsewhere_dir.path().join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&elsewhere).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::write(
        ws.path().join("probe.py"),
        "import errno, socket, sys\n\
         for label, path in zip(sys.argv[1::2], sys.argv[2::2]):\n    \
             try:\n        \
                 s = socket.socket(socket.AF_UNIX)\n    \
             except OSError as e:\n        \
                 print(label, 'socket', errno.errorcode[e.errno]); continue\n    \
             try:\n        \
                 s.connect(path)\n    \
             except OSError as e:\n        \
                 print(label, 'connect', errno.errorcode[e.errno]); continue\n    \
             if label != 'control':\n        \
                 s.sendall(b'x'); print(label, 'connected'); continue\n    \
             try:\n        \
                 s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"heartbeat\"}\\n')\n        \
                 reply = s.recv(200)\n    \
             except OSError:\n        \
                 reply = b''\n    \
             print(label, 'answered' if reply else 'refused')\n",
    )
    .unwrap();
    let run = async |sandbox: SandboxPolicy| {
        let log = Arc::new(HostSessionLog::open(state.path(), None).unwrap());
        let mut config = allow_all_config(ws.path(), state.path());
        config.events = Some(log);
        config.sessions.sandbox = sandbox;
        let host = Arc::new(Host::new(config).await.unwrap());
        let (stop, _) = tokio::sync::watch::channel(false);
        let _control = ControlServer::start(host.clone(), stop).unwrap();
        let socket = socket_path(state.path(), host.events().id());
        // A human's client (this test process) is served.
        let mut human = ControlClient::connect(&socket).await.unwrap();
        human.call("heartbeat", json!({})).await.unwrap();
        let command = format!(
            "python3 probe.py control '{}' elsewhere '{}'",
            socket.display(),
            elsewhere.display()
        );
        let result = host
            .call_tool("bash", json!({ "command": command }))
            .await
            .unwrap();
        assert!(!result.text().contains("answered"), "{result:?}");
        result.text().trim_end().to_owned()
    };
    let accepted = || match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    };

    let text = run(SandboxPolicy::default()).await;
    assert_eq!(text, "control socket EPERM\nelsewhere socket EPERM");
    assert!(
        !accepted(),
        "a sandboxed command reached {}",
        elsewhere.display()
    );

    let text = run(SandboxPolicy {
        unix_sockets: true,
        ..SandboxPolicy::default()
    })
    .await;
    assert_eq!(text, "control connect ENOENT\nelsewhere connected");
    assert!(accepted(), "the grant did not let the command connect");

    let text = run(SandboxPolicy {
        mode: SandboxMode::FullAccess,
        ..SandboxPolicy::default()
    })
    .await;
    assert_eq!(text, "control refused\nelsewhere connected");
    assert!(accepted());
}
