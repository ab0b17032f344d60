//! Only the host's user, and never the host's own commands, reach its doors
//! (docs/attach.md#the-control-socket, docs/mcp.md#tokens), through the real
//! binary: a command, in every sandbox mode and process tracking, that runs a
//! client of the control socket (directly, after `setsid`, as an orphan, or
//! `toolhost attach`) is refused; over HTTP a command holding a valid token is
//! refused, and without tokens so is another user of the machine.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::mcp_http::{HttpServe, initialize_body, open_session, post_headers, request, send};
use crate::support::{allow_all_policy, dirs};

/// Connects to the UNIX socket `argv[1]` and asks for the pending prompts;
/// writes `answered`, `refused` (the host closed the connection) or the
/// connect's errno name to `argv[2].txt`.
const PROBE: &str = "import errno, socket, sys\n\
path, label = sys.argv[1], sys.argv[2]\n\
try:\n    \
    s = socket.socket(socket.AF_UNIX)\n    \
    s.connect(path)\n\
except OSError as e:\n    \
    out = errno.errorcode.get(e.errno, str(e.errno))\n\
else:\n    \
    try:\n        \
        s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"permission.pending\"}\\n')\n        \
        out = 'answered' if s.recv(200) else 'refused'\n    \
    except OSError:\n        \
        out = 'refused'\n\
open(label + '.txt', 'w').write(out + '\\n')\n";

/// Waits (at most 30 s) until every file named in `argv` is non-empty: the
/// last line of a command whose other processes run on after it, so that
/// the session does not end them first.
const WAIT: &str = "import os, sys, time\n\
deadline = time.time() + 30\n\
while time.time() < deadline and not all(\n    \
    os.path.exists(p) and os.path.getsize(p) for p in sys.argv[1:]):\n    \
    time.sleep(0.02)\n";

/// Waits (at most 30 s) for `path` to exist and returns its text.
fn wait_for(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        assert!(Instant::now() < deadline, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The control socket of the one host session under `state`.
fn control_socket(state: &Path) -> std::path::PathBuf {
    let hosts: Vec<_> = std::fs::read_dir(state.join("hosts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    hosts[0].join("control.sock")
}

#[tokio::test(flavor = "multi_thread")]
async fn no_command_reaches_the_control_socket_in_any_sandbox_mode_or_tracking() {
    let bin = env!("CARGO_BIN_EXE_toolhost");
    for (mode, args, expected) in [
        ("full-access", &["--sandbox", "full-access"][..], "refused"),
        (
            "full-access, subreaper",
            &[
                "--sandbox",
                "full-access",
                "--process-tracking",
                "subreaper",
            ][..],
            "refused",
        ),
        (
            "workspace-write, subreaper",
            &["--process-tracking", "subreaper"][..],
            "EPERM",
        ),
    ] {
        let (ws, state) = dirs();
        std::fs::write(ws.path().join("probe.py"), PROBE).unwrap();
        std::fs::write(ws.path().join("wait.py"), WAIT).unwrap();
        let policy = allow_all_policy(state.path());
        let mut cmd = crate::support::serve(ws.path(), state.path());
        cmd.args(["--policy", &policy]).args(args);
        let s = toolhost_test_support::StdioClient::spawn(cmd).unwrap();
        s.initialize("2025-11-25").await.unwrap();
        let socket = control_socket(state.path());
        // A person's client (this test's) is served.
        let human = Command::new(bin)
            .args(["attach", "--once", "--state-dir"])
            .arg(state.path())
            .output()
            .unwrap();
        assert_eq!(human.status.code(), Some(0), "{mode}: {human:?}");
        let sock = socket.display();
        let state_dir = state.path().display();
        // Directly; after leaving its session; as an orphan; `toolhost attach`.
        std::fs::write(
            ws.path().join("run.sh"),
            format!(
                "python3 probe.py '{sock}' direct\n\
                 setsid -f python3 probe.py '{sock}' escaped\n\
                 (python3 probe.py '{sock}' orphan &)\n\
                 '{bin}' attach --once --state-dir '{state_dir}' > attach.out 2>&1\n\
                 echo \"rc=$?\" > attach.txt\n\
                 python3 wait.py escaped.txt orphan.txt\n"
            ),
        )
        .unwrap();
        let result = s
            .call_tool("bash", json!({"command": "sh run.sh"}))
            .await
            .unwrap();
        for label in ["direct", "escaped", "orphan"] {
            let text = wait_for(&ws.path().join(format!("{label}.txt")));
            let text = text.trim_end();
            match expected {
                "refused" => assert_eq!(text, "refused", "{mode}, {label}: {result}"),
                // Confined: no UNIX socket at all, or the state dir hidden.
                _ => assert!(
                    ["EPERM", "ENOENT", "EACCES"].contains(&text),
                    "{mode}, {label}: {text} {result}"
                ),
            }
        }
        let attach = wait_for(&ws.path().join("attach.txt"));
        assert_ne!(attach.trim_end(), "rc=0", "{mode}: a command attached");
        let printed = std::fs::read_to_string(ws.path().join("attach.out")).unwrap();
        assert!(!printed.contains("tool_call"), "{mode}: {printed}");
        s.close().await.unwrap();
    }
}

/// The body of a raw `initialize` as `curl --data` sends it.
fn init() -> String {
    initialize_body("2025-11-25")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_holding_a_token_cannot_use_the_http_door() {
    let (ws, state) = dirs();
    let token = "alice-token-0123456789abcdef";
    let tokens = state.path().join("tokens.toml");
    std::fs::create_dir_all(state.path()).unwrap();
    std::fs::write(
        &tokens,
        format!("[[token]]\nname = \"alice\"\ntoken = \"{token}\"\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let policy = allow_all_policy(state.path());
    // full-access: nothing is hidden from commands, the network included.
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&policy),
        &[
            "--http",
            "127.0.0.1:0",
            "--tokens-file",
            tokens.to_str().unwrap(),
            "--sandbox",
            "full-access",
        ],
    );
    let addr = serve.addr.clone();
    std::fs::write(ws.path().join("init.json"), init()).unwrap();
    std::fs::write(ws.path().join("wait.py"), WAIT).unwrap();
    let auth = format!("Bearer {token}");
    let session = open_session(&addr, &[("authorization", &auth)]).await;
    let curl = format!(
        "curl -s -o OUT -w '%{{http_code}}' -X POST -H 'content-type: application/json' \
         -H 'accept: application/json, text/event-stream' -H 'authorization: {auth}' \
         --data @init.json http://{addr}/mcp"
    );
    std::fs::write(
        ws.path().join("escaped.sh"),
        format!("{} > escaped.code\n", curl.replace("OUT", "escaped.body")),
    )
    .unwrap();
    std::fs::write(
        ws.path().join("run.sh"),
        format!(
            "{} > direct.code\nsetsid -f sh escaped.sh\npython3 wait.py escaped.code\n",
            curl.replace("OUT", "direct.body")
        ),
    )
    .unwrap();
    let command = "sh run.sh";
    let result = request(
        &addr,
        &session,
        &json!(1),
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
                "params":{"name":"bash","arguments":{"command":command}}}),
        &[("authorization", &auth)],
    )
    .await;
    assert_eq!(result["result"]["isError"], json!(false), "{result}");
    for label in ["direct", "escaped"] {
        let deadline = Instant::now() + Duration::from_secs(30);
        let code = loop {
            let code = std::fs::read_to_string(ws.path().join(format!("{label}.code")))
                .unwrap_or_default();
            if !code.is_empty() {
                break code;
            }
            assert!(Instant::now() < deadline, "{label}: no status");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(code, "403", "{label}");
        let body = std::fs::read_to_string(ws.path().join(format!("{label}.body"))).unwrap();
        assert_eq!(
            body,
            "Forbidden: the host's own commands may not use this server (it is a command the \
             host started (or a process it started))",
            "{label}"
        );
    }
    // The token still works for a client that is no command of the host.
    let list = request(
        &addr,
        &session,
        &json!(2),
        &json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        &[("authorization", &auth)],
    )
    .await;
    assert!(list["result"]["tools"].is_array(), "{list}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_tokens_the_http_door_serves_only_its_own_user() {
    if toolhost_process::current_uid() != 0 {
        eprintln!("skipped: only root can run a client as another user here");
        return;
    }
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(&policy),
        &["--http", "127.0.0.1:0"],
    );
    let addr = serve.addr.clone();
    // Another user (nobody) of this machine.
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "curl",
            "-s",
        ])
        .args(["-w", "\n%{http_code}", "-X", "POST"])
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"])
        .args(["--data", &init(), &format!("http://{addr}/mcp")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "Forbidden: this server has no token, so it serves only processes of its own user on \
         this machine, never its own commands (its socket belongs to uid 65534); start it with \
         --token-file or --tokens-file to serve others\n403",
        "{out:?}"
    );
    // Its own user is served.
    let reply = send(&addr, "POST", "/mcp", &post_headers(&[]), init()).await;
    assert_eq!(reply.status, 200);
    let stderr = serve.stderr.lock().unwrap().join("\n");
    assert!(
        stderr.contains("refused an HTTP connection: its socket belongs to uid 65534"),
        "{stderr}"
    );
}
