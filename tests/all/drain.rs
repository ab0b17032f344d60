//! The drain (`host/toolhost/src/mcp/drain.rs`, docs/operations.md#stopping-and-draining)
//! through the real binary: SIGTERM with five calls in flight over HTTP
//! (each waits on a FIFO the test writes), `/ready` `503` at once, new calls
//! refused with the exact `503` and body in both eras, the five finishing
//! with their exact output, exit 0, and the lifecycle events with their seqs;
//! a call that outlives a short `--drain-timeout`, cancelled, with a
//! background session killed at the end; a second SIGTERM stopping at once;
//! the refusal on stdio; a 2026-07-28 call waiting for its answer drained
//! through its retry; and the control socket's `stop`, twice.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_http::{EXCHANGE_TIMEOUT, HttpServe, open_session, post_headers, request, send};
use crate::support::{allow_all_policy, dirs, modern_meta};
use toolhost::mcp::drain::STOP_AFTER_DRAIN_MAX;

/// The refusal's message for a `method` during a drain begun by SIGTERM.
fn refused_message(method: &str) -> String {
    format!(
        "Server stopping: toolhost is draining (SIGTERM) and takes no new `{method}`; requests \
         already running finish. Retry once it has restarted, or on another server"
    )
}

/// A FIFO at `path`, for a command to wait on until the test writes it.
fn fifo(path: &Path) {
    nix::unistd::mkfifo(
        path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap();
}

/// Writes `text` to the FIFO `path` (its reader, a command, has it open or
/// opens it), within [`EXCHANGE_TIMEOUT`].
async fn release(path: PathBuf, text: String) {
    let write = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    });
    tokio::time::timeout(EXCHANGE_TIMEOUT, write)
        .await
        .expect("the command never opened its FIFO")
        .unwrap();
}

/// Polls `done` every 20 ms until it is true; fails after `limit`.
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not in {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The host-session log once `done` holds for it (within [`EXCHANGE_TIMEOUT`]).
fn events_when(state: &Path, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut events = Vec::new();
    wait_until(what, EXCHANGE_TIMEOUT, || {
        events = toolhost_test_support::host_log::events(state).unwrap_or_default();
        done(&events)
    });
    events
}

/// Waits until the log holds `n` `process_started` events.
fn logged_starts(state: &Path, n: usize) {
    events_when(state, &format!("{n} process starts logged"), |events| {
        events
            .iter()
            .filter(|e| e["kind"] == "process_started")
            .count()
            == n
    });
}

fn draining(events: &[Value]) -> bool {
    events
        .iter()
        .any(|e| e["kind"] == "lifecycle" && e["state"] == "draining")
}

/// Every event's seq is its place (1, 2, ...); the lifecycle events as
/// `(seq, state, message)`.
fn lifecycle(events: &[Value]) -> Vec<(u64, String, String)> {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(i as u64 + 1), "{events:#?}");
    }
    events
        .iter()
        .filter(|e| e["kind"] == "lifecycle")
        .map(|e| {
            (
                e["seq"].as_u64().unwrap(),
                e["state"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Asserts the state and message of every lifecycle event of the host
/// session in `state`, in order (its seqs contiguous, [`lifecycle`]).
fn assert_states(state: &Path, expected: &[(&str, &str)]) {
    let events = toolhost_test_support::host_log::events(state).unwrap();
    let life = lifecycle(&events);
    let got: Vec<(&str, &str)> = life
        .iter()
        .map(|(_, s, m)| (s.as_str(), m.as_str()))
        .collect();
    assert_eq!(got, expected);
}

/// Waits at most [`STOP_AFTER_DRAIN_MAX`] for `try_wait` to tell an exit,
/// and asserts it was 0.
fn exits_0(mut try_wait: impl FnMut() -> Option<std::process::ExitStatus>) {
    let mut status = None;
    wait_until("serve exited", STOP_AFTER_DRAIN_MAX, || {
        status = try_wait();
        status.is_some()
    });
    assert!(status.unwrap().success(), "{status:?}");
}

fn life(seq: u64, state: &str, message: &str) -> (u64, String, String) {
    (seq, state.to_string(), message.to_string())
}

fn sigterm(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

fn bash_call(id: Value, command: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "bash", "arguments": {"command": command}}})
}

/// The seqs of the events of `kind` for tool call `tc`.
fn seq_of(events: &[Value], kind: &str, tc: &str) -> u64 {
    events
        .iter()
        .find(|e| e["kind"] == kind && e["tool_call_id"] == tc)
        .unwrap_or_else(|| panic!("no {kind} of {tc}: {events:#?}"))["seq"]
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_drains_five_calls_in_flight_refuses_new_ones_and_exits_0() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let mut serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&policy),
        &["--http", "127.0.0.1:0"],
    );
    let addr = serve.addr.clone();
    let session = open_session(&addr, &[]).await;
    let mut headers = post_headers(&[]);
    headers.push(("mcp-session-id", &session));
    let mut replies = Vec::new();
    for n in 1..=5 {
        fifo(&ws.path().join(format!("gate-{n}")));
        let command = format!("touch started-{n}; read line < gate-{n}; echo \"call {n}: $line\"");
        let reply = send(
            &addr,
            "POST",
            "/mcp",
            &headers,
            bash_call(json!(n), &command).to_string(),
        )
        .await;
        assert_eq!(reply.status, 200);
        replies.push(reply);
    }
    wait_until("the five commands started", EXCHANGE_TIMEOUT, || {
        (1..=5).all(|n| ws.path().join(format!("started-{n}")).exists())
    });
    // A command runs before the host has logged its start.
    logged_starts(state.path(), 5);

    let sigterm_at = Instant::now();
    sigterm(serve.child.id());
    events_when(state.path(), "the drain recorded", draining);
    // Readiness went false when the drain began.
    let ready = send(&addr, "GET", "/ready", &[], "").await;
    assert_eq!(ready.status, 503);
    assert_eq!(
        ready.json().await,
        json!({"status": "not_ready", "failed": ["accepting"], "checks": {
            "plugins_loaded": true, "state_dir_writable": true,
            "sandbox_probed": true, "accepting": false}})
    );
    // A new call in the session: 503, Retry-After, the JSON-RPC error.
    let refused = send(
        &addr,
        "POST",
        "/mcp",
        &headers,
        bash_call(json!(6), "echo late").to_string(),
    )
    .await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.headers["content-type"], "application/json");
    let retry: u64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "Retry-After: {retry}");
    assert_eq!(
        refused.json().await,
        json!({"jsonrpc": "2.0", "id": 6, "error": {"code": -31000,
            "message": refused_message("tools/call"),
            "data": {"reason": "draining", "retryAfterSeconds": retry}}})
    );
    // A 2026-07-28 request gets the same (the revision defines no code of its own).
    let modern = json!({"jsonrpc": "2.0", "id": "m1", "method": "tools/call", "params": {
        "name": "bash", "arguments": {"command": "echo late"},
        "_meta": modern_meta("2026-07-28", json!({}))}});
    let refused = send(
        &addr,
        "POST",
        "/mcp",
        &post_headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "bash"),
        ]),
        modern.to_string(),
    )
    .await;
    assert_eq!(refused.status, 503);
    let retry: u64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        refused.json().await,
        json!({"jsonrpc": "2.0", "id": "m1", "error": {"code": -31000,
            "message": refused_message("tools/call"),
            "data": {"reason": "draining", "retryAfterSeconds": retry}}})
    );
    // A new session is refused too; the session's lists and pings are answered.
    let init = send(
        &addr,
        "POST",
        "/mcp",
        &post_headers(&[]),
        crate::mcp_http::initialize_body("2025-11-25"),
    )
    .await;
    assert_eq!(init.status, 503);
    assert_eq!(
        init.json().await["error"]["message"],
        json!(refused_message("initialize"))
    );
    let list = request(
        &addr,
        &session,
        &json!(7),
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
        &[],
    )
    .await;
    assert!(
        list["result"]["tools"].as_array().unwrap().len() >= 5,
        "{list}"
    );
    let ping = request(
        &addr,
        &session,
        &json!(8),
        &json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}),
        &[],
    )
    .await;
    assert_eq!(ping, json!({"jsonrpc": "2.0", "id": 8, "result": {}}));

    // Released, the five finish with their output, and serve exits 0.
    for n in 1..=5 {
        release(ws.path().join(format!("gate-{n}")), format!("go-{n}\n")).await;
    }
    for (reply, n) in replies.iter_mut().zip(1..=5) {
        let message = reply.message(&json!(n)).await;
        assert_eq!(message["result"]["isError"], json!(false), "{message}");
        assert_eq!(
            message["result"]["content"][0]["text"],
            json!(format!("call {n}: go-{n}")),
            "{message}"
        );
    }
    let status = serve.wait_exit(Duration::from_secs(20) + STOP_AFTER_DRAIN_MAX);
    let took = sigterm_at.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(20), "SIGTERM to exit: {took:?}");
    eprintln!("drain of 5 calls: SIGTERM to exit {took:?}");

    // The log: running, draining (seq 12, after the five calls' starts and
    // their processes'), the five settling, stopped.
    let events = toolhost_test_support::host_log::events(state.path()).unwrap();
    assert_eq!(
        lifecycle(&events),
        [
            life(1, "running", "serving MCP over HTTP"),
            life(
                12,
                "draining",
                "SIGTERM: draining 5 calls in progress (at most 20s); new calls are refused"
            ),
            life(
                28,
                "stopped",
                "SIGTERM: stopped after the drain, nothing left running"
            ),
        ]
    );
    let settled: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_call_settled")
        .collect();
    assert_eq!(settled.len(), 5);
    for e in settled {
        let seq = e["seq"].as_u64().unwrap();
        assert!(12 < seq && seq < 28 && e["is_error"] == json!(false), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_outliving_the_drain_timeout_is_cancelled_and_serve_exits_0_in_bound() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let mut serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&policy),
        &["--http", "127.0.0.1:0", "--drain-timeout", "2s"],
    );
    let addr = serve.addr.clone();
    let session = open_session(&addr, &[]).await;
    let mut headers = post_headers(&[]);
    headers.push(("mcp-session-id", &session));
    // A background session that runs until the host ends it.
    fifo(&ws.path().join("bg-gate"));
    let bg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "bash",
        "arguments": {"command": "cat bg-gate", "run_in_background": true}}});
    let started = request(&addr, &session, &json!(1), &bg, &[]).await;
    assert_eq!(started["result"]["isError"], json!(false), "{started}");
    // A call nobody releases.
    fifo(&ws.path().join("gate"));
    let mut reply = send(
        &addr,
        "POST",
        "/mcp",
        &headers,
        bash_call(json!(2), "touch started; read line < gate; echo never").to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    wait_until("the command started", EXCHANGE_TIMEOUT, || {
        ws.path().join("started").exists()
    });
    logged_starts(state.path(), 2);

    let sigterm_at = Instant::now();
    sigterm(serve.child.id());
    // The client gets the cancelled result.
    let message = reply.message(&json!(2)).await;
    let cancelled_after = sigterm_at.elapsed();
    assert_eq!(
        message["result"],
        json!({"content": [{"type": "text", "text": "tool call `tc_000000000002` was cancelled"}], "isError": true}),
    );
    let status = serve.wait_exit(Duration::from_secs(2) + STOP_AFTER_DRAIN_MAX);
    let took = sigterm_at.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        cancelled_after >= Duration::from_secs(2),
        "cancelled before the timeout: {cancelled_after:?}"
    );
    assert!(
        took <= Duration::from_secs(2) + STOP_AFTER_DRAIN_MAX,
        "{took:?}"
    );
    eprintln!("drain timeout 2s: cancelled result after {cancelled_after:?}, exit after {took:?}");

    let events = toolhost_test_support::host_log::events(state.path()).unwrap();
    assert_eq!(
        lifecycle(&events),
        [
            life(1, "running", "serving MCP over HTTP"),
            life(
                7,
                "draining",
                "SIGTERM: draining 1 call in progress (at most 2s); new calls are refused"
            ),
            life(
                8,
                "draining",
                "the drain timeout (2s) passed: cancelling 1 call still running (tc_000000000002)"
            ),
            life(
                12,
                "stopped",
                "SIGTERM: stopped after the drain timeout (2s), 1 call cancelled (tc_000000000002)"
            ),
        ]
    );
    // The call's process killed by the cancel, the call failed `cancelled`, then the
    // background session ended by the host.
    let exited: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e["kind"] == "process_exited")
        .map(|e| (e["seq"].as_u64().unwrap(), e["summary"].as_str().unwrap()))
        .collect();
    assert_eq!(
        exited,
        [
            (9, "ended by SIGTERM, killed by cancelled"),
            (11, "ended by SIGTERM, killed by host-shutdown")
        ],
        "{events:#?}"
    );
    assert_eq!(seq_of(&events, "tool_call_failed", "tc_000000000002"), 10);
    assert_eq!(events[9]["cancelled"], json!(true));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_sigterm_during_the_drain_stops_at_once() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let mut serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&policy),
        &["--http", "127.0.0.1:0"],
    );
    let addr = serve.addr.clone();
    let session = open_session(&addr, &[]).await;
    let mut headers = post_headers(&[]);
    headers.push(("mcp-session-id", &session));
    fifo(&ws.path().join("gate"));
    let mut reply = send(
        &addr,
        "POST",
        "/mcp",
        &headers,
        bash_call(json!(1), "touch started; read line < gate").to_string(),
    )
    .await;
    wait_until("the command started", EXCHANGE_TIMEOUT, || {
        ws.path().join("started").exists()
    });
    let cgroups = own_cgroups(serve.child.id());
    sigterm(serve.child.id());
    events_when(state.path(), "the drain recorded", draining);
    let again_at = Instant::now();
    sigterm(serve.child.id());
    let message = reply.message(&json!(1)).await;
    assert_eq!(message["result"]["isError"], json!(true), "{message}");
    let status = serve.wait_exit(STOP_AFTER_DRAIN_MAX);
    let took = again_at.elapsed();
    assert!(status.success(), "{status:?}");
    eprintln!("second SIGTERM to exit: {took:?}");
    assert_states(
        state.path(),
        &[
            ("running", "serving MCP over HTTP"),
            (
                "draining",
                "SIGTERM: draining 1 call in progress (at most 20s); new calls are refused",
            ),
            (
                "draining",
                "SIGTERM again: cancelling 1 call still running (tc_000000000001)",
            ),
            (
                "stopped",
                "SIGTERM, then SIGTERM during the drain: stopped at once, 1 call cancelled (tc_000000000001)",
            ),
        ],
    );
    // No cgroup of this host is left behind.
    for dir in &cgroups {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    eprintln!("cgroups of the host, all removed: {cgroups:?}");
}

/// The `toolhost-<pid>` cgroup directories of the running process `pid`
/// (`sessions/tree.rs` makes them beside its own cgroup, v2 or v1 `pids`)
/// that exist now; none where the host could make none.
fn own_cgroups(pid: u32) -> Vec<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // (root, mount point, fstype, super options) of each cgroup mount.
    let mounts: Vec<[&str; 4]> = mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            let fstype = *post.first()?;
            (fstype == "cgroup" || fstype == "cgroup2")
                .then(|| [pre[3], pre[4], fstype, post.get(2).copied().unwrap_or("")])
        })
        .collect();
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let mut dirs = Vec::new();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        for [root, mount, fstype, options] in &mounts {
            let matches = if controllers.is_empty() {
                *fstype == "cgroup2"
            } else {
                *fstype == "cgroup"
                    && controllers
                        .split(',')
                        .any(|c| options.split(',').any(|o| o == c))
            };
            let Some(rel) = path.strip_prefix(root) else {
                continue;
            };
            let dir = Path::new(mount)
                .join(rel.trim_start_matches('/'))
                .join(format!("toolhost-{pid}"));
            if matches && dir.exists() && !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

#[tokio::test(flavor = "multi_thread")]
async fn on_stdio_a_new_call_during_the_drain_gets_the_refusal_and_the_running_one_finishes() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let mut cmd = crate::support::serve(ws.path(), state.path());
    cmd.arg("--policy").arg(&policy);
    let client = Arc::new(toolhost_test_support::StdioClient::spawn(cmd).unwrap());
    let init = client.initialize("2025-11-25").await.unwrap();
    assert!(init["result"].is_object(), "{init}");
    fifo(&ws.path().join("gate"));
    let running = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .request(
                    "tools/call",
                    json!({"name": "bash", "arguments": {
                    "command": "touch started; read line < gate; echo \"got $line\""}}),
                )
                .await
                .unwrap()
        })
    };
    wait_until("the command started", EXCHANGE_TIMEOUT, || {
        ws.path().join("started").exists()
    });
    sigterm(client.pid().unwrap());
    events_when(state.path(), "the drain recorded", draining);
    let refused = crate::support::exchange(
        &client,
        json!(100),
        "tools/call",
        json!({"name": "bash", "arguments": {"command": "echo late"}}),
    )
    .await;
    assert_eq!(
        refused,
        json!({"jsonrpc": "2.0", "id": 100, "error": {"code": -31000,
            "message": refused_message("tools/call"), "data": {"reason": "draining"}}})
    );
    let ping = crate::support::exchange(&client, json!(101), "ping", json!({})).await;
    assert_eq!(ping, json!({"jsonrpc": "2.0", "id": 101, "result": {}}));
    release(ws.path().join("gate"), "go\n".to_string()).await;
    let result = running.await.unwrap();
    assert_eq!(
        result["result"]["content"][0]["text"],
        json!("got go"),
        "{result}"
    );
    // It exits by itself, stdin still open.
    let mut client = Arc::try_unwrap(client).ok().unwrap();
    exits_0(|| client.try_wait().unwrap());
    assert_states(
        state.path(),
        &[
            ("running", "serving MCP on stdio"),
            (
                "draining",
                "SIGTERM: draining 1 call in progress (at most 20s); new calls are refused",
            ),
            (
                "stopped",
                "SIGTERM: stopped after the drain, nothing left running",
            ),
        ],
    );
}

/// One request to the control socket of the only host session under `state`
/// (docs/attach.md#the-control-socket), and its response line.
fn control(state: &Path, method: &str) -> Value {
    use std::io::{BufRead, Write};
    let hosts = state.join("hosts");
    let id = std::fs::read_dir(&hosts)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let mut socket =
        std::os::unix::net::UnixStream::connect(hosts.join(id).join("control.sock")).unwrap();
    socket.set_read_timeout(Some(EXCHANGE_TIMEOUT)).unwrap();
    writeln!(
        socket,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": method})
    )
    .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(socket)
        .read_line(&mut line)
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_request_drains_and_a_second_one_stops_at_once() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let mut cmd = crate::support::serve(ws.path(), state.path());
    cmd.arg("--policy").arg(&policy);
    let client = Arc::new(toolhost_test_support::StdioClient::spawn(cmd).unwrap());
    client.initialize("2025-11-25").await.unwrap();
    fifo(&ws.path().join("gate"));
    let running = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .request(
                    "tools/call",
                    json!({"name": "bash", "arguments": {
                    "command": "touch started; read line < gate"}}),
                )
                .await
                .unwrap()
        })
    };
    wait_until("the command started", EXCHANGE_TIMEOUT, || {
        ws.path().join("started").exists()
    });
    assert_eq!(
        control(state.path(), "stop"),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}})
    );
    events_when(state.path(), "the drain recorded", draining);
    let refused = crate::support::exchange(
        &client,
        json!(100),
        "tools/call",
        json!({"name": "bash", "arguments": {"command": "echo late"}}),
    )
    .await;
    assert_eq!(
        refused["error"]["message"],
        json!(
            "Server stopping: toolhost is draining (a stop request) and takes no new \
               `tools/call`; requests already running finish. Retry once it has restarted, \
               or on another server"
        )
    );
    assert_eq!(control(state.path(), "stop")["result"], json!({}));
    let result = running.await.unwrap();
    assert_eq!(
        result["result"],
        json!({"content": [{"type": "text", "text": "tool call `tc_000000000001` was cancelled"}],
               "isError": true})
    );
    let mut client = Arc::try_unwrap(client).ok().unwrap();
    exits_0(|| client.try_wait().unwrap());
    assert_states(
        state.path(),
        &[
            ("running", "serving MCP on stdio"),
            (
                "draining",
                "a stop request: draining 1 call in progress (at most 20s); new calls are refused",
            ),
            (
                "draining",
                "a stop request again: cancelling 1 call still running (tc_000000000001)",
            ),
            (
                "stopped",
                "a stop request, then a stop request during the drain: stopped at once, 1 call cancelled (tc_000000000001)",
            ),
        ],
    );
}

/// A 2026-07-28 call waiting for its client's answer (MRTR,
/// docs/mcp.md#permission-questions-mrtr) counts as running: the drain waits
/// for it, refuses a new call, and serves the retry that answers it.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_waiting_for_its_2026_answer_is_drained_through_its_retry() {
    let (ws, state) = dirs();
    std::fs::create_dir_all(state.path()).unwrap();
    let policy = state.path().join("ask.toml");
    std::fs::write(&policy, "default = \"ask\"\nallow = [\"echo *\"]\n").unwrap();
    let mut cmd = crate::support::serve(ws.path(), state.path());
    cmd.arg("--policy").arg(&policy);
    let mut client = toolhost_test_support::StdioClient::spawn(cmd).unwrap();
    let meta = modern_meta("2026-07-28", json!({"elicitation": {}}));
    let call =
        |command: &str| json!({"name": "bash", "arguments": {"command": command}, "_meta": meta});
    let asked =
        crate::support::exchange(&client, json!(1), "tools/call", call("touch answered")).await;
    assert_eq!(
        asked["result"]["resultType"],
        json!("input_required"),
        "{asked}"
    );
    let state_token = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();

    sigterm(client.pid().unwrap());
    let events = events_when(state.path(), "the drain recorded", draining);
    assert!(
        events.iter().any(|e| e["message"]
            == json!("SIGTERM: draining 1 call in progress (at most 20s); new calls are refused")),
        "{events:#?}"
    );
    let refused =
        crate::support::exchange(&client, json!(2), "tools/call", call("echo late")).await;
    assert_eq!(refused["error"]["code"], json!(-31000), "{refused}");
    let mut retry = call("touch answered");
    retry["requestState"] = json!(state_token);
    retry["inputResponses"] =
        json!({"permission": {"action": "accept", "content": {"decision": "allow_once"}}});
    let done = crate::support::exchange(&client, json!(3), "tools/call", retry).await;
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    assert_eq!(done["result"]["isError"], json!(false), "{done}");
    assert!(ws.path().join("answered").exists());
    exits_0(|| client.try_wait().unwrap());
    let events = toolhost_test_support::host_log::events(state.path()).unwrap();
    let life = lifecycle(&events);
    assert_eq!(
        life.last().map(|(_, s, m)| (s.as_str(), m.as_str())),
        Some((
            "stopped",
            "SIGTERM: stopped after the drain, nothing left running"
        ))
    );
}
