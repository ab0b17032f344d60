//! Commands behave as they do in a developer's terminal: the `bash` tool runs
//! bash, keeps stdout and stderr in write order, never waits on an editor or a
//! pager, and takes large commands. Each test drives the real `toolhost` binary.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::mcp::{call, client, text_of};
use crate::support::{allow_all_policy, describe, dirs, stdout, toolhost};

/// `toolhost call bash ARGS --json --policy allow-all --allow-git-writes`:
/// the parsed `{text, structured, is_error}` and the process output. (These
/// tests are about the shell, not the policy or the sandbox's `.git` rule.)
fn bash(ws: &Path, state: &Path, args: Value) -> (Value, Output) {
    let policy = allow_all_policy(state);
    let args = args.to_string();
    let out = toolhost(
        ws,
        state,
        &[
            "call",
            "bash",
            &args,
            "--json",
            "--policy",
            &policy,
            "--allow-git-writes",
        ],
    );
    let result =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    (result, out)
}

fn text(result: &Value) -> &str {
    result["text"].as_str().unwrap()
}

#[test]
fn the_tool_named_bash_runs_bash() {
    let (ws, state) = dirs();
    let (result, out) = bash(
        ws.path(),
        state.path(),
        json!({"command": "[[ 1 == 1 ]] && echo brackets; mkdir -p p/{src,tests} && ls p; \
                           echo \"$BASH_VERSION\" | grep -c '^[0-9]'"}),
    );
    assert_eq!(
        text(&result),
        "brackets\nsrc\ntests\n1",
        "{}",
        describe(&out)
    );
    assert!(!ws.path().join("p/{src,tests}").exists());
    // Process substitution, a bash-only form agents use to tee their output.
    let (result, out) = bash(
        ws.path(),
        state.path(),
        json!({"command": "exec > >(tee -a log); echo through-tee"}),
    );
    assert_eq!(result["is_error"], json!(false), "{}", describe(&out));
    let (result, _) = bash(ws.path(), state.path(), json!({"command": "cat log"}));
    assert_eq!(text(&result), "through-tee");
    // The structured result and `toolhost tools` name the same shell, and it is bash.
    let shell = result["structured"]["shell"].as_str().unwrap().to_string();
    assert!(shell.ends_with("/bash"), "{shell}");
    let tools = toolhost(ws.path(), state.path(), &["tools", "--json"]);
    let tools: Value = serde_json::from_slice(&tools.stdout).unwrap();
    let listed = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "bash")
        .unwrap();
    assert_eq!(listed["shell"], json!(shell));
    let plain = stdout(&toolhost(ws.path(), state.path(), &["tools"]));
    assert!(
        plain.contains(&format!("the bash tool's shell: {shell}")),
        "{plain}"
    );
}

#[test]
fn stdout_and_stderr_keep_the_order_they_were_written_in() {
    let (ws, state) = dirs();
    let (result, out) = bash(
        ws.path(),
        state.path(),
        json!({"command": "for i in $(seq 1 300); do echo out$i; echo err$i >&2; done"}),
    );
    let expected: String = (1..=300).map(|i| format!("out{i}\nerr{i}\n")).collect();
    // The tool's text drops the final newline; the log keeps every byte.
    assert_eq!(text(&result), expected.trim_end(), "{}", describe(&out));
    // The byte-exact log holds the same interleaving.
    let log = result["structured"]["output_path"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(log).unwrap(), expected);
    // Python's own buffering does not reorder it either.
    let (result, _) = bash(
        ws.path(),
        state.path(),
        json!({"command": "python3 -c 'import sys; print(\"step 1\"); print(\"oops\", file=sys.stderr); print(\"step 2\")'"}),
    );
    assert_eq!(text(&result), "step 1\noops\nstep 2");
}

#[test]
fn editors_and_pagers_never_wait() {
    let (ws, state) = dirs();
    let setup = "git init -q . && git config user.email a@b.c && git config user.name A \
                 && git config core.editor vi && git config core.pager less \
                 && git config sequence.editor vi";
    let (result, out) = bash(ws.path(), state.path(), json!({"command": setup}));
    assert_eq!(result["is_error"], json!(false), "{}", describe(&out));
    for (command, wanted) in [
        ("git commit -q --allow-empty", "editor"),
        (
            "git commit -q --allow-empty -m one && git commit -q --allow-empty -m two && git commit --amend --allow-empty",
            "editor",
        ),
        ("git rebase -i HEAD~1", "editor"),
    ] {
        let (result, out) = bash(
            ws.path(),
            state.path(),
            json!({"command": command, "timeout_ms": 60000}),
        );
        let text = text(&result);
        assert_eq!(
            result["is_error"],
            json!(true),
            "{command}: {}",
            describe(&out)
        );
        assert!(!text.contains("timed out"), "{command}: {text}");
        assert!(text.to_lowercase().contains(wanted), "{command}: {text}");
    }
    // `git merge` without --no-edit opens no editor when nothing is a terminal:
    // it completes with the default message.
    let (result, out) = bash(
        ws.path(),
        state.path(),
        json!({"command": "git checkout -q -b side && git commit -q --allow-empty -m three \
                           && git checkout -q - && git commit -q --allow-empty -m four \
                           && git merge side", "timeout_ms": 60000}),
    );
    assert_eq!(result["is_error"], json!(false), "{}", describe(&out));
    assert!(text(&result).contains("Merge made"), "{}", text(&result));
    // The pager prints instead of waiting.
    let (result, out) = bash(
        ws.path(),
        state.path(),
        json!({"command": "git log --format=%s", "timeout_ms": 60000}),
    );
    assert_eq!(result["is_error"], json!(false), "{}", describe(&out));
    assert!(text(&result).contains("one"), "{}", text(&result));
}

#[test]
fn a_40_kb_heredoc_writes_its_file() {
    let (ws, state) = dirs();
    let body: String = (0..1000)
        .map(|i| format!("line {i:04} of the generated file, forty bytes or so\n"))
        .collect();
    assert!(body.len() >= 40_000);
    let command = format!("cat > big.txt <<'EOF'\n{body}EOF\nwc -c < big.txt");
    let (result, out) = bash(ws.path(), state.path(), json!({"command": command}));
    assert_eq!(text(&result), body.len().to_string(), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("big.txt")).unwrap(),
        body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_up_to_1_mib_are_checked_and_longer_ones_refused_with_the_limit() {
    let (ws, state) = dirs();
    let (mcp, _) = client(ws.path(), state.path()).await;
    // The worst shape for the policy's parser: one short command per line.
    let n = (1 << 20) / 5 - 8;
    let command = format!("{}echo done", "true\n".repeat(n));
    assert!(command.len() <= 1 << 20);
    let result = mcp
        .call_tool(call("bash", json!({"command": command})))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "done");
    let too_long = format!("{}echo done", "#".repeat((1 << 20) - 8));
    assert_eq!(too_long.len(), (1 << 20) + 1);
    let result = mcp
        .call_tool(call("bash", json!({"command": too_long})))
        .await
        .unwrap();
    let text = text_of(&result);
    assert_eq!(result.is_error, Some(true));
    assert!(text.contains("1048577 bytes"), "{text}");
    // The host's size check (toolhost_process::MAX_COMMAND_BYTES) refuses it
    // before the policy sees it.
    assert!(
        text.contains("over the limit MAX_COMMAND_BYTES (1048576 bytes)"),
        "{text}"
    );
    mcp.cancel().await.unwrap();
}

#[test]
fn commands_get_the_open_file_limit_toolhost_was_started_with() {
    use std::os::unix::process::CommandExt;
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.args([
        "call",
        "bash",
        r#"{"command":"ulimit -Sn"}"#,
        "--policy",
        &policy,
    ])
    .arg("--workspace")
    .arg(ws.path())
    .arg("--state-dir")
    .arg(state.path());
    // toolhost starts with a soft limit of 1000, raises its own to the hard limit,
    // and gives its commands the 1000 back.
    // SAFETY: only setrlimit, which is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            limit.rlim_cur = 1000.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(stdout(&out), "1000\n", "{}", describe(&out));
}
