//! `toolhost:plugin@0.1.0` (`wit/v0.1.0`): the `tool-plugin` world (imports
//! `sessions`, exports `tool`) and the `policy-plugin` world (exports
//! `policy`). `bindgen!` needs literal paths and world names, so they repeat
//! the version; every other use names it as a value,
//! [`ContractVersion::V0_1_0`](toolhost_manifest::ContractVersion::V0_1_0).
//!
//! Contract 0.2.0 ([`super::v0_2_0`]) is newer, so it holds the types the
//! runtime works with; [`adapt`] converts this version's `tool` results onto
//! them. `sessions` and `policy` are unchanged in 0.2.0 (which imports and
//! exports these very interfaces), so their host side lives here, once.

pub mod adapt;
mod sessions;

pub use sessions::{SessionsCtx, SubscriptionResource, add_to_linker as add_sessions_to_linker};

/// The export names of this version's interfaces, as a component lists them.
pub mod names {
    /// `toolhost:plugin/policy@0.1.0`.
    pub const POLICY: &str = "toolhost:plugin/policy@0.1.0";
    /// `toolhost:plugin/sessions@0.1.0` (an import; 0.2.0 imports it too).
    pub const SESSIONS: &str = "toolhost:plugin/sessions@0.1.0";
}

/// The `tool-plugin` world: imports `sessions` (implemented in this module's
/// `sessions`), exports `tool`.
#[allow(missing_docs)]
pub mod tool_plugin {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.1.0",
        world: "toolhost:plugin/tool-plugin@0.1.0",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
            "toolhost:plugin/sessions.subscription": super::SubscriptionResource,
        },
        additional_derives: [PartialEq],
    });
}

/// The `policy-plugin` world: exports `policy`, imports nothing of ours.
#[allow(missing_docs)]
pub mod policy_plugin {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.1.0",
        world: "toolhost:plugin/policy-plugin@0.1.0",
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
        },
    });
}
