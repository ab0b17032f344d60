//! Per-call resource limits, as plain data: a manifest states them
//! ([`Manifest::limits`](crate::Manifest::limits)), the runtime's plugin store
//! enforces them (memory and tables through a store limiter, CPU through epoch ticks,
//! wall time through a timeout around the whole call).

use std::time::Duration;

/// The limits one plugin call runs under.
///
/// Defaults ([`Limits::default`]): 64 MiB of linear memory, 1 s of CPU, 30 s
/// of wall time, 10,000 table elements, 16 instances, tables and memories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes of linear memory across the call's memories.
    pub memory_bytes: usize,
    /// Most CPU time the guest may run (the runtime counts it in epoch ticks; time
    /// blocked in host calls does not count).
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
    /// The CPU budget in ticks of `tick` (at least 1): how the runtime's epoch
    /// callback counts [`Limits::cpu`].
    pub fn cpu_ticks(&self, tick: Duration) -> u64 {
        (self.cpu.as_millis() / tick.as_millis().max(1)).max(1) as u64
    }
}
