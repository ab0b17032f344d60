//! OS processes for toolhost: spawning without `fork`, the kernel sandbox, and
//! process sessions (a command the host runs for a plugin, with output capture,
//! an event backlog, subscriptions, timeouts and kills of the whole process
//! group). See ARCHITECTURE.md, "Crates" and "Where each invariant is enforced".
//!
//! This crate has no wasmtime in it, and all of the host's `unsafe` and libc
//! calls live here. Everything it needs is passed in through
//! [`SessionsConfig`]: it reads no globals.
//!
//! Terms: a *process session* (here just "session", id `bg_…`) is one
//! command and its process group. It is not a *host session* (the event log of
//! one `toolhost serve` run, in `toolhost-runtime`).

mod fd_flags;
mod fd_limit;
mod peer;
pub mod sandbox;
mod sessions;
mod spawn;

pub use fd_flags::set_nonblocking;
pub use fd_limit::{FdLimit, raise_fd_limit};
pub use peer::current_uid;
pub use sessions::*;
