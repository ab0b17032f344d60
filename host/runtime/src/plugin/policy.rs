//! Policy plugins (`policy-plugin` world): [`PolicyPlugin`] loads one and
//! implements [`Policy`] for the permission pipeline.
//!
//! # Instances are reused across decisions
//!
//! Unlike a tool call, a policy decision does not get a fresh instance every
//! time. A decision runs on an idle instance of the plugin when there is one,
//! and an instance that finished its decision cleanly is kept for the next
//! (at most [`MAX_IDLE_PER_SHARE`] per pool share, see below). That is what
//! lets the built-in policy parse its rules once instead of once per decision
//! (it caches the parsed rules, keyed by the whole rules text:
//! `toolhost_policy::RulesCache`).
//!
//! Why this is sound when "a fresh instance per call" is the rule for tools
//! (ARCHITECTURE.md, invariant "A fresh instance per tool call (made ahead of it or on
//! the call path, never reused); policy instances reused only after a clean decision,
//! at most `MAX_DECISIONS_PER_INSTANCE`"):
//!
//! - The fresh instance protects a *call's* state and authority: a tool call
//!   holds sessions, a client, a tool-call id, and a later call must not see
//!   what an earlier one did. A policy instance holds none of that: its store
//!   has no services and no client, and every decision's store data is the
//!   same ([`CallInfo::plugin_only`]: the policy's id and its deny-all
//!   manifest), whoever asks.
//! - `decide(rules, request)` is a function of its arguments for the built-in
//!   policy: the rules text comes in with every call, the cache hands back the
//!   parse of exactly that text (compared byte for byte) and nothing else is
//!   kept between calls, so a reused instance answers what a fresh one would.
//!   A third-party policy plugin could keep state between decisions; it is the
//!   operator's chosen judge, granted nothing (no preopens, env or network),
//!   and what it could remember is only the requests the host shows it anyway.
//! - The limits stay per decision: each decision gets a new CPU budget and
//!   epoch deadline ([`super::store::restart_call`]) and its own wall-time
//!   limit; the memory limit applies to the instance as it is. An instance
//!   that trapped, hit a limit (CPU, wall, memory, table) or was cancelled is
//!   dropped, never reused; so is one whose memory grew past
//!   [`MAX_IDLE_MEMORY_BYTES`] (one huge command must not pin its memory),
//!   and one that served [`MAX_DECISIONS_PER_INSTANCE`] decisions (what a
//!   plugin keeps between decisions, in its memory or in host resources it
//!   did not drop, is bounded by that count). The memory an instance kept
//!   counts against the next decision's memory limit: a decision near the
//!   limit can fail on a reused instance where a fresh one would pass, and
//!   fails closed (deny). The guest log's byte budget and its recent lines
//!   start again for each decision.
//! - One decision at a time per instance: an instance is taken out of the idle
//!   list for its decision and put back after.
//!
//! # Pool slots
//!
//! An idle instance keeps its pool slot: it holds the [`CallPermit`] of the
//! policy's share its last decision took ([`DecisionShare`]; one idle list
//! per share). It is put back only while that share still has a free slot
//! ([`Pool::decision_slots_free`]) and is dropped otherwise, so an idle
//! instance never makes a decision wait: when every slot of a share is taken,
//! decisions in flight hold at least one of them, and the first to end frees
//! its slot for the waiter (a freed slot goes to a waiter first). Idle
//! instances live as long as the [`PolicyPlugin`].

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use wasmtime::Store;

use super::instances::{CallPermit, DecisionShare, IdleMark, Pool};
use super::store::{new_store, restart_call};
use super::{
    CallError, CallState, LoadError, PluginKind, Prepared, prepare, with_stderr_tail, within_wall,
};
use crate::call::CallInfo;
use crate::contract::v0_1_0::policy_plugin;
use crate::contract::v0_2_0::client::ClientState;
use crate::engine::{CompileSource, Runtime};
use crate::limits::Limits;
use crate::manifest::Manifest;
use crate::permissions::{Decision, PermissionRequest, Policy};

/// Most idle instances a policy plugin keeps per pool share (2): enough for
/// the decisions one agent's shell calls ask for one after another, and a
/// small bound on the slots and memory held while nothing is decided.
pub const MAX_IDLE_PER_SHARE: usize = 2;

/// Largest linear memory (bytes, 32 MiB) an instance may have grown to and
/// still be kept for another decision. The built-in policy deciding a command
/// of a few KiB under the default rules stays far below; a 1 MiB command
/// grows it to hundreds of MiB, and that instance is dropped after its
/// decision rather than held idle.
pub const MAX_IDLE_MEMORY_BYTES: usize = 32 << 20;

/// Most decisions one instance serves (256) before it is dropped and the
/// next decision gets a fresh one.
pub const MAX_DECISIONS_PER_INSTANCE: u32 = 256;

/// An instance between decisions, with the pool slot it holds.
struct Idle {
    // Field order is drop order: the store (and its pool slot) goes before
    // the permit that admits another call to that slot.
    /// Its slot counts as idle in the host's metrics while it waits.
    _idle: IdleMark,
    store: Store<CallState>,
    bindings: policy_plugin::PolicyPlugin,
    /// Decisions this instance has served.
    decisions: u32,
    _permit: CallPermit,
}

/// A loaded policy plugin (`policy-plugin` world). It implements [`Policy`]
/// for the permission pipeline, deciding under the rules it was given, on
/// instances reused across decisions (see the module docs).
pub struct PolicyPlugin {
    id: Arc<str>,
    manifest: Arc<Manifest>,
    pre: policy_plugin::PolicyPluginPre<CallState>,
    rules: String,
    /// Idle instances: decisions for built-in requesters (and the host), for
    /// third-party requesters.
    idle: Mutex<[Vec<Idle>; 2]>,
    /// Keeps the epoch ticker running (see [`super::ToolPlugin`]).
    _runtime: Runtime,
    /// Where its compiled code came from.
    pub source: CompileSource,
}

/// A rules-file error from `validate`.
pub type RulesError = policy_plugin::exports::toolhost::plugin::policy::RulesError;

/// The slot of `share` in [`PolicyPlugin::idle`].
fn slot(share: DecisionShare) -> usize {
    match share {
        DecisionShare::Builtin => 0,
        DecisionShare::ThirdParty => 1,
    }
}

impl PolicyPlugin {
    /// Loads a policy plugin from component bytes (`prepare`). It runs with
    /// no grants (a deny-all manifest) and the given limits, and decides under
    /// `rules` (the `--policy` file's text; empty for the plugin's defaults).
    ///
    /// Errors: [`LoadError::Invalid`], [`LoadError::WrongWorld`].
    pub fn load(
        runtime: &Runtime,
        id: &str,
        bytes: &[u8],
        limits: Limits,
        rules: String,
    ) -> Result<PolicyPlugin, LoadError> {
        let manifest = Manifest {
            limits,
            ..Manifest::deny_all(id)
        };
        let Prepared { pre, source, world } =
            prepare(runtime, &manifest, bytes, PluginKind::Policy)?;
        let pre = policy_plugin::PolicyPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: world.name(),
            message: format!("{e:#}"),
        })?;
        Ok(PolicyPlugin {
            id: id.into(),
            manifest: Arc::new(manifest),
            pre,
            rules,
            idle: Mutex::new([Vec::new(), Vec::new()]),
            _runtime: runtime.clone(),
            source,
        })
    }

    /// The plugin id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How many instances are idle now, both shares together (at most
    /// 2 × [`MAX_IDLE_PER_SHARE`]); for tests and diagnostics.
    pub fn idle_instances(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(Vec::len)
            .sum()
    }

    /// Calls `validate` on the rules it was loaded with.
    ///
    /// Errors: as [`super::ToolPlugin::call`].
    pub async fn validate(&self) -> Result<Result<(), RulesError>, CallError> {
        let rules = self.rules.clone();
        self.run("", move |bindings, store| {
            Box::pin(async move {
                bindings
                    .toolhost_plugin_policy()
                    .call_validate(store, &rules)
                    .await
            })
        })
        .await
    }

    /// Calls `decide(rules, request)` for a process start.
    ///
    /// Errors: as [`super::ToolPlugin::call`].
    pub async fn decide_start(&self, request: &PermissionRequest) -> Result<Decision, CallError> {
        use policy_plugin::exports::toolhost::plugin::policy as wit;
        let rules = self.rules.clone();
        let requester = request.plugin.clone();
        let request = wit::PermissionRequest {
            plugin: request.plugin.clone(),
            tool: request.tool.clone(),
            tool_call_id: request.tool_call_id.clone(),
            action: wit::Action::ProcessStart(wit::ProcessStart {
                command: request.command.clone(),
                cwd: request.cwd.clone(),
                workspace: request.workspace.clone(),
                env_keys: request.env_keys.clone(),
                shell: request.shell.clone(),
            }),
        };
        let decision = self
            .run(&requester, move |bindings, store| {
                Box::pin(async move {
                    bindings
                        .toolhost_plugin_policy()
                        .call_decide(store, &rules, &request)
                        .await
                })
            })
            .await?;
        Ok(match decision {
            wit::Decision::Allow => Decision::Allow,
            wit::Decision::Deny(reason) => Decision::Deny(reason),
            wit::Decision::Ask(ask) => Decision::Ask(ask.prompt),
        })
    }

    /// Runs one call of the policy for a start asked for by plugin `requester`
    /// (`""`: the host itself): on an idle instance of the requester's share
    /// if there is one, else on a fresh instance in a slot of that share
    /// ([`Pool::admit_decision`]: a decision waits for a slot rather than fail
    /// for want of an instance). Wall time (instantiation included) is limited
    /// to the manifest's; the instance is kept for the next call only when the
    /// call ended without an error ([`PolicyPlugin::keep`]).
    async fn run<R: Send + 'static>(
        &self,
        requester: &str,
        f: impl for<'a> FnOnce(
            &'a policy_plugin::PolicyPlugin,
            &'a mut Store<CallState>,
        )
            -> Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>
        + Send,
    ) -> Result<R, CallError> {
        let share = DecisionShare::of(requester);
        let reused = self.idle.lock().unwrap_or_else(|e| e.into_inner())[slot(share)].pop();
        // `permit` first: locals drop in reverse order, so on every return
        // the store (and its pool slot) goes before the permit.
        let (permit, mut store, bindings, decisions) = match reused {
            Some(Idle {
                mut store,
                bindings,
                decisions,
                _permit,
                ..
            }) => {
                restart_call(&mut store);
                (_permit, store, Some(bindings), decisions)
            }
            None => {
                let permit = Pool::of(&self._runtime).admit_decision(requester).await;
                let info = CallInfo::plugin_only(self.id.clone(), self.manifest.clone());
                let store = new_store(self.pre.engine(), info, None, None, ClientState::default())?;
                (permit, store, None, 0)
            }
        };
        let pre = &self.pre;
        let work = async {
            let bindings = match bindings {
                Some(bindings) => bindings,
                None => pre.instantiate_async(&mut store).await?,
            };
            let value = f(&bindings, &mut store).await?;
            Ok((bindings, value))
        };
        match within_wall(self.id.to_string(), self.manifest.limits.wall, work).await {
            Ok((bindings, value)) => {
                self.keep(
                    share,
                    Idle {
                        _idle: IdleMark::new(Pool::of(&self._runtime).usage()),
                        store,
                        bindings,
                        decisions: decisions + 1,
                        _permit: permit,
                    },
                );
                Ok(value)
            }
            // A trap says little on its own: the guest's last stderr lines say why.
            Err(CallError::Trap { plugin, message }) => Err(CallError::Trap {
                plugin,
                message: with_stderr_tail(message, &store.data().stderr.recent()),
            }),
            Err(e) => Err(e),
        }
    }

    /// Puts `idle`, whose decision just ended cleanly, back in `share`'s idle
    /// list, or drops it (with its slot): when its memory grew past
    /// [`MAX_IDLE_MEMORY_BYTES`] or it served [`MAX_DECISIONS_PER_INSTANCE`],
    /// when the list is full, or when `share` has no free slot left (a
    /// decision may be waiting for this one).
    fn keep(&self, share: DecisionShare, idle: Idle) {
        if idle.store.data().memory_bytes() > MAX_IDLE_MEMORY_BYTES
            || idle.decisions >= MAX_DECISIONS_PER_INSTANCE
        {
            return;
        }
        let dropped = {
            let mut lists = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            let list = &mut lists[slot(share)];
            if list.len() >= MAX_IDLE_PER_SHARE
                || Pool::of(&self._runtime).decision_slots_free(share) == 0
            {
                Some(idle)
            } else {
                list.push(idle);
                None
            }
        };
        // Outside the lock: dropping a store resets its pool slot.
        drop(dropped);
    }
}

impl Policy for PolicyPlugin {
    fn decide<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Decision, String>> + Send + 'a>> {
        Box::pin(async move { self.decide_start(request).await.map_err(|e| e.to_string()) })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::builtin::{POLICY, POLICY_ID, policy_limits};
    use crate::engine::EngineOptions;
    use crate::limits::LimitExceeded;

    const RULES: &str = "allow = [\"ls *\", \"git status *\"]\nask = [\"git push *\"]\n\
                         deny = [\"rm -rf *\"]\n";

    fn runtime(max_instances: u32) -> Runtime {
        Runtime::with_options(
            None,
            EngineOptions {
                max_instances,
                max_memory_bytes: policy_limits().memory_bytes as u64,
                ..EngineOptions::default()
            },
        )
        .unwrap()
    }

    fn policy(runtime: &Runtime, limits: Limits) -> PolicyPlugin {
        PolicyPlugin::load(runtime, POLICY_ID, POLICY, limits, RULES.to_string()).unwrap()
    }

    fn request(requester: &str, command: &str) -> PermissionRequest {
        PermissionRequest {
            plugin: requester.into(),
            tool: "bash".into(),
            tool_call_id: "call_1".into(),
            command: command.into(),
            cwd: "/ws".into(),
            workspace: "/ws".into(),
            env_keys: Vec::new(),
            shell: "/bin/bash".into(),
        }
    }

    /// A long command that takes the policy a while (about 150,000 parts).
    fn long_command() -> String {
        "ls -la; ".repeat(120_000)
    }

    /// Decisions on a reused instance are those of a fresh one, for every kind
    /// of answer and after an invalid-looking request; one instance serves them.
    #[tokio::test]
    async fn a_reused_instance_decides_as_a_fresh_one() {
        let rt = runtime(128);
        let reused = policy(&rt, policy_limits());
        let commands = [
            "ls -la",
            "rm -rf /",
            "git push origin main",
            "git status && ls; rm -rf x",
            "",
            "echo $(",
            "ls -la",
        ];
        assert!(reused.validate().await.unwrap().is_ok());
        assert_eq!(
            reused.idle_instances(),
            1,
            "validate leaves its instance idle"
        );
        for command in commands {
            let fresh = policy(&rt, policy_limits());
            let want = fresh.decide_start(&request("bash", command)).await.unwrap();
            let got = reused
                .decide_start(&request("bash", command))
                .await
                .unwrap();
            assert_eq!(got, want, "{command:?}");
            assert_eq!(reused.idle_instances(), 1, "{command:?}");
        }
        // A third-party requester's decisions take the other share's slots.
        reused.decide_start(&request("other", "ls")).await.unwrap();
        assert_eq!(reused.idle_instances(), 2);
    }

    /// An instance that hit its CPU, wall or memory limit is dropped, and the
    /// next decision gets a fresh one that works.
    #[tokio::test]
    async fn an_instance_that_hit_a_limit_is_never_reused() {
        let rt = runtime(128);
        let long = long_command();
        let cases = [
            (
                Limits {
                    cpu: Duration::from_millis(100),
                    ..policy_limits()
                },
                "CPU",
            ),
            (
                Limits {
                    wall: Duration::from_millis(100),
                    ..policy_limits()
                },
                "wall",
            ),
            (
                Limits {
                    memory_bytes: 8 << 20,
                    ..policy_limits()
                },
                "memory",
            ),
        ];
        for (limits, what) in cases {
            let p = policy(&rt, limits);
            assert_eq!(
                p.decide_start(&request("bash", "ls")).await.unwrap(),
                Decision::Allow
            );
            assert_eq!(p.idle_instances(), 1);
            let e = p
                .decide_start(&request("bash", &long))
                .await
                .expect_err(what);
            let hit = match &e {
                CallError::Limit { limit, .. } => match limit {
                    LimitExceeded::Cpu { .. } => "CPU",
                    LimitExceeded::Wall { .. } => "wall",
                    LimitExceeded::Memory { .. } => "memory",
                    _ => "other",
                },
                _ => "not a limit",
            };
            assert_eq!(hit, what, "{e}");
            assert_eq!(p.idle_instances(), 0, "{what}: the instance was dropped");
            assert_eq!(
                p.decide_start(&request("bash", "ls")).await.unwrap(),
                Decision::Allow,
                "{what}"
            );
            assert_eq!(p.idle_instances(), 1);
        }
    }

    /// An instance whose memory grew past `MAX_IDLE_MEMORY_BYTES` is dropped
    /// after its (successful) decision.
    #[tokio::test]
    async fn an_instance_grown_large_is_dropped() {
        let rt = runtime(128);
        let p = policy(&rt, policy_limits());
        let d = p
            .decide_start(&request("bash", &long_command()))
            .await
            .unwrap();
        assert_eq!(d, Decision::Allow);
        assert_eq!(p.idle_instances(), 0);
    }

    /// With one slot per policy share (an 8-instance pool), concurrent decisions
    /// all complete: an idle instance never holds the slot a decision waits for.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_instances_never_make_a_decision_wait_forever() {
        let rt = runtime(8);
        let p = Arc::new(policy(&rt, policy_limits()));
        for _ in 0..3 {
            let tasks: Vec<_> = (0..12)
                .map(|i| {
                    let p = p.clone();
                    tokio::spawn(async move {
                        let who = if i % 2 == 0 { "bash" } else { "other" };
                        p.decide_start(&request(who, "git status")).await
                    })
                })
                .collect();
            for t in tasks {
                let d = tokio::time::timeout(Duration::from_secs(60), t)
                    .await
                    .expect("the decision ends")
                    .unwrap()
                    .unwrap();
                assert_eq!(d, Decision::Allow);
            }
            assert!(p.idle_instances() <= 2);
        }
    }
}
