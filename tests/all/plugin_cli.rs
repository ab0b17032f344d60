//! `toolhost plugin inspect | add | new` for authors and CI, through the real
//! binary: inspect checks the world before compiling, compiles into the
//! cache `serve` uses with progress on stderr, and exits 1 naming why a
//! plugin cannot load; `add` installs a plugin compiled ahead, so the host's
//! first load does not compile; `new` writes a project that builds (offline)
//! and passes inspect with no edits, needing nothing from this repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::{describe, dirs, stdout, toolhost};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `toolhost ARGS` with `TOOLHOST_LOG` unset (no `--workspace`).
fn bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .env_remove("TOOLHOST_LOG")
        .output()
        .unwrap()
}

/// Copies the v0.1.0 compat fixture (the Rust example) into `dir` as
/// `NAME.wasm` with its manifest `NAME.toml`.
fn example_in(dir: &Path, name: &str) -> PathBuf {
    let fixture = root().join("tests/fixtures/compat/v0.1.0/example.wasm");
    let wasm = dir.join(format!("{name}.wasm"));
    std::fs::copy(&fixture, &wasm).unwrap();
    std::fs::copy(fixture.with_extension("toml"), wasm.with_extension("toml")).unwrap();
    wasm
}

fn cache_entries(state: &Path) -> usize {
    std::fs::read_dir(state.join("compiled"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn inspect_refuses_a_wrong_world_before_compiling_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("http.wasm");
    std::fs::write(&wasm, crate::support::component_importing_http()).unwrap();
    let out = bin(&[
        "plugin",
        "inspect",
        "--json",
        wasm.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let why = "plugin `http` does not target toolhost:plugin/tool-plugin@0.1.0: it imports \
               wasi:http/outgoing-handler@0.2.0, which toolhost does not provide to this kind \
               of plugin";
    // Nothing compiled: no progress line, no cache entry.
    assert_eq!(
        stderr(&out),
        format!("toolhost: {} cannot be loaded: {why}\n", wasm.display())
    );
    assert_eq!(cache_entries(state.path()), 0);
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["loads"], json!(false));
    assert_eq!(report["load_error"], json!(why));
    assert_eq!(report["compiled"], Value::Null);
    assert_eq!(
        report["imports"],
        json!(["wasi:http/outgoing-handler@0.2.0"])
    );
    assert_eq!(report["exports"], json!(["toolhost:plugin/tool@0.1.0"]));
}

#[test]
fn inspect_exits_1_for_what_cannot_load_and_2_for_what_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let s = state.path().to_str().unwrap();

    // Not WebAssembly at all.
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm").unwrap();
    let out = bin(&[
        "plugin",
        "inspect",
        junk.to_str().unwrap(),
        "--state-dir",
        s,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).starts_with(&format!(
            "toolhost: {} cannot be loaded: plugin `junk` is not a valid component: not a \
             WebAssembly file (it does not start with the `\\0asm` header): give the built \
             `.wasm` component\n",
            junk.display()
        )),
        "{}",
        describe(&out)
    );
    assert!(
        stdout(&out).contains(
            "\nverdict:\n  cannot be loaded: plugin `junk` is not a valid component: not a \
             WebAssembly file (it does not start with the `\\0asm` header): give the built \
             `.wasm` component\n"
        ),
        "{}",
        stdout(&out)
    );

    // A valid plugin under an invalid manifest.
    let wasm = example_in(dir.path(), "badmanifest");
    std::fs::write(
        wasm.with_extension("toml"),
        "id = \"badmanifest\"\ncontract = \"0.1.0\"\nmemroy = \"1MiB\"\n",
    )
    .unwrap();
    let out = bin(&[
        "plugin",
        "inspect",
        wasm.to_str().unwrap(),
        "--state-dir",
        s,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "toolhost: {} cannot be loaded: the manifest is invalid: ",
            wasm.display()
        )) && err.contains("memroy"),
        "{err}"
    );
    assert_eq!(
        cache_entries(state.path()),
        0,
        "compiled despite the manifest"
    );

    // A pin that does not match.
    let wasm = example_in(dir.path(), "pinned");
    let toml = std::fs::read_to_string(wasm.with_extension("toml")).unwrap();
    let wrong = format!("sha256 = \"{}\"", "0".repeat(64));
    let toml: String = toml
        .lines()
        .map(|l| {
            if l.starts_with("sha256") {
                wrong.clone()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(wasm.with_extension("toml"), toml).unwrap();
    let out = bin(&[
        "plugin",
        "inspect",
        wasm.to_str().unwrap(),
        "--state-dir",
        s,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains(
            "cannot be loaded: plugin `example_rust`: sha256 mismatch: the manifest pins 0000"
        ),
        "{}",
        describe(&out)
    );

    // No such file: a usage error.
    let missing = dir.path().join("missing.wasm");
    let out = bin(&[
        "plugin",
        "inspect",
        missing.to_str().unwrap(),
        "--state-dir",
        s,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).starts_with(&format!("toolhost: cannot read {}: ", missing.display())),
        "{}",
        describe(&out)
    );
}

#[test]
fn inspect_compiles_once_into_the_cache_with_progress() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let wasm = example_in(dir.path(), "example");
    let args = [
        "plugin",
        "inspect",
        "--json",
        wasm.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let first = bin(&args);
    assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    let progress = stderr(&first);
    assert!(
        progress.starts_with("compiling example.wasm (117 KB)… done in ")
            && progress.ends_with(" s\n")
            && progress.lines().count() == 1,
        "{progress:?}"
    );
    let report: Value = serde_json::from_str(&stdout(&first)).unwrap();
    assert_eq!(report["compiled"], json!("compiled"));
    assert_eq!(report["loads"], json!(true));
    assert_eq!(report["load_error"], Value::Null);
    let names: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greet", "now"]);
    assert_eq!(cache_entries(state.path()), 1);

    let second = bin(&args);
    assert_eq!(second.status.code(), Some(0), "{}", describe(&second));
    assert_eq!(
        stderr(&second),
        "example.wasm (117 KB): compiled code from the cache\n"
    );
    let report: Value = serde_json::from_str(&stdout(&second)).unwrap();
    assert_eq!(report["compiled"], json!("cache"));
    assert_eq!(cache_entries(state.path()), 1);
}

/// The `loaded plugin` log line of `id` in a `TOOLHOST_LOG=info` stderr.
fn load_line(err: &str, id: &str) -> String {
    err.lines()
        .find(|l| l.contains("loaded plugin") && l.contains(&format!("plugin=\"{id}\"")))
        .or_else(|| {
            err.lines()
                .find(|l| l.contains("loaded plugin") && l.contains(&format!("plugin={id}")))
        })
        .unwrap_or_else(|| panic!("no `loaded plugin` line for {id} in:\n{err}"))
        .to_string()
}

/// `toolhost call TOOL ARGS` in `ws`/`state`, logging at info.
fn call_logged(ws: &Path, state: &Path, extra: &[&str], tool: &str, args: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("call")
        .args(extra)
        .args([tool, args, "--workspace"])
        .arg(ws)
        .arg("--state-dir")
        .arg(state)
        .env("TOOLHOST_LOG", "toolhost_runtime=info")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

#[test]
fn plugin_add_compiles_ahead_so_the_first_call_does_not() {
    let src = tempfile::tempdir().unwrap();
    let (ws, state) = dirs();
    let wasm = example_in(src.path(), "anything");

    let out = bin(&[
        "plugin",
        "add",
        wasm.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let installed = state.path().join("plugins");
    assert_eq!(
        stdout(&out),
        format!(
            "added plugin `example_rust`: {} (2 tools: greet, now); compiled code cached in {}\n",
            installed.join("example_rust.wasm").display(),
            state.path().join("compiled").display()
        )
    );
    assert!(
        stderr(&out).starts_with("compiling anything.wasm (117 KB)… done in "),
        "{}",
        describe(&out)
    );
    // Installed as ID.wasm + ID.toml, byte for byte.
    let mut files: Vec<String> = std::fs::read_dir(&installed)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["example_rust.toml", "example_rust.wasm"]);
    assert_eq!(
        std::fs::read(installed.join("example_rust.wasm")).unwrap(),
        std::fs::read(&wasm).unwrap()
    );

    // The host loads it from <state>/plugins by default, from the cache.
    let out = call_logged(
        ws.path(),
        state.path(),
        &["--json"],
        "greet",
        r#"{"name":"Ada"}"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap()["text"],
        json!("Hello, Ada!")
    );
    let line = load_line(&stderr(&out), "example_rust");
    assert!(line.contains("source=Cache"), "{line}");

    // Adding it again replaces it and finds the compiled code.
    let out = bin(&[
        "plugin",
        "add",
        wasm.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stdout(&out).starts_with("replaced plugin `example_rust`: "),
        "{}",
        describe(&out)
    );
    assert_eq!(
        stderr(&out),
        "anything.wasm (117 KB): compiled code from the cache\n"
    );

    // The copy being worked on, named with --plugin, answers to its own tool
    // names: the installed plugins are not loaded next to it (no `id__tool`
    // renaming, no "id is already taken").
    let out = call_logged(
        ws.path(),
        state.path(),
        &["--plugin", wasm.to_str().unwrap()],
        "greet",
        r#"{"name":"Bo"}"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out), "Hello, Bo!\n", "{}", describe(&out));
    assert!(
        !stderr(&out).contains("already taken"),
        "{}",
        describe(&out)
    );

    // Without `plugin add`, a fresh state dir compiles at the host's load.
    let (ws2, state2) = dirs();
    let out = call_logged(
        ws2.path(),
        state2.path(),
        &["--plugin", wasm.to_str().unwrap()],
        "greet",
        r#"{"name":"Ada"}"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let line = load_line(&stderr(&out), "example_rust");
    assert!(line.contains("source=Compiled"), "{line}");
}

#[test]
fn plugin_add_copies_nothing_for_a_plugin_that_cannot_load() {
    let src = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let plugins = state.path().join("installed");
    let wasm = src.path().join("http.wasm");
    std::fs::write(&wasm, crate::support::component_importing_http()).unwrap();
    let out = bin(&[
        "plugin",
        "add",
        wasm.to_str().unwrap(),
        "--plugins-dir",
        plugins.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).starts_with(&format!(
            "toolhost: {} cannot be loaded: plugin `http` does not target",
            wasm.display()
        )),
        "{}",
        describe(&out)
    );
    assert!(!plugins.exists());

    // --manifest names the manifest; its id names the installed files.
    let wasm = example_in(src.path(), "other");
    let manifest = src.path().join("renamed.toml");
    std::fs::write(
        &manifest,
        std::fs::read_to_string(wasm.with_extension("toml"))
            .unwrap()
            .replace("id = \"example_rust\"", "id = \"renamed\""),
    )
    .unwrap();
    let out = bin(&[
        "plugin",
        "add",
        wasm.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
        "--plugins-dir",
        plugins.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(plugins.join("renamed.wasm").is_file() && plugins.join("renamed.toml").is_file());

    // A relative preopen that exists beside the source but not in the plugins
    // dir: refused before anything is copied.
    std::fs::create_dir(src.path().join("data")).unwrap();
    let wasm = example_in(src.path(), "withdata");
    let toml = std::fs::read_to_string(wasm.with_extension("toml"))
        .unwrap()
        .replace("id = \"example_rust\"", "id = \"withdata\"");
    std::fs::write(
        wasm.with_extension("toml"),
        format!("{toml}\n[[preopen]]\nhost = \"data\"\nguest = \"/data\"\nmode = \"read-only\"\n"),
    )
    .unwrap();
    let out = bin(&[
        "plugin",
        "add",
        wasm.to_str().unwrap(),
        "--plugins-dir",
        plugins.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains(&format!(
            "its manifest would not hold in {} (relative preopens resolve against the \
             manifest's directory): ",
            plugins.display()
        )),
        "{}",
        describe(&out)
    );
    assert!(!plugins.join("withdata.wasm").exists() && !plugins.join("withdata.toml").exists());
}

/// Every file under `dir`, relative, sorted.
fn listing(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

const WIT_FILES: [&str; 10] = [
    "wit/deps/cli.wit",
    "wit/deps/clocks.wit",
    "wit/deps/filesystem.wit",
    "wit/deps/io.wit",
    "wit/deps/random.wit",
    "wit/deps/sockets.wit",
    "wit/policy.wit",
    "wit/sessions.wit",
    "wit/tool.wit",
    "wit/worlds.wit",
];

/// `plugin new NAME --lang LANG --dir DIR`, checked: exit 0, the files it
/// promises, the contract byte for byte, nothing pointing into this repository.
fn new_project(name: &str, lang: &str, dir: &Path, expect: &[&str]) {
    let out = bin(&[
        "plugin",
        "new",
        name,
        "--lang",
        lang,
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let mut want: Vec<String> = expect.iter().map(|s| s.to_string()).collect();
    want.extend(WIT_FILES.iter().map(|s| s.to_string()));
    want.sort();
    assert_eq!(listing(dir), want);
    assert_eq!(
        stdout(&out),
        format!(
            "created {lang} plugin `{name}` in {} ({} files)\nnext: cd {} && ./build.sh && toolhost plugin inspect {name}.wasm\n",
            dir.display(),
            want.len(),
            dir.display()
        )
    );
    for f in WIT_FILES {
        let released = root()
            .join("wit/v0.1.0")
            .join(f.strip_prefix("wit/").unwrap());
        assert_eq!(
            std::fs::read(dir.join(f)).unwrap(),
            std::fs::read(released).unwrap(),
            "{f}"
        );
    }
    let repo = root().to_string_lossy().into_owned();
    for f in listing(dir) {
        let text = std::fs::read_to_string(dir.join(&f)).unwrap();
        assert!(
            !text.contains(&repo) && !text.contains("../../"),
            "{f} points into the repository"
        );
    }
    let manifest = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap();
    assert!(manifest.contains(&format!("id = \"{name}\"")), "{manifest}");
}

/// Runs the project's build.sh with `env`; then `plugin inspect` must pass
/// and `greet` answer through `toolhost call`.
fn build_and_call(dir: &Path, name: &str, env: &[(&str, &str)]) {
    let mut build = Command::new(dir.join("build.sh"));
    build.current_dir(dir);
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
    ] {
        build.env_remove(var);
    }
    for (k, v) in env {
        build.env(k, v);
    }
    let out = build.output().unwrap();
    assert!(out.status.success(), "build.sh: {}", describe(&out));
    let wasm = dir.join(format!("{name}.wasm"));
    assert!(wasm.is_file(), "{} not built", wasm.display());

    let (ws, state) = dirs();
    let out = bin(&[
        "plugin",
        "inspect",
        wasm.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "inspect: {}", describe(&out));
    assert!(
        stdout(&out).ends_with("\nverdict:\n  loads\n"),
        "{}",
        stdout(&out)
    );

    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "call",
            "--plugin",
            wasm.to_str().unwrap(),
            "greet",
            r#"{"name":"Ada"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out), "Hello, Ada!\n");
    let out = toolhost(
        ws.path(),
        state.path(),
        &["call", "--json", "--plugin", wasm.to_str().unwrap(), "now"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["structured"]["exit_code"], json!(0), "{result}");
}

#[test]
fn plugin_new_rust_builds_offline_and_passes_inspect_with_no_edits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("my-tool");
    new_project(
        "my-tool",
        "rust",
        &dir,
        &[
            ".gitignore",
            "Cargo.toml",
            "README.md",
            "build.sh",
            "my-tool.toml",
            "sdk/Cargo.toml",
            "sdk/src/lib.rs",
            "src/lib.rs",
        ],
    );
    // Offline: the crates come from the local registry, never the network.
    // One target dir across runs, so only the project itself is rebuilt.
    let target = root().join("target/plugin-new-rust");
    build_and_call(
        &dir,
        "my-tool",
        &[
            ("CARGO_NET_OFFLINE", "true"),
            ("CARGO_TARGET_DIR", target.to_str().unwrap()),
        ],
    );
}

#[test]
fn plugin_new_python_writes_a_project_that_builds_where_componentize_py_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pytool");
    new_project(
        "pytool",
        "python",
        &dir,
        &[
            ".gitignore",
            "README.md",
            "app.py",
            "build.sh",
            "pytool.toml",
            "toolhost_sdk.py",
            "toolhost_sdk.pyi",
        ],
    );
    // The venv `.ci/run` fills (plugins/examples/build.sh installs the pinned
    // componentize-py there); without it only the files are checked.
    let venv = root().join(".venv");
    if !venv.join("bin/componentize-py").is_file() {
        eprintln!(
            "skipping the Python build: no {}/bin/componentize-py",
            venv.display()
        );
        return;
    }
    build_and_call(&dir, "pytool", &[("VENV", venv.to_str().unwrap())]);
}

#[test]
fn plugin_new_js_writes_a_project_that_builds_where_componentize_js_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("jstool");
    new_project(
        "jstool",
        "js",
        &dir,
        &[
            ".gitignore",
            "README.md",
            "app.js",
            "build.sh",
            "jstool.toml",
            "package-lock.json",
            "package.json",
            "toolhost.d.ts",
            "toolhost.js",
        ],
    );
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    assert_eq!(package["name"], json!("jstool"));
    // The installation plugins/examples/js/build.sh makes (with `npm ci`
    // from the same lockfile); without it only the files are checked.
    let componentize = root().join("target/examples/js-tools/node_modules/.bin/componentize-js");
    if !componentize.is_file() {
        eprintln!("skipping the JS build: no {}", componentize.display());
        return;
    }
    build_and_call(
        &dir,
        "jstool",
        &[("COMPONENTIZE_JS", componentize.to_str().unwrap())],
    );
}

#[test]
fn plugin_new_refuses_a_bad_name_and_a_used_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = bin(&[
        "plugin",
        "new",
        "My Tool",
        "--lang",
        "rust",
        "--dir",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).starts_with("toolhost: `My Tool` cannot name a plugin: "),
        "{}",
        describe(&out)
    );
    std::fs::write(tmp.path().join("keep.txt"), "mine").unwrap();
    let out = bin(&[
        "plugin",
        "new",
        "ok",
        "--lang",
        "js",
        "--dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "toolhost: {} already exists and is not empty; choose another --dir\n",
            tmp.path().display()
        )
    );
    assert_eq!(listing(tmp.path()), ["keep.txt"]);
}

/// A `plugins.lock` over 4 MiB is refused with a clear error, not read whole.
#[test]
fn a_huge_plugins_lock_is_a_clear_error() {
    let (_ws, state) = dirs();
    let plugins = state.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(plugins.join("plugins.lock"), vec![b'#'; (4 << 20) + 1]).unwrap();
    let out = bin(&[
        "plugin",
        "list",
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    let lock = plugins.join("plugins.lock");
    assert!(
        stderr(&out).contains(&format!(
            "{}: larger than 4194304 bytes, more than any set of installed plugins needs; not read",
            lock.display()
        )),
        "{}",
        describe(&out)
    );
}
