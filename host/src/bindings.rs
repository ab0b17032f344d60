//! Host-side bindings of the WIT contract (`wit/`), one module per released
//! contract version. Each version's folder is frozen once released; a later
//! version gets a new module here and thin adapters onto the same host
//! implementation (the approach of Zed's extension host).

/// `toolhost:plugin@0.1.0`.
pub mod v0_1_0 {
    /// The `tool-plugin` world: imports `sessions` (implemented in
    /// `plugins::sessions_api`), exports `tool`.
    #[allow(missing_docs)]
    pub mod tool_plugin {
        wasmtime::component::bindgen!({
            path: "../wit/v0.1.0",
            world: "toolhost:plugin/tool-plugin@0.1.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "wasi": wasmtime_wasi::p2::bindings,
                "toolhost:plugin/sessions.subscription": crate::plugins::sessions_api::SubscriptionResource,
            },
        });
    }

    /// The `policy-plugin` world: exports `policy`, imports nothing of ours.
    #[allow(missing_docs)]
    pub mod policy_plugin {
        wasmtime::component::bindgen!({
            path: "../wit/v0.1.0",
            world: "toolhost:plugin/policy-plugin@0.1.0",
            exports: { default: async },
            with: {
                "wasi": wasmtime_wasi::p2::bindings,
            },
        });
    }

    /// The WIT package name and version these bindings target.
    pub const PACKAGE: &str = "toolhost:plugin@0.1.0";
}
