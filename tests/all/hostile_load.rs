//! Hostile plugins at load time through the real binary: what a person reads
//! of a plugin's `describe` (`toolhost tools`, `toolhost call`, `plugin
//! inspect`) starts nothing and carries no terminal controls. The hostile
//! plugin (`tests/plugins/hostile`) shapes its `describe` by the
//! `HOSTILE_DESCRIBE` variable its manifest grants; what the host keeps of it
//! is tested with the runtime (`host/runtime/tests/all/hostile_load.rs`).

use crate::runtime_support::{add_hostile, use_cache};
use crate::support::{allow_all_policy, describe, dirs, stdout, toolhost};

/// Item 4 through the listing command: `toolhost tools` runs `describe` and
/// must not start anything.
#[test]
fn toolhost_tools_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    use_cache(state.path());
    let wasm = add_hostile(
        dir.path(),
        "hostile",
        Some("start"),
        "exec = [\"touch *\"]\n",
    );
    let policy = allow_all_policy(&dir.path().join("policy"));
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "tools",
            "--policy",
            &policy,
            "--plugin",
            wasm.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        stdout(&out).contains("describe start: Err("),
        "{}",
        describe(&out)
    );
    assert!(stdout(&out).contains("Denied"), "{}", describe(&out));
    assert!(
        !ws.path().join("describe-marker").exists(),
        "describe started a process under `toolhost tools`"
    );
}

/// Item 10 through the binary: `toolhost tools` lists the loaded tools and
/// names each skipped plugin with its error.
#[test]
fn toolhost_tools_lists_the_rest_and_names_skipped_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    use_cache(state.path());
    add_hostile(dir.path(), "broken", Some("trap"), "");
    add_hostile(dir.path(), "good", None, "");
    let out = toolhost(
        ws.path(),
        state.path(),
        &["tools", "--plugins-dir", dir.path().to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout(&out);
    assert!(text.lines().any(|l| l.starts_with("bash ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("hello ")), "{text}");
    assert!(text.contains("skipped plugins (not loaded):"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("broken.wasm") && l.contains("trapped")),
        "{text}"
    );
    // Logged too (tracing, on stderr at the default level).
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("skipping plugin"), "{err}");
}

/// Item 11 for `toolhost tools`: refused names and descriptions with escape
/// sequences are shown escaped, never raw; `--json` stays exact.
#[test]
fn toolhost_tools_escapes_plugin_text() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    use_cache(state.path());
    let ansi = add_hostile(dir.path(), "ansi", Some("ansi"), "");
    let bad = add_hostile(dir.path(), "bad", Some("bad-names"), "");
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "tools",
            "--plugin",
            ansi.to_str().unwrap(),
            "--plugin",
            bad.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_no_controls(&out.stdout);
    let text = stdout(&out);
    assert!(
        text.contains(
            "\\x1b[2K\\x1b]0;pwned\\x07Says hello\\x1b[8m hidden \\u{9b}31m \\u{202e}txt"
        ),
        "{text}"
    );
    assert!(text.contains("refused tools (not offered):"), "{text}");
    assert!(text.contains("bad/\\x1b[31mred:"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("bash ") && !l.contains("__")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("bad__bash ")), "{text}");

    let out = toolhost(
        ws.path(),
        state.path(),
        &["tools", "--json", "--plugin", ansi.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hello = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "hello")
        .unwrap();
    assert!(
        hello["description"]
            .as_str()
            .unwrap()
            .starts_with("\u{1b}[2K\u{1b}]0;pwned\u{7}"),
        "{hello}"
    );
}

/// Item 11 for `toolhost call`: a result's escape sequences are escaped in
/// text output and exact in `--json`.
#[test]
fn toolhost_call_escapes_plugin_text() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    use_cache(state.path());
    let wasm = add_hostile(dir.path(), "hostile", None, "");
    let plugin = wasm.to_str().unwrap();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "ansi", "{}", "--plugin", plugin],
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_no_controls(&out.stdout);
    let text = stdout(&out);
    assert!(
        text.contains(
            "\\x1b[2J\\x1b[31mred\\x1b[0m \\x1b]0;pwned\\x07\\u{9b}1m \\u{202e}gnp.exe\n"
        ),
        "{text:?}"
    );

    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "ansi", "{}", "--json", "--plugin", plugin],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .starts_with("\u{1b}[2J\u{1b}[31mred"),
        "{v}"
    );
}

/// Item 11 for `plugin inspect`: descriptions cannot hide the grants section;
/// refused tools are listed with reasons.
#[test]
fn plugin_inspect_escapes_plugin_text() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = add_hostile(dir.path(), "hostile", Some("ansi"), "");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["plugin", "inspect", wasm.to_str().unwrap()])
        .env_remove("TOOLHOST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert_no_controls(&out.stdout);
    let text = stdout(&out);
    assert!(text.contains("\\x1b]0;pwned\\x07Says hello"), "{text}");
    assert!(text.contains("\ngrants:\n  exec       none"), "{text}");

    let bad = add_hostile(dir.path(), "bad", Some("bad-names"), "");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["plugin", "inspect", bad.to_str().unwrap()])
        .env_remove("TOOLHOST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert_no_controls(&out.stdout);
    let text = stdout(&out);
    assert!(text.contains("refused tools (not offered):"), "{text}");
    assert!(text.contains("  a b: the name contains a space"), "{text}");
    assert!(text.contains("  \\x1b[31mred: "), "{text}");
}

/// No ESC, DEL, C1 (U+0080–U+009F as UTF-8) or bidi override in `bytes`; the
/// only C0 controls are newlines and tabs.
fn assert_no_controls(bytes: &[u8]) {
    assert!(
        !bytes.contains(&0x1b),
        "raw ESC: {:?}",
        String::from_utf8_lossy(bytes)
    );
    let text = std::str::from_utf8(bytes).expect("UTF-8");
    let bad = text.chars().find(|c| {
        matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    });
    assert!(bad.is_none(), "raw {bad:?} in {text:?}");
}

/// `toolhost tools` shows the plugin owning each tool, and the refused squats.
#[test]
fn toolhost_tools_names_the_owner_of_each_tool() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    use_cache(state.path());
    add_hostile(dir.path(), "aaa", Some("squat"), "");
    add_hostile(dir.path(), "zzz", None, "");
    let out = toolhost(
        ws.path(),
        state.path(),
        &["tools", "--plugins-dir", dir.path().to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout(&out);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not listed: {text}"))
            .to_string()
    };
    assert!(line("bash").contains("[bash]"), "{text}");
    assert!(line("zzz__run").contains("[zzz]"), "{text}");
    assert!(line("aaa__run").contains("[aaa]"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("aaa/x__y:") && l.contains("reserved")),
        "{text}"
    );
}
