//! The contract is frozen and versioned (ARCHITECTURE.md, invariant "A released
//! contract never changes; every supported version stays linked"):
//! a released `wit/vX.Y.Z/` never changes by a byte, the host links every
//! version it supports, `toolhost plugin wit` writes each exactly, and a
//! plugin binary built for v0.1.0 (`tests/fixtures/compat/v0.1.0/`) keeps
//! working, with the same answers, on every later host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolhost_runtime::ContractVersion;
use toolhost_runtime::sha256_hex;

use crate::support::{describe, dirs, stdout, toolhost};

/// The released contracts, file by file: (version, path in `wit/vX.Y.Z/`,
/// sha256). A released row never changes; a new version adds rows.
const FROZEN: &[(&str, &str, &str)] = &[
    (
        "0.1.0",
        "deps/cli.wit",
        "fb6ac5d23fcaf3d231142a3c2f9bb1e9bc1fe5af6f1f329f6b1a5555ce0d3873",
    ),
    (
        "0.1.0",
        "deps/clocks.wit",
        "6ed8aa65bb8cbe224a0b2cbac9fc1b3bd25bdb17eda5ae0d23c983ed31c447cc",
    ),
    (
        "0.1.0",
        "deps/filesystem.wit",
        "e675f261017bf9b4fa7df5b9701023fe0249ede71021ac1bf978748e62edcda8",
    ),
    (
        "0.1.0",
        "deps/io.wit",
        "96e206d00076fa0480df32c5bcf255a3fa4862805ac2f6b8537a781cce54f433",
    ),
    (
        "0.1.0",
        "deps/random.wit",
        "48578c40213d5cab6650980905fa146a0be8c39c4433ee5e7e00637b87dbe08f",
    ),
    (
        "0.1.0",
        "deps/sockets.wit",
        "ad38dbf3b0bbdf34c0f2b608edcbfee04d71b443a63faff1f5e0053c3f84b377",
    ),
    (
        "0.1.0",
        "policy.wit",
        "a14f5cd6f2d521e1461a2453967986c8dc38ae19103feba4947e0c4f85d6982a",
    ),
    (
        "0.1.0",
        "sessions.wit",
        "9a6c242431fb708a1738186159a21cacae486b1e378caa525aefca1ecfa14fec",
    ),
    (
        "0.1.0",
        "tool.wit",
        "a15b829075705ec190115b29ab848717a5d316ae580d4423a3ed9e515d352a9f",
    ),
    (
        "0.1.0",
        "worlds.wit",
        "ad6b926acce6a2b914f00ec6a562b27227fda660733cb7fdedcaf710975ede34",
    ),
    (
        "0.2.0",
        "client.wit",
        "b45e35c8a864bad58c0a9c08394183f058431db107c7be5beaf5d76ed489617b",
    ),
    (
        "0.2.0",
        "content.wit",
        "88816bc94ecf3d5a6554287e8cb58df5f17c95ce2441aad47762951d819a2404",
    ),
    (
        "0.2.0",
        "deps/cli.wit",
        "fb6ac5d23fcaf3d231142a3c2f9bb1e9bc1fe5af6f1f329f6b1a5555ce0d3873",
    ),
    (
        "0.2.0",
        "deps/clocks.wit",
        "6ed8aa65bb8cbe224a0b2cbac9fc1b3bd25bdb17eda5ae0d23c983ed31c447cc",
    ),
    (
        "0.2.0",
        "deps/filesystem.wit",
        "e675f261017bf9b4fa7df5b9701023fe0249ede71021ac1bf978748e62edcda8",
    ),
    (
        "0.2.0",
        "deps/io.wit",
        "96e206d00076fa0480df32c5bcf255a3fa4862805ac2f6b8537a781cce54f433",
    ),
    (
        "0.2.0",
        "deps/random.wit",
        "48578c40213d5cab6650980905fa146a0be8c39c4433ee5e7e00637b87dbe08f",
    ),
    (
        "0.2.0",
        "deps/sockets.wit",
        "ad38dbf3b0bbdf34c0f2b608edcbfee04d71b443a63faff1f5e0053c3f84b377",
    ),
    (
        "0.2.0",
        "deps/toolhost-plugin-0.1.0/policy.wit",
        "a14f5cd6f2d521e1461a2453967986c8dc38ae19103feba4947e0c4f85d6982a",
    ),
    (
        "0.2.0",
        "deps/toolhost-plugin-0.1.0/sessions.wit",
        "9a6c242431fb708a1738186159a21cacae486b1e378caa525aefca1ecfa14fec",
    ),
    (
        "0.2.0",
        "deps/toolhost-plugin-0.1.0/tool.wit",
        "a15b829075705ec190115b29ab848717a5d316ae580d4423a3ed9e515d352a9f",
    ),
    (
        "0.2.0",
        "deps/toolhost-plugin-0.1.0/worlds.wit",
        "ad6b926acce6a2b914f00ec6a562b27227fda660733cb7fdedcaf710975ede34",
    ),
    (
        "0.2.0",
        "prompts.wit",
        "c443c1eba705b97ff3bc837df7b5805eab6318e1870eb11b03b800261c15f1db",
    ),
    (
        "0.2.0",
        "resources.wit",
        "5819e339feb654e0de5062e344dce5606c653fe630cbfd5e41b531395902a295",
    ),
    (
        "0.2.0",
        "tool.wit",
        "398f27a4a1844372c1455ace3f625cf77fc567b5e500d564b66f24fab6efd3cd",
    ),
    (
        "0.2.0",
        "worlds.wit",
        "40deaac22c0a25cbb16991805d2699db85072b83f1d16e99beaa46b3eff67078",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// Every file under `dir`, by path relative to it (`/`-separated), with its sha256.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let rel = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, sha256_hex(&std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn frozen(version: &str) -> BTreeMap<String, String> {
    FROZEN
        .iter()
        .filter(|(v, _, _)| *v == version)
        .map(|(_, p, h)| (p.to_string(), h.to_string()))
        .collect()
}

/// The released contracts: every supported version as written (a version is
/// released and frozen when it is added to `ContractVersion::ALL`; `STARTER` is
/// only the one new projects start from).
fn released() -> Vec<&'static str> {
    ContractVersion::ALL.iter().map(|v| v.as_str()).collect()
}

#[test]
fn released_contracts_never_change_by_a_byte() {
    for version in released() {
        let dir = root().join(format!("wit/v{version}"));
        assert!(dir.is_dir(), "{} is missing", dir.display());
        assert_eq!(
            tree(&dir),
            frozen(version),
            "wit/v{version} changed: a released contract is frozen; put a change in a new \
             wit/vX.Y.Z (plugins/README.md explains contract versions)"
        );
    }
}

#[test]
fn the_host_links_every_version_it_supports() {
    let supported = released();
    assert_eq!(supported.first(), Some(&"0.1.0"), "0.1.0 is never dropped");
    assert_eq!(ContractVersion::MIN, ContractVersion::V0_1_0);
    assert!(ContractVersion::ALL.contains(&ContractVersion::STARTER));
    for version in &supported {
        if released().contains(version) {
            assert!(
                !frozen(version).is_empty(),
                "contract {version} is released but has no FROZEN rows"
            );
        } else {
            assert!(
                frozen(version).is_empty(),
                "contract {version} has FROZEN rows but is not supported"
            );
        }
        let module = root().join(format!(
            "host/runtime/src/contract/v{}/mod.rs",
            version.replace('.', "_")
        ));
        assert!(
            module.is_file(),
            "no bindings for {version}: {}",
            module.display()
        );
        assert!(
            toolhost::scaffold::contract(version).is_some(),
            "the binary does not carry contract {version} for `plugin wit`"
        );
    }
}

#[test]
fn plugin_wit_writes_the_released_contract_exactly() {
    let out = tempfile::tempdir().unwrap();
    let wit = out.path().join("wit");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["plugin", "wit", "--out"])
        .arg(&wit)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", describe(&run));
    assert_eq!(
        stdout(&run),
        format!(
            "wrote contract toolhost:plugin@0.1.0 (10 files) to {}\n",
            wit.display()
        )
    );
    assert_eq!(tree(&wit), tree(&root().join("wit/v0.1.0")));

    let run = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["plugin", "wit", "--contract", "0.9.0", "--out"])
        .arg(&wit)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", describe(&run));
    assert_eq!(
        String::from_utf8_lossy(&run.stderr),
        "toolhost: no contract version 0.9.0 in this toolhost (it carries: 0.1.0, 0.2.0)\n"
    );
}

/// The v0.1.0 fixture: the Rust example as built for contract 0.1.0.
fn fixture() -> PathBuf {
    root().join("tests/fixtures/compat/v0.1.0/example.wasm")
}

#[test]
fn the_compat_fixture_is_the_binary_it_claims_to_be() {
    let wasm = std::fs::read(fixture()).unwrap();
    let recorded = std::fs::read_to_string(fixture().with_extension("wasm.sha256")).unwrap();
    assert_eq!(recorded, format!("{}  example.wasm\n", sha256_hex(&wasm)));
    // The manifest pins the same digest, so the host checks it at every load.
    let manifest = std::fs::read_to_string(fixture().with_extension("toml")).unwrap();
    assert!(
        manifest.contains(&format!("sha256 = \"{}\"", sha256_hex(&wasm))),
        "{manifest}"
    );
}

#[test]
fn a_v0_1_0_plugin_binary_works_on_this_host() {
    let (ws, state) = dirs();
    let plugin = fixture();
    let plugin = plugin.to_str().unwrap();

    let out = toolhost(
        ws.path(),
        state.path(),
        &["tools", "--json", "--plugin", plugin],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let tools: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mine: Vec<&Value> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["plugin"] == "example_rust")
        .collect();
    assert_eq!(
        mine,
        [
            &json!({
                "name": "greet",
                "description": "Greets someone by name. Pure: runs nothing.",
                "inputSchema": {"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},
                "plugin": "example_rust",
            }),
            &json!({
                "name": "now",
                "description": "Runs `date -u` on the host and returns the current UTC time.",
                "inputSchema": {"type":"object","properties":{}},
                "plugin": "example_rust",
            }),
        ]
    );

    // The pure tool: exact result.
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "--json",
            "--plugin",
            plugin,
            "greet",
            r#"{"name":"Ada"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        result,
        json!({"text": "Hello, Ada!", "structured": {"greeting": "Hello, Ada!"}, "is_error": false})
    );

    // Its refusal of bad arguments: the tool-error variant, a usage error.
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "--plugin", plugin, "greet", r#"{"name":5}"#],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "toolhost: invalid arguments for `greet`: `name` must be a string\n"
    );

    // The command tool: `date -u` through sessions, under the default policy.
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "--json", "--plugin", plugin, "now"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["is_error"], json!(false), "{result}");
    assert_eq!(result["structured"]["exit_code"], json!(0), "{result}");
    let session = result["structured"]["session"].as_str().unwrap();
    assert!(
        session.len() == 15
            && session.starts_with("bg_")
            && session[3..].bytes().all(|b| b.is_ascii_hexdigit()),
        "{session}"
    );
    // `date -u`'s own format, e.g. `Mon Dec  1 01:40:00 UTC 2025`.
    let text = result["text"].as_str().unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words.len(), 6, "{text:?}");
    assert_eq!(words[4], "UTC", "{text:?}");
    assert!(words[5].parse::<u32>().is_ok_and(|y| y >= 2025), "{text:?}");
}

/// The v0.2.0 fixture: the conformance plugin as built for contract 0.2.0.
fn fixture_v0_2_0() -> PathBuf {
    root().join("tests/fixtures/compat/v0.2.0/conformance.wasm")
}

#[test]
fn the_v0_2_0_compat_fixture_is_the_binary_it_claims_to_be() {
    let wasm = std::fs::read(fixture_v0_2_0()).unwrap();
    let recorded = std::fs::read_to_string(fixture_v0_2_0().with_extension("wasm.sha256")).unwrap();
    assert_eq!(
        recorded,
        format!("{}  conformance.wasm\n", sha256_hex(&wasm))
    );
    let manifest = std::fs::read_to_string(fixture_v0_2_0().with_extension("toml")).unwrap();
    assert!(
        manifest.contains(&format!("sha256 = \"{}\"", sha256_hex(&wasm))),
        "{manifest}"
    );
}

/// A plugin binary built for 0.2.0 answers its tools with the same content
/// blocks on this host: text, an image (the exact PNG bytes, base64), an
/// embedded resource, and an error result.
#[test]
fn a_v0_2_0_plugin_binary_works_on_this_host() {
    let (ws, state) = dirs();
    let plugin = fixture_v0_2_0();
    let plugin = plugin.to_str().unwrap();
    let call = |tool: &str| -> Value {
        let out = toolhost(
            ws.path(),
            state.path(),
            &["call", "--json", "--plugin", plugin, tool, "{}"],
        );
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)))
    };
    assert_eq!(
        call("test_simple_text"),
        json!({"text": "This is a simple text response for testing.", "structured": null, "is_error": false})
    );
    assert_eq!(
        call("test_multiple_content_types")["content"],
        json!([
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "mimeType": "image/png",
             "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="},
            {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
             "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}},
        ])
    );
    let error = call("test_error_handling");
    assert_eq!(error["is_error"], true, "{error}");
    assert_eq!(
        error["text"],
        "This tool intentionally returns an error for testing"
    );
}

/// A manifest whose `contract` is not the one the component was built for is
/// refused at load, naming both and the fix.
#[test]
fn a_manifest_naming_another_contract_is_refused() {
    let (ws, state) = dirs();
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("conformance.wasm");
    std::fs::copy(fixture_v0_2_0(), &wasm).unwrap();
    std::fs::write(
        dir.path().join("conformance.toml"),
        "id = \"conformance\"\ncontract = \"0.1.0\"\nmemory = \"96MiB\"\n",
    )
    .unwrap();
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "--plugin",
            wasm.to_str().unwrap(),
            "test_simple_text",
            "{}",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("contract = \"0.1.0\"")
            && err.contains("built for contract 0.2.0")
            && err.contains("set `contract = \"0.2.0\"`"),
        "{}",
        describe(&out)
    );
}
