//! Guest SDK for toolhost tool plugins written in Rust (contract v0.1.0).
//!
//! It holds the one `wit_bindgen::generate!` of `wit/v0.1.0`, world
//! `toolhost:plugin/tool-plugin@0.1.0`, re-exports the types a plugin uses,
//! and adds a few helpers:
//!
//! - [`run_and_wait`]: start a command through `sessions`, wait for it with a
//!   timeout (`wasi:io/poll` on the session's pollable and a monotonic-clock
//!   timer, no busy loop), then `check` it;
//! - [`StartRequest::new`] and friends for requests with the contract's defaults;
//! - [`ToolOutput::text`], [`ToolOutput::error`], [`ToolSpec::new`];
//! - [`export!`](crate::export), which exports your `Guest` implementation.
//!
//! ```ignore
//! use toolhost_plugin_sdk::{Guest, ToolCall, ToolError, ToolOutput, ToolSpec};
//!
//! struct Plugin;
//!
//! impl Guest for Plugin {
//!     fn describe() -> Vec<ToolSpec> {
//!         vec![ToolSpec::new("greet", "Says hello.", r#"{"type":"object"}"#)]
//!     }
//!     fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
//!         Ok(ToolOutput::text("hello"))
//!     }
//! }
//!
//! toolhost_plugin_sdk::export!(Plugin);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the `.wasm`
//! in `target/wasm32-wasip2/release/` is the component (no adapter step).
//! The author's guide is `plugins/README.md`.
//!
//! Contract v0.2.0 (content blocks, client calls, resources, prompts) is the
//! module `v0_2`, behind the cargo feature `v0_2` (off by default, so a
//! v0.1.0 plugin's component does not change): see its docs.

#![deny(missing_docs)]

use std::time::Duration;

/// Implements the helpers that every contract version's `tool` types share, on
/// the `ToolHints`, `ToolOutput` and `ToolSpec` in scope where it is invoked:
/// each version's `generate!` makes its own records of the same shape, so the
/// crate root invokes it for v0.1.0 and `contract/v0_2.rs` for v0.2.0. What a
/// version changes (`ToolOutput::text`, `ToolSpec::new`) stays in that
/// version's module. Defined before `mod contract` so that module sees it.
macro_rules! shared_tool_helpers {
    () => {
        impl ToolHints {
            /// Hints for a tool that changes nothing and touches no outside world.
            pub const PURE: ToolHints = ToolHints {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: false,
            };
            /// Hints for a tool that runs processes but changes nothing.
            pub const READ_ONLY_PROCESS: ToolHints = ToolHints {
                read_only: true,
                destructive: false,
                idempotent: false,
                open_world: true,
            };
        }

        impl ToolOutput {
            /// A result the agent should see as a failure (MCP `isError`):
            /// [`ToolOutput::text`] of `text` with `is_error` set.
            pub fn error(text: impl Into<String>) -> ToolOutput {
                ToolOutput {
                    is_error: true,
                    ..ToolOutput::text(text)
                }
            }

            /// Adds structured content (a JSON object text, MCP `structuredContent`).
            pub fn with_structured(mut self, json: impl Into<String>) -> ToolOutput {
                self.structured = Some(json.into());
                self
            }
        }

        impl ToolSpec {
            /// The same spec with other `hints`.
            pub fn hints(mut self, hints: ToolHints) -> ToolSpec {
                self.hints = hints;
                self
            }
        }
    };
}

// Contract v0.2.0, `contract/v0_2.rs`. The `allow` is for copies of this
// file whose Cargo.toml declares no `v0_2` feature (the SDK that `toolhost
// plugin new` vendors): there the module is left out without a warning.
#[allow(unexpected_cfgs)]
mod contract {
    #[cfg(feature = "v0_2")]
    pub mod v0_2;
}
#[allow(unused_imports)] // empty without the feature
pub use contract::*;

/// The generated bindings of `wit/v0.1.0` (world `tool-plugin`), with every
/// WASI interface the world imports (`generate_all`).
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit/v0.1.0",
        world: "toolhost:plugin/tool-plugin@0.1.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "toolhost_plugin_sdk::bindings",
    });
}

pub use bindings::exports::toolhost::plugin::tool::{
    self, Guest, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec,
};
pub use bindings::toolhost::plugin::sessions::{
    self, EndReason, EventKind, ExitStatus, SessionError, SessionEvent, SessionStatus, Snapshot,
    StartRequest, StdinMode, Subscription,
};
pub use bindings::wasi;

use bindings::wasi::clocks::monotonic_clock;
use bindings::wasi::io::poll;

/// Exports a type implementing [`Guest`] as the plugin's `tool` interface.
/// Use it once, at the crate root of a `cdylib` crate.
#[macro_export]
macro_rules! export {
    ($ty:ident) => {
        $crate::bindings::export_bindings!($ty with_types_in $crate::bindings);
    };
}

/// What [`run_and_wait`] (or [`wait`]) saw.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The session id (`bg_` + 12 hex digits).
    pub id: String,
    /// The session as `check` reported it after the wait: status, exit code
    /// or signal, the last 16 KiB of output (`output_tail`), byte count, ...
    pub snapshot: Snapshot,
    /// True when the timeout elapsed first: the process is still running (a
    /// foreground run is killed by the host when the call ends; call
    /// `sessions::kill` or `sessions::detach` to decide yourself).
    pub timed_out: bool,
}

impl Outcome {
    /// The exit code, when the process exited normally.
    pub fn exit_code(&self) -> Option<i32> {
        self.snapshot.exit.as_ref().and_then(|e| e.code)
    }

    /// True when the process exited by itself with code 0.
    pub fn success(&self) -> bool {
        self.snapshot.status == SessionStatus::Exited && self.exit_code() == Some(0)
    }
}

/// Starts `request` and waits at most `timeout` for it to end: start,
/// subscribe, poll the subscription's pollable together with a
/// monotonic-clock timer, then `check`. A denied or malformed request is the
/// `Err` of `start` (`SessionError::Denied` names the refusing step).
pub fn run_and_wait(request: StartRequest, timeout: Duration) -> Result<Outcome, SessionError> {
    let id = sessions::start(&request)?;
    wait(&id, timeout)
}

/// Waits at most `timeout` for session `id` to end, then `check`s it.
pub fn wait(id: &str, timeout: Duration) -> Result<Outcome, SessionError> {
    let sub = sessions::subscribe(id, 1)?;
    let ready = sub.subscribe();
    let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    let timer = monotonic_clock::subscribe_duration(nanos);
    let ended = |events: &[SessionEvent]| {
        events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Exited(_)))
    };
    let timed_out = loop {
        let events = sub.next();
        if ended(&events) {
            break false;
        }
        if events.is_empty() && ready.ready() {
            // Ready with nothing to return: the session ended and every event
            // was returned (the `exited` one may have been folded away).
            if sessions::check(id)?.status != SessionStatus::Running {
                break false;
            }
            // An event raced in; back off briefly instead of spinning.
            monotonic_clock::subscribe_duration(10_000_000).block();
        }
        if poll::poll(&[&ready, &timer]).contains(&1) {
            break !ended(&sub.next());
        }
    };
    Ok(Outcome {
        id: id.to_owned(),
        snapshot: sessions::check(id)?,
        timed_out,
    })
}

impl StartRequest {
    /// `command` with the contract's defaults: the workspace root as cwd, no
    /// extra environment, stdin closed, no host timeout, `/bin/sh`, and a
    /// background session (call [`StartRequest::for_call`] to make it a
    /// foreground run of your tool call).
    pub fn new(command: impl Into<String>) -> StartRequest {
        StartRequest {
            command: command.into(),
            cwd: None,
            env: Vec::new(),
            stdin: StdinMode::Closed,
            timeout_ms: None,
            shell: None,
            tool_call_id: None,
        }
    }

    /// Ties the run to tool call `tool_call_id` (from [`ToolCall`]): the host
    /// lists it under the call, can detach it, and kills it when the call
    /// ends without detaching it.
    pub fn for_call(mut self, tool_call_id: impl Into<String>) -> StartRequest {
        self.tool_call_id = Some(tool_call_id.into());
        self
    }

    /// Has the host kill the process group after `timeout` (at least 1 ms).
    pub fn kill_after(mut self, timeout: Duration) -> StartRequest {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.timeout_ms = Some(ms.max(1));
        self
    }
}

// The `tool` helpers of v0.1.0: those every version shares, then its own.
shared_tool_helpers!();

impl ToolOutput {
    /// A successful result with `text` and no structured content.
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            structured: None,
            is_error: false,
        }
    }
}

impl ToolSpec {
    /// A tool named `name` with `description` and `input_schema` (a JSON
    /// Schema object as text), hinted [`ToolHints::PURE`].
    pub fn new(name: &str, description: &str, input_schema: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: input_schema.into(),
            hints: ToolHints::PURE,
        }
    }
}

/// A one-line description of a session error, for a tool's result text.
pub fn describe_error(err: &SessionError) -> String {
    match err {
        SessionError::UnknownSession(id) => format!("unknown session {id}"),
        SessionError::SessionExited(st) => format!("session already ended: {st:?}"),
        SessionError::Denied(why) => format!("denied: {why}"),
        SessionError::InvalidRequest(why) => format!("invalid request: {why}"),
        SessionError::ResourceLimit(why) => format!("resource limit: {why}"),
        SessionError::Io(why) => format!("host I/O error: {why}"),
    }
}
