//! The contract versions this host implements, written once (a leaf module:
//! manifests validate against it, the bindings in [`crate::contract`] take their
//! version from it). `bindgen!` needs literal paths and world names, so the
//! per-version binding modules repeat the string there and only there.

/// `toolhost:plugin@0.1.0` (`wit/v0.1.0`).
pub const V0_1_0: &str = "0.1.0";

/// Every contract version this host links, oldest first; a manifest's
/// `contract` must be one of them.
pub const SUPPORTED: &[&str] = &[V0_1_0];

/// The newest supported version (what a plugin without a manifest is taken
/// to target).
pub const LATEST: &str = V0_1_0;
