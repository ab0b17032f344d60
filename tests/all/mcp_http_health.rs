//! `toolhost serve --http`'s operational endpoints (`GET /health`, `/ready`,
//! `/info`, `host/toolhost/src/mcp/health.rs`) driven over loopback with a
//! bearer token configured and none sent: exact statuses, content types and
//! JSON keys, `405` for other methods, nothing sensitive in the bodies, and
//! `/mcp` (and any other path) still `401`.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp_http::{HttpServe, initialize_body, post_headers, send};
use crate::support::dirs;

const TOKEN: &str = "h3alth-t0ken-0123456789abcdef-SECRET";

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn set<'a>(names: &[&'a str]) -> BTreeSet<&'a str> {
    names.iter().copied().collect()
}

/// GET `path` without `Authorization`: the status and the JSON body, after
/// checking the content type.
async fn get(addr: &str, method: &str, path: &str) -> (u16, http::HeaderMap, Value) {
    let reply = send(addr, method, path, &[], "").await;
    let (status, headers) = (reply.status, reply.headers.clone());
    assert_eq!(headers["content-type"], "application/json", "{path}");
    (status, headers, reply.json().await)
}

#[tokio::test(flavor = "multi_thread")]
async fn health_ready_and_info_answer_without_the_token_and_reveal_nothing_sensitive() {
    let (ws, state) = dirs();
    let token_file = state.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    // A token file must be private (docs/operations.md#identities).
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&token_file, private).unwrap();
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        None,
        &[
            "--http",
            "127.0.0.1:0",
            "--token-file",
            token_file.to_str().unwrap(),
            "--sandbox",
            "workspace-write",
        ],
    );
    let addr = serve.addr.clone();

    let (status, _, health) = get(&addr, "GET", "/health").await;
    assert_eq!(status, 200);
    assert_eq!(health, json!({"status": "ok"}));

    let (status, _, ready) = get(&addr, "GET", "/ready").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        ready,
        json!({"status": "ready", "checks": {
            "plugins_loaded": true,
            "state_dir_writable": true,
            "sandbox_probed": true,
            "accepting": true,
        }})
    );
    // The probe file is gone again.
    let leftovers: Vec<_> = std::fs::read_dir(state.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".ready-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let (status, _, info) = get(&addr, "GET", "/info").await;
    assert_eq!(status, 200);
    assert_eq!(
        keys(&info),
        set(&[
            "name",
            "version",
            "mcp_protocol_versions",
            "contract_versions",
            "sandbox"
        ])
    );
    assert_eq!(info["name"], "toolhost");
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        info["mcp_protocol_versions"],
        json!([
            "2026-07-28",
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05"
        ])
    );
    assert_eq!(info["contract_versions"], json!(["0.1.0", "0.2.0"]));
    let sandbox = &info["sandbox"];
    assert_eq!(
        keys(sandbox),
        set(&[
            "mode",
            "landlock_abi",
            "network_blocked",
            "unix_sockets_blocked",
            "git_read_only",
            "metadata_read_only",
            "setid_refused",
            "weakened",
            "kernel",
            "layers"
        ])
    );
    // Which layers are available (`sandbox_layers.rs`, as `toolhost doctor`),
    // booleans only.
    assert_eq!(
        keys(&sandbox["layers"]),
        set(&[
            "user_namespace",
            "mount_namespace",
            "landlock",
            "seccomp",
            "cgroup_v2",
            "network"
        ])
    );
    assert!(
        sandbox["layers"]
            .as_object()
            .unwrap()
            .values()
            .all(Value::is_boolean)
    );
    assert_eq!(
        keys(&sandbox["kernel"]),
        set(&[
            "landlock_abi",
            "seccomp",
            "user_namespaces",
            "mount_namespace",
            "private_shm",
            "private_pts",
            "read_only_root"
        ])
    );
    assert_eq!(sandbox["mode"], "workspace-write");

    // The same sandbox as the CLI reports (`toolhost tools`: "commands run
    // under: ..."), fact by fact.
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["tools", "--sandbox", "workspace-write", "--workspace"])
        .arg(ws.path())
        .arg("--state-dir")
        .arg(state.path())
        .env_remove("TOOLHOST_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("commands run under: "))
        .unwrap_or_else(|| panic!("no sandbox line in {stdout}"));
    let landlock = match sandbox["landlock_abi"].as_i64() {
        Some(abi) => format!("(landlock abi {abi},"),
        None => "(NO landlock,".to_string(),
    };
    assert!(
        line.starts_with(&format!("workspace-write {landlock}")),
        "{line}"
    );
    let flag = |key: &str, yes: &str, no: &str| {
        let want = if sandbox[key].as_bool().unwrap() {
            yes
        } else {
            no
        };
        assert!(line.contains(want), "{key}: {line} vs {sandbox}");
    };
    flag("network_blocked", "network blocked", "network allowed");
    flag("git_read_only", ".git read-only", ".git writable");
    flag(
        "unix_sockets_blocked",
        "unix sockets blocked",
        "unix sockets allowed",
    );
    assert_eq!(
        sandbox["weakened"].as_bool().unwrap(),
        line.contains("warning(s)"),
        "{line}"
    );

    // Nothing sensitive: no path of the state dir or workspace, no token.
    let state_real = std::fs::canonicalize(state.path()).unwrap();
    let ws_real = std::fs::canonicalize(ws.path()).unwrap();
    for body in [&health, &ready, &info] {
        let text = body.to_string();
        for secret in [
            TOKEN,
            state.path().to_str().unwrap(),
            state_real.to_str().unwrap(),
            ws.path().to_str().unwrap(),
            ws_real.to_str().unwrap(),
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(!text.contains("\"/"), "a path in {text}");
    }

    // Other methods: 405, `Allow: GET`, a JSON body.
    for path in ["/health", "/ready", "/info"] {
        let (status, headers, body) = get(&addr, "POST", path).await;
        assert_eq!(status, 405, "{path}");
        assert_eq!(headers["allow"], "GET", "{path}");
        assert_eq!(body, json!({"error": "method not allowed", "allow": "GET"}));
    }

    // The MCP endpoint and every other path still need the token.
    let mcp = send(
        &addr,
        "POST",
        "/mcp",
        &post_headers(&[]),
        initialize_body("2025-11-25"),
    )
    .await;
    assert_eq!(mcp.status, 401);
    assert_eq!(mcp.headers["www-authenticate"], "Bearer realm=\"toolhost\"");
    for path in ["/healthz", "/metrics", "/health/x"] {
        assert_eq!(
            send(&addr, "GET", path, &[], "").await.status,
            401,
            "{path}"
        );
    }
    drop(serve);
}
