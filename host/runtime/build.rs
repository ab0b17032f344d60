//! Builds the built-in plugins (`plugins/bash`, `plugins/policy`) as
//! `wasm32-wasip2` components into `OUT_DIR`, where `src/builtin.rs` embeds
//! them with `include_bytes!`. Test-only
//! plugins are built by `tests/fixtures`, never here.

fn main() {
    toolhost_wasm_build::build_plugins(
        &toolhost_wasm_build::workspace_root(),
        &[
            ("toolhost-bash", "toolhost_bash"),
            ("toolhost-policy", "toolhost_policy"),
        ],
    );
}
