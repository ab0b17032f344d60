//! Integration tests for toolhost: one binary, one module per area.
//!
//! `cli` drives the built `toolhost` binary on real commands; the others use
//! the library API with real processes and the real embedded plugins.

mod cli;
mod control;
mod mcp;
mod plugins;
mod sandbox;
mod sessions;
