//! Per-call resource limits, as plain data: a manifest states them, the
//! plugin store enforces them (memory and tables through a store limiter, CPU
//! through epoch ticks, wall time through a timeout around the whole call; see
//! `crate::plugin`).

use std::time::Duration;

use crate::engine::EPOCH_TICK;

/// The limits one plugin call runs under.
///
/// Defaults ([`Limits::default`]): 64 MiB of linear memory, 1 s of CPU, 30 s
/// of wall time, 10,000 table elements, 16 instances, tables and memories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes of linear memory across the call's memories.
    pub memory_bytes: usize,
    /// Most CPU time the guest may run (counted in epoch ticks of
    /// [`EPOCH_TICK`]; time blocked in host calls does not count).
    pub cpu: Duration,
    /// Most wall-clock time for the whole call, host calls included.
    pub wall: Duration,
    /// Most elements in any one table.
    pub table_elements: usize,
    /// Most component/core instances, tables and memories created in a call.
    pub instances: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: 64 << 20,
            cpu: Duration::from_secs(1),
            wall: Duration::from_secs(30),
            table_elements: 10_000,
            instances: 16,
        }
    }
}

impl Limits {
    /// The CPU budget in epoch ticks (at least 1).
    pub fn cpu_ticks(&self) -> u64 {
        (self.cpu.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }
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
