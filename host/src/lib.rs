//! toolhost: a WebAssembly component host with sandboxed tool plugins.
//!
//! The host owns everything with real authority (OS processes, session state,
//! the permission pipeline); plugins are WASI p2 components that see only the
//! WIT interfaces in `wit/` and what their manifest grants. Start with
//! [`Host`]: it loads the built-in plugins and runs tool calls.

#![warn(missing_docs)]

pub mod attach;
pub mod bindings;
pub mod builtin;
pub mod control;
pub mod engine;
pub mod events;
pub mod host;
pub mod inspect;
pub mod manifest;
pub mod mcp;
pub mod permissions;
pub mod plugins;
pub mod sandbox;
pub mod sessions;
pub mod tty;

pub use host::{Host, HostConfig, HostError, RunningCall, ToolResult};
