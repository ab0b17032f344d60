//! Build-script helper: compiles toolhost plugin crates to `wasm32-wasip2`
//! components and copies them into the calling build script's `OUT_DIR`,
//! with their sha256 beside them. Used by `host/runtime/build.rs` (the
//! built-in plugins it embeds) and `tests/fixtures/build.rs` (test-only
//! plugins).
//!
//! Like wasmtime's own test-programs crate, [`build_plugins`] runs a nested
//! `cargo build` with its own target directory (reusing the outer one would
//! block on cargo's build lock) and without the outer build's flags (coverage
//! or sanitizer `RUSTFLAGS` break wasm builds).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// Builds `plugins` (pairs of cargo package name and artifact stem, e.g.
/// `("toolhost-bash", "toolhost_bash")`) with the workspace's `plugin` profile
/// for `wasm32-wasip2`, then writes `<stem>.wasm` and `<stem>.sha256` (lowercase
/// hex) into `OUT_DIR`. Prints `cargo:rerun-if-changed` for `plugins/` (but
/// not `plugins/examples` and `plugins/sdk`), `wit/`, `tests/plugins/`,
/// `host/pattern`, `host/text`, `Cargo.toml` and `Cargo.lock` of the workspace at
/// `workspace_root`.
///
/// Panics (the build script's way to fail) when cargo fails; when the
/// `wasm32-wasip2` target is missing the message says to run
/// `rustup target add wasm32-wasip2`.
pub fn build_plugins(workspace_root: &Path, plugins: &[(&str, &str)]) {
    let out_dir =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set for build scripts"));
    for dir in [
        "plugins",
        "wit",
        "tests/plugins",
        "host/pattern",
        "host/text",
    ] {
        rerun_for_tree(&workspace_root.join(dir));
    }
    for file in ["Cargo.lock", "Cargo.toml"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace_root.join(file).display()
        );
    }

    // A shared target dir for the plugin builds: under the outer target dir
    // (next to `debug/`, `release/`), so host debug and release builds share
    // one plugin build. OUT_DIR is `<target>/<profile>/build/<pkg>-<hash>/out`.
    let target_dir = out_dir
        .ancestors()
        .nth(4)
        .map(|t| t.join("plugins"))
        .unwrap_or_else(|| out_dir.join("plugins-target"));

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root)
        .args([
            "build",
            "--quiet",
            "--profile",
            "plugin",
            "--target",
            "wasm32-wasip2",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    for (package, _) in plugins {
        cmd.args(["-p", package]);
    }
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_LLVM_COV",
        "CARGO_LLVM_COV_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .expect("failed to run cargo for the wasm plugins");
    if !status.success() {
        let installed = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("wasm32-wasip2"))
            .unwrap_or(true);
        if !installed {
            panic!(
                "the wasm32-wasip2 target is not installed; run `rustup target add wasm32-wasip2` \
                 (this environment does not install targets automatically)"
            );
        }
        panic!("building the wasm plugins failed (see the cargo output above)");
    }
    for (_, stem) in plugins {
        let built = target_dir
            .join("wasm32-wasip2/plugin")
            .join(format!("{stem}.wasm"));
        let dest = out_dir.join(format!("{stem}.wasm"));
        std::fs::copy(&built, &dest)
            .unwrap_or_else(|e| panic!("copying {} failed: {e}", built.display()));
        // Its sha256 (the compiled-code cache key), so start-up need not hash the
        // embedded bytes every time (benchmark P6).
        let bytes = std::fs::read(&dest)
            .unwrap_or_else(|e| panic!("reading {} failed: {e}", dest.display()));
        let digest: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(out_dir.join(format!("{stem}.sha256")), digest)
            .unwrap_or_else(|e| panic!("writing the digest of {stem} failed: {e}"));
    }
}

/// The workspace root of a crate at `<root>/<a>/<b>` (two levels down, as every
/// crate that builds plugins is), from the build script's `CARGO_MANIFEST_DIR`.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR is set for build scripts"),
    );
    manifest_dir
        .ancestors()
        .nth(2)
        .expect("the crate lives two levels below the workspace root")
        .to_path_buf()
}

/// Asks cargo to rerun the build script when any file under `dir` changes
/// (build outputs, the guest examples and SDKs, and Markdown excluded: no plugin
/// crate built here reads them, and watching them would rebuild the host on
/// every edit of the author's guide).
fn rerun_for_tree(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path
            .file_name()
            .is_some_and(|n| n == "target" || n == "node_modules")
            || path.ends_with("plugins/examples")
            || path.ends_with("plugins/sdk")
            || path.extension().is_some_and(|e| e == "md")
        {
            continue;
        }
        if path.is_dir() {
            rerun_for_tree(&path);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
