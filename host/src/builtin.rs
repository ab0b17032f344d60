//! The built-in plugins, compiled from `plugins/` by `build.rs` and embedded
//! in the binary so `toolhost` works with no setup (DESIGN §8).

/// The `bash` tool plugin component (`plugins/bash`).
pub static BASH: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_bash.wasm"));

/// The policy plugin component (`plugins/policy`).
pub static POLICY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_policy.wasm"));

/// Lowercase hex sha256 of [`BASH`], computed at build time.
pub const BASH_SHA256: &str = include_str!(concat!(env!("OUT_DIR"), "/toolhost_bash.sha256"));

/// Lowercase hex sha256 of [`POLICY`], computed at build time.
pub const POLICY_SHA256: &str = include_str!(concat!(env!("OUT_DIR"), "/toolhost_policy.sha256"));

/// The build-time sha256 of `bytes` when they are one of the embedded plugins
/// (the same slice, by address and length), so start-up does not hash them.
pub fn known_sha256(bytes: &[u8]) -> Option<&'static str> {
    [(BASH, BASH_SHA256), (POLICY, POLICY_SHA256)]
        .into_iter()
        .find(|(b, _)| std::ptr::eq(*b, bytes))
        .map(|(_, digest)| digest)
}

/// Plugin id of the built-in bash plugin.
pub const BASH_ID: &str = "bash";

/// Plugin id of the built-in policy plugin.
pub const POLICY_ID: &str = "policy";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_time_digests_match_the_embedded_bytes() {
        assert_eq!(BASH_SHA256, crate::engine::sha256_hex(BASH));
        assert_eq!(POLICY_SHA256, crate::engine::sha256_hex(POLICY));
        assert_eq!(known_sha256(BASH), Some(BASH_SHA256));
        assert_eq!(
            known_sha256(BASH.to_vec().as_slice()),
            None,
            "only the embedded slice"
        );
    }
}
