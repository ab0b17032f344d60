//! Integration tests for toolhost: one binary, one module per area.
//!
//! `cli`, `exec_sandbox` (the kernel sandbox end to end) and `mcp` drive the
//! built `toolhost` binary on real commands; the others use the library API
//! with real processes and the real embedded plugins; `architecture` checks
//! the layout ARCHITECTURE.md describes. `support` holds what they share.

mod architecture;
mod bash;
mod cli;
mod control;
mod exec_sandbox;
mod hostile;
mod mcp;
mod sandbox;
mod sessions;
mod support;
mod terminal;
