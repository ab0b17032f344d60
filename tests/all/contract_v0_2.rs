//! Contract 0.2.0 through the real binary: `toolhost call` prints the test
//! plugin's content blocks (`tests/plugins/server`), and `plugin wit` writes
//! the contract exactly. The contract on `Host` is tested with the runtime
//! (`host/runtime/tests/all/contract_v0_2.rs`).

use std::path::Path;

use serde_json::json;
use toolhost_test_fixtures::SERVER;

use crate::support::{describe, dirs, stdout, toolhost};

#[test]
fn the_cli_prints_content_blocks() {
    let (ws, state) = dirs();
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("server.wasm");
    std::fs::write(&wasm, SERVER).unwrap();
    std::fs::write(
        dir.path().join("server.toml"),
        "id = \"server\"\ncontract = \"0.2.0\"\n",
    )
    .unwrap();
    let plugin = wasm.to_str().unwrap();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "--plugin", plugin, "content"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        stdout(&out),
        "hello\n[image image/png, 67 bytes]\n[audio audio/wav, 12 bytes]\n\
         [resource test://static (text/plain), 11 bytes of text]\n\
         [resource test://template/7/data, 4 bytes]\n[resource link test://static \"static\"]\n"
    );
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "--json", "--plugin", plugin, "content"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let result: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["text"], "hello");
    assert_eq!(result["structured"], json!({"ok": true, "blocks": 6}));
    assert_eq!(
        result["content"][0],
        json!({"type": "text", "text": "hello"})
    );
    assert_eq!(result["content"][1]["type"], "image");
    assert_eq!(result["content"][1]["mimeType"], "image/png");
    assert_eq!(
        result["content"][4],
        json!({"type": "resource", "resource": {"uri": "test://template/7/data", "blob": "AAEC/w=="}})
    );
    assert_eq!(result["content"][5]["type"], "resource_link");
}

#[test]
fn plugin_wit_writes_contract_0_2_0_exactly() {
    let out = tempfile::tempdir().unwrap();
    let wit = out.path().join("wit");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["plugin", "wit", "--contract", "0.2.0", "--out"])
        .arg(&wit)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", describe(&run));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let mut expected = Vec::new();
    let mut got = Vec::new();
    for (base, list) in [(root.join("wit/v0.2.0"), &mut expected), (wit, &mut got)] {
        let mut stack = vec![base.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(&base).unwrap().to_path_buf();
                    list.push((rel, std::fs::read(&path).unwrap()));
                }
            }
        }
        list.sort();
    }
    assert_eq!(got.len(), 16);
    assert!(
        got == expected,
        "plugin wit --contract 0.2.0 differs from wit/v0.2.0"
    );
}
