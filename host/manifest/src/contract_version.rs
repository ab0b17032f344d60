//! The contract versions this host implements, as values with an order (a leaf
//! module: manifests validate against it, the runtime's bindings in
//! `toolhost_runtime::contract` take their version from it). `bindgen!` needs
//! literal paths and world names, so the per-version binding modules repeat the
//! version there and only there.
//!
//! The rules (ARCHITECTURE.md, invariant "A released contract never changes; every
//! supported version stays linked"): a released `wit/vX.Y.Z/` is frozen, its bytes
//! checked by `tests/all/contract.rs`; a change is a new version in a new directory
//! with its own binding module under `host/runtime/src/contract/` and a new variant
//! here; a version, once in [`ContractVersion::ALL`], is released and frozen and
//! stays there, so plugin binaries built for it keep loading (the fixtures in
//! `tests/fixtures/compat/vX.Y.Z/` prove it on every host).

use std::fmt;
use std::str::FromStr;

/// A version of the `toolhost:plugin` contract (`wit/vX.Y.Z`) this host links.
///
/// Ordered oldest first (`V0_1_0 < V0_2_0`), so "0.2.0 or later" is
/// `version >= ContractVersion::V0_2_0`. Its `Display` and [`ContractVersion::as_str`]
/// are the version as written in WIT and in manifests (`0.1.0`); [`FromStr`] parses
/// exactly that text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContractVersion {
    /// `toolhost:plugin@0.1.0` (`wit/v0.1.0`), released and frozen.
    V0_1_0,
    /// `toolhost:plugin@0.2.0` (`wit/v0.2.0`): content blocks, the `client`
    /// interface, resources and prompts; imports `sessions@0.1.0` and exports
    /// `policy@0.1.0` unchanged. Released and frozen.
    V0_2_0,
}

impl ContractVersion {
    /// The oldest version this host links (never dropped).
    pub const MIN: ContractVersion = ContractVersion::V0_1_0;

    /// The newest version this host links: its binding module holds the types the
    /// runtime works with.
    pub const MAX: ContractVersion = ContractVersion::V0_2_0;

    /// Every version this host links, oldest first ([`MIN`](Self::MIN) to
    /// [`MAX`](Self::MAX)); a manifest's `contract` must be one of them. Versions are
    /// only ever appended.
    pub const ALL: &'static [ContractVersion] = &[ContractVersion::V0_1_0, ContractVersion::V0_2_0];

    /// The version new projects start from: what `toolhost plugin new` and
    /// `plugin wit` write by default, and what a plugin without a manifest is
    /// recorded as targeting. Still 0.1.0, because the Python and JavaScript
    /// guest SDKs and the starter projects target it; Rust authors get 0.2.0
    /// from the SDK's `v0_2` feature and `plugin wit --contract 0.2.0`. (The host
    /// picks each component's version from what it exports, whatever this says.)
    pub const STARTER: ContractVersion = ContractVersion::V0_1_0;

    /// The version as WIT and manifests write it: `0.1.0`, `0.2.0`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ContractVersion::V0_1_0 => "0.1.0",
            ContractVersion::V0_2_0 => "0.2.0",
        }
    }

    /// The version written `text` (exactly as [`as_str`](Self::as_str) gives it), or
    /// `None` for a version this host does not link.
    pub fn parse(text: &str) -> Option<ContractVersion> {
        ContractVersion::ALL
            .iter()
            .copied()
            .find(|v| v.as_str() == text)
    }

    /// Every supported version as text, oldest first, joined by `, ` (`0.1.0, 0.2.0`):
    /// how error messages list them.
    pub fn supported_list() -> String {
        ContractVersion::ALL
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A contract version this host does not link ([`ContractVersion`]'s [`FromStr`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("contract {0} is not supported; this toolhost loads {list}", list = ContractVersion::supported_list())]
pub struct UnsupportedContract(pub String);

impl FromStr for ContractVersion {
    type Err = UnsupportedContract;

    fn from_str(text: &str) -> Result<ContractVersion, UnsupportedContract> {
        ContractVersion::parse(text).ok_or_else(|| UnsupportedContract(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_print_and_order() {
        for v in ContractVersion::ALL {
            assert_eq!(v.as_str().parse::<ContractVersion>(), Ok(*v));
            assert_eq!(v.to_string(), v.as_str());
        }
        assert_eq!(ContractVersion::V0_1_0.to_string(), "0.1.0");
        assert!(ContractVersion::V0_1_0 < ContractVersion::V0_2_0);
        assert_eq!(ContractVersion::ALL.first(), Some(&ContractVersion::MIN));
        assert_eq!(ContractVersion::ALL.last(), Some(&ContractVersion::MAX));
        assert!(ContractVersion::ALL.windows(2).all(|w| w[0] < w[1]));
        assert!(ContractVersion::ALL.contains(&ContractVersion::STARTER));
        for bad in ["", "0.1", "v0.1.0", "0.1.0 ", "0.3.0"] {
            assert_eq!(ContractVersion::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            "9.9.9".parse::<ContractVersion>().unwrap_err().to_string(),
            "contract 9.9.9 is not supported; this toolhost loads 0.1.0, 0.2.0"
        );
    }
}
