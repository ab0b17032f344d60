//! The toolhost runtime: everything between a front door and a process.
//!
//! - [`engine`] narrows wasmtime: the one place that configures
//!   `wasmtime::Config` (epochs, pooling, the compiled-code cache);
//! - [`plugin`]: the one load pipeline for every plugin kind (pin, compile,
//!   world check, link, `InstancePre`) and a fresh, limited store per call;
//! - [`contract`]: the WIT bindings, one module per contract version;
//! - [`manifest`]: a plugin's grants (exec patterns in the shared
//!   [`toolhost_pattern`] language, preopens, env, limits);
//! - [`permissions`]: the pipeline every process start passes
//!   (request resolved → exec grant → policy → approver → spawn);
//! - [`host_session`]: the event log of one host session;
//! - [`Host`]: loads the plugins and runs tool calls for every front door.
//!
//! Processes themselves live in `toolhost-process`, which this crate drives and
//! never reaches around. See ARCHITECTURE.md for the map.

pub mod builtin;
mod call;
pub mod contract;
mod contract_version;
pub mod engine;
mod host;
pub mod host_session;
pub mod inspect;
mod limits;
pub mod manifest;
pub mod permissions;
pub mod plugin;

pub use call::{CallInfo, Services};
pub use host::{Host, HostConfig, HostError, RunningCall, ToolEntry, ToolResult, manifest_for};
pub use limits::{LimitExceeded, Limits};

/// Most threads the tokio blocking pool of [`tokio_runtime`] may start: file reads
/// for replays and prompts are the only blocking work, and a bounded pool keeps the
/// host's thread count at `cores + 8` or less (benchmark P5 in `BENCHMARKS.md`).
pub const MAX_BLOCKING_THREADS: usize = 4;

/// The tokio runtime the `toolhost` binary runs on: multi-threaded (one worker per
/// core), IO and time drivers on, at most [`MAX_BLOCKING_THREADS`] blocking threads.
/// Embedders and the benchmarks use the same so measured figures match the binary.
///
/// Errors: the OS refused the threads or the IO driver.
pub fn tokio_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
}
