//! The built-in `bash` tool plugin: an agent's shell tool, running commands
//! through the host's `sessions` interface (it cannot spawn anything itself).
//!
//! Tools: `bash`, `bash_output`, `kill_shell`, `write_stdin`, `list_shells`
//! (see [`tools`] for their descriptions and schemas). Everything that does not
//! talk to the host lives in native-testable modules: [`args`] (argument
//! parsing), [`text`] (output cleaning and truncation), [`range`] (a part of
//! the output read again), [`report`] (status lines, error texts, structured
//! results) and [`tools`]. The wit-bindgen glue
//! (`component`) is compiled only for wasm32.

#![deny(missing_docs)]

pub mod args;
pub mod range;
pub mod report;
pub mod schemas;
pub mod text;
pub mod tools;

#[cfg(target_arch = "wasm32")]
mod component;
