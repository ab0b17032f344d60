//! The contract boundary fuzzed through the real binary: `toolhost serve`
//! runs the fuzz plugins (`tests/plugins/fuzz`, one component per contract
//! version), whose tool makes, from a seed, random calls of every host
//! function and resource method of its contract with edge arguments, in
//! random order, while the test's MCP client declares elicitation and
//! sampling and answers every request the host sends it with an edge answer
//! (declined, cancelled, malformed, huge, an error). Over many seeds the
//! host must not panic or hang (each call ends within its wall limit, never
//! at it), every answer the guest sees must be a WIT
//! `result` the contract allows (the plugin reports any other as an error),
//! a guest fault on purpose (a stale, forged or parent-dropped handle) must
//! trap only its own call, and once idle the host must hold no process, no
//! descriptor and no memory more than before.
//!
//! It runs for [`DEFAULT_SECS`] in the suite; `TOOLHOST_FUZZ_SECS=N` runs
//! it for N seconds, and `TOOLHOST_FUZZ_SEED=S` starts at seed S (a failure
//! names its seed and contract version).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_test_fixtures::{FUZZ_V0_1_0, FUZZ_V0_2_0};
use toolhost_test_support::{StdioClient, is_error, result_text};

use crate::support::{allow_all_policy, dirs};

/// Seconds of seeds in the suite.
const DEFAULT_SECS: u64 = 15;
/// Random steps per call.
const STEPS: u64 = 150;
/// The fuzz plugins' wall-time limit per call (their manifests).
const WALL: Duration = Duration::from_secs(20);
/// How long the host may take to end what a call left, once idle.
const SETTLE: Duration = Duration::from_secs(30);
/// Most the host's resident memory may grow over the run: one call's linear
/// memory limit (64 MiB, the default) and its engine's caches.
const RSS_GROWTH_MAX: u64 = 160 << 20;

/// The plugins: (tool, component, manifest).
const PLUGINS: [(&str, &[u8], &str); 2] = [
    (
        "fuzz_0_1_0",
        FUZZ_V0_1_0,
        "id = \"fuzz1\"\ncontract = \"0.1.0\"\nexec = [\"**\"]\nwall = \"20s\"\n",
    ),
    (
        "fuzz_0_2_0",
        FUZZ_V0_2_0,
        "id = \"fuzz2\"\ncontract = \"0.2.0\"\nexec = [\"**\"]\nwall = \"20s\"\n\
         elicitation = true\nsampling = true\n",
    ),
];

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Open descriptors of `pid`.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// `VmRSS` of `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Every live process below `root` (children, their children, ...).
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut parent = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let mut fields = rest.split(' ');
        let state = fields.next().unwrap_or("");
        if state == "Z" || state == "X" {
            continue;
        }
        if let Some(ppid) = fields.next().and_then(|p| p.parse::<u32>().ok()) {
            parent.insert(
                pid,
                (ppid, stat[..stat.rfind(')').unwrap() + 1].to_string()),
            );
        }
    }
    let below = |mut pid: u32| {
        while let Some((ppid, _)) = parent.get(&pid) {
            if *ppid == root {
                return true;
            }
            pid = *ppid;
        }
        false
    };
    parent
        .iter()
        .filter(|(pid, _)| below(**pid))
        .map(|(pid, (_, what))| (*pid, what.clone()))
        .collect()
}

/// The cgroups the host `pid` made for its sessions: the directories below
/// each `toolhost-<pid>` in the cgroup file systems (none in subreaper mode).
fn cgroups(pid: u32) -> usize {
    fn walk(dir: &Path, depth: usize, name: &str, found: &mut usize, inside: bool) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let here = inside || e.file_name() == name;
            if inside {
                *found += 1;
            }
            if here || depth > 0 {
                walk(&e.path(), depth.saturating_sub(1), name, found, here);
            }
        }
    }
    let mut found = 0;
    walk(
        Path::new("/sys/fs/cgroup"),
        3,
        &format!("toolhost-{pid}"),
        &mut found,
        false,
    );
    found
}

/// Whether `pid` is running (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .is_some_and(|i| !s[i + 1..].trim_start().starts_with('Z'))
    })
}

/// Answers every request the host sends the client (`elicitation/create`,
/// `sampling/createMessage`, anything else) with the next of a rotation of
/// answers, valid and not: accepted, declined, cancelled, an unknown action,
/// content that is no object or is huge, a malformed or huge completion, a
/// JSON-RPC error.
async fn answer(client: std::sync::Arc<StdioClient>, answered: std::sync::Arc<AtomicUsize>) {
    // Under the server's 4 MiB line limit (a longer line is refused unread,
    // and the request it answered then waits for its call's wall limit).
    let huge = "h".repeat(1 << 20);
    let elicit = [
        json!({"action": "accept", "content": {"a": "x"}}),
        json!({"action": "accept", "content": {"a": huge}}),
        json!({"action": "accept", "content": [1, 2]}),
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        json!({"action": "bogus\u{0}"}),
        json!({}),
    ];
    let sample = [
        json!({"role": "assistant", "content": {"type": "text", "text": "hi"},
               "model": "m", "stopReason": "endTurn"}),
        json!({"role": "assistant", "content": {"type": "image", "data": "%%%",
               "mimeType": "image/png"}, "model": "m"}),
        json!({"role": "user", "content": {"type": "text", "text": huge}, "model": "m"}),
        json!({"role": "system", "content": 7}),
        json!(null),
    ];
    let mut n = 0usize;
    loop {
        let message = match client.next_message().await {
            Ok(m) => m,
            Err(e) if e.to_string().contains("closed") => return,
            Err(_) => continue,
        };
        let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) else {
            continue;
        };
        n += 1;
        answered.fetch_add(1, Ordering::Relaxed);
        let reply = match (method, n % 8) {
            (_, 7) => json!({"jsonrpc": "2.0", "id": id,
                             "error": {"code": -32000, "message": "refused by the fuzz client"}}),
            ("elicitation/create", _) => {
                json!({"jsonrpc": "2.0", "id": id, "result": elicit[n % elicit.len()]})
            }
            ("sampling/createMessage", _) => {
                json!({"jsonrpc": "2.0", "id": id, "result": sample[n % sample.len()]})
            }
            _ => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        };
        if client.send(reply.to_string()).await.is_err() {
            return;
        }
    }
}

/// Waits until `done` holds, for at most [`SETTLE`]; whether it did.
async fn settled(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + SETTLE;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

/// Writes the fuzz plugins and their manifests into `dir`; `--plugin` args.
fn plugin_args(dir: &Path) -> Vec<String> {
    let mut args = Vec::new();
    for (tool, wasm, manifest) in PLUGINS {
        let path = dir.join(format!("{tool}.wasm"));
        std::fs::write(&path, wasm).unwrap();
        std::fs::write(path.with_extension("toml"), manifest).unwrap();
        args.push("--plugin".to_string());
        args.push(path.to_str().unwrap().to_string());
    }
    args
}

/// One fuzz call: its result, or a panic naming the seed if it hangs or the
/// host answers with a protocol error.
async fn fuzz(client: &StdioClient, tool: &str, seed: u64, steps: u64, fault: bool) -> Value {
    let args = json!({"seed": seed, "steps": steps, "fault": fault});
    let call = client.call_tool(tool, args);
    match tokio::time::timeout(WALL + Duration::from_secs(15), call).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => panic!("{tool} seed {seed}: {e}"),
        Err(_) => panic!("{tool} seed {seed} (fault {fault}): no answer within {WALL:?} and 15 s"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_calls_of_every_host_function_leave_the_host_whole() {
    let secs = env_u64("TOOLHOST_FUZZ_SECS").unwrap_or(DEFAULT_SECS);
    let first_seed = env_u64("TOOLHOST_FUZZ_SEED").unwrap_or(1);
    let (ws, state) = dirs();
    let plugins = tempfile::tempdir().unwrap();
    // serve under `sh -c 'exec "$@" 2>FILE'`: the same process, its stderr
    // kept, where a panic (in any thread) would show.
    let stderr = plugins.path().join("serve.stderr");
    let mut cmd = tokio::process::Command::new("sh");
    cmd.args(["-c", r#"f=$1; shift; exec "$@" 2>"$f""#, "sh"])
        .arg(&stderr)
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--workspace"])
        .arg(ws.path())
        .arg("--state-dir")
        .arg(state.path())
        .arg("--policy")
        .arg(allow_all_policy(plugins.path()))
        .args(plugin_args(plugins.path()))
        .env_remove("TOOLHOST_LOG");
    let client = std::sync::Arc::new(StdioClient::spawn(cmd).unwrap());
    // A client that declares elicitation and sampling, so the 0.2.0 plugin's
    // requests that pass the host's checks reach it, and the host's
    // permission asks too; `answer` gives each an edge answer.
    let init = client
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18",
                   "capabilities": {"elicitation": {}, "sampling": {}},
                   "clientInfo": {"name": "fuzz", "version": "1"}}),
        )
        .await
        .unwrap();
    assert!(init["result"].is_object(), "{init}");
    client
        .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await
        .unwrap();
    let answered = std::sync::Arc::new(AtomicUsize::new(0));
    let answerer = tokio::spawn(answer(client.clone(), answered.clone()));
    let pid = client.pid().unwrap();

    // Warm up (compile, the first sessions), then take the baseline.
    for (tool, _, _) in PLUGINS {
        let r = fuzz(&client, tool, 0, 20, false).await;
        assert!(!is_error(&r), "{tool} warm-up: {r}");
    }
    assert!(
        settled(|| descendants(pid).is_empty()).await,
        "{:?}",
        descendants(pid)
    );
    let (fds_before, rss_before, cgroups_before) = (fds(pid), rss(pid), cgroups(pid));

    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut seed = first_seed;
    let mut calls = 0;
    let mut faults = 0;
    let mut host_calls = 0u64;
    let mut refused = 0;
    while Instant::now() < deadline || calls < 4 {
        let (tool, _, _) = PLUGINS[(seed % 2) as usize];
        // One call in five ends with a guest fault on purpose.
        let fault = seed % 5 == 3;
        let r = fuzz(&client, tool, seed, STEPS, fault).await;
        let text = result_text(&r).to_string();
        assert!(alive(pid), "the host died on {tool} seed {seed}: {r}");
        if fault {
            faults += 1;
            assert!(
                is_error(&r),
                "{tool} seed {seed}: a bad handle did not trap: {r}"
            );
            assert!(
                text.contains("trap") || text.contains("wasm"),
                "{tool} seed {seed}: {r}"
            );
        } else if is_error(&r) {
            refused += 1;
            // A plugin-reported violation (lines after the summary), or a
            // result the host refused (its limits): never a trap.
            assert!(
                text.contains("limit") && !text.contains("trap") && !text.contains("wall time"),
                "{tool} seed {seed}: {text}"
            );
        } else {
            host_calls += text
                .split_whitespace()
                .nth(2)
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("{tool} seed {seed}: {text}"));
        }
        calls += 1;
        seed += 1;
    }
    // A last clean call of each plugin ends what the faulted calls left.
    for (tool, _, _) in PLUGINS {
        let r = fuzz(&client, tool, seed, 1, false).await;
        assert!(!is_error(&r), "{tool} clean-up: {r}");
        seed += 1;
    }
    eprintln!(
        "fuzz: {} client requests answered, {} session cgroups at the end of the run",
        answered.load(Ordering::Relaxed),
        cgroups(pid)
    );
    eprintln!(
        "fuzz: {calls} calls (seeds {first_seed}..{seed}, {faults} faults, {refused} results \
         refused), {host_calls} host calls"
    );

    assert!(
        settled(|| descendants(pid).is_empty()).await,
        "processes left after the fuzz: {:?}",
        descendants(pid)
    );
    assert!(
        settled(|| cgroups(pid) <= cgroups_before).await,
        "cgroups: {cgroups_before} before, {} after",
        cgroups(pid)
    );
    assert!(
        settled(|| fds(pid) <= fds_before).await,
        "descriptors: {fds_before} before, {} after:\n{:?}",
        fds(pid),
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
            .map(|e| std::fs::read_link(e.path()).unwrap_or_default())
            .collect::<Vec<_>>()
    );
    let rss_after = rss(pid);
    assert!(
        rss_after <= rss_before + RSS_GROWTH_MAX,
        "resident memory grew from {rss_before} to {rss_after} bytes"
    );
    answerer.abort();
    let _ = answerer.await;
    let client = std::sync::Arc::try_unwrap(client)
        .ok()
        .expect("the answerer let go of the client");
    let status = client.close().await.unwrap();
    let stderr = std::fs::read_to_string(&stderr).unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "the host panicked:\n{stderr}");

    // The log holds every call, started once and ended once, seqs contiguous.
    let events = toolhost_test_support::host_log::events(state.path()).unwrap();
    let mut open = std::collections::HashMap::new();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(i as u64 + 1), "{e}");
        let id = e["tool_call_id"].as_str().unwrap_or_default().to_string();
        match e["kind"].as_str().unwrap() {
            "tool_call_started" => assert!(open.insert(id, ()).is_none(), "{e}"),
            "tool_call_settled" | "tool_call_failed" => {
                assert!(open.remove(&id).is_some(), "{e}")
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "calls never ended: {open:?}");
    let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    eprintln!(
        "fuzz: {} processes started, {} permission requests, {} events",
        count("process_started"),
        count("permission_requested"),
        events.len()
    );
}
