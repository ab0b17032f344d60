//! What `toolhost plugin wit` and `toolhost plugin new` write: the released
//! contracts (the bytes of `wit/vX.Y.Z/**`) and one starter project per
//! language, all embedded in the binary, so a plugin author never needs this
//! repository (`ContractVersion::ALL` and `ContractVersion::STARTER` name the versions).
//!
//! The starter projects are the example plugins of `plugins/examples/`
//! (a pure `greet` tool and a `now` tool that runs `date -u` through
//! `sessions`) with their guest SDK from `plugins/sdk/`, renamed. Each project
//! is self-contained:
//!
//! - **rust**: the SDK crate is vendored as `sdk/` (its source, reading the
//!   contract from `wit/`), a path dependency, because the SDK is not
//!   published on crates.io. Its only dependency is `wit-bindgen`
//!   ([`WIT_BINDGEN_VERSION`], pinned exactly); the plugin adds `serde_json`.
//!   `cargo build --release --target wasm32-wasip2` builds it (offline too,
//!   when those crates are in the local registry).
//! - **python**: `toolhost_sdk.py` (and its `.pyi` stubs) beside `app.py`;
//!   `build.sh` installs the pinned componentize-py into `.venv`.
//! - **js**: `toolhost.js` (and its `.d.ts`) beside `app.js`; `package.json`
//!   and `package-lock.json` pin componentize-js; `build.sh` runs `npm ci`.
//!
//! Every project gets the contract in `wit/`, written by the same code as
//! `plugin wit` ([`write_contract`]), and its manifest `NAME.toml`, which
//! `build.sh` puts `NAME.wasm` beside.

use std::path::{Path, PathBuf};

/// One file of a released contract.
#[derive(Debug, Clone, Copy)]
pub struct ContractFile {
    /// Its path inside the contract directory, e.g. `deps/io.wit`.
    pub path: &'static str,
    /// Its exact text.
    pub text: &'static str,
}

macro_rules! contract_files {
    ($dir:literal: $($path:literal),* $(,)?) => {
        &[$(ContractFile {
            path: $path,
            text: include_str!(concat!("../../../wit/", $dir, "/", $path)),
        }),*]
    };
}

/// Contract 0.1.0: every file of `wit/v0.1.0`, the `toolhost:plugin@0.1.0`
/// package and the WASI packages it uses (`deps/`).
pub const CONTRACT_V0_1_0: &[ContractFile] = contract_files!("v0.1.0":
    "worlds.wit",
    "tool.wit",
    "sessions.wit",
    "policy.wit",
    "deps/cli.wit",
    "deps/clocks.wit",
    "deps/filesystem.wit",
    "deps/io.wit",
    "deps/random.wit",
    "deps/sockets.wit",
);

/// Contract 0.2.0 (not yet released; `toolhost plugin wit --contract 0.2.0`):
/// every file of `wit/v0.2.0`, the `toolhost:plugin@0.2.0` package, the
/// 0.1.0 interfaces it imports and exports unchanged
/// (`deps/toolhost-plugin-0.1.0/`) and the WASI packages (`deps/`).
pub const CONTRACT_V0_2_0: &[ContractFile] = contract_files!("v0.2.0":
    "worlds.wit",
    "content.wit",
    "client.wit",
    "tool.wit",
    "resources.wit",
    "prompts.wit",
    "deps/toolhost-plugin-0.1.0/worlds.wit",
    "deps/toolhost-plugin-0.1.0/tool.wit",
    "deps/toolhost-plugin-0.1.0/sessions.wit",
    "deps/toolhost-plugin-0.1.0/policy.wit",
    "deps/cli.wit",
    "deps/clocks.wit",
    "deps/filesystem.wit",
    "deps/io.wit",
    "deps/random.wit",
    "deps/sockets.wit",
);

/// The embedded contract of `version` as written (`0.1.0`, one of
/// [`ContractVersion::ALL`](toolhost_runtime::ContractVersion::ALL)), or `None` for a
/// version this binary does not carry.
pub fn contract(version: &str) -> Option<&'static [ContractFile]> {
    use toolhost_runtime::ContractVersion;
    Some(match ContractVersion::parse(version)? {
        ContractVersion::V0_1_0 => CONTRACT_V0_1_0,
        ContractVersion::V0_2_0 => CONTRACT_V0_2_0,
    })
}

/// The wit-bindgen release the Rust starter project (its vendored SDK) pins:
/// the one this repository builds its Rust plugins with.
pub const WIT_BINDGEN_VERSION: &str = "0.63.0";

/// Errors of `plugin wit` and `plugin new`; each names the file and the reason.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// No embedded contract of this version.
    #[error("no contract version {version} in this toolhost (it carries: {supported})")]
    UnknownVersion {
        /// The version asked for.
        version: String,
        /// The versions it has, comma-separated.
        supported: String,
    },
    /// The plugin name is not a valid plugin id.
    #[error("`{name}` cannot name a plugin: {message}")]
    BadName {
        /// The name given.
        name: String,
        /// Why (the manifest's id rule).
        message: String,
    },
    /// The target directory exists and is not empty.
    #[error("{dir} already exists and is not empty; choose another --dir")]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
    },
    /// Writing a file or creating a directory failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Writes contract `version` into `out` (created if missing): the exact bytes
/// of every file of `wit/vX.Y.Z`, `deps/` included. Files already there are
/// overwritten; others are left alone. Returns the files written.
///
/// Errors: [`ScaffoldError::UnknownVersion`], [`ScaffoldError::Write`].
pub fn write_contract(version: &str, out: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    let files = contract(version).ok_or_else(|| ScaffoldError::UnknownVersion {
        version: version.to_string(),
        supported: toolhost_runtime::ContractVersion::supported_list(),
    })?;
    let mut written = Vec::new();
    for file in files {
        let path = out.join(file.path);
        write_file(&path, file.text)?;
        written.push(path);
    }
    Ok(written)
}

/// The languages `plugin new` has a starter project for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, built with cargo and wit-bindgen (about 100 KB components).
    Rust,
    /// Python, built with componentize-py (about 18 MB components).
    Python,
    /// JavaScript, built with componentize-js (about 13 MB components).
    Js,
}

impl Lang {
    /// The name used on the command line and in `plugins/examples/`.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }
}

/// The embedded example and SDK files the starter projects are made from.
mod templates {
    pub const RUST_LIB: &str = include_str!("../../../plugins/examples/rust/src/lib.rs");
    pub const RUST_MANIFEST: &str =
        include_str!("../../../plugins/examples/rust/example_rust.toml");
    pub const RUST_SDK: &str = include_str!("../../../plugins/sdk/rust/src/lib.rs");

    pub const PY_APP: &str = include_str!("../../../plugins/examples/python/app.py");
    pub const PY_MANIFEST: &str =
        include_str!("../../../plugins/examples/python/example_python.toml");
    pub const PY_BUILD: &str = include_str!("../../../plugins/examples/python/build.sh");
    pub const PY_SDK: &str = include_str!("../../../plugins/sdk/python/toolhost_sdk.py");
    pub const PY_SDK_STUBS: &str = include_str!("../../../plugins/sdk/python/toolhost_sdk.pyi");

    pub const JS_APP: &str = include_str!("../../../plugins/examples/js/app.js");
    pub const JS_MANIFEST: &str = include_str!("../../../plugins/examples/js/example_js.toml");
    pub const JS_PACKAGE: &str = include_str!("../../../plugins/examples/js/package.json");
    pub const JS_LOCK: &str = include_str!("../../../plugins/examples/js/package-lock.json");
    pub const JS_SDK: &str = include_str!("../../../plugins/sdk/js/toolhost.js");
    pub const JS_SDK_TYPES: &str = include_str!("../../../plugins/sdk/js/toolhost.d.ts");
}

/// One file of a starter project: its path in the project and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFile {
    /// Relative to the project directory.
    pub path: String,
    /// The text.
    pub text: String,
    /// Whether it is a script to run (`build.sh`): written mode 0755.
    pub executable: bool,
}

/// The files of the `lang` starter project for plugin `name` (a valid plugin
/// id), without the contract (which [`new_project`] adds under `wit/`).
///
/// Errors: [`ScaffoldError::BadName`].
pub fn project_files(name: &str, lang: Lang) -> Result<Vec<ProjectFile>, ScaffoldError> {
    toolhost_runtime::validate_id(name).map_err(|e| ScaffoldError::BadName {
        name: name.to_string(),
        message: e.to_string(),
    })?;
    let example = format!("example_{}", lang.as_str());
    let rename = |text: &str| text.replace(&example, name);
    let file = |path: &str, text: String| ProjectFile {
        path: path.to_string(),
        text,
        executable: false,
    };
    let script = |text: String| ProjectFile {
        path: "build.sh".into(),
        text,
        executable: true,
    };
    let manifest = format!("{name}.toml");
    let mut files = match lang {
        Lang::Rust => vec![
            file("Cargo.toml", rust_cargo_toml(name)),
            file(
                "src/lib.rs",
                rename(templates::RUST_LIB)
                    .replace("`plugins/examples/rust/build.sh`", "`build.sh`"),
            ),
            file(
                &manifest,
                rename(templates::RUST_MANIFEST) + MANIFEST_REFERENCE,
            ),
            file("sdk/Cargo.toml", rust_sdk_cargo_toml()),
            file("sdk/src/lib.rs", rust_sdk_lib()),
            script(rust_build_sh(name)),
        ],
        Lang::Python => vec![
            file("app.py", rename(templates::PY_APP)),
            file("toolhost_sdk.py", templates::PY_SDK.to_string()),
            file("toolhost_sdk.pyi", templates::PY_SDK_STUBS.to_string()),
            file(
                &manifest,
                rename(templates::PY_MANIFEST) + MANIFEST_REFERENCE,
            ),
            script(python_build_sh(name)),
        ],
        Lang::Js => vec![
            file("app.js", rename(templates::JS_APP)),
            file("toolhost.js", templates::JS_SDK.to_string()),
            file("toolhost.d.ts", templates::JS_SDK_TYPES.to_string()),
            file(
                "package.json",
                templates::JS_PACKAGE.replace("toolhost-example-js", name),
            ),
            file(
                "package-lock.json",
                templates::JS_LOCK.replace("toolhost-example-js", name),
            ),
            file(
                &manifest,
                rename(templates::JS_MANIFEST) + MANIFEST_REFERENCE,
            ),
            script(js_build_sh(name)),
        ],
    };
    files.push(file("README.md", readme(name, lang)));
    files.push(file(".gitignore", gitignore(name, lang)));
    Ok(files)
}

/// Writes the `lang` starter project for plugin `name` into `dir` (created;
/// it must not exist or be empty): [`project_files`] plus the latest
/// contract in `dir/wit` ([`write_contract`]). Returns the files written.
///
/// Errors: [`ScaffoldError::BadName`], [`ScaffoldError::NotEmpty`],
/// [`ScaffoldError::Write`].
pub fn new_project(name: &str, lang: Lang, dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    let files = project_files(name, lang)?;
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ScaffoldError::NotEmpty {
            dir: dir.to_path_buf(),
        });
    }
    let mut written = Vec::new();
    for f in &files {
        let path = dir.join(&f.path);
        write_file(&path, &f.text)?;
        if f.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(
                |source| ScaffoldError::Write {
                    path: path.clone(),
                    source,
                },
            )?;
        }
        written.push(path);
    }
    written.extend(write_contract(
        toolhost_runtime::ContractVersion::STARTER.as_str(),
        &dir.join("wit"),
    )?);
    Ok(written)
}

fn write_file(path: &Path, text: &str) -> Result<(), ScaffoldError> {
    let err = |source| ScaffoldError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    std::fs::write(path, text).map_err(err)
}

/// The `.wasm` file cargo makes for crate `name` (`-` becomes `_`).
fn rust_artifact(name: &str) -> String {
    format!("{}.wasm", name.replace('-', "_"))
}

/// Appended to every generated manifest: each other field, commented out,
/// with its form and default, so an author outside this repository need not
/// look them up (the full rules: docs/manifests.md#fields).
const MANIFEST_REFERENCE: &str = r#"
# Every other field, with its default. Uncomment what the plugin needs; the
# operator reads this file to see what the plugin may do.
# sha256 = "…"                  # pin of the .wasm file's sha256 (lowercase hex)
# exec_env = ["NAME", "PRE_*"]  # env names its commands may set beyond LANG, LC_*, TZ, ...
# exec_shells = ["/bin/bash"]   # shells beyond /bin/sh
# exec_stdin = ["wc -l"]        # commands that may be fed stdin (each also in `exec`)
# memory = "64MiB"              # linear memory per call (units: KiB, MiB, GiB; max 4GiB)
# cpu = "1s"                    # guest CPU per call (units: ms, s, m)
# wall = "30s"                  # wall time per call, waits on commands included
# sandbox = "workspace-write"   # or "read-only": for the commands it starts (stricter only)
# network = false               # its commands may use the network (if the operator allows)
# unix_sockets = false          # its commands may use UNIX sockets (if the operator allows)
#
# [env]                         # environment the plugin itself (not its commands) sees
# NAME = "value"                # a literal, or `true` to copy the host's value
#
# [[preopen]]                   # a directory the plugin itself reads (WASI filesystem)
# host = "data"                 # relative to this file; must exist
# guest = "/data"
# mode = "read-only"            # or "read-write"
"#;

fn rust_cargo_toml(name: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false
description = "A toolhost tool plugin (contract v{contract}, world toolhost:plugin/tool-plugin@{contract})."

[lib]
crate-type = ["cdylib"]

[dependencies]
# The guest SDK, vendored in sdk/ (it is not on crates.io): the bindings of the
# contract in wit/ and helpers such as run_and_wait.
toolhost-plugin-sdk = {{ path = "sdk" }}
serde_json = "1"

# A workspace of its own, whatever directory it is created in.
[workspace]

# Small components (about 100 KB): optimise for size, one codegen unit, LTO.
[profile.release]
opt-level = "s"
lto = true
strip = true
panic = "abort"
codegen-units = 1
"#,
        contract = toolhost_runtime::ContractVersion::STARTER,
    )
}

fn rust_sdk_cargo_toml() -> String {
    format!(
        r#"[package]
name = "toolhost-plugin-sdk"
version = "0.1.0"
edition = "2024"
publish = false
license = "Apache-2.0"
description = "Guest SDK for toolhost tool plugins in Rust, vendored by `toolhost plugin new`: the bindings of the contract in ../wit and a few helpers (run_and_wait, export!)."

[dependencies]
wit-bindgen = "={WIT_BINDGEN_VERSION}"
"#
    )
}

/// The SDK source, reading the contract from the project's `wit/`.
fn rust_sdk_lib() -> String {
    templates::RUST_SDK.replace(
        &format!(
            "path: \"../../../wit/v{}\"",
            toolhost_runtime::ContractVersion::STARTER
        ),
        "path: \"../wit\"",
    )
}

fn rust_build_sh(name: &str) -> String {
    let artifact = rust_artifact(name);
    format!(
        r#"#!/usr/bin/env bash
# Builds {name}.wasm (a wasm32-wasip2 component) beside its manifest {name}.toml.
# Needs Rust 1.85 or later and `rustup target add wasm32-wasip2`.
set -euo pipefail
cd "$(dirname "$0")"
target="${{CARGO_TARGET_DIR:-target}}"
cargo build --release --target wasm32-wasip2 --target-dir "$target"
cp "$target/wasm32-wasip2/release/{artifact}" {name}.wasm
echo "built {name}.wasm ($(wc -c < {name}.wasm) bytes); check it with: toolhost plugin inspect {name}.wasm"
"#
    )
}

/// The componentize-py version the Python example pins (its build.sh's
/// `COMPONENTIZE_PY=` line).
fn componentize_py_version() -> &'static str {
    templates::PY_BUILD
        .lines()
        .find_map(|l| l.strip_prefix("COMPONENTIZE_PY="))
        .map(str::trim)
        .unwrap_or("0.25.1")
}

fn python_build_sh(name: &str) -> String {
    let version = componentize_py_version();
    format!(
        r#"#!/usr/bin/env bash
# Builds {name}.wasm (a component made by componentize-py) beside its manifest
# {name}.toml.
#
# Pinned: componentize-py {version} from PyPI, installed into .venv here
# (created if missing; use another with VENV=DIR). Only app.py and
# toolhost_sdk.py are bundled, no site-packages.
set -euo pipefail
COMPONENTIZE_PY={version}
here=$(cd "$(dirname "$0")" && pwd)
venv="${{VENV:-$here/.venv}}"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if [ "$("$venv/bin/componentize-py" --version 2>/dev/null)" != "componentize-py $COMPONENTIZE_PY" ]; then
  "$venv/bin/pip" install -q "componentize-py==$COMPONENTIZE_PY"
fi

# From a copy: componentize-py writes __pycache__ beside the sources.
src="$here/build/src"
rm -rf "$src" && mkdir -p "$src"
cp "$here/app.py" "$here/toolhost_sdk.py" "$src/"
cd "$src"
env -u VIRTUAL_ENV "$venv/bin/componentize-py" -d "$here/wit" -w tool-plugin \
  componentize app -p "$src" -o "$here/{name}.wasm"
echo "built {name}.wasm ($(wc -c < "$here/{name}.wasm") bytes); check it with: toolhost plugin inspect {name}.wasm"
"#
    )
}

fn js_build_sh(name: &str) -> String {
    format!(
        r#"#!/usr/bin/env bash
# Builds {name}.wasm (a component made by componentize-js) beside its manifest
# {name}.toml.
#
# Pinned: componentize-js by package.json and package-lock.json, installed with
# `npm ci` (again only when the lockfile changes); COMPONENTIZE_JS=PATH uses
# another installation instead. Node as the machine has it.
#
# `-d http -d fetch-event`: componentize-js's default build imports wasi:http
# (for fetch and the fetch event), which toolhost never links, so the plugin
# would be refused at load.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
componentize="${{COMPONENTIZE_JS:-}}"
if [ -z "$componentize" ]; then
  if ! cmp -s package-lock.json node_modules/.installed-lock.json; then
    npm ci --no-audit --no-fund --loglevel=error
    cp package-lock.json node_modules/.installed-lock.json
  fi
  componentize=node_modules/.bin/componentize-js
fi
"$componentize" --wit wit -n tool-plugin -d http -d fetch-event -o {name}.wasm app.js
echo "built {name}.wasm ($(wc -c < {name}.wasm) bytes); check it with: toolhost plugin inspect {name}.wasm"
"#
    )
}

fn readme(name: &str, lang: Lang) -> String {
    let (sources, build_needs) = match lang {
        Lang::Rust => (
            "`src/lib.rs` (the plugin) and `sdk/` (the guest SDK, vendored)",
            "Rust 1.85+ with `rustup target add wasm32-wasip2`",
        ),
        Lang::Python => (
            "`app.py` (the plugin; the exported class must be named `Tool`) and \
             `toolhost_sdk.py` (the guest SDK, typed by `toolhost_sdk.pyi`)",
            "Python 3 (`build.sh` installs componentize-py into `.venv`)",
        ),
        Lang::Js => (
            "`app.js` (the plugin) and `toolhost.js` (the guest SDK, typed by `toolhost.d.ts`)",
            "Node and npm (`build.sh` installs componentize-js with `npm ci`)",
        ),
    };
    format!(
        r#"# {name}

A toolhost tool plugin in {lang}, made by `toolhost plugin new`. It has two
tools: `greet` (pure) and `now` (runs `date -u` through the host's `sessions`
and waits for it with a timeout). Sources: {sources}. The contract it targets
is in `wit/` (`toolhost plugin wit --out wit` writes it again).

Build (needs {build_needs}):

    ./build.sh                                   # writes {name}.wasm beside {name}.toml
    toolhost plugin inspect {name}.wasm          # imports, tools, grants; exits 1 if it cannot load
    toolhost call --plugin {name}.wasm greet '{{"name":"Ada"}}'
    toolhost plugin add {name}.wasm --plugins-dir DIR   # install, compiled ahead of the first call

`{name}.toml` is the manifest: it grants exactly `date -u` (`exec`). The
operator's policy must also allow a command for it to run.

Publish (any OCI registry; credentials from `~/.docker/config.json` or
`REGISTRY_AUTH_FILE`, never the command line):

    toolhost plugin publish {name}.wasm oci://REGISTRY/REPO:TAG   # {name}.toml rides along
    cosign sign --new-bundle-format REGISTRY/REPO@DIGEST   # the digest publish printed
    toolhost plugin add oci://REGISTRY/REPO:TAG --verify-identity ID --verify-issuer URL

The artifact is the CNCF wasm layout (`wkg oci pull` and `oras pull` read it);
`plugin add` refuses it unless its signature verifies (docs/manifests.md in the
toolhost repository: "Plugins from registries").
"#,
        lang = match lang {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        },
    )
}

fn gitignore(name: &str, lang: Lang) -> String {
    let extra = match lang {
        Lang::Rust => "/target/\n",
        Lang::Python => "/build/\n/.venv/\n",
        Lang::Js => "/node_modules/\n",
    };
    format!("/{name}.wasm\n{extra}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_substitution_finds_its_text() {
        // The example files may change: each rewrite must still apply.
        assert!(rust_sdk_lib().contains("path: \"../wit\""));
        assert!(!rust_sdk_lib().contains("../../../wit"));
        assert!(templates::PY_BUILD.contains("COMPONENTIZE_PY="));
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let files = project_files("my-tool", lang).unwrap();
            let manifest = files.iter().find(|f| f.path == "my-tool.toml").unwrap();
            assert!(manifest.text.contains("id = \"my-tool\""), "{lang:?}");
            for f in &files {
                assert!(
                    !f.text.contains("example_") && !f.text.contains("toolhost-example-"),
                    "{lang:?} {} still names the example",
                    f.path
                );
                assert!(
                    !f.text.contains("../../"),
                    "{lang:?} {} points into the repository",
                    f.path
                );
            }
        }
    }

    #[test]
    fn every_readme_says_how_to_publish_and_sign() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let files = project_files("my-tool", lang).unwrap();
            let readme = &files.iter().find(|f| f.path == "README.md").unwrap().text;
            assert!(
                readme.contains("toolhost plugin publish my-tool.wasm oci://REGISTRY/REPO:TAG"),
                "{lang:?}"
            );
            assert!(
                readme.contains("cosign sign --new-bundle-format"),
                "{lang:?}"
            );
            assert!(readme.contains("toolhost plugin add oci://"), "{lang:?}");
        }
    }

    #[test]
    fn a_bad_name_is_refused() {
        let err = project_files("My Tool", Lang::Rust).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("`My Tool` cannot name a plugin: ")
        );
    }
}
