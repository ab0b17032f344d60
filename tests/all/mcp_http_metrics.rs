//! `toolhost serve --http`'s `GET /metrics` (`host/toolhost/src/mcp/metrics.rs`,
//! `host/runtime/src/metrics.rs`) scraped over loopback and parsed by the
//! Prometheus project's Python client (`prometheus_client`'s OpenMetrics
//! parser, from `.venv`): the token is required, and the counters move by
//! exactly what the calls did.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_http::{HttpServe, open_session, request, send};
use crate::support::dirs;

const TOKEN: &str = "m3trics-t0ken-0123456789abcdef";
const AUTH: &str = "Bearer m3trics-t0ken-0123456789abcdef";

/// Every sample of `text` as `name{label="v",…}` → value, parsed by
/// `prometheus_client.openmetrics.parser.text_string_to_metric_families`
/// (labels sorted by name).
pub(crate) fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let python = crate::support::venv_python("the Prometheus parser (prometheus-client)");
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        out[f"{s.name}{{{labels}}}"] = s.value
print(json.dumps(out))
"#;
    let mut child = Command::new(&python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser refused the text:\n{}\n---\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `GET /metrics` with the token: status 200, the OpenMetrics content type,
/// the samples parsed.
pub(crate) async fn scrape(addr: &str, auth: Option<&str>) -> BTreeMap<String, f64> {
    let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
    let reply = send(addr, "GET", "/metrics", &headers, "").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    parse_metrics(&reply.text().await)
}

/// The value of `key` (0 when the series does not exist yet).
fn value(samples: &BTreeMap<String, f64>, key: &str) -> f64 {
    samples.get(key).copied().unwrap_or(0.0)
}

/// How much each of `keys` moved from `before` to `after`.
fn moved(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    keys: &[&str],
) -> Vec<(String, f64)> {
    keys.iter()
        .map(|k| (k.to_string(), value(after, k) - value(before, k)))
        .collect()
}

fn call_body(id: u64, command: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
           "params":{"name":"bash","arguments":{"command":command}}})
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_need_the_token_and_count_calls_decisions_sessions_and_output_exactly() {
    let (ws, state) = dirs();
    let token_file = state.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    // A token file must be private (docs/operations.md#identities).
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&token_file, private).unwrap();
    let policy = state.path().join("policy.toml");
    std::fs::write(&policy, "default = \"allow\"\ndeny = [\"rm -rf *\"]\n").unwrap();
    let serve = HttpServe::start(
        ws.path(),
        state.path(),
        Some(policy.to_str().unwrap()),
        &[
            "--http",
            "127.0.0.1:0",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    );
    let addr = serve.addr.clone();

    // No token, a wrong one: 401, and nothing else is said.
    for headers in [vec![], vec![("authorization", "Bearer wrong")]] {
        let reply = send(&addr, "GET", "/metrics", &headers, "").await;
        assert_eq!(reply.status, 401);
        assert!(!reply.text().await.contains("toolhost_"));
    }
    let reply = send(&addr, "POST", "/metrics", &[("authorization", AUTH)], "").await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.headers["allow"], "GET");

    let before = scrape(&addr, Some(AUTH)).await;
    // Every tool's call series exist from the start, at zero.
    for outcome in ["ok", "error", "failed", "cancelled", "usage"] {
        let key = format!(
            r#"toolhost_tool_calls_total{{outcome="{outcome}",plugin="bash",tool="bash"}}"#
        );
        assert_eq!(before.get(&key), Some(&0.0), "{key}: {before:#?}");
    }
    assert_eq!(value(&before, "toolhost_http_sessions{}"), 0.0);

    let auth = [("authorization", AUTH)];
    let session = open_session(&addr, &auth).await;
    // Three calls: two succeed, one exits 1 (a tool error); then one the
    // policy denies.
    let calls = [
        (1, "printf hi", false),
        (2, "printf abcd", false),
        (3, "false", true),
        (4, "rm -rf scratch", true),
    ];
    for (id, command, is_error) in calls {
        let response = request(&addr, &session, &json!(id), &call_body(id, command), &auth).await;
        assert_eq!(
            response["result"]["isError"],
            json!(is_error),
            "{command}: {response}"
        );
    }
    let after = scrape(&addr, Some(AUTH)).await;
    let keys = [
        r#"toolhost_tool_calls_total{outcome="ok",plugin="bash",tool="bash"}"#,
        r#"toolhost_tool_calls_total{outcome="error",plugin="bash",tool="bash"}"#,
        r#"toolhost_tool_calls_total{outcome="failed",plugin="bash",tool="bash"}"#,
        r#"toolhost_tool_call_duration_seconds_count{tool="bash"}"#,
        r#"toolhost_permission_decisions_total{outcome="allow",source="policy"}"#,
        r#"toolhost_permission_decisions_total{outcome="deny",source="policy"}"#,
        r#"toolhost_denials_total{kind="policy"}"#,
        r#"toolhost_process_sessions_finished_total{reason="exited"}"#,
        "toolhost_process_output_bytes_total{}",
    ];
    assert_eq!(
        moved(&before, &after, &keys),
        [2.0, 2.0, 0.0, 4.0, 3.0, 1.0, 1.0, 3.0, 6.0]
            .iter()
            .zip(keys)
            .map(|(v, k)| (k.to_string(), *v))
            .collect::<Vec<_>>(),
        "{after:#?}"
    );
    assert_eq!(value(&after, "toolhost_process_sessions_running{}"), 0.0);
    assert_eq!(value(&after, "toolhost_http_sessions{}"), 1.0);
    // Each call's response came on an SSE stream of its own (plus the
    // initialize's), and each has ended.
    assert_eq!(
        value(&after, "toolhost_http_streams_total{}")
            - value(&before, "toolhost_http_streams_total{}"),
        5.0
    );
    assert_eq!(value(&after, "toolhost_http_open_streams{}"), 0.0);
    assert!(value(&after, r#"toolhost_http_responses_total{code="401"}"#) >= 2.0);
    // Every call's latency is in a bucket; the histogram's buckets add up.
    assert_eq!(
        value(
            &after,
            r#"toolhost_tool_call_duration_seconds_bucket{le="+Inf",tool="bash"}"#
        ),
        4.0
    );

    // The pool settles: no slot held by a call; two held by instances
    // waiting, the built-in bash's next one made ahead of its call and the
    // policy plugin's kept between decisions.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = scrape(&addr, Some(AUTH)).await;
        let (in_use, idle) = (
            value(&now, "toolhost_instance_pool_in_use{}"),
            value(&now, "toolhost_instance_pool_idle{}"),
        );
        if (in_use, idle) == (0.0, 2.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the pool did not settle: in use {in_use}, idle {idle}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
