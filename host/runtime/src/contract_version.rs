//! The contract versions this host implements, written once (a leaf module:
//! manifests validate against it, the bindings in [`crate::contract`] take their
//! version from it). `bindgen!` needs literal paths and world names, so the
//! per-version binding modules repeat the string there and only there.
//!
//! The rules (ARCHITECTURE.md, invariant "A released contract never changes; every
//! supported version stays linked"): a released `wit/vX.Y.Z/`
//! is frozen, its bytes checked by `tests/all/contract.rs`; a change is a new
//! version in a new directory with its own binding module under `contract/`;
//! a version, once in [`SUPPORTED`], is released and frozen and stays there,
//! so plugin binaries built for it keep loading (the fixtures in
//! `tests/fixtures/compat/vX.Y.Z/` prove it on every host).

/// `toolhost:plugin@0.1.0` (`wit/v0.1.0`), released and frozen.
pub const V0_1_0: &str = "0.1.0";

/// `toolhost:plugin@0.2.0` (`wit/v0.2.0`): content blocks, the `client`
/// interface, resources and prompts; imports `sessions@0.1.0` and exports
/// `policy@0.1.0` unchanged. Released and frozen.
pub const V0_2_0: &str = "0.2.0";

/// Every contract version this host links, oldest first; a manifest's
/// `contract` must be one of them. Versions are only ever appended.
pub const SUPPORTED: &[&str] = &[V0_1_0, V0_2_0];

/// The version new projects start from: what `toolhost plugin new` and
/// `plugin wit` write by default, and what a plugin without a manifest is
/// recorded as targeting. Still 0.1.0, because the Python and JavaScript
/// guest SDKs and the starter projects target it; Rust authors get 0.2.0
/// from the SDK's `v0_2` feature and `plugin wit --contract 0.2.0`. (The host
/// picks each component's version from what it exports, whatever this says.)
pub const STARTER: &str = V0_1_0;
