//! Host-side bindings of the WIT contract (`wit/`), one module per released
//! contract version (Zed's `since_vX` shape; the versions: [`ContractVersion`]). Each
//! version's folder under `wit/` is frozen once released; a
//! later version gets a new module here, and older ones become thin adapters
//! onto the same host implementation. Versions are values written once,
//! [`ContractVersion`] (in `toolhost-manifest`, which manifests validate against).
//!
//! - [`v0_1_0`]: `tool-plugin` and `policy-plugin` worlds; the host side of
//!   `sessions` (which 0.2.0 imports unchanged); [`v0_1_0::adapt`] converts
//!   its tool results to 0.2.0's types.
//! - [`v0_2_0`]: the newest, so its types are the runtime's (content blocks,
//!   tool specs and results, resources, prompts); the host side of `client`
//!   ([`v0_2_0::client`], with the [`v0_2_0::client::CallClient`] trait a
//!   front door implements).

pub mod v0_1_0;
pub mod v0_2_0;

#[cfg(doc)]
use toolhost_manifest::ContractVersion;
