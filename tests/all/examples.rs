//! The example plugins of `plugins/examples/` (Rust, Python, JavaScript), as
//! built by `plugins/examples/build.sh` into `target/examples/`, through
//! `toolhost call` and `toolhost serve` (MCP). Each has a pure tool (`greet`)
//! and one that runs `date -u` through `sessions` and waits on its pollable
//! with a timeout (`now`), using its language's guest SDK (`plugins/sdk/`).
//!
//! The examples are not built by cargo: README's test command runs
//! `plugins/examples/build.sh` first. Without them these tests fail and say
//! so. Compiling an interpreted plugin takes seconds, so the tests share one
//! state dir (the compiled cache) and compile each example once.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};
use toolhost_test_support::rmcp_client;

use crate::mcp::{Recorder, call, text_of};
use crate::support::{describe, stdout, toolhost};

/// The languages, as folder names under `plugins/examples/` and `target/examples/`.
const LANGS: [&str; 3] = ["rust", "python", "js"];

/// `target/examples/LANG/example_LANG.wasm` (its manifest `example_LANG.toml`
/// beside it); fails naming the build command when it is not there.
fn example(lang: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/examples");
    let wasm = dir.join(lang).join(format!("example_{lang}.wasm"));
    assert!(
        wasm.is_file() && wasm.with_extension("toml").is_file(),
        "{} or its manifest is missing: build the example plugins with \
         `tests/setup.sh` (README's test command runs it)",
        wasm.display()
    );
    wasm
}

/// A workspace and state dir shared by every test here, so each example is
/// compiled once (`<state>/compiled`).
fn shared() -> &'static (tempfile::TempDir, tempfile::TempDir) {
    static DIRS: OnceLock<(tempfile::TempDir, tempfile::TempDir)> = OnceLock::new();
    DIRS.get_or_init(crate::support::dirs)
}

/// Runs `toolhost call --plugin <example> TOOL ARGS` (default policy), with
/// `extra` options, in the shared dirs.
fn call_example(lang: &str, extra: &[&str], tool: &str, args: &str) -> std::process::Output {
    let wasm = example(lang);
    let (ws, state) = shared();
    let mut argv = vec!["call", "--plugin", wasm.to_str().unwrap()];
    argv.extend_from_slice(extra);
    argv.extend_from_slice(&[tool, args]);
    toolhost(ws.path(), state.path(), &argv)
}

/// The first call of a language compiles it into the shared cache; the others
/// wait for it instead of compiling the same component concurrently.
fn compiled(lang: &str) {
    static DONE: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    if !done.iter().any(|l| l == lang) {
        let out = call_example(lang, &[], "greet", r#"{"name":"cache"}"#);
        assert!(out.status.success(), "{lang}: {}", describe(&out));
        done.push(lang.to_owned());
    }
}

fn via_call(lang: &str) {
    compiled(lang);
    // The pure tool, with structured content.
    let out = call_example(lang, &["--json"], "greet", r#"{"name":"Ada"}"#);
    assert!(out.status.success(), "{lang}: {}", describe(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["text"], json!("Hello, Ada!"), "{lang}: {result}");
    assert_eq!(result["structured"]["greeting"], json!("Hello, Ada!"));
    assert_eq!(result["is_error"], json!(false));

    // Arguments the plugin refuses: the tool-error variant, exit 2.
    let out = call_example(lang, &[], "greet", r#"{"name":5}"#);
    assert_eq!(out.status.code(), Some(2), "{lang}: {}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`name` must be a string"),
        "{lang}: {}",
        describe(&out)
    );

    // A command through sessions: granted by the manifest (`date -u`) and
    // allowed by the default policy.
    let out = call_example(lang, &["--json"], "now", "{}");
    assert!(out.status.success(), "{lang}: {}", describe(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        result["text"].as_str().unwrap().contains("UTC"),
        "{lang}: {result}"
    );
    assert_eq!(
        result["structured"]["exit_code"],
        json!(0),
        "{lang}: {result}"
    );
    assert!(
        result["structured"]["session"]
            .as_str()
            .unwrap()
            .starts_with("bg_"),
        "{lang}: {result}"
    );

    // A policy that asks, and nobody to answer (no TTY): the start is denied,
    // and the plugin shows the host's reason as an error result. One file per
    // language: the three tests share the state dir and run in parallel, and
    // a rewrite of a shared file can be read half written (empty: the
    // built-in default policy, which allows `date -u`).
    let (_, state) = shared();
    let policy = state.path().join(format!("ask-{lang}.toml"));
    std::fs::write(&policy, "default = \"ask\"\n").unwrap();
    let out = call_example(lang, &["--policy", policy.to_str().unwrap()], "now", "{}");
    assert_eq!(out.status.code(), Some(1), "{lang}: {}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.contains("denied") && text.contains("no approver"),
        "{lang}: {text}"
    );
}

#[test]
fn rust_example_through_toolhost_call() {
    via_call("rust");
}

#[test]
fn python_example_through_toolhost_call() {
    via_call("python");
}

#[test]
fn js_example_through_toolhost_call() {
    via_call("js");
}

/// Without a manifest the same component gets no exec grant: the host
/// refuses `date -u` before the policy is asked.
#[test]
fn without_its_manifest_an_example_cannot_run_commands() {
    let wasm = example("rust");
    let bare = shared().1.path().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let copy = bare.join("example_rust.wasm");
    std::fs::copy(&wasm, &copy).unwrap();
    let (ws, state) = shared();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "--plugin", copy.to_str().unwrap(), "now"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stdout(&out).contains("denied"), "{}", describe(&out));
}

/// All three examples in one `toolhost serve`: both tool names clash, so each
/// is offered as `<plugin id>__<tool>`; an MCP client calls each.
#[tokio::test(flavor = "multi_thread")]
async fn all_examples_through_toolhost_serve() {
    let wasms: Vec<PathBuf> = LANGS.iter().map(|l| example(l)).collect();
    tokio::task::spawn_blocking(|| LANGS.iter().for_each(|l| compiled(l)))
        .await
        .unwrap();
    let (ws, state) = shared();
    let mut cmd = crate::support::serve(ws.path(), state.path());
    for wasm in &wasms {
        cmd.arg("--plugin").arg(wasm);
    }
    let (client, _) = rmcp_client(Recorder::default(), cmd)
        .await
        .expect("initialize");

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    for lang in LANGS {
        let greet = format!("example_{lang}__greet");
        let tool = tools.iter().find(|t| t.name == greet.as_str());
        let tool = tool.unwrap_or_else(|| panic!("{greet} not in {names:?}"));
        assert_eq!(tool.input_schema["required"], json!(["name"]), "{greet}");
        let ann = serde_json::to_value(tool.annotations.as_ref().unwrap()).unwrap();
        assert_eq!(ann["readOnlyHint"], json!(true), "{greet}");

        let result = client
            .call_tool(call(&greet, json!({"name": "MCP"})))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(false), "{greet}: {result:?}");
        assert_eq!(text_of(&result), "Hello, MCP!", "{greet}");
        assert_eq!(
            result.structured_content.as_ref().unwrap()["greeting"],
            json!("Hello, MCP!")
        );

        let now = format!("example_{lang}__now");
        let result = client.call_tool(call(&now, json!({}))).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{now}: {result:?}");
        assert!(text_of(&result).contains("UTC"), "{now}: {result:?}");
        assert_eq!(
            result.structured_content.as_ref().unwrap()["exit_code"],
            json!(0),
            "{now}"
        );

        // Refused arguments are the tool-error variant: JSON-RPC -32602.
        let err = client
            .call_tool(call(&greet, json!({"name": 5})))
            .await
            .unwrap_err();
        assert!(format!("{err:?}").contains("-32602"), "{greet}: {err:?}");
    }
    client.cancel().await.unwrap();
}
