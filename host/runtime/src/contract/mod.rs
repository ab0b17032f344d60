//! Host-side bindings of the WIT contract (`wit/`), one module per released
//! contract version (Zed's `since_vX` shape; see ARCHITECTURE.md, "Contract
//! versions"). Each version's folder under `wit/` is frozen once released; a
//! later version gets a new module here, and older ones become thin adapters
//! onto the same host implementation. Version strings are written once, in
//! `contract_version.rs`.

pub mod v0_1_0;

pub use crate::contract_version::{LATEST, SUPPORTED};
