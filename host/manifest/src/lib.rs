//! A toolhost plugin's manifest, read and judged without the engine (no wasmtime):
//!
//! - [`ContractVersion`]: the contract versions this host links, as ordered values
//!   ([`ContractVersion::MIN`], [`ContractVersion::MAX`]); manifests validate against
//!   them and the runtime's bindings take their version from them.
//!
//! `toolhost-runtime` re-exports what it needs; see ARCHITECTURE.md for the map.

mod contract_version;

pub use contract_version::{ContractVersion, UnsupportedContract};
