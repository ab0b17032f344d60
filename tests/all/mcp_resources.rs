//! Host work a plugin triggers stays inside that plugin's budget, and each
//! plugin has its own namespace of resources, templates and prompts, through
//! the real binary with the contract 0.2.0 test plugin (`tests/plugins/server`,
//! its `SERVER_OFFERS` modes): a plugin whose resource-updated notices would
//! make the host match long URIs against 256 pathological templates does not
//! stall the server for other requests; a second plugin cannot take reads of
//! the first one's URIs, and a read that returns another plugin's URI fails.
//! The rules: `host/runtime/src/catalog.rs`, `contract/v0_2_0/client.rs`,
//! docs/limits.md.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_test_fixtures::SERVER;
use toolhost_test_support::{StdioClient, result_text};

use crate::support::{describe, dirs, serve, toolhost};

/// The longest a `ping` may wait while the plugin's calls run.
const PING_LIMIT: Duration = Duration::from_secs(5);

/// Writes the server plugin as `id` with `SERVER_OFFERS` = `offers`.
fn plugin(dir: &Path, id: &str, offers: &str) -> PathBuf {
    let wasm = dir.join(format!("{id}.wasm"));
    std::fs::write(&wasm, SERVER).unwrap();
    std::fs::write(
        dir.join(format!("{id}.toml")),
        format!("id = \"{id}\"\ncontract = \"0.2.0\"\n\n[env]\nSERVER_OFFERS = \"{offers}\"\n"),
    )
    .unwrap();
    wasm
}

/// Two calls whose 1,000 resource-updated notices each name a 3 KB URI that
/// all 256 of the plugin's templates match: before the host bounded this
/// work, each notice cost the host seconds of matching on a shared worker
/// and the server answered nothing else for tens of seconds. Now every
/// `ping` sent meanwhile is answered within 5 s, and the calls end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_updates_against_hostile_templates_do_not_stall_the_server() {
    let (ws, state) = dirs();
    let dir = tempfile::tempdir().unwrap();
    let wasm = plugin(dir.path(), "server", "hostile");
    let mut cmd = serve(ws.path(), state.path());
    cmd.arg("--plugin").arg(&wasm);
    let client = Arc::new(StdioClient::spawn(cmd).unwrap());
    client.initialize("2025-11-25").await.unwrap();
    let templates = client
        .request("resources/templates/list", json!({}))
        .await
        .unwrap();
    let listed = templates["result"]["resourceTemplates"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(listed, 256, "{templates}");

    let t0 = Instant::now();
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .call_tool("updates", json!({"count": 1000, "len": 3000}))
                    .await
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    let mut pings = 0;
    while calls.iter().any(|c| !c.is_finished()) {
        let t = Instant::now();
        let pong = tokio::time::timeout(PING_LIMIT, client.request("ping", json!({}))).await;
        let took = t.elapsed();
        assert!(
            pong.is_ok(),
            "no answer to ping within {PING_LIMIT:?} while the plugin's calls ran ({:?} in)",
            t0.elapsed()
        );
        slowest = slowest.max(took);
        pings += 1;
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the calls did not end"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for c in calls {
        let r = c.await.unwrap().unwrap();
        assert_eq!(result_text(&r), "sent 1000", "{r}");
    }
    eprintln!(
        "two calls of 1000 notices: {:?}; {pings} pings, the slowest {slowest:?}",
        t0.elapsed()
    );
}

/// Sends `method` with `params` and returns the whole JSON-RPC response.
async fn rpc(client: &StdioClient, method: &str, params: Value) -> Value {
    client.request(method, params).await.unwrap()
}

/// The first plugin keeps its URIs: a second plugin's resource that the
/// first one's template covers, and its template that overlaps the first
/// one's, are refused at load with a warning naming the owner and never
/// served; a read whose contents name another plugin's URI fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_plugin_cannot_take_reads_of_an_earlier_plugins_uris() {
    let (ws, state) = dirs();
    let dir = tempfile::tempdir().unwrap();
    let first = plugin(dir.path(), "server", "");
    let second = plugin(dir.path(), "server2", "overlap");
    let (first, second) = (first.to_str().unwrap(), second.to_str().unwrap());

    // The load-time warnings.
    let out = toolhost(
        ws.path(),
        state.path(),
        &["tools", "--plugin", first, "--plugin", second],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for warning in [
        "resource refused: plugin `server`'s resource template `test://template/{id}/data` \
         already covers this URI",
        "resource template refused: it overlaps plugin `server`'s resource template \
         `test://template/{id}/data` (some URI matches both)",
    ] {
        assert!(stderr.contains(warning), "{warning:?} not in {stderr}");
    }

    let mut cmd = serve(ws.path(), state.path());
    cmd.arg("--plugin").arg(first).arg("--plugin").arg(second);
    let client = StdioClient::spawn(cmd).unwrap();
    client.initialize("2025-11-25").await.unwrap();
    let templates = rpc(&client, "resources/templates/list", json!({})).await;
    let texts: Vec<&str> = templates["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["test://template/{id}/data", "other://{x}"]);
    let resources = rpc(&client, "resources/list", json!({})).await;
    let uris: Vec<&str> = resources["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["test://static"]);

    // Reads of the first plugin's URIs go to it: the second's would answer
    // "overlap has it".
    let read = |uri: &str| json!({"uri": uri});
    let r = rpc(&client, "resources/read", read("test://template/1/data")).await;
    assert_eq!(
        r["result"]["contents"],
        json!([{"uri": "test://template/1/data", "mimeType": "application/octet-stream", "blob": "MQ=="}]),
        "{r}"
    );
    // A URI only the refused template would match is nobody's.
    let r = rpc(&client, "resources/read", read("test://other/7/data")).await;
    assert_eq!(r["error"]["code"], -32002, "{r}");
    // The second plugin's own template still serves it ...
    let r = rpc(&client, "resources/read", read("other://mine")).await;
    assert_eq!(r["result"]["contents"][0]["text"], "other", "{r}");
    // ... but contents it returns for another plugin's URI fail the read.
    let r = rpc(&client, "resources/read", read("other://steal")).await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(
        r["error"]["message"],
        "plugin `server2` returned contents for `test://template/1/data`, a URI it does not \
         offer",
        "{r}"
    );
    let status = client.close().await.unwrap();
    assert!(status.success(), "{status:?}");
}
