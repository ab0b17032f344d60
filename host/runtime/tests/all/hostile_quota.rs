//! No plugin can starve the host or the others. Two
//! copies of the hostile plugin (`a` and `b`, `tests/plugins/hostile`) next to
//! the built-in bash: per-plugin quotas of sessions and calls with headroom
//! for bash, bounded memory for finished sessions, stdin and the host-session
//! log, capped guest input to `start`, and wall-limit-cancelled starts that
//! leave no process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use toolhost_process::Caller;
use toolhost_runtime::{EVENT_FIELD_MAX, HostSessionLog, OMITTED_KEY};
use toolhost_runtime::{Host, HostConfig, ToolCallError, ToolResult};
use toolhost_test_fixtures::HOSTILE;

use crate::support::{ALLOW_ALL, dirs, use_cache};

/// A generous bound for anything that must not hang (not a timing assertion).
const HANG_GUARD: Duration = Duration::from_secs(10);

/// A host with the hostile plugin loaded twice, as `a` (manifest `a_extra`
/// added) and `b`, both granted every command, under an allow-all policy, with
/// a persisted host-session log.
struct Env {
    host: Host,
    ws: tempfile::TempDir,
    _plugins: tempfile::TempDir,
    _state: tempfile::TempDir,
}

async fn env(a_extra: &str) -> Env {
    let plugins = tempfile::tempdir().unwrap();
    for (id, extra) in [("a", a_extra), ("b", "")] {
        std::fs::write(plugins.path().join(format!("{id}.wasm")), HOSTILE).unwrap();
        std::fs::write(
            plugins.path().join(format!("{id}.toml")),
            format!(
                "id = \"{id}\"\ncontract = \"0.1.0\"\nexec = [\"**\"]\nmemory = \"128MiB\"\n{extra}"
            ),
        )
        .unwrap();
    }
    let (ws, state) = dirs();
    use_cache(state.path());
    let log = HostSessionLog::open(state.path(), None).unwrap();
    let config = HostConfig {
        plugins: vec![plugins.path().join("a.wasm"), plugins.path().join("b.wasm")],
        policy_rules: ALLOW_ALL.into(),
        events: Some(Arc::new(log)),
        ..HostConfig::new(ws.path(), state.path())
    };
    let host = Host::new(config).await.expect("host with plugins a and b");
    Env {
        host,
        ws,
        _plugins: plugins,
        _state: state,
    }
}

/// The name the host offers `plugin`'s tool `tool` under.
fn tool_name(host: &Host, plugin: &str, tool: &str) -> String {
    host.tools()
        .iter()
        .find(|t| t.plugin.id() == plugin && t.plugin_tool == tool)
        .unwrap_or_else(|| panic!("{plugin} offers no tool {tool}"))
        .name
        .clone()
}

async fn call(
    host: &Host,
    plugin: &str,
    tool: &str,
    args: serde_json::Value,
) -> Result<ToolResult, ToolCallError> {
    let name = tool_name(host, plugin, tool);
    host.call_tool(&name, args).await
}

/// The built-in bash answers a real command within [`HANG_GUARD`].
async fn assert_bash_answers(host: &Host) {
    let out = tokio::time::timeout(
        HANG_GUARD,
        host.call_tool("bash", serde_json::json!({"command": "echo bash-ok"})),
    )
    .await
    .expect("bash answers")
    .expect("bash call");
    assert_eq!(out.text().trim_end(), "bash-ok", "{out:?}");
    assert!(!out.is_error);
}

/// `started N` from the hostile `starts` tool.
fn started(out: &ToolResult) -> u64 {
    out.text()
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("started "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output: {}", out.text()))
}

/// Waits until `caller` has no running session.
async fn wait_idle(host: &Host, caller: &Caller) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while host.sessions().usage(caller).running > 0 {
        assert!(Instant::now() < deadline, "sessions still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_plugins_sessions_hit_its_own_quota_while_others_and_bash_still_start() {
    let env = env("").await;
    let out = call(
        &env.host,
        "a",
        "starts",
        serde_json::json!({"count": 70, "command": "sleep 30"}),
    )
    .await
    .unwrap();
    assert_eq!(started(&out), 16, "{}", out.text());
    assert!(out.is_error);
    assert!(
        out.text().contains("ResourceLimit")
            && out.text().contains("plugin `a` has 16 running sessions")
            && out.text().contains("max_sessions_per_plugin")
            && out.text().contains("default 16"),
        "the refusal names the quota: {}",
        out.text()
    );
    let a = Caller::Plugin("a".into());
    assert_eq!(env.host.sessions().usage(&a).running, 16);
    // Plugin b still starts, and so does the built-in bash.
    let out = call(
        &env.host,
        "b",
        "starts",
        serde_json::json!({"count": 2, "command": "sleep 30"}),
    )
    .await
    .unwrap();
    assert_eq!(started(&out), 2, "{}", out.text());
    assert!(!out.is_error, "{}", out.text());
    assert_bash_answers(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_blocking_calls_of_one_plugin_do_not_starve_the_others() {
    let env = Arc::new(env("").await);
    let name = tool_name(&env.host, "a", "sleep");
    // More than the whole instance pool (128) of calls blocked in a host call.
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..140 {
        let env = env.clone();
        let name = name.clone();
        calls.spawn(async move {
            env.host
                .call_tool(&name, serde_json::json!({"ms": 3000}))
                .await
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let hello = tokio::time::timeout(
        HANG_GUARD,
        call(&env.host, "b", "hello", serde_json::json!({})),
    )
    .await
    .expect("b answers")
    .expect("b's hello");
    assert_eq!(hello.text(), "hello");
    assert_bash_answers(&env.host).await;
    let (mut slept, mut refused) = (0, 0);
    while let Some(result) = calls.join_next().await {
        match result.unwrap() {
            Ok(out) if out.text() == "slept" => slept += 1,
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("plugin `a` has 16 calls in flight")
                        && e.contains("max_calls_per_plugin")
                        && e.contains("default 16"),
                    "the refusal names the quota: {e}"
                );
                refused += 1;
            }
            other => panic!("unexpected: {other:?}"),
        }
    }
    assert!(slept <= 16, "{slept} calls ran at once");
    assert!(slept >= 1);
    assert_eq!(slept + refused, 140);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_sessions_beyond_the_bound_are_evicted_and_logged() {
    let env = env("").await;
    let a = Caller::Plugin("a".into());
    let mb = 1 << 20;
    for _ in 0..6 {
        let out = call(
            &env.host,
            "a",
            "starts",
            serde_json::json!({"count": 16, "command": format!("head -c {mb} /dev/zero")}),
        )
        .await
        .unwrap();
        assert_eq!(started(&out), 16, "{}", out.text());
        wait_idle(&env.host, &a).await;
    }
    let usage = env.host.sessions().usage(&a);
    // 96 sessions of 1 MiB each: at most 64 finished ones are kept, each small.
    assert!(usage.finished <= 64, "{usage:?}");
    assert!(usage.evicted >= 32, "{usage:?}");
    assert!(usage.finished_bytes <= 16 << 20, "{usage:?}");
    assert!(
        usage.finished_bytes / usage.finished.max(1)
            <= toolhost_process::FINISHED_OUTPUT_BYTES + (64 << 10),
        "{usage:?}"
    );
    // What is kept still says how much output there was, and the bytes stay readable.
    let kept = env.host.sessions().list(&a);
    assert_eq!(kept.len(), usage.finished);
    let last = kept.last().unwrap();
    assert_eq!(last.output_bytes, mb as u64);
    let range = env
        .host
        .sessions()
        .read_output(&a, &last.id, 0, 1024)
        .await
        .unwrap();
    assert_eq!(range.data.len(), 1024);
    // Every eviction is in the host-session log, naming the bound.
    let (mut cursor, mut evictions) = (0, 0u64);
    loop {
        let replay = env.host.events().replay(cursor, 1000);
        evictions += replay
            .events
            .iter()
            .filter(|e| {
                e.json().contains("\"kind\":\"omitted\"")
                    && e.json().contains("max_finished_per_plugin")
            })
            .count() as u64;
        cursor = replay.events.last().map_or(cursor, |e| e.seq);
        if replay.history_complete {
            break;
        }
    }
    assert_eq!(evictions, usage.evicted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_over_the_cap_is_refused_naming_the_limit() {
    let env = env("").await;
    let out = call(
        &env.host,
        "a",
        "starts",
        serde_json::json!({"stdin_mib": 9, "command": "cat >/dev/null"}),
    )
    .await
    .unwrap();
    assert_eq!(started(&out), 0, "{}", out.text());
    assert!(
        out.text().contains("MAX_STDIN_BYTES") && out.text().contains("8388608"),
        "{}",
        out.text()
    );
    // Within the cap the bytes arrive whole.
    let out = call(
        &env.host,
        "a",
        "starts",
        serde_json::json!({"stdin_mib": 8, "command": "wc -c > stdin-count"}),
    )
    .await
    .unwrap();
    assert_eq!(started(&out), 1, "{}", out.text());
    wait_idle(&env.host, &Caller::Plugin("a".into())).await;
    let count = std::fs::read_to_string(env.ws.path().join("stdin-count")).unwrap();
    assert_eq!(count.trim(), (8 << 20).to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_command_is_refused_quickly_while_bash_answers() {
    let env = Arc::new(env("").await);
    let start = Instant::now();
    let hostile = {
        let env = env.clone();
        tokio::spawn(async move {
            call(
                &env.host,
                "a",
                "starts",
                serde_json::json!({"command_mib": 20}),
            )
            .await
        })
    };
    assert_bash_answers(&env.host).await;
    let out = tokio::time::timeout(HANG_GUARD, hostile)
        .await
        .expect("the refusal comes quickly")
        .unwrap()
        .unwrap();
    assert!(start.elapsed() < HANG_GUARD);
    assert_eq!(started(&out), 0, "{}", out.text());
    assert!(
        out.text().contains("InvalidRequest")
            && out.text().contains("MAX_COMMAND_BYTES")
            && out.text().contains("1048576"),
        "{}",
        out.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_result_is_bounded_in_the_host_session_log() {
    let env = env("").await;
    for _ in 0..3 {
        let out = call(
            &env.host,
            "a",
            "huge_structured",
            serde_json::json!({"mib": 15}),
        )
        .await
        .unwrap();
        // The caller still gets the whole result.
        let data = out.structured.as_ref().unwrap()["data"].as_str().unwrap();
        assert_eq!(data.len(), 15 << 20);
    }
    let path = env.host.events().path().unwrap().to_path_buf();
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len < 1 << 20, "the log holds {len} bytes");
    let replay = env.host.events().replay(0, 1000);
    let settled: Vec<_> = replay
        .events
        .iter()
        .filter(|e| e.json().contains("\"kind\":\"tool_call_settled\""))
        .collect();
    assert_eq!(settled.len(), 3);
    for e in settled {
        assert!(e.json().len() < 2 * EVENT_FIELD_MAX, "{}", e.json().len());
        let event: serde_json::Value = serde_json::from_str(e.json()).unwrap();
        let omitted = &event["structured"][OMITTED_KEY];
        assert_eq!(omitted["bytes"], (15 << 20) + 11, "{omitted}");
        assert!(
            omitted["head"]
                .as_str()
                .unwrap()
                .starts_with("{\"data\":\"xxx")
        );
    }
}

/// True while `pid` is a live (not zombie) process named `sh`, `bash`, `dash`
/// or `sleep` (so a reused pid is not mistaken for a survivor).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let comm = stat
        .split_once('(')
        .and_then(|(_, rest)| rest.rsplit_once(')'))
        .map(|(comm, rest)| (comm.to_string(), rest.trim_start().chars().next()));
    matches!(comm, Some((name, Some(state)))
        if state != 'Z' && ["sh", "bash", "dash", "sleep"].contains(&name.as_str()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_cancelled_by_the_wall_limit_leave_no_process() {
    let env = env("wall = \"400ms\"\n").await;
    let pids = env.ws.path().join("pids");
    for _ in 0..10 {
        // Starts in a loop, each shell forking a child, until the wall limit
        // cancels the call, most likely inside a `start`.
        let result = call(
            &env.host,
            "a",
            "starts",
            serde_json::json!({
                "count": 100_000,
                "foreground": true,
                "timeout_ms": 40,
                "command": "echo $$ >> pids; sleep 30 & echo $! >> pids; wait",
            }),
        )
        .await;
        assert!(
            matches!(&result, Err(ToolCallError::Plugin(e)) if e.to_string().contains("wall time limit")),
            "{result:?}"
        );
    }
    let Env { host, ws, .. } = env;
    drop(host);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let text = std::fs::read_to_string(&pids).unwrap_or_default();
    let all: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert!(!all.is_empty(), "no start ran");
    let survivors: Vec<u32> = all.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        survivors.is_empty(),
        "{} of {} processes survived: {survivors:?}",
        survivors.len(),
        all.len()
    );
    drop(ws);
}

/// The instance pool is split in shares (`toolhost_runtime::PoolShares`):
/// more concurrent built-in `bash` calls than its share (3 of 8 instances here)
/// queue for a slot instead of failing to instantiate, each starting a process
/// (so each also needs a policy decision from the policy's share). Before the
/// shares, the ninth instance failed with "maximum concurrent limit of 8".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_calls_beyond_their_share_of_the_pool_wait_instead_of_failing() {
    let (ws, state) = dirs();
    use_cache(state.path());
    let mut config = HostConfig {
        policy_rules: ALLOW_ALL.into(),
        ..HostConfig::new(ws.path(), state.path())
    };
    config.engine.max_instances = 8;
    let shares = config.engine.shares();
    assert_eq!(
        (
            shares.policy_builtin,
            shares.policy_third_party,
            shares.builtin,
            shares.third_party
        ),
        (1, 1, 3, 3)
    );
    let host = Arc::new(Host::new(config).await.expect("host"));
    let calls: Vec<_> = (0..12)
        .map(|i| {
            let host = host.clone();
            tokio::spawn(async move {
                let command = format!("sleep 0.2; echo call-{i}");
                host.call_tool("bash", serde_json::json!({ "command": command }))
                    .await
            })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let out = tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .expect("the call ends")
            .unwrap()
            .unwrap_or_else(|e| panic!("call {i} failed: {e}"));
        assert!(!out.is_error, "call {i}: {}", out.text());
        assert_eq!(out.text().trim_end(), format!("call-{i}"));
    }
}
