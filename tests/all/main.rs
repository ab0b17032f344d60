//! Integration tests for toolhost: one binary, one module per area.
//!
//! `cli`, `exec_sandbox` (the kernel sandbox end to end) and `mcp` drive the
//! built `toolhost` binary on real commands; the others use the library API
//! with real processes and the real embedded plugins; `architecture` checks
//! the layout ARCHITECTURE.md describes and `docs` that the documents and the
//! code's citations resolve, both over `repo` (the repository's own files).
//! `support` holds what they share;
//! `process_support` is the process crate's test support
//! (`host/process/tests/all/support.rs`), for what these tests need of it too.
//! Tests that need only `toolhost-process` live with it, in `host/process/tests`.

mod architecture;
mod bash;
mod bash_compat;
mod cli;
mod conformance;
mod contract;
mod contract_v0_2;
mod control;
mod crash_restart;
mod descendants;
mod disk;
mod docs;
mod examples;
mod exec_sandbox;
mod hostile;
mod hostile_grants;
mod hostile_load;
mod hostile_quota;
mod hostile_state;
mod load;
mod mcp;
mod mcp_http;
mod mcp_robustness;
mod plugin_cli;
mod policy_honesty;
#[path = "../../host/process/tests/all/support.rs"]
mod process_support;
mod repo;
mod support;
mod terminal;
mod unix_sockets;
