//! The toolhost runtime: everything between a front door and a process.
//!
//! Its modules are private; the `pub use` lists below are the crate's API (as
//! wasmtime-wasi's lib.rs), grouped by the module that owns each item:
//!
//! - `host`: [`Host`] loads the plugins and runs tool calls (and resource
//!   reads, prompts, completions) for every front door, set up by
//!   [`HostConfig`];
//! - `engine` narrows wasmtime: the one place that configures
//!   `wasmtime::Config` (epochs, pooling, the compiled-code cache);
//! - `plugin`: the one load pipeline for every plugin kind (pin, world check
//!   from the bytes, compile, link, `InstancePre`) and a fresh, limited store
//!   per call;
//! - `contract`: the WIT bindings, one module per contract version; the
//!   newest (0.2.0) holds the types (MCP content blocks, tool specs and
//!   results, resources, prompts, and the [`CallClient`] channel);
//! - `content`: limits on content blocks and their terminal rendering;
//! - `uri_template`: RFC 6570 level-1 URI templates, matched in reverse;
//! - `manifest`: a plugin's manifest, the `toolhost-manifest` crate (its
//!   grants: exec patterns in the shared [`toolhost_pattern`] language,
//!   preopens, env, limits);
//! - `permissions`: the pipeline every process start passes (request
//!   resolved → exec grant → policy → approver → spawn);
//! - `event_bridge`: process events and permission requests into the host
//!   session's event log ([`LogObserver`]; the log itself is the
//!   `toolhost-host-session` crate, re-exported below);
//! - `display`: escaping plugin-provided text before a person reads it;
//! - `catalog`: the resources, templates and prompts plugins offer, merged and
//!   routed;
//! - `inspect`: what `toolhost plugin inspect` reports of a component;
//! - `builtin`: the embedded plugins.
//!
//! Processes themselves live in `toolhost-process`, which this crate drives and
//! never reaches around. See ARCHITECTURE.md for the map.

mod approval_text;
mod builtin;
mod call;
mod call_sink;
mod catalog;
mod content;
mod contract;
mod display;
mod engine;
mod event_bridge;
mod host;
mod inspect;
mod installed;
mod limits;
mod metrics;
mod permissions;
mod plugin;
mod uri_template;

// The host every front door drives: its configuration, calls and results.
pub use call_sink::CallProgress;
pub use catalog::{CompletionRef, PromptEntry, RequestError, ResourceEntry, TemplateEntry};
pub use host::{
    CallRequest, Host, HostConfig, LOCAL_IDENTITY, RunningCall, SkippedPlugin, StartError,
    ToolCallError, ToolEntry, ToolResult, manifest_for,
};
pub use limits::{LimitExceeded, Limits};
pub use metrics::{Metrics, ToolMetrics};

// The contract: its versions, and 0.2.0's types, which are the runtime's (content,
// resources, prompts, and the client channel a front door implements).
pub use contract::v0_2_0::client::{
    CallClient, ClientError, ClientFuture, ElicitAction, ElicitRequest, ElicitResponse, LogLevel,
    MAX_LOGS_PER_CALL, MAX_PROGRESS_PER_CALL, SamplingRequest, SamplingResponse,
};
pub use contract::v0_2_0::{
    Annotations, ContentBlock, Media, PromptMessage, PromptResult, ResourceBody, ResourceContents,
    ResourceLink, Role,
};
pub use toolhost_manifest::{ContractVersion, UnsupportedContract};
// Contract 0.1.0's tool-plugin bindings, to measure a bare instance (the bench).
pub use contract::v0_1_0::tool_plugin::ToolPluginPre;
pub use contract::v0_1_0::tool_plugin::exports::toolhost::plugin::tool::ToolCall as ToolCallV0_1_0;

// Plugins: loading, calling, their limits, the built-in ones, and the engine under them.
pub use builtin::{BASH, BASH_ID, POLICY, POLICY_ID, bash_manifest, policy_limits};
pub use engine::{Allocation, CompileProgress, CompileSource, EngineOptions, Runtime, sha256_hex};
pub use inspect::{InspectOptions, Inspection, Progress, inspect, inspect_with};
pub use plugin::{
    CallError, Completions, LoadError, MAX_COMPLETIONS, MAX_CONTENT_BLOCKS, MAX_DESCRIPTION_BYTES,
    MAX_OUTPUT_BYTES, MAX_TOOL_NAME_LEN, MAX_TOOLS_PER_PLUGIN, PolicyPlugin, ToolPlugin,
    tool_name_error,
};

// Manifests (the `toolhost-manifest` crate: schema, validation, exec grants) and the
// permission pipeline.
pub use approval_text::{PERMISSION_HEADER, permission_text, plugin_question_text, short_id};
pub use permissions::{
    Answer, ApprovalOutcome, ApprovalRequest, Approver, BY_CALL_TIMEOUT, Decision,
    PermissionRequest, STDIN_HEAD_BYTES, StdinShown,
};
use toolhost_manifest as manifest;
pub use toolhost_manifest::{ExecGrant, Manifest, parse_size, validate_id};

// The host session's event log (the `toolhost-host-session` crate) and the bridge
// that feeds it.
pub use event_bridge::LogObserver;
pub use toolhost_host_session::{
    Actor, ClientInfo, EVENT_FIELD_MAX, EVENTS_FILE, HostEvent, HostEventKind, HostSessionLog,
    Lifecycle, MAX_REPLAY_EVENTS, OMITTED_KEY, Replay, hosts_dir, now_ms, validate_host_session_id,
};

// Plugin text before a person reads it.
pub use display::{
    ECHO_MESSAGE_MAX_BYTES, ECHO_NAME_MAX_BYTES, echo_message, echo_name, escape, escape_block,
    escape_line,
};

/// Most threads the tokio blocking pool of [`tokio_runtime`] may start: file reads
/// for replays and prompts are the only blocking work, and a bounded pool keeps the
/// host's thread count at `cores + 8` or less (benchmark P5 in `BENCHMARKS.md`).
pub const MAX_BLOCKING_THREADS: usize = 4;

/// The tokio runtime the `toolhost` binary runs on: multi-threaded (one worker per
/// core), IO and time drivers on, at most [`MAX_BLOCKING_THREADS`] blocking threads.
/// Embedders and the benchmarks use the same so measured figures match the binary.
///
/// The blocking threads are started here and never retire: tokio panics when
/// `spawn_blocking` finds no blocking thread and cannot start one, which is what
/// happens when commands have used up a process limit the host shares with them
/// (`RLIMIT_NPROC`, a cgroup's `pids.max`). With the threads already there, such a
/// task waits for a free one instead (docs/processes.md#process-tracking).
///
/// Errors: the OS refused the threads or the IO driver.
pub fn tokio_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_keep_alive(std::time::Duration::from_secs(100 * 365 * 24 * 3600))
        .build()?;
    prestart_blocking_threads(&runtime);
    Ok(runtime)
}

/// Starts all [`MAX_BLOCKING_THREADS`] blocking threads: each task holds its
/// thread until all have started (or 1 s passed, should the OS refuse one).
fn prestart_blocking_threads(runtime: &tokio::runtime::Runtime) {
    use std::sync::{Arc, Condvar, Mutex};
    let started = Arc::new((Mutex::new(0usize), Condvar::new()));
    for _ in 0..MAX_BLOCKING_THREADS {
        let started = started.clone();
        runtime.spawn_blocking(move || {
            let (count, all) = &*started;
            let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            all.notify_all();
            let wait = std::time::Duration::from_secs(1);
            let _ = all.wait_timeout_while(n, wait, |n| *n < MAX_BLOCKING_THREADS);
        });
    }
}
