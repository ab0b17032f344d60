//! The state dir's file system full, through the real binary: `toolhost
//! serve` runs with its state dir on a small tmpfs (mounted in a private
//! mount namespace, `unshare --mount`, so nothing outlives the test), which
//! the test fills mid-run. Calls made while it is full fail with a clear
//! error, no event is lost or torn (the log loads back with contiguous
//! seqs, every call in it), and once space returns the host works as before
//! and what was written before is still there. Root only (mounting needs
//! it, as in CI); skipped with a message otherwise.

use std::path::{Path, PathBuf};

use serde_json::json;
use toolhost_test_support::{StdioClient, is_error, result_text};

use crate::support::{allow_all_policy, dirs};

/// The tmpfs's size: room for the host's files, not for much output.
const TMPFS_SIZE: &str = "4m";

/// Whether this process is root (tmpfs mounts need it).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|euid| euid == "0"))
            .unwrap_or(false)
    })
}

/// Fills the file system of `dir` (seen through `/proc/PID/root`) with
/// `filler` until a write fails with ENOSPC.
fn fill(filler: &Path) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(filler).unwrap();
    let block = vec![0u8; 64 << 10];
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", filler.display()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_state_dir_fails_calls_clearly_loses_no_event_and_recovers() {
    if !is_root() {
        eprintln!(
            "skipped: mounting the state dir's tmpfs needs root (the suite runs as root in CI)"
        );
        return;
    }
    let (ws, state) = dirs();
    let outside = tempfile::tempdir().unwrap();
    let policy = allow_all_policy(outside.path());
    let saved = outside.path().join("hosts");
    let cache = crate::runtime_support::shared_cache();
    // sh mounts the tmpfs over the state dir, links the shared compile cache
    // into it, runs serve, and copies the host sessions out when it is done
    // (the tmpfs goes with the namespace).
    let script = r#"mount -t tmpfs -o "size=$1,mode=0700" toolhost-full "$2" || exit 90
ln -s "$3" "$2/compiled"
state=$2 saved=$4; shift 4
"$@"; code=$?
cp -a "$state/hosts" "$saved"
exit $code"#;
    let mut cmd = tokio::process::Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(TMPFS_SIZE)
    .arg(state.path())
    .arg(cache)
    .arg(&saved)
    .arg(env!("CARGO_BIN_EXE_toolhost"))
    .args(["serve", "--policy", &policy, "--workspace"])
    .arg(ws.path())
    .arg("--state-dir")
    .arg(state.path())
    .env_remove("TOOLHOST_LOG");
    let client = StdioClient::spawn(cmd).unwrap();
    let init = client.initialize("2025-06-18").await.unwrap();
    assert!(init["result"].is_object(), "{init}");
    // The namespace's view of the state dir, from outside it.
    let inside = PathBuf::from(format!("/proc/{}/root", client.pid().unwrap()))
        .join(state.path().strip_prefix("/").unwrap());

    let bash = |command: &str| json!({"command": command});
    let r = client.call_tool("bash", bash("echo before")).await.unwrap();
    assert!(!is_error(&r) && result_text(&r).contains("before"), "{r}");

    let filler = inside.join("filler");
    fill(&filler);
    let mut during = Vec::new();
    for n in 0..3 {
        let r = client
            .call_tool("bash", bash(&format!("echo during {n}")))
            .await
            .unwrap();
        during.push(r);
    }
    for r in &during {
        eprintln!("during: {}", result_text(r));
        assert!(is_error(r), "a call on a full disk: {r}");
        assert!(
            result_text(r).contains("No space left on device"),
            "the error does not say why: {r}"
        );
    }

    // The log could not take the events of those calls: they wait in memory.
    let on_full_disk = |kind: &str| {
        let dir = std::fs::read_dir(inside.join("hosts"))
            .unwrap()
            .flatten()
            .next()
            .unwrap();
        let text = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "a torn line: {text}"
        );
        text.lines().filter(|l| l.contains(kind)).count()
    };
    let ended = on_full_disk("\"kind\":\"tool_call_failed\"")
        + on_full_disk("\"kind\":\"tool_call_settled\"");
    assert!(
        ended < 4,
        "every call's end was written on a full disk ({ended})"
    );

    std::fs::remove_file(&filler).unwrap();
    let r = client.call_tool("bash", bash("echo after")).await.unwrap();
    assert!(!is_error(&r) && result_text(&r).contains("after"), "{r}");
    // What was logged before the disk filled is still there, exactly.
    let before = inside.join("sessions/bg_000000000001/output.log");
    assert_eq!(std::fs::read(&before).unwrap(), b"before\n");
    let status = client.close().await.unwrap();
    assert!(status.success(), "{status:?}");

    // Every event is in the file, whole, in order: 5 calls started and
    // ended, the outputs before and after, the lifecycle from running to
    // stopped.
    let logs: Vec<_> = std::fs::read_dir(&saved).unwrap().flatten().collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log = logs[0].path().join("events.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(i as u64 + 1), "{e}");
    }
    let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    assert_eq!(count("tool_call_started"), 5, "{text}");
    assert_eq!(
        count("tool_call_settled") + count("tool_call_failed"),
        5,
        "{text}"
    );
    let lifecycle: Vec<_> = events
        .iter()
        .filter(|e| e["kind"] == "lifecycle")
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(lifecycle, ["running", "stopped"], "{text}");
    let outputs: String = events
        .iter()
        .filter(|e| e["kind"] == "process_output")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(
        outputs.contains("before\n") && outputs.contains("after\n"),
        "{outputs}"
    );

    // And the host loads it back: resuming replays it and goes on from its last seq.
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(copy.path().join("hosts")).unwrap();
    let id = logs[0].file_name();
    let dest = copy.path().join("hosts").join(&id);
    std::fs::create_dir(&dest).unwrap();
    std::fs::copy(&log, dest.join("events.jsonl")).unwrap();
    crate::runtime_support::use_cache(copy.path());
    let mut resume = crate::support::serve(ws.path(), copy.path());
    resume.arg("--host-session").arg(&id);
    let resumed = StdioClient::spawn(resume).unwrap();
    let init = resumed.initialize("2025-06-18").await.unwrap();
    assert!(init["result"].is_object(), "{init}");
    assert!(resumed.close().await.unwrap().success());
    let again = toolhost_test_support::host_log::events(copy.path()).unwrap();
    assert_eq!(&again[..events.len()], &events[..]);
    assert_eq!(again.len(), events.len() + 2, "running and stopped added");
}

/// `toolhost call` on a state dir that is already full: the call fails
/// naming ENOSPC and leaves no partial file behind (a failed compiled-cache
/// write used to leave its temp file, keeping the disk full for good); once
/// space returns the same state dir works.
#[test]
fn a_call_on_a_full_state_dir_leaves_no_partial_file_and_works_once_space_returns() {
    if !is_root() {
        eprintln!(
            "skipped: mounting the state dir's tmpfs needs root (the suite runs as root in CI)"
        );
        return;
    }
    let (ws, state) = dirs();
    let out = tempfile::tempdir().unwrap();
    // Fill it, call, list what is left, free it, call again.
    let script = r#"mount -t tmpfs -o "size=$1,mode=0700" toolhost-full "$2" || exit 90
state=$2 out=$3 bin=$4 ws=$5
dd if=/dev/zero of="$state/filler" bs=64k 2>/dev/null
"$bin" call bash '{"command":"echo full"}' --workspace "$ws" --state-dir "$state" \
  >"$out/full.out" 2>"$out/full.err"; echo $? >"$out/full.code"
find "$state" -mindepth 1 -name '*.tmp*' >"$out/left"
rm "$state/filler"
"$bin" call bash '{"command":"echo room"}' --workspace "$ws" --state-dir "$state" \
  >"$out/room.out" 2>"$out/room.err"; echo $? >"$out/room.code""#;
    let run = std::process::Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg("16m")
        .arg(state.path())
        .arg(out.path())
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .arg(ws.path())
        .env_remove("TOOLHOST_LOG")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", crate::support::describe(&run));
    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap();
    assert_eq!(read("full.code").trim(), "1", "{}", read("full.err"));
    assert!(
        read("full.out").contains("No space left on device")
            || read("full.err").contains("No space left on device"),
        "stdout: {}\nstderr: {}",
        read("full.out"),
        read("full.err")
    );
    assert_eq!(read("left"), "", "partial files left on the full disk");
    assert_eq!(read("room.code").trim(), "0", "{}", read("room.err"));
    assert_eq!(read("room.out"), "room\n");
}
