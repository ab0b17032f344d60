//! Policy honesty through the real binary: `toolhost tools --policy FILE`
//! refuses a bad file naming its line; a comment-only file is the built-in
//! policy, as an empty one is; under `default = "allow"` a program run by path
//! inside the workspace runs without an approver, while a deny rule still
//! holds against the programs that run other programs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::{describe, dirs, stdout, toolhost};

fn write_policy(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn tools_refuses_a_bad_policy_file_naming_the_line() {
    let (ws, state) = dirs();
    for (text, line, needle) in [
        (
            "default = \"allow\"\n# a comment\nalow = [\"ls\"]\n",
            3,
            "alow",
        ),
        ("allow = [\"ls\"]\ndeny = [\n  \"* rm\",\n]\n", 3, "program"),
        ("default = \"sometimes\"\n", 1, "default"),
    ] {
        let policy = write_policy(state.path(), "bad.toml", text);
        let out = toolhost(ws.path(), state.path(), &["tools", "--policy", &policy]);
        assert_ne!(out.status.code(), Some(0), "{text:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("line {line}")) && err.contains(needle),
            "{text:?}: {}",
            describe(&out)
        );
        assert!(
            !stdout(&out).contains("bash"),
            "{text:?}: tools were listed"
        );
    }
    // An empty and a comment-only file are both the built-in policy: valid.
    for text in ["", "# nothing set yet\n\n# default = \"allow\"\n"] {
        let policy = write_policy(state.path(), "empty.toml", text);
        let out = toolhost(ws.path(), state.path(), &["tools", "--policy", &policy]);
        assert_eq!(out.status.code(), Some(0), "{text:?}: {}", describe(&out));
        // The built-in policy runs `ls` unasked and asks (no approver: refuses) `touch`.
        let ls = toolhost(
            ws.path(),
            state.path(),
            &["call", "bash", r#"{"command":"ls"}"#, "--policy", &policy],
        );
        assert_eq!(ls.status.code(), Some(0), "{text:?}: {}", describe(&ls));
        let touch = toolhost(
            ws.path(),
            state.path(),
            &[
                "call",
                "bash",
                r#"{"command":"touch y"}"#,
                "--policy",
                &policy,
            ],
        );
        assert_eq!(
            touch.status.code(),
            Some(1),
            "{text:?}: {}",
            describe(&touch)
        );
        assert!(!ws.path().join("y").exists(), "{text:?}");
    }
}

#[test]
fn default_allow_runs_a_program_by_path_and_deny_rules_hold_against_wrappers() {
    let (ws, state) = dirs();
    let script = ws.path().join("run.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran by path\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let allow = write_policy(
        state.path(),
        "allow.toml",
        "default = \"allow\"\ndeny = [\"rm *\"]\n",
    );
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "bash",
            r#"{"command":"./run.sh"}"#,
            "--policy",
            &allow,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out), "ran by path\n");
    // Under `default = "ask"` it is still asked: without an approver, refused.
    let ask = write_policy(state.path(), "ask.toml", "default = \"ask\"\n");
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "bash",
            r#"{"command":"./run.sh"}"#,
            "--policy",
            &ask,
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(!stdout(&out).contains("ran by path"), "{}", describe(&out));
    // The deny rule is not got around by programs that run programs.
    std::fs::write(ws.path().join("keep"), "x").unwrap();
    for command in [
        "find . -name keep -exec rm {} \\;",
        "echo keep | xargs rm",
        "trap 'rm keep' EXIT",
        "flock keep rm keep",
        "git -c alias.x='!rm keep' x",
        "sh -c 'rm keep'",
        "python3 -c 'import os; os.remove(\"keep\")'",
    ] {
        let args = serde_json::json!({ "command": command }).to_string();
        let out = toolhost(
            ws.path(),
            state.path(),
            &["call", "bash", &args, "--policy", &allow],
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "{command:?}: {}",
            describe(&out)
        );
        assert!(
            ws.path().join("keep").exists(),
            "{command:?} removed the file"
        );
    }
}
