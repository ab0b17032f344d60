//! The built-in `bash` tool plugin: an agent's shell tool, running commands
//! through the host's `sessions` interface (it cannot spawn anything itself).

#[cfg(target_arch = "wasm32")]
mod component;
