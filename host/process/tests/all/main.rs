//! Integration tests of toolhost-process: one binary, one module per area, real
//! processes throughout (no wasm, no runtime). `support` holds what they share;
//! the binary's suite (`tests/all`) borrows it for its own tests of these areas
//! through the real `toolhost`.
//!
//! - `sessions`: the session engine (start, output, events, stdin, kills, quotas,
//!   retention, the host's shell).
//! - `descendants`: whole process trees (setsid grandchildren, leftovers, the
//!   subreaper fallback).
//! - `sandbox`: the kernel sandbox applied to plain commands.
//! - `confinement`: metadata, setuid files, keyrings, io_uring and git's hooks path.
//! - `read_deny`: denied reads (masks) and their limits.
//! - `unix_sockets`: the UNIX-socket grant of the sandbox.

mod confinement;
mod descendants;
mod read_deny;
mod sandbox;
mod sessions;
mod support;
mod unix_sockets;
