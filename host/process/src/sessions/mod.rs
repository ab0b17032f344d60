//! Process sessions: real OS processes the host runs on behalf of plugins
//! (this crate knows nothing of wasm); [`Sessions`](crate::Sessions) is the engine.
//! One file per concern:
//!
//! - what callers name and ask: `id.rs` (session ids), `caller.rs` (host or plugin),
//!   `request.rs` (start requests, their size limits, the resolved start), `shell.rs`
//!   (the shell kinds, the host's shell);
//! - what they get back: `event.rs` (the event stream), `snapshot.rs` (snapshots,
//!   output ranges, usage), `status.rs` (how a session ends, who killed it),
//!   `error.rs` (session errors, failed host operations), `subscription.rs`;
//! - the engine: `config.rs` (its configuration and defaults), `observer.rs` (the hook
//!   every event leaves through), `engine.rs` (the registry, finished-session bounds,
//!   the blocking half of a start), `ledger.rs` (running-session slots and quotas),
//!   `start.rs` (resolve, spawn, adopt), `manage.rs` (check, wait, detach, stdin,
//!   kill, read, end a call's runs, shut down);
//! - one session: `session.rs` (its state and task), `output.rs` (memory buffers, the
//!   capped `output.log`), `exits.rs` (waiting for exits through io_uring);
//! - processes: `process.rs` (environment, cwd, the spawner thread, signalling),
//!   `program.rs` (the program a command's first word names, the `PATH` it is found on),
//!   `tree.rs` (whole process trees: cgroups or the subreaper), `reaper.rs`
//!   (orphans the subreaper adopted, reaped), `proc_scan.rs` (`/proc`);
//! - what outlives a host: `retention.rs` (the state dir's sweep), `survivors.rs`
//!   (processes a dead host left), `restore.rs` (the ended sessions of an earlier
//!   run of the host session, known again).

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
pub(crate) mod program;
pub(crate) mod reaper;
pub(crate) mod request;
pub(crate) mod restore;
pub(crate) mod retention;
pub(crate) mod session;
pub(crate) mod shell;
pub(crate) mod snapshot;
pub(crate) mod start;
pub(crate) mod status;
pub(crate) mod subscription;
pub(crate) mod survivors;
pub(crate) mod tree;
