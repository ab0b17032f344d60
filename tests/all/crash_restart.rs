//! Crash and restart, with the real binary and a real `kill -9`:
//! `toolhost serve` dies while a foreground, a detached and a background command
//! run; `serve --host-session ID` then replays a whole log (a torn last line is cut
//! and noted), reports the open call and sessions interrupted, leaves no process of
//! the old host alive, and continues tool-call ids above the old ones; the bash
//! tools then tell the old sessions as ended (interrupted by the restart, or as
//! they ended before it), with the output their logs hold. An unknown
//! `--host-session` is an error.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(30);

/// `toolhost serve` over stdio with raw JSON-RPC lines.
struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Responses read while waiting for another one.
    early: Vec<Value>,
}

fn serve_command(ws: &Path, state: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.arg("serve")
        .arg("--policy")
        .arg(crate::support::allow_all_policy(state))
        .args(extra)
        .arg("--workspace")
        .arg(ws)
        .arg("--state-dir")
        .arg(state)
        .env_remove("TOOLHOST_LOG");
    cmd
}

impl Serve {
    fn start(ws: &Path, state: &Path, extra: &[&str]) -> Serve {
        let mut child = serve_command(ws, state, extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut serve = Serve {
            child,
            stdin,
            stdout,
            early: Vec::new(),
        };
        serve.send(
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"crash","version":"1"}}}),
        );
        let init = serve.response(0);
        assert!(init["result"].is_object(), "{init}");
        serve.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        serve
    }

    fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(msg.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn call(&mut self, id: u64, arguments: Value) {
        self.tool(id, "bash", arguments);
    }

    fn tool(&mut self, id: u64, name: &str, arguments: Value) {
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":name,"arguments":arguments}}));
    }

    /// Calls tool `name` and returns its result's text and structured content.
    fn result(&mut self, id: u64, name: &str, arguments: Value) -> (String, Value) {
        self.tool(id, name, arguments);
        let response = self.response(id);
        let result = &response["result"];
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{response}"))
            .to_string();
        (text, result["structuredContent"].clone())
    }

    /// The response with `id` (responses come in any order), skipping notifications.
    fn response(&mut self, id: u64) -> Value {
        if let Some(i) = self.early.iter().position(|m| m["id"] == json!(id)) {
            return self.early.remove(i);
        }
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "serve closed stdout"
            );
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg.get("id") == Some(&json!(id)) {
                return msg;
            }
            if msg.get("id").is_some() && msg.get("method").is_none() {
                self.early.push(msg);
                continue;
            }
            assert!(msg.get("method").is_some(), "unexpected message {msg}");
        }
    }
}

/// The lines of `events.jsonl`, each parsed (panics on a line that is not JSON).
fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}: {l}", i + 1))
        })
        .collect()
}

fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// True while `pid` is a live (non-zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
            state != 'Z'
        }
        Err(_) => false,
    }
}

fn read_pid(path: &PathBuf) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn kill_9_then_resume_reports_interrupted_kills_leftovers_and_continues_ids() {
    let (ws, state) = crate::support::dirs();
    let w = ws.path();
    let mut serve = Serve::start(w, state.path(), &[]);
    // Each command starts a long `sleep` of its own (the shell's child: PDEATHSIG
    // does not reach it) and writes that pid to a file; the background one also
    // starts one that leaves the group with setsid.
    serve.call(
        1,
        json!({"command": "sleep 300 & echo $! > fg.pid; wait", "timeout_ms": 600000}),
    );
    serve.call(
        2,
        json!({"command": "sleep 301 & echo $! > det.pid; wait", "yield_ms": 300,
               "timeout_ms": 600000}),
    );
    serve.call(
        3,
        json!({"command": "sleep 302 & echo $! > bg.pid; setsid sleep 303 & echo $! > esc.pid; wait",
               "run_in_background": true}),
    );
    let detached = serve.response(2);
    assert!(
        detached.to_string().contains("Detached to background task"),
        "{detached}"
    );
    let background = serve.response(3);
    assert!(background["result"].is_object(), "{background}");
    let files = ["fg.pid", "det.pid", "bg.pid", "esc.pid"].map(|f| w.join(f));
    let pids: Vec<u32> = files
        .iter()
        .map(|f| {
            poll(&format!("{}", f.display()), || {
                read_pid(f).filter(|&p| alive(p))
            })
        })
        .collect();
    let hosts = state.path().join("hosts");
    let id = std::fs::read_dir(&hosts)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();
    let log = hosts.join(&id).join("events.jsonl");
    let before = poll("three process_started events", || {
        let e = events(&log);
        (e.iter().filter(|e| e["kind"] == "process_started").count() == 3).then_some(e)
    });
    let old_calls: Vec<String> = before
        .iter()
        .filter(|e| e["kind"] == "tool_call_started")
        .map(|e| e["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(old_calls.len(), 3);
    let sessions: Vec<String> = before
        .iter()
        .filter(|e| e["kind"] == "process_started")
        .map(|e| e["session_id"].as_str().unwrap().to_string())
        .collect();
    for e in before.iter().filter(|e| e["kind"] == "process_started") {
        assert!(e["start_time"].as_u64().is_some(), "{e}");
    }

    // kill -9: nothing of the host runs its shutdown.
    serve.child.kill().unwrap();
    serve.child.wait().unwrap();
    drop(serve);
    // The old sleeps outlive it (only the shells get PDEATHSIG).
    for &pid in &pids {
        assert!(
            alive(pid),
            "{pid} died with the host: the test proves nothing"
        );
    }
    // And it died mid-write: a torn last line.
    let torn = br#"{"seq":999,"ts_ms":1,"kind":"process_out"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(torn)
        .unwrap();
    let whole_len = std::fs::metadata(&log).unwrap().len() - torn.len() as u64;

    let mut serve = Serve::start(w, state.path(), &["--host-session", &id]);
    // The old processes are gone.
    for &pid in &pids {
        poll(&format!("pid {pid} to end"), || (!alive(pid)).then_some(()));
    }
    // A new call gets an id above every old one.
    serve.call(10, json!({"command": "echo after"}));
    let after = serve.response(10);
    assert!(after.to_string().contains("after"), "{after}");
    serve.stdin.take();
    poll("serve to exit", || serve.child.try_wait().unwrap());

    let all = events(&log);
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e["seq"], json!(i as u64 + 1), "event {i}: {e}");
    }
    assert_eq!(&all[..before.len()], &before[..], "history was rewritten");
    let resumed = &all[before.len()..];
    // The torn line was cut and noted first.
    assert_eq!(resumed[0]["kind"], "omitted", "{}", resumed[0]);
    assert_eq!(resumed[0]["what"], "event_line");
    assert_eq!(resumed[0]["offset"], json!(whole_len));
    assert_eq!(resumed[0]["len"], json!(torn.len()));
    assert_eq!(resumed[1]["kind"], "lifecycle");
    assert_eq!(resumed[1]["state"], "interrupted");
    // Every session left open is closed as interrupted, and so is the open call
    // (the foreground one; the detached and background calls had returned).
    let exited: Vec<&str> = resumed
        .iter()
        .filter(|e| e["kind"] == "process_exited" && e["status"] == "interrupted")
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    let mut expected_sessions: Vec<&str> = sessions.iter().map(String::as_str).collect();
    expected_sessions.sort();
    assert_eq!(exited, expected_sessions);
    let failed: Vec<&Value> = resumed
        .iter()
        .filter(|e| e["kind"] == "tool_call_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    // Calls run concurrently, so ids follow arrival, not request order: find the
    // foreground call by its command.
    let foreground = before
        .iter()
        .find(|e| {
            e["kind"] == "process_started" && e["command"].as_str().unwrap().contains("fg.pid")
        })
        .unwrap();
    assert_eq!(failed[0]["tool_call_id"], foreground["tool_call_id"]);
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("interrupted:")
    );
    let new_calls: Vec<&str> = resumed
        .iter()
        .filter(|e| e["kind"] == "tool_call_started")
        .map(|e| e["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(new_calls.len(), 1);
    let max_old = old_calls.iter().max().unwrap();
    assert!(
        new_calls[0] > max_old.as_str(),
        "{new_calls:?} vs {max_old}"
    );
    // Only one process_started per session id in the whole log.
    let mut started: Vec<&str> = all
        .iter()
        .filter(|e| e["kind"] == "process_started")
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    let n = started.len();
    started.sort();
    started.dedup();
    assert_eq!(started.len(), n, "a session id came back");
}

#[test]
fn an_unknown_host_session_is_an_error() {
    let (ws, state) = crate::support::dirs();
    let out = serve_command(
        ws.path(),
        state.path(),
        &["--host-session", "hs_doesnotexist"],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    assert!(!out.status.success(), "{}", crate::support::describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown host session `hs_doesnotexist`"),
        "{stderr}"
    );
    assert!(!state.path().join("hosts/hs_doesnotexist").exists());
}

/// A whole last line of `events.jsonl` that is not an event (it ends in a
/// newline, so no crash tore it) is not cut silently on resume: its bytes move
/// to `events.rejected`, an `omitted` event says where and why, and every
/// event before it stays. A line over 4 MiB is a clear error, not read whole.
#[test]
fn resume_moves_a_whole_unparsable_last_line_aside_and_refuses_a_huge_line() {
    let (ws, state) = crate::support::dirs();
    let run = |extra: &[&str]| {
        let out = serve_command(ws.path(), state.path(), extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // stdin is empty: each serve ends at once.
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(0), "{stderr}");
    let hosts: Vec<_> = std::fs::read_dir(state.path().join("hosts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let log = hosts[0].join("events.jsonl");
    let id = hosts[0].file_name().unwrap().to_str().unwrap().to_string();
    let before = std::fs::read(&log).unwrap();
    let garbage = b"{\"seq\": not an event}\n";
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(garbage)
        .unwrap();

    let (code, stderr) = run(&["--host-session", &id]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        std::fs::read(hosts[0].join("events.rejected")).unwrap(),
        garbage
    );
    let after = std::fs::read(&log).unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "earlier events changed"
    );
    let omitted: Vec<Value> = events(&log)
        .into_iter()
        .filter(|e| e["kind"] == "omitted")
        .collect();
    assert_eq!(omitted.len(), 1, "{omitted:?}");
    assert_eq!(omitted[0]["what"], "event_line");
    assert_eq!(omitted[0]["offset"], before.len());
    assert_eq!(omitted[0]["len"], garbage.len());
    assert!(
        omitted[0]["reason"]
            .as_str()
            .unwrap()
            .contains("moved, as it was, to events.rejected"),
        "{}",
        omitted[0]
    );

    let mut huge = vec![b'x'; (4 << 20) + 1];
    huge.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(&huge)
        .unwrap();
    let (code, stderr) = run(&["--host-session", &id]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("a line longer than 4194304 bytes"),
        "{stderr}"
    );
}

/// Permission request ids never repeat within one host session's log: a
/// resumed `serve` numbers its requests above the highest the log holds, as it
/// does tool call ids.
#[tokio::test]
async fn permission_request_ids_continue_across_a_resume() {
    let (ws, state) = crate::support::dirs();
    let policy = state.path().join("ask.toml");
    std::fs::write(&policy, "default = \"ask\"\n").unwrap();
    let policy = policy.to_str().unwrap();
    let mut ids = Vec::new();
    for resume in [None, Some(())] {
        let mut cmd = crate::support::serve(ws.path(), state.path());
        cmd.args(["--policy", policy]);
        if resume.is_some() {
            let hosts: Vec<_> = std::fs::read_dir(state.path().join("hosts"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            cmd.args(["--host-session", &hosts[0]]);
        }
        let client = toolhost_test_support::StdioClient::spawn(cmd).unwrap();
        client.initialize("2025-11-25").await.unwrap();
        // No approver answers (the client does not elicit): each ask is denied.
        for _ in 0..2 {
            let result = client
                .call_tool("bash", json!({"command": "echo asked"}))
                .await
                .unwrap();
            assert!(toolhost_test_support::is_error(&result), "{result}");
        }
        client.close().await.unwrap();
    }
    for e in toolhost_test_support::host_log::events(state.path()).unwrap() {
        if e["kind"] == "permission_requested" {
            ids.push(e["request_id"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(
        ids,
        [
            "perm_000000000001",
            "perm_000000000002",
            "perm_000000000003",
            "perm_000000000004"
        ]
    );
}

/// After `kill -9` and `serve --host-session ID`, the earlier run's sessions
/// are known again, ended, never unknown and never running: `list_shells`
/// lists the background one that was running as interrupted and the one that
/// had finished with its exit code; `bash_output` gives the output the log
/// still holds and how it ended; `kill_shell` says it had ended already.
#[test]
fn the_bash_tools_tell_the_earlier_runs_sessions_as_ended() {
    let (ws, state) = crate::support::dirs();
    let mut serve = Serve::start(ws.path(), state.path(), &[]);
    let (text, finished) = serve.result(1, "bash", json!({"command": "echo finished"}));
    assert_eq!(text, "finished");
    let (_, background) = serve.result(
        2,
        "bash",
        json!({"command": "echo started; sleep 300", "run_in_background": true}),
    );
    let finished = finished["session_id"].as_str().unwrap().to_string();
    let id = background["session_id"].as_str().unwrap().to_string();
    let log = std::path::PathBuf::from(background["output_path"].as_str().unwrap());
    poll("the background output", || {
        (std::fs::read_to_string(&log).ok()? == "started\n").then_some(())
    });
    serve.child.kill().unwrap();
    serve.child.wait().unwrap();
    drop(serve);
    let hosts = state.path().join("hosts");
    let host_session = std::fs::read_dir(&hosts)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();

    let mut serve = Serve::start(ws.path(), state.path(), &["--host-session", &host_session]);
    let interrupted = "[interrupted: the host restarted while it ran (an earlier host process of \
                       this host session ended); its processes were killed]";
    let (text, listed) = serve.result(3, "list_shells", json!({}));
    let rows: Vec<(&str, &str, &Value, &str, &Value, &Value)> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["session_id"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
                &r["exit_code"],
                r["command"].as_str().unwrap(),
                &r["output_bytes"],
                &r["detached"],
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                finished.as_str(),
                "exited",
                &json!(0),
                "echo finished",
                &json!(9),
                &json!(false)
            ),
            (
                id.as_str(),
                "killed",
                &Value::Null,
                "echo started; sleep 300",
                &json!(8),
                &json!(true)
            ),
        ],
        "{text}"
    );
    assert_eq!(
        (&listed["total"], &listed["running"]),
        (&json!(2), &json!(0))
    );
    let line = text
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("  interrupted  "), "{text}");
    let (text, read) = serve.result(4, "bash_output", json!({"session_id": id}));
    assert_eq!(text, format!("started\n\n{interrupted}"));
    assert_eq!(read["status"], "killed");
    let (text, _) = serve.result(5, "kill_shell", json!({"session_id": id}));
    assert_eq!(
        text,
        format!("Session {id} had already ended {interrupted}; nothing was signalled.")
    );
    serve.stdin.take();
    poll("serve to exit", || serve.child.try_wait().unwrap());
}
