//! The host's own metrics: what its tool calls, permission decisions,
//! process sessions and instance pool did, as Prometheus families
//! (`prometheus-client`, the Prometheus project's Rust client). The front
//! door that serves them (`toolhost serve --http`'s `GET /metrics`) adds its
//! own families and encodes the registry; nothing here knows about HTTP
//! (docs/operations.md#metrics has every name and label).
//!
//! The hooks on the call path are atomic operations: each tool's counters
//! and histogram are looked up once, when [`Host::new`](crate::Host::new)
//! names the tool ([`ToolMetrics`]), and a call increments them; the other
//! families are looked up by labels of a fixed, small set (`&'static str`),
//! under `prometheus-client`'s own read lock.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use toolhost_process::EndReason;

/// The buckets of `toolhost_tool_call_duration_seconds`: 1 ms, doubling, to
/// about 65 s (17 buckets, then `+Inf`).
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// `tool`, `plugin`, `outcome` of `toolhost_tool_calls_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    plugin: String,
    outcome: &'static str,
}

/// `tool` of `toolhost_tool_call_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

/// `source`, `outcome` of `toolhost_permission_decisions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    source: &'static str,
    outcome: &'static str,
}

/// `kind` of `toolhost_denials_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

/// `reason` of `toolhost_process_sessions_finished_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// How a tool call ended, the `outcome` label of `toolhost_tool_calls_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// A result that is not an error (`ok`).
    Ok,
    /// A result the tool marked `is_error` (`error`), e.g. a command's
    /// non-zero exit.
    Error,
    /// No result: a trap, a limit, too much output, the host (`failed`).
    Failed,
    /// Cancelled before it settled (`cancelled`).
    Cancelled,
    /// The plugin refused the arguments or the tool name (`usage`).
    Usage,
}

impl CallOutcome {
    const ALL: [CallOutcome; 5] = [
        CallOutcome::Ok,
        CallOutcome::Error,
        CallOutcome::Failed,
        CallOutcome::Cancelled,
        CallOutcome::Usage,
    ];

    fn label(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Error => "error",
            CallOutcome::Failed => "failed",
            CallOutcome::Cancelled => "cancelled",
            CallOutcome::Usage => "usage",
        }
    }
}

/// One served tool's counters (one per [`CallOutcome`]) and latency
/// histogram, resolved once so a call only increments them.
#[derive(Clone, Debug)]
pub struct ToolMetrics {
    calls: [Counter; 5],
    seconds: Histogram,
}

impl ToolMetrics {
    /// Counts one call that ended with `outcome` after `seconds`.
    pub(crate) fn record(&self, outcome: CallOutcome, seconds: f64) {
        self.calls[outcome as usize].inc();
        self.seconds.observe(seconds);
    }
}

/// Which step decided a permission request, the `source` label of
/// `toolhost_permission_decisions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecisionSource {
    /// The plugin's manifest exec grant refused it (`manifest`).
    Manifest,
    /// The policy plugin allowed or denied it (`policy`).
    Policy,
    /// The policy plugin failed and the pipeline failed closed (`policy_failed`).
    PolicyFailed,
    /// An `allow_always` / `reject_always` answer of this host session (`remembered`).
    Remembered,
    /// An approver answered (`approver`).
    Approver,
    /// The policy asked and nobody could answer (`no_approver`).
    NoApprover,
}

impl DecisionSource {
    /// The `source` label (and the `toolhost.permission.source` span attribute).
    pub(crate) fn label(self) -> &'static str {
        match self {
            DecisionSource::Manifest => "manifest",
            DecisionSource::Policy => "policy",
            DecisionSource::PolicyFailed => "policy_failed",
            DecisionSource::Remembered => "remembered",
            DecisionSource::Approver => "approver",
            DecisionSource::NoApprover => "no_approver",
        }
    }
}

/// The instance pool's slots in use by calls and decisions, and held by
/// instances made ahead of their calls (`plugin/instances.rs`), as gauges
/// the pool moves and the registry reads.
#[derive(Clone, Debug, Default)]
pub(crate) struct PoolUse {
    /// Slots held by a call or a policy decision.
    pub(crate) in_use: Gauge,
    /// Slots held by a ready instance, waiting for its call.
    pub(crate) idle: Gauge,
}

/// The host's metric families (module docs). Cloning shares them.
#[derive(Clone, Debug)]
pub struct Metrics {
    tool_calls: Family<CallLabels, Counter>,
    call_seconds: Family<ToolLabel, Histogram, fn() -> Histogram>,
    decisions: Family<DecisionLabels, Counter>,
    denials: Family<KindLabel, Counter>,
    sessions_running: Gauge,
    sessions_finished: Family<ReasonLabel, Counter>,
    output_bytes: Counter,
    pool: PoolUse,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            tool_calls: Family::default(),
            call_seconds: Family::new_with_constructor(call_buckets),
            decisions: Family::default(),
            denials: Family::default(),
            sessions_running: Gauge::default(),
            sessions_finished: Family::default(),
            output_bytes: Counter::default(),
            pool: PoolUse::default(),
        }
    }
}

impl Metrics {
    /// These metrics with the pool gauges of `pool` (the runtime's instance
    /// pool) instead of their own.
    pub(crate) fn with_pool(self, pool: PoolUse) -> Metrics {
        Metrics { pool, ..self }
    }

    /// Registers every family in `registry` under the names
    /// docs/operations.md#metrics lists (`toolhost_…`; counters get the
    /// `_total` suffix when encoded).
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("toolhost");
        r.register(
            "tool_calls",
            "Tool calls that ended, by served tool name, plugin id and outcome (ok, error, failed, cancelled, usage)",
            self.tool_calls.clone(),
        );
        r.register(
            "tool_call_duration_seconds",
            "Wall time of tool calls from start to settle, by served tool name",
            self.call_seconds.clone(),
        );
        r.register(
            "permission_decisions",
            "Permission decisions on process starts, by the step that decided (manifest, policy, policy_failed, remembered, approver, no_approver) and outcome (allow, deny)",
            self.decisions.clone(),
        );
        r.register(
            "denials",
            "Process starts refused, by kind (manifest, policy, host_rule, approver, quota, invalid_request, io)",
            self.denials.clone(),
        );
        r.register(
            "process_sessions_running",
            "Process sessions running now (foreground and background)",
            self.sessions_running.clone(),
        );
        r.register(
            "process_sessions_finished",
            "Process sessions that ended, by reason (exited, timed_out, killed, failed)",
            self.sessions_finished.clone(),
        );
        r.register(
            "process_output_bytes",
            "Bytes of output (stdout and stderr) process sessions wrote",
            self.output_bytes.clone(),
        );
        r.register(
            "instance_pool_in_use",
            "Instance pool slots held by a tool call or a policy decision",
            self.pool.in_use.clone(),
        );
        r.register(
            "instance_pool_idle",
            "Instance pool slots held by an instance made ahead of its call",
            self.pool.idle.clone(),
        );
    }

    /// The counters and histogram of served tool `tool` of plugin `plugin`,
    /// every outcome's series created now (at zero).
    pub(crate) fn tool(&self, tool: &str, plugin: &str) -> ToolMetrics {
        let calls = CallOutcome::ALL.map(|outcome| {
            self.tool_calls
                .get_or_create(&CallLabels {
                    tool: tool.to_string(),
                    plugin: plugin.to_string(),
                    outcome: outcome.label(),
                })
                .clone()
        });
        let seconds = self
            .call_seconds
            .get_or_create(&ToolLabel {
                tool: tool.to_string(),
            })
            .clone();
        ToolMetrics { calls, seconds }
    }

    /// Counts one permission decision by `source`: allowed or not.
    pub(crate) fn decision(&self, source: DecisionSource, allowed: bool) {
        let outcome = if allowed { "allow" } else { "deny" };
        self.decisions
            .get_or_create(&DecisionLabels {
                source: source.label(),
                outcome,
            })
            .inc();
    }

    /// Counts one start the start gate refused, by `kind`
    /// (`crate::permissions::start_process` names it).
    pub(crate) fn refused(&self, kind: &'static str) {
        self.denials.get_or_create(&KindLabel { kind }).inc();
    }

    /// A process session started.
    pub(crate) fn session_started(&self) {
        self.sessions_running.inc();
    }

    /// A process session ended for `reason`.
    pub(crate) fn session_ended(&self, reason: &EndReason) {
        self.sessions_running.dec();
        let reason = match reason {
            EndReason::Exited => "exited",
            EndReason::TimedOut => "timed_out",
            EndReason::Killed(_) => "killed",
            EndReason::Failed(_) => "failed",
        };
        self.sessions_finished
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    /// A process session wrote `bytes` bytes of output.
    pub(crate) fn output(&self, bytes: u64) {
        self.output_bytes.inc_by(bytes);
    }
}
