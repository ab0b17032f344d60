//! Process sessions: real OS processes the host runs on behalf of plugins (ARCHITECTURE.md, "Crates").
//!
//! [`Sessions`] starts `SHELL -c COMMAND` in its own session and process group with an
//! allowlisted environment, a working directory inside the workspace and stdin closed
//! unless asked for, confined by the kernel sandbox ([`crate::sandbox`];
//! [`SessionsConfig::sandbox`], default `workspace-write` with the network blocked) with
//! a private `TMPDIR`; captures stdout and stderr byte-exact (interleaved in arrival
//! order) to `<state_dir>/sessions/<id>/output.log` while keeping memory bounded;
//! ends a run on the direct child's exit (draining the pipes for a bounded grace);
//! kills whole process groups (SIGTERM, grace, SIGKILL) on timeout, `kill`, the end of
//! a tool call or host shutdown; and records a seq-numbered event stream per session
//! that [`Subscription`]s follow without polling.
//!
//! The types mirror `wit/v0.1.0/sessions.wit` (`interface sessions`) so the wasm
//! binding is a field-by-field conversion.
//!
//! Runtime requirements: [`Sessions::new`] must be called inside a tokio runtime with
//! IO and time enabled (a multi-thread runtime is recommended); every session runs as a
//! task on that runtime, and children are forked by one dedicated thread that lives as
//! long as the [`Sessions`]. Dropping the last clone SIGKILLs every running session's
//! process group (call [`Sessions::shutdown`] for an orderly SIGTERM first); if the host
//! dies outright, `PR_SET_PDEATHSIG` SIGKILLs the shells (not their background children).

pub(crate) mod caller;
pub(crate) mod config;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod exits;
pub(crate) mod id;
pub(crate) mod ledger;
pub(crate) mod manage;
pub(crate) mod observer;
pub(crate) mod output;
pub(crate) mod proc_scan;
pub(crate) mod process;
pub(crate) mod request;
pub(crate) mod retention;
pub(crate) mod session;
pub(crate) mod shell;
pub(crate) mod snapshot;
pub(crate) mod start;
pub(crate) mod status;
pub(crate) mod subscription;
pub(crate) mod survivors;
pub(crate) mod tree;
