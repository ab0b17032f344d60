//! Integration tests for toolhost: one binary, one module per area.
//!
//! They drive the built `toolhost` binary on real commands (`cli`,
//! `exec_sandbox`: the kernel sandbox end to end) or its front doors (`mcp`,
//! `mcp_http`, `control`); `architecture` checks the layout ARCHITECTURE.md
//! describes and `docs` that the documents and the code's citations resolve,
//! both over `repo` (the repository's own files). `support` holds what they
//! share; `runtime_support` and `process_support` are the runtime's and the
//! process crate's test support (`host/runtime/tests/all/support.rs`,
//! `host/process/tests/all/support.rs`), for what these tests need of them too.
//! Tests that need only `toolhost-runtime` live with it, in
//! `host/runtime/tests`, and those that need only `toolhost-process` in
//! `host/process/tests`.

mod approvals;
mod architecture;
mod cli;
mod closed_output;
mod confinement;
mod conformance;
mod container;
mod contract;
mod contract_v0_2;
mod control;
mod crash_restart;
mod deny_read;
mod deploy;
mod descendants;
mod disk;
mod disk_full;
mod docs;
mod doctor;
mod drain;
mod examples;
mod exec_sandbox;
mod fuzz;
mod hostile;
mod hostile_load;
mod load;
mod mcp;
mod mcp_http;
mod mcp_http_health;
mod mcp_http_metrics;
mod mcp_identity;
mod mcp_modern;
mod mcp_mrtr;
mod mcp_resources;
mod mcp_robustness;
mod output_events;
mod peers;
mod plugin_cli;
mod plugin_oci;
mod policy_honesty;
#[path = "../../host/process/tests/all/support.rs"]
mod process_support;
mod repo;
#[path = "../../host/runtime/tests/all/support.rs"]
mod runtime_support;
mod soak;
mod state_dir;
mod support;
mod telemetry;
mod terminal;
mod unix_sockets;
