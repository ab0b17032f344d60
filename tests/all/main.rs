//! Integration tests for toolhost: one binary, one module per area.
//!
//! `cli` and `exec_sandbox` drive the built `toolhost` binary on real
//! commands (`exec_sandbox`: the kernel sandbox end to end); the others use
//! the library API with real processes and the real embedded plugins.

mod bash;
mod cli;
mod control;
mod exec_sandbox;
mod hostile;
mod mcp;
mod plugins;
mod sandbox;
mod sessions;
