//! Integration tests of toolhost-runtime: one binary, one module per area,
//! driving `Host` (and the session engine beside it) through the crate's API
//! with real processes and the real embedded plugins, no front door.
//!
//! `support` holds what they share (also included by the binary's suite,
//! `tests/all`); `process_support` is the process crate's test support
//! (`host/process/tests/all/support.rs`), for what these tests need of it too.
//! What needs the `toolhost` binary or the MCP door is in `tests/all`.

mod bash;
mod bash_compat;
mod contract_v0_2;
mod disk;
mod hostile;
mod hostile_grants;
mod hostile_load;
mod hostile_quota;
mod hostile_state;
#[path = "../../../process/tests/all/support.rs"]
mod process_support;
mod remembered;
mod support;
