//! Approvals mean exactly what the person saw, through the real binary
//! (docs/permissions.md, docs/attach.md#answering-prompts):
//!
//! - `PATH` cannot point a rule at the workspace: with an empty or relative
//!   entry, a workspace file named `ls` does not run under `allow = ["ls"]`;
//! - in `toolhost attach` a question ends with its call's `timeout_ms` and is
//!   shown withdrawn; an answer naming a prompt that is no longer on screen
//!   is refused and the prompt on screen drawn again; every prompt is the
//!   whole command, escaped;
//! - the TTY prompt of `toolhost call` discards what was typed before it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{describe, dirs};

const BIN: &str = env!("CARGO_BIN_EXE_toolhost");

/// How long a test waits for a line it expects before failing.
const WAIT: Duration = Duration::from_secs(60);

/// An executable `ls` in `ws` that writes `ws/pwned` when run.
fn fake_ls(ws: &Path) {
    let fake = ws.join("ls");
    std::fs::write(&fake, format!("#!/bin/sh\ntouch {}/pwned\n", ws.display())).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn an_empty_or_relative_path_entry_does_not_run_a_workspace_file_under_an_allow_rule() {
    let (ws, state) = dirs();
    fake_ls(ws.path());
    let policy = state.path().join("policy.toml");
    std::fs::write(&policy, "default = \"deny\"\nallow = [\"ls\"]\n").unwrap();
    for path in [":/usr/bin:/bin", ".", "/usr/bin:bin:/bin"] {
        let out = Command::new(BIN)
            .args(["call", "bash", r#"{"command":"ls"}"#, "--json", "--policy"])
            .arg(&policy)
            .arg("--workspace")
            .arg(ws.path())
            .arg("--state-dir")
            .arg(state.path())
            .env("PATH", path)
            .env_remove("TOOLHOST_LOG")
            .output()
            .unwrap();
        assert!(
            !ws.path().join("pwned").exists(),
            "PATH={path}: {}",
            describe(&out)
        );
        // The real `ls` ran: it lists the workspace's one file.
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            result["text"],
            json!("ls"),
            "PATH={path}: {}",
            describe(&out)
        );
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("PATH for started commands: dropped the empty or relative entries"),
            "PATH={path}: {stderr}"
        );
    }
}

/// Lines a child prints, read on a thread.
struct Lines(mpsc::Receiver<String>);

impl Lines {
    fn of(out: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines(rx)
    }

    /// Reads lines up to and including the first one `matches`; panics with
    /// what was read if none comes within [`WAIT`].
    fn until(&self, matches: impl Fn(&str) -> bool) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.0.recv_timeout(WAIT) {
                Ok(line) => {
                    let done = matches(&line);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(e) => panic!("{e}; read so far:\n{}", seen.join("\n")),
            }
        }
    }
}

/// `toolhost serve` on stdio, initialized, with the built-in default policy.
struct Serve {
    child: Child,
    stdin: ChildStdin,
    lines: Lines,
}

impl Serve {
    fn start(ws: &Path, state: &Path) -> Serve {
        let mut child = Command::new(BIN)
            .args(["serve", "--workspace"])
            .arg(ws)
            .arg("--state-dir")
            .arg(state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = Lines::of(child.stdout.take().unwrap());
        let mut serve = Serve {
            child,
            stdin,
            lines,
        };
        serve.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}));
        serve.response(0);
        serve.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        serve
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn call(&mut self, id: u64, arguments: Value) {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"bash","arguments":arguments}}));
    }

    /// The result of request `id`.
    fn response(&self, id: u64) -> Value {
        let lines = self
            .lines
            .until(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["id"] == json!(id)));
        let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        last["result"].clone()
    }
}

#[test]
fn attach_withdraws_a_timed_out_question_and_refuses_an_answer_for_a_replaced_prompt() {
    let (ws, state) = dirs();
    let mut serve = Serve::start(ws.path(), state.path());
    let mut attach = Command::new(BIN)
        .args(["attach", "--state-dir"])
        .arg(state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut typed = attach.stdin.take().unwrap();
    let mut type_line = |line: &str| {
        writeln!(typed, "{line}").unwrap();
        typed.flush().unwrap();
    };
    let screen = Lines::of(attach.stdout.take().unwrap());
    screen.until(|l| l.starts_with("attached to host session"));

    // `touch` is asked about by the default policy; nobody answers #1 before
    // its call's timeout_ms.
    serve.call(2, json!({"command": "touch one", "timeout_ms": 1500}));
    let drawn = screen.until(|l| l.starts_with("  answer: a #1 "));
    assert!(
        drawn
            .iter()
            .any(|l| l.starts_with("toolhost permission request #1: plugin `bash`, tool `bash`")),
        "{drawn:#?}"
    );
    let shown: Vec<&String> = drawn
        .iter()
        .filter(|l| l.starts_with("  command: ") || l.starts_with("  program: "))
        .collect();
    let touch = std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("touch"))
                .find(|t| t.is_file())
        })
        .and_then(|t| t.canonicalize().ok())
        .unwrap();
    assert_eq!(
        shown,
        [
            &format!("  program: {}", touch.display()),
            "  command: touch one"
        ],
        "{drawn:#?}"
    );
    screen.until(|l| {
        l == "toolhost: permission request #1 was withdrawn (cancelled by call-timeout): nothing \
              to answer"
    });
    let timed_out = serve.response(2);
    assert_eq!(timed_out["isError"], json!(true), "{timed_out}");
    assert!(
        timed_out["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not answered within the command's timeout (1500 ms) and was withdrawn"),
        "{timed_out}"
    );

    // #2 replaces it on screen; an answer meant for #1 is refused.
    serve.call(3, json!({"command": "touch two"}));
    screen.until(|l| l.starts_with("  answer: a #2 "));
    type_line("a #1");
    screen.until(|l| {
        l == "toolhost: refused: #1 is not the prompt on screen (it was answered, withdrawn or \
              replaced); nothing was answered"
    });
    let redrawn = screen.until(|l| l.starts_with("  answer: a #2 "));
    assert!(
        redrawn[0].starts_with("toolhost permission request #2: "),
        "{redrawn:#?}"
    );
    type_line("a");
    screen
        .until(|l| l == "toolhost: name the prompt you answer, e.g. `a #2`; nothing was answered");
    assert!(!ws.path().join("one").exists() && !ws.path().join("two").exists());
    type_line("a #2");
    let allowed = serve.response(3);
    assert_eq!(allowed["isError"], json!(false), "{allowed}");
    assert!(ws.path().join("two").exists());

    // What the prompt shows is what runs: whole (past the event log's 64 KiB
    // field bound) and escaped (a newline, a bidi override, an escape).
    let tail = "y".repeat(70_000);
    let command = format!("touch 'a\nb' \u{202e}c\u{1b}[2K #{tail}");
    serve.call(4, json!({ "command": command }));
    let drawn = screen.until(|l| l.starts_with("  answer: a #3 "));
    let header = drawn
        .iter()
        .rposition(|l| l.starts_with("toolhost permission request #3: "))
        .expect("the question's first line");
    let question = &drawn[header..];
    let shown = question
        .iter()
        .find(|l| l.starts_with("  command: "))
        .expect("a command line");
    let wanted = format!("  command: touch 'a\\nb' \\u{{202e}}c\\x1b[2K #{tail}");
    // Compared byte for byte; printed only by length (it is 70 KB).
    assert!(
        shown.as_bytes() == wanted.as_bytes(),
        "shown {} bytes, wanted {}; shown starts {:?}",
        shown.len(),
        wanted.len(),
        &shown[..shown.len().min(80)]
    );
    assert!(
        question.contains(&"  stdin:   closed".to_string()),
        "{:?}",
        &question[question.len() - 3..]
    );
    type_line("r #3");
    let rejected = serve.response(4);
    assert_eq!(rejected["isError"], json!(true), "{rejected}");

    drop(typed);
    assert!(attach.wait().unwrap().success());
    drop(serve.stdin);
    assert!(serve.child.wait().unwrap().success());
}
