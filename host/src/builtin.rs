//! The built-in plugins, compiled from `plugins/` by `build.rs` and embedded
//! in the binary so `toolhost` works with no setup (DESIGN §8).

/// The `bash` tool plugin component (`plugins/bash`).
pub const BASH: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_bash.wasm"));

/// The policy plugin component (`plugins/policy`).
pub const POLICY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_policy.wasm"));

/// Plugin id of the built-in bash plugin.
pub const BASH_ID: &str = "bash";

/// Plugin id of the built-in policy plugin.
pub const POLICY_ID: &str = "policy";
