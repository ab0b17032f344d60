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
mod spawn;
pub mod tty;

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

/// The soft `RLIMIT_NOFILE` before [`raise_fd_limit`] raised it (0: not raised).
pub(crate) static INHERITED_NOFILE: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (as Go and most servers do at
/// start-up) and returns the new soft limit. Every running session holds a few
/// descriptors (its pipes and pidfd), so the default soft limit of 1024 would cap a
/// host at a few hundred sessions.
///
/// Errors: the `getrlimit`/`setrlimit` error.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid out-pointer for getrlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        // Commands get the limit the host was started with back (see
        // `sessions::process::child_setup`): some programs loop up to it.
        INHERITED_NOFILE.store(limit.rlim_cur, std::sync::atomic::Ordering::Relaxed);
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid rlimit read just above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(limit.rlim_cur)
}

pub use host::{Host, HostConfig, HostError, RunningCall, ToolResult};
