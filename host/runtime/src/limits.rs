//! Per-call resource limits: the data ([`Limits`]) comes with the manifest
//! (`toolhost-manifest`); the plugin store enforces them (memory and tables through
//! a store limiter, CPU through epoch ticks, [`cpu_ticks`], wall time through a
//! timeout around the whole call; see `crate::plugin`), and a call that hits one
//! fails with [`LimitExceeded`].

use std::time::Duration;

use crate::engine::EPOCH_TICK;

pub use toolhost_manifest::Limits;

/// The CPU budget of `limits` in epoch ticks of [`EPOCH_TICK`] (at least 1).
pub fn cpu_ticks(limits: &Limits) -> u64 {
    limits.cpu_ticks(EPOCH_TICK)
}

/// Which limit a call hit. Carried as the trap error so the host can name it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    /// Linear memory would have grown past the limit.
    #[error("memory limit of {limit} bytes exceeded (the guest asked for {requested} bytes)")]
    Memory {
        /// The limit (bytes).
        limit: usize,
        /// The size the guest asked to grow to (bytes).
        requested: usize,
    },
    /// A table would have grown past the limit.
    #[error("table limit of {limit} elements exceeded")]
    Table {
        /// The limit (elements).
        limit: usize,
    },
    /// The guest ran longer than its CPU budget.
    #[error("CPU time limit of {} ms exceeded", limit.as_millis())]
    Cpu {
        /// The budget.
        limit: Duration,
    },
    /// The guest's call stack outgrew the engine's maximum (deep recursion).
    #[error("stack limit of {limit} bytes exceeded (call stack exhausted, e.g. by deep recursion)")]
    Stack {
        /// The limit (bytes; [`crate::engine::MAX_WASM_STACK`]).
        limit: usize,
    },
    /// The whole call took longer than its wall-time budget.
    #[error("wall time limit of {} ms exceeded", limit.as_millis())]
    Wall {
        /// The budget.
        limit: Duration,
    },
}
