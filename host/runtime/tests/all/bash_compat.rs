//! The built-in plugins as they were built for contract 0.1.0, kept byte for
//! byte (`tests/fixtures/compat/v0.1.0/{bash,policy}.wasm`): they keep
//! loading on this host, and the built-in bash answers every tool call with
//! the same text and structured result as that binary (ARCHITECTURE.md,
//! invariant "A released contract never changes; every supported version stays
//! linked"), so a change of the built-in's contract changes
//! nothing a model reads. One part of that text is the bash plugin's own
//! words, not the contract's, and changed deliberately since 0.1.0: the
//! words of a cut marker after its counts ([`marker_counts`]).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolhost_runtime::sha256_hex;
use toolhost_runtime::{Host, ToolResult};

use crate::support::{allow_all_config, dirs};

fn compat(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .join("tests/fixtures/compat/v0.1.0")
        .join(file)
}

#[test]
fn the_builtin_fixtures_are_the_binaries_they_claim_to_be() {
    for name in ["bash.wasm", "policy.wasm"] {
        let wasm = std::fs::read(compat(name)).unwrap();
        let recorded = std::fs::read_to_string(compat(&format!("{name}.sha256"))).unwrap();
        assert_eq!(recorded, format!("{}  {name}\n", sha256_hex(&wasm)));
    }
    let manifest = std::fs::read_to_string(compat("bash.toml")).unwrap();
    let wasm = std::fs::read(compat("bash.wasm")).unwrap();
    assert!(
        manifest.contains(&format!("sha256 = \"{}\"", sha256_hex(&wasm))),
        "{manifest}"
    );
}

/// `s` with every session id (`bg_` + 12 hex digits) replaced by `bg_ID`.
fn mask_ids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("bg_") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 3..];
        let hex = tail
            .bytes()
            .take(12)
            .take_while(u8::is_ascii_hexdigit)
            .count();
        if hex == 12 {
            out.push_str("bg_ID");
            rest = &tail[12..];
        } else {
            out.push_str("bg_");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// `s` with every cut marker's words after its counts replaced by `…`:
/// `... [N characters omitted<words>] ...` reads `... [N characters omitted
/// …] ...` (likewise `N bytes` and `N characters and M bytes`). Exactly that
/// is left out of the comparison, and why: the counts say what a result
/// shows and leaves out, which the output pipeline decides and a contract
/// change must not change, so they are compared; the words after them say how
/// to read the rest, which is the bash plugin's own text. Contract 0.1.0's
/// plugin named the host path of the log there, which sandboxed commands
/// cannot read; the plugin names the `bash_output` call that reads any range
/// now (`plugins/bash/src/text.rs`, `with_marker`). Any other bracket, the
/// result cap's `[N characters of this result omitted]` included, is kept.
fn marker_counts(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("... [") {
        let (before, marker) = rest.split_at(at + "... [".len());
        out.push_str(before);
        rest = marker;
        let Some(counted) = marker.find(" omitted") else {
            continue;
        };
        let words: Vec<&str> = marker[..counted].split(' ').collect();
        let number = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
        let counts = match words.as_slice() {
            [n, "characters" | "bytes"] => number(n),
            [n, "characters", "and", m, "bytes"] => number(n) && number(m),
            _ => false,
        };
        let Some(end) = marker.find("] ...") else {
            continue;
        };
        if counts && counted < end {
            out.push_str(&marker[..counted]);
            out.push_str(" omitted …");
            rest = &marker[end..];
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn marker_counts_keeps_the_counts_and_only_them() {
    for (text, want) in [
        (
            "a\n\n... [5 characters omitted; full output: /s/x/output.log] ...\n\nb",
            "a\n\n... [5 characters omitted …] ...\n\nb",
        ),
        (
            "... [7 bytes omitted from bytes 0-9 of the output; bash_output {} reads it] ...",
            "... [7 bytes omitted …] ...",
        ),
        (
            "x... [3 characters and 40 bytes omitted (dropped)] ...y",
            "x... [3 characters and 40 bytes omitted …] ...y",
        ),
        (
            "\n\n... [12 characters of this result omitted] ...\n\n",
            "\n\n... [12 characters of this result omitted] ...\n\n",
        ),
        ("... [a lot omitted; x] ...", "... [a lot omitted; x] ..."),
    ] {
        assert_eq!(marker_counts(text), want, "{text}");
    }
}

/// What a model reads of `result`: its text and structured content, session
/// ids masked, `elapsed_ms` dropped (it differs between any two runs), the cut
/// marker's words after its counts masked ([`marker_counts`]).
fn seen(result: &ToolResult) -> (String, Value) {
    let mut structured = result.structured.clone().unwrap_or(Value::Null);
    if let Some(map) = structured.as_object_mut() {
        map.remove("elapsed_ms");
    }
    let structured: Value = serde_json::from_str(&mask_ids(&structured.to_string())).unwrap();
    (marker_counts(&mask_ids(&result.text())), structured)
}

/// A host with the built-in bash and the 0.1.0 bash fixture loaded beside it
/// (its tools served as `bash_v1__*`), allow-all policy.
async fn both() -> (tempfile::TempDir, tempfile::TempDir, Host) {
    let (ws, state) = dirs();
    let mut config = allow_all_config(ws.path(), state.path());
    config.plugins = vec![compat("bash.wasm")];
    let host = Host::new(config).await.expect("host starts");
    (ws, state, host)
}

/// Foreground runs of a small corpus (exit codes, a signal, a timeout,
/// terminal control sequences, invalid UTF-8, multibyte text cut at the
/// budget, output cut in the middle): the same text and structured result
/// from the built-in and the fixture. Cost: 18 short commands (≈ 2 s in a
/// debug build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_bash_answers_as_the_v0_1_0_binary() {
    let (_ws, _state, host) = both().await;
    let mut cut = false;
    let corpus = [
        json!({"command": "true"}),
        json!({"command": "printf hello; exit 3"}),
        json!({"command": "echo out; echo err >&2"}),
        json!({"command": "kill -KILL $$"}),
        json!({"command": "sleep 5", "timeout_ms": 200}),
        json!({"command": "printf 'a\\rb\\033[31mred\\033[0m\\n\\x08x\\n'"}),
        json!({"command": "printf '\\377\\376ok\\n'"}),
        json!({"command": "for i in $(seq 1 40000); do printf 'é'; done"}),
        json!({"command": "seq 1 200000"}),
    ];
    for args in corpus {
        let builtin = host.call_tool("bash", args.clone()).await.unwrap();
        let fixture = host.call_tool("bash_v1__bash", args.clone()).await.unwrap();
        assert_eq!(seen(&builtin), seen(&fixture), "{args}");
        assert_eq!(builtin.is_error, fixture.is_error, "{args}");
        cut |= seen(&builtin).0.contains(" omitted …] ...");
    }
    assert!(
        cut,
        "no result of the corpus was cut: the markers were never compared"
    );
}

/// The built-in policy decides as the 0.1.0 policy binary: the same kind and
/// text for commands of every kind of answer, under a rules file and under
/// the built-in defaults. Cost: four policy compiles (≈ 8 s in a debug build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_policy_decides_as_the_v0_1_0_binary() {
    use toolhost_runtime::PermissionRequest;
    use toolhost_runtime::PolicyPlugin;
    use toolhost_runtime::{EngineOptions, Runtime};
    use toolhost_runtime::{POLICY, POLICY_ID, policy_limits};

    let runtime = Runtime::with_options(
        None,
        EngineOptions {
            max_memory_bytes: policy_limits().memory_bytes as u64,
            ..EngineOptions::default()
        },
    )
    .unwrap();
    let fixture = std::fs::read(compat("policy.wasm")).unwrap();
    let rules = "allow = [\"ls *\", \"git status *\"]\nask = [\"git push *\"]\n\
                 deny = [\"rm -rf *\"]\n";
    let commands = [
        "ls -la",
        "rm -rf /",
        "git push origin main",
        "git status && ls; rm -rf x",
        "",
        "echo $(",
        "sh -c 'rm -rf /'",
        "LD_PRELOAD=/x ls",
        "python3 -c 'print(1)'",
        "find . -exec rm {} \\;",
    ];
    for rules in [rules, ""] {
        let load = |bytes: &[u8]| {
            PolicyPlugin::load(
                &runtime,
                POLICY_ID,
                bytes,
                policy_limits(),
                rules.to_string(),
            )
            .unwrap()
        };
        let (builtin, old) = (load(POLICY), load(&fixture));
        assert_eq!(
            builtin.validate().await.unwrap().is_ok(),
            old.validate().await.unwrap().is_ok()
        );
        for command in commands {
            for (shell, env_keys) in [("/bin/bash", vec![]), ("/opt/odd/sh", vec!["BASH_ENV"])] {
                let request = PermissionRequest {
                    plugin: "bash".into(),
                    tool: "bash".into(),
                    tool_call_id: "tc_1".into(),
                    command: command.into(),
                    cwd: "/ws/sub".into(),
                    workspace: "/ws".into(),
                    env_keys: env_keys.iter().map(|k| k.to_string()).collect(),
                    shell: shell.into(),
                };
                assert_eq!(
                    builtin.decide_start(&request).await.unwrap(),
                    old.decide_start(&request).await.unwrap(),
                    "{rules:?} {command:?} {shell}"
                );
            }
        }
    }
}
