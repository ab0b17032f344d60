//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `tests/clients/package.json`) against `toolhost serve --http`
//! with the conformance plugin (`plugins/examples/conformance`, built by
//! `plugins/examples/build.sh`), and the MCP Inspector CLI
//! (`@modelcontextprotocol/inspector`) listing and calling tools over stdio
//! and HTTP. Both run on the Node 22 that `tests/setup.sh`
//! installs there (the `node` npm package; the suite needs Node ≥ 22.19).
//!
//! The 0.2.0-alpha.12 suite (npm alias `conformance-next`) runs the frozen
//! requirement sets of 2025-11-25 and of 2026-07-28 the same way, each with
//! its own baseline (`tests/clients/conformance-baseline-REVISION.yml`).
//!
//! Expected failures live in `tests/clients/conformance-baseline.yml` with
//! the reason for each; the suite itself fails the run for a scenario that
//! fails and is not listed, and for one that is listed but now passes, so the
//! list can only shrink.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::describe;

/// The repository root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/clients/node_modules/.bin/node`; fails naming the install command
/// when it is missing.
pub(crate) fn node() -> PathBuf {
    let node = root().join("tests/clients/node_modules/.bin/node");
    assert!(
        node.exists(),
        "{} is missing: run `tests/setup.sh` (README's test command runs it)",
        node.display()
    );
    node
}

/// A JS entry point under `tests/clients/node_modules/`.
fn client_script(path: &str) -> PathBuf {
    let script = root().join("tests/clients/node_modules").join(path);
    assert!(
        script.is_file(),
        "{} is missing: run `tests/setup.sh`",
        script.display()
    );
    script
}

/// `target/examples/conformance/conformance.wasm` (manifest beside it).
pub(crate) fn conformance_plugin() -> PathBuf {
    let wasm = root().join("target/examples/conformance/conformance.wasm");
    assert!(
        wasm.is_file() && wasm.with_extension("toml").is_file(),
        "{} or its manifest is missing: build the example plugins with \
         `tests/setup.sh` (README's test command runs it)",
        wasm.display()
    );
    wasm
}

/// A running `toolhost serve --http 127.0.0.1:0 --drain-timeout 0`, killed
/// (SIGTERM, then waited for) when dropped.
pub struct HttpServe {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl HttpServe {
    /// Starts `toolhost serve --http 127.0.0.1:0 EXTRA...` in fresh dirs and
    /// waits (at most 120 s: the first start compiles the plugin) for the
    /// address it prints on stderr.
    pub fn start(extra: &[&str]) -> HttpServe {
        let dirs = crate::support::dirs();
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            // Dropped with questions the suite left unanswered: no drain.
            .args(["serve", "--http", "127.0.0.1:0", "--drain-timeout", "0"])
            .args(extra)
            .arg("--workspace")
            .arg(dirs.0.path())
            .arg("--state-dir")
            .arg(dirs.1.path())
            .env_remove("TOOLHOST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting toolhost serve --http");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent && let Some(at) = line.find("http://") {
                    let url = line[at..].split_whitespace().next().unwrap().to_string();
                    let _ = tx.send(url);
                    sent = true;
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("toolhost serve --http printed no address");
        HttpServe {
            child,
            url,
            _dirs: dirs,
        }
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// Every server scenario of the suite (`--suite all`: the active ones and
/// the pending `json-schema-2020-12` and `server-sse-polling`) against
/// `serve --http` with the conformance plugin: the suite's own baseline
/// check passes (exit 0), and the scenarios its summary marks failed are
/// exactly those the baseline lists.
#[test]
fn official_suite_passes_every_scenario_not_in_the_baseline() {
    let wasm = conformance_plugin();
    let serve = HttpServe::start(&["--plugin", wasm.to_str().unwrap()]);
    let baseline = root().join("tests/clients/conformance-baseline.yml");
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(node())
        .arg(client_script(
            "@modelcontextprotocol/conformance/dist/index.js",
        ))
        .args(["server", "--suite", "all", "--url", &serve.url])
        .arg("--expected-failures")
        .arg(&baseline)
        .current_dir(scratch.path())
        .output()
        .expect("running the conformance suite");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    let summary = text
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary in the suite's output:\n{text}"));
    let scenario = |mark: &str| -> Vec<String> {
        summary
            .lines()
            .filter_map(|l| l.trim().strip_prefix(mark))
            .filter_map(|l| l.split(':').next())
            .map(str::to_string)
            .collect()
    };
    let (passed, failed) = (scenario("✓ "), scenario("✗ "));
    let listed: Vec<String> = std::fs::read_to_string(&baseline)
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .collect();
    assert_eq!(failed, listed, "failed scenarios vs the baseline\n{text}");
    assert!(
        passed.len() >= 32,
        "only {} scenarios passed: {passed:?}\n{text}",
        passed.len()
    );
}

/// The 0.2.0-alpha.12 suite (`conformance-next` in `tests/clients`) with
/// `--requirements revision` against `serve --http` with the conformance
/// plugin, and `tests/clients/conformance-baseline-REVISION.yml` as the
/// expected failures: the suite's baseline check passes (exit 0: no failure
/// that is not listed, no listed scenario that now passes). Returns the
/// scenarios the summary marks passed.
fn requirements_pass_but_for_the_baseline(revision: &str) -> Vec<String> {
    let wasm = conformance_plugin();
    let serve = HttpServe::start(&["--plugin", wasm.to_str().unwrap()]);
    let baseline = root().join(format!("tests/clients/conformance-baseline-{revision}.yml"));
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(node())
        .arg(client_script("conformance-next/dist/index.js"))
        .args(["server", "--url", &serve.url, "--requirements", revision])
        .arg("--expected-failures")
        .arg(&baseline)
        .current_dir(scratch.path())
        .output()
        .expect("running the conformance suite");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        text.contains("Baseline check passed"),
        "no baseline verdict in the suite's output:\n{text}"
    );
    let summary = text
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary in the suite's output:\n{text}"));
    summary
        .lines()
        .filter_map(|l| l.trim().strip_prefix("✓ "))
        .filter_map(|l| l.split(':').next())
        .map(str::to_string)
        .collect()
}

/// 2025-11-25's frozen requirement set (stateful): every scenario passes,
/// the three it does not score included.
#[test]
fn requirements_of_2025_11_25_pass() {
    let passed = requirements_pass_but_for_the_baseline("2025-11-25");
    assert_eq!(passed.len(), 33, "{passed:?}");
}

/// 2026-07-28's frozen requirement set (stateless, per-request `_meta`):
/// what is not in the baseline passes; the baseline says why the rest
/// fails.
#[test]
fn requirements_of_2026_07_28_pass_but_for_the_baseline() {
    let passed = requirements_pass_but_for_the_baseline("2026-07-28");
    for scenario in [
        "tools-list",
        "tools-call-simple-text",
        "tools-call-error",
        "resources-read-text",
        "prompts-get-with-args",
        "completion-complete",
        "caching",
        "dns-rebinding-protection",
        "http-header-validation",
    ] {
        assert!(
            passed.iter().any(|p| p == scenario),
            "{scenario}: {passed:?}"
        );
    }
}

/// Runs the MCP Inspector CLI (`mcp-inspector --cli ARGS...`) and returns its
/// stdout parsed as JSON; fails with its output when it exits non-zero or
/// prints something else.
fn inspector(args: &[&str]) -> serde_json::Value {
    let out = Command::new(node())
        .arg(client_script(
            "@modelcontextprotocol/inspector/clients/launcher/build/index.js",
        ))
        .arg("--cli")
        .args(args)
        .env_remove("TOOLHOST_LOG")
        .output()
        .expect("running the MCP Inspector CLI");
    assert!(out.status.success(), "{}", describe(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("inspector output is not JSON ({e}): {}", describe(&out)))
}

/// The text of the first content block of a `tools/call` result.
fn first_text(result: &serde_json::Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
}

/// The Inspector CLI lists toolhost's tools and calls the built-in bash tool
/// over stdio (it starts `toolhost serve` itself).
#[test]
fn inspector_lists_and_calls_tools_over_stdio() {
    let (ws, state) = crate::support::dirs();
    let policy = crate::support::allow_all_policy(state.path());
    let bin = env!("CARGO_BIN_EXE_toolhost");
    let base = [
        bin,
        "serve",
        "--policy",
        policy.as_str(),
        "--workspace",
        ws.path().to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let mut list = base.to_vec();
    list.extend(["--method", "tools/list"]);
    let tools = inspector(&list);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in [
        "bash",
        "bash_output",
        "kill_shell",
        "write_stdin",
        "list_shells",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let mut call = base.to_vec();
    call.extend([
        "--method",
        "tools/call",
        "--tool-name",
        "bash",
        "--tool-arg",
        "command=printf 'inspector %s' stdio",
    ]);
    let result = inspector(&call);
    assert_eq!(first_text(&result), "inspector stdio", "{result}");
    assert_ne!(result["isError"], true, "{result}");
}

/// The Inspector CLI lists and calls the conformance plugin's tools over
/// Streamable HTTP.
#[test]
fn inspector_lists_and_calls_tools_over_http() {
    let wasm = conformance_plugin();
    let serve = HttpServe::start(&["--plugin", wasm.to_str().unwrap()]);
    let tools = inspector(&[&serve.url, "--transport", "http", "--method", "tools/list"]);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"test_simple_text"), "{names:?}");
    let result = inspector(&[
        &serve.url,
        "--transport",
        "http",
        "--method",
        "tools/call",
        "--tool-name",
        "test_simple_text",
    ]);
    assert_eq!(
        first_text(&result),
        "This is a simple text response for testing.",
        "{result}"
    );
    let image = inspector(&[
        &serve.url,
        "--transport",
        "http",
        "--method",
        "tools/call",
        "--tool-name",
        "test_image_content",
    ]);
    assert_eq!(image["content"][0]["type"], "image", "{image}");
    assert_eq!(image["content"][0]["mimeType"], "image/png", "{image}");
}
