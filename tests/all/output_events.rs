//! Output in the event log, through the real binary: a command that writes
//! one byte at a time costs the log in proportion to its bytes, not to its
//! writes (its small writes are coalesced into few `process_output` events),
//! and the events still give back exactly the bytes written, in order.
//! The coalescing itself is tested in `toolhost-host-session` (`coalesce.rs`).

use serde_json::json;
use toolhost_test_support::{StdioClient, is_error, result_text};

use crate::support::{allow_all_policy, dirs, serve};

/// Writes of one byte each.
const WRITES: usize = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_one_byte_writes_cost_the_log_their_bytes_and_replay_exactly() {
    let (ws, state) = dirs();
    let policy = tempfile::tempdir().unwrap();
    let mut cmd = serve(ws.path(), state.path());
    cmd.arg("--policy").arg(allow_all_policy(policy.path()));
    let client = StdioClient::spawn(cmd).unwrap();
    let init = client.initialize("2025-06-18").await.unwrap();
    assert!(init["result"].is_object(), "{init}");
    // bash's builtin printf: one write(2) of one byte per iteration, a
    // letter that follows the count so order and loss both show.
    std::fs::write(
        ws.path().join("tiny.sh"),
        format!(
            "l=abcdefghijklmnopqrstuvwxyz\ni=0\nwhile [ $i -lt {WRITES} ]; do\n\
             printf %s \"${{l:$((i % 26)):1}}\"\ni=$((i + 1))\ndone\n"
        ),
    )
    .unwrap();
    let r = client
        .call_tool(
            "bash",
            json!({"command": "bash tiny.sh", "timeout_ms": 120_000}),
        )
        .await
        .unwrap();
    assert!(!is_error(&r), "{}", result_text(&r));
    assert!(client.close().await.unwrap().success());

    let events = toolhost_test_support::host_log::events(state.path()).unwrap();
    let outputs: Vec<_> = events
        .iter()
        .filter(|e| e["kind"] == "process_output")
        .collect();
    let mut text = String::new();
    for e in &outputs {
        assert_eq!(e["offset"], json!(text.len()), "{e}");
        let chunk = e["text"].as_str().unwrap();
        assert_eq!(e["len"], json!(chunk.len()), "{e}");
        text.push_str(chunk);
    }
    let expected: String = (0..WRITES)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    assert_eq!(text, expected, "the log's bytes are not the bytes written");
    let log_bytes: usize = outputs.iter().map(|e| e.to_string().len() + 1).sum();
    eprintln!(
        "{WRITES} one-byte writes: {} process_output events, {log_bytes} bytes of log",
        outputs.len()
    );
    assert!(
        log_bytes <= 2 * WRITES + 4096,
        "{log_bytes} bytes of log in {} events for {WRITES} bytes of output",
        outputs.len()
    );
}
