//! Where a call's instance comes from: admission to the engine's instance pool and
//! the instances made ahead of their calls, behind one door. The call path takes an
//! instance and gives it back, as Spin's per-request instantiation does; everything
//! that makes that fast is here.
//!
//! - [`Pool`]: admission, one per [`Runtime`] (all its plugins share it). The pool's
//!   slots are split in shares ([`PoolShares`]: policy decisions, the built-in
//!   `bash`, third-party plugins) that add up to at most its size, so an admitted
//!   call always finds its instance: built-in calls and decisions wait for a slot of
//!   their share, a third-party call past its plugin's quota
//!   ([`EngineOptions::max_calls_per_plugin`]) or its share is refused at once,
//!   naming it. A [`CallPermit`] holds the slot until dropped.
//! - [`ToolInstances`]: a tool plugin's instances. [`ToolInstances::take`] hands a
//!   call the instance made for it ahead of time, or admits the call and gives it a
//!   fresh store; [`ToolInstances::give_back`] drops the used one off the call path
//!   and makes the next call's there (ARCHITECTURE.md, invariant "A fresh instance per
//!   tool call (made ahead of it or on the call path, never reused); policy instances
//!   reused only after a clean decision, at most `MAX_DECISIONS_PER_INSTANCE`"). A
//!   ready instance takes a slot only with another free beside it, and gives it back
//!   to a call that finds its share or quota full, so it never makes [`Pool::admit`]
//!   refuse or delay a call it would admit without it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use wasmtime::Store;

use super::store::{attach, blank_store, new_store};
use super::world::{ToolInstance, ToolPre};
use super::{CallError, CallState, within_wall};
use crate::builtin::{BASH_ID, POLICY_ID};
use crate::call::{CallInfo, Services};
use crate::contract::v0_2_0::client::ClientState;
#[cfg(doc)]
use crate::engine::PoolShares;
use crate::engine::{EngineOptions, Runtime};
use crate::limits::LimitExceeded;
use crate::metrics::PoolUse;

/// Which of the policy's two shares of the pool ([`PoolShares`]) a decision
/// takes its slot from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DecisionShare {
    /// Decisions on starts of the built-in plugins, and the host's own
    /// (`validate`): [`PoolShares::policy_builtin`].
    Builtin,
    /// Decisions on starts of third-party plugins:
    /// [`PoolShares::policy_third_party`].
    ThirdParty,
}

impl DecisionShare {
    /// The share of a decision on a start asked for by plugin `requester`
    /// (`""`: the host itself).
    pub(super) fn of(requester: &str) -> DecisionShare {
        if requester == BASH_ID || requester == POLICY_ID || requester.is_empty() {
            DecisionShare::Builtin
        } else {
            DecisionShare::ThirdParty
        }
    }
}

/// Admission to a runtime's instance pool: calls in flight per third-party plugin
/// and for all of them together, the slots the built-in plugins and the policy
/// wait for, and the ready instances that give their slot up to a call.
pub(super) struct Pool {
    per_plugin: u32,
    third_party: u32,
    state: Mutex<AdmissionState>,
    /// Slots of the built-in `bash` plugin's share.
    builtin: Arc<tokio::sync::Semaphore>,
    /// Slots of the policy plugin's shares: decisions for `bash`, for the others.
    policy_builtin: Arc<tokio::sync::Semaphore>,
    policy_third_party: Arc<tokio::sync::Semaphore>,
    /// Third-party plugins' ready instances ([`Spare`]) by plugin id, given
    /// up when the third-party share or that plugin's quota is full.
    spares: Mutex<Vec<RegisteredSpare>>,
    /// The slots held by calls and by ready instances, for the host's metrics.
    usage: PoolUse,
}

/// A third-party plugin's ready-instance holder, by plugin id.
type RegisteredSpare = (Arc<str>, Weak<dyn Spare>);

/// Something holding a spare instance with its [`CallPermit`] (a tool plugin's
/// ready instance), which it gives up when a call needs the slot.
trait Spare: Send + Sync {
    /// Drops the held instance and its permit, if it holds one; true if it did.
    fn release(&self) -> bool;
}

#[derive(Default)]
struct AdmissionState {
    total: u32,
    by_plugin: HashMap<Arc<str>, u32>,
}

/// A call admitted by [`Pool`]; it counts against the quotas until dropped.
pub(super) struct CallPermit {
    /// `None` for a built-in plugin (not counted).
    counted: Option<(Arc<Pool>, Arc<str>)>,
    /// The slot of a built-in plugin's share, freed on drop.
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
    _in_use: Held,
}

/// One slot counted in a gauge of [`PoolUse`] from its making to its drop:
/// a [`CallPermit`]'s in `in_use`; a [`Ready`] instance's moves its permit's
/// count from `in_use` to `idle` while it waits.
struct Held(prometheus_client::metrics::gauge::Gauge);

impl Held {
    fn new(gauge: &prometheus_client::metrics::gauge::Gauge) -> Held {
        gauge.inc();
        Held(gauge.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The mark of an instance waiting for its call or decision with its slot (a
/// [`Ready`] instance, a policy plugin's idle one): its permit's slot counts
/// as `idle`, not `in_use`, from the mark's making to its drop.
pub(super) struct IdleMark {
    _idle: Held,
    in_use: prometheus_client::metrics::gauge::Gauge,
}

impl IdleMark {
    /// Moves one slot of `usage` from `in_use` to `idle` until dropped.
    pub(super) fn new(usage: &PoolUse) -> IdleMark {
        usage.in_use.dec();
        IdleMark {
            _idle: Held::new(&usage.idle),
            in_use: usage.in_use.clone(),
        }
    }
}

impl Drop for IdleMark {
    fn drop(&mut self) {
        self.in_use.inc();
    }
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        if let Some((pool, plugin)) = self.counted.take() {
            let mut st = pool.state.lock().unwrap_or_else(|e| e.into_inner());
            st.total = st.total.saturating_sub(1);
            if let Some(n) = st.by_plugin.get_mut(&plugin) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    st.by_plugin.remove(&plugin);
                }
            }
        }
    }
}

/// Waits for a slot of `share` (a semaphore that is never closed), counted
/// in `usage`.
async fn wait_for_slot(share: &Arc<tokio::sync::Semaphore>, usage: &PoolUse) -> CallPermit {
    let slot = share.clone().acquire_owned().await.ok();
    CallPermit {
        counted: None,
        _slot: slot,
        _in_use: Held::new(&usage.in_use),
    }
}

/// Why a third-party call was not admitted (the message names the quota).
enum Refusal {
    /// The plugin is at its own quota.
    Plugin(String),
    /// Third-party plugins together are at their share.
    Share(String),
}

impl Pool {
    /// The pool of `runtime`, shared by every plugin loaded on it.
    pub(super) fn of(runtime: &Runtime) -> &Arc<Pool> {
        runtime.plugin_state(|options| Arc::new(Pool::new(options)))
    }

    fn new(options: &EngineOptions) -> Pool {
        let shares = options.shares();
        let semaphore = |n: u32| Arc::new(tokio::sync::Semaphore::new(n as usize));
        Pool {
            per_plugin: options.max_calls_per_plugin.max(1),
            third_party: shares.third_party,
            state: Mutex::default(),
            builtin: semaphore(shares.builtin),
            policy_builtin: semaphore(shares.policy_builtin),
            policy_third_party: semaphore(shares.policy_third_party),
            spares: Mutex::default(),
            usage: PoolUse::default(),
        }
    }

    /// The gauges of the slots held by calls and by ready instances.
    pub(super) fn usage(&self) -> &PoolUse {
        &self.usage
    }

    /// Admits one policy decision on a start asked for by plugin `requester`
    /// (the host itself, e.g. validating the rules, counts as built-in), for as
    /// long as the returned permit lives: it waits for a slot of the policy's
    /// share for built-in or for third-party requesters ([`PoolShares`]).
    pub(super) async fn admit_decision(&self, requester: &str) -> CallPermit {
        wait_for_slot(
            self.decision_semaphore(DecisionShare::of(requester)),
            &self.usage,
        )
        .await
    }

    /// How many slots of the policy's `share` are free now: decisions that
    /// [`Pool::admit_decision`] would admit without waiting. Zero while a
    /// decision waits for one (a freed slot goes to a waiter first). A policy
    /// plugin keeps an idle instance, with its slot, only while this is not
    /// zero, so an idle instance never makes a decision wait (`PolicyPlugin`).
    pub(super) fn decision_slots_free(&self, share: DecisionShare) -> usize {
        self.decision_semaphore(share).available_permits()
    }

    fn decision_semaphore(&self, share: DecisionShare) -> &Arc<tokio::sync::Semaphore> {
        match share {
            DecisionShare::Builtin => &self.policy_builtin,
            DecisionShare::ThirdParty => &self.policy_third_party,
        }
    }

    /// Admits one tool call of `plugin`, for as long as the returned permit lives
    /// ([`PoolShares`]). A call of the built-in `bash` waits for a slot of its
    /// share; a third-party call is refused at once when the plugin already has
    /// [`EngineOptions::max_calls_per_plugin`] calls in flight, or third-party
    /// plugins together have their share.
    ///
    /// Errors: the refusal, naming the quota and its default, e.g. ``resource-limit:
    /// plugin `x` has 16 calls in flight, its quota (max_calls_per_plugin = 16, default
    /// 16); wait for one to end``.
    pub(super) async fn admit(self: &Arc<Self>, plugin: &str) -> Result<CallPermit, String> {
        if plugin == BASH_ID {
            return Ok(wait_for_slot(&self.builtin, &self.usage).await);
        }
        if plugin == POLICY_ID {
            return Ok(wait_for_slot(&self.policy_builtin, &self.usage).await);
        }
        // A full share (or quota) first takes back the slots of ready
        // instances ([`Spare`]): any third-party plugin's for the share, the
        // plugin's own for its quota.
        let mut tries = self.third_party;
        loop {
            match self.admit_third_party(plugin) {
                Ok(permit) => return Ok(permit),
                Err(Refusal::Share(_)) if tries > 0 && self.release_spare(None) => tries -= 1,
                Err(Refusal::Plugin(_)) if tries > 0 && self.release_spare(Some(plugin)) => {
                    tries -= 1
                }
                Err(Refusal::Share(why) | Refusal::Plugin(why)) => return Err(why),
            }
        }
    }

    /// Admits one call of `plugin` if that needs no wait and leaves another
    /// slot free beside it, for a ready instance made ahead of its call
    /// ([`Spare`]): `None` when its share, or the plugin's quota, would be
    /// full with it. A ready instance never waits, never takes a slot a call
    /// waits for, and while it is being made the next call still finds one
    /// free.
    fn try_admit(self: &Arc<Self>, plugin: &str) -> Option<CallPermit> {
        let share = if plugin == BASH_ID {
            &self.builtin
        } else if plugin == POLICY_ID {
            &self.policy_builtin
        } else {
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let mine = st.by_plugin.get(plugin).copied().unwrap_or(0);
            if mine + 1 >= self.per_plugin || st.total + 1 >= self.third_party {
                return None;
            }
            drop(st);
            return self.admit_third_party(plugin).ok();
        };
        if share.available_permits() < 2 {
            return None;
        }
        let slot = share.clone().try_acquire_owned().ok()?;
        Some(CallPermit {
            counted: None,
            _slot: Some(slot),
            _in_use: Held::new(&self.usage.in_use),
        })
    }

    /// Registers `spare`, the ready instance holder of `plugin`, which
    /// [`Pool::admit`] asks to give up its instance when the third-party
    /// share or the plugin's quota is full. Built-in plugins' are not kept
    /// (their next call takes their ready instance; no other waits for their
    /// share). Dropped holders are forgotten.
    fn register_spare(&self, plugin: &str, spare: Weak<dyn Spare>) {
        if plugin == BASH_ID || plugin == POLICY_ID {
            return;
        }
        let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
        spares.retain(|(_, s)| s.strong_count() > 0);
        spares.push((plugin.into(), spare));
    }

    /// Asks the registered spares (of `plugin` only, when given), in turn, to
    /// give up their instance; true if one did.
    fn release_spare(&self, plugin: Option<&str>) -> bool {
        let live: Vec<Arc<dyn Spare>> = {
            let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
            spares.retain(|(_, s)| s.strong_count() > 0);
            spares
                .iter()
                .filter(|(id, _)| plugin.is_none_or(|p| **id == *p))
                .filter_map(|(_, s)| s.upgrade())
                .collect()
        };
        // Not under the lock: a released permit takes the admission state's lock.
        live.iter().any(|s| s.release())
    }

    /// A third-party call's permit, counted against its plugin's quota and the
    /// third-party share.
    fn admit_third_party(self: &Arc<Self>, plugin: &str) -> Result<CallPermit, Refusal> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mine = st.by_plugin.get(plugin).copied().unwrap_or(0);
        if mine >= self.per_plugin {
            return Err(Refusal::Plugin(format!(
                "resource-limit: plugin `{plugin}` has {mine} calls in flight, its quota \
                 (max_calls_per_plugin = {}, default 16); wait for one to end",
                self.per_plugin
            )));
        }
        if st.total >= self.third_party {
            return Err(Refusal::Share(format!(
                "resource-limit: third-party plugins have {} calls in flight, their share of \
                 the instance pool (max_instances - max_instances / 8 - 3 × max_instances / 8 = \
                 {}, default 64); wait for one to end",
                st.total, self.third_party
            )));
        }
        let plugin: Arc<str> = plugin.into();
        st.total += 1;
        *st.by_plugin.entry(plugin.clone()).or_default() += 1;
        Ok(CallPermit {
            counted: Some((self.clone(), plugin)),
            _slot: None,
            _in_use: Held::new(&self.usage.in_use),
        })
    }
}

/// An instance taken for one call ([`ToolInstances::take`]), with its pool slot.
/// Field order is drop order: the store (and its pool slot) goes before the permit
/// that admits another call to that slot, on a return and on a cancelled call alike.
pub(super) struct Instance {
    /// The call's store, holding its data.
    pub(super) store: Store<CallState>,
    /// The instance already made in `store` (a ready one), or `None`: the call
    /// instantiates on its own path.
    pub(super) bindings: Option<ToolInstance>,
    permit: CallPermit,
}

/// An instance made ahead of its call: a store from [`blank_store`] (no call
/// data yet) and the instance in it, with the pool slot it holds. Only the
/// component's start code has run in it. Its slot counts as idle until it is
/// dropped or taken apart for its call.
struct Ready {
    _idle: IdleMark,
    store: Store<CallState>,
    bindings: ToolInstance,
    permit: CallPermit,
}

/// A plugin's ready instance for its next tool call, and the refill that
/// makes it after each call takes one.
#[derive(Default)]
struct ReadySlot {
    instance: Mutex<Option<Ready>>,
    /// Held from the end of a call until its refill is done (or skipped), so
    /// the next call waits for that instance instead of making a second one.
    refill: Arc<tokio::sync::Mutex<()>>,
    /// Set when a refill failed (the start code trapped, hung or hit a limit):
    /// calls then make their instance on the call path, as they would without
    /// a ready one, so the error reaches the call.
    failed: AtomicBool,
}

impl ReadySlot {
    fn take(&self) -> Option<Ready> {
        self.instance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn is_empty(&self) -> bool {
        self.instance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Keeps `ready` unless the slot holds one already (then `ready` is dropped).
    fn put(&self, ready: Ready) {
        let mut slot = self.instance.lock().unwrap_or_else(|e| e.into_inner());
        let spare = if slot.is_none() {
            *slot = Some(ready);
            None
        } else {
            Some(ready)
        };
        drop(slot);
        drop(spare);
    }
}

impl Spare for ReadySlot {
    fn release(&self) -> bool {
        // Dropped here, outside the slot's lock (the permit takes the admission lock).
        self.take().is_some()
    }
}

/// A tool plugin's instances: the one made ahead for its next tool call and the
/// pool its calls are admitted to. Dropping it drops the ready instance.
pub(super) struct ToolInstances {
    pre: ToolPre,
    /// The plugin's id and manifest, as its stores made ahead of a call carry them.
    plugin: CallInfo,
    /// Wall time a ready instance's start code may take.
    ready_wall: Duration,
    /// The host's shell its stores name in their environment (`store.rs::SHELL_ENV`),
    /// when it was loaded with session services.
    host_shell: Option<Arc<Path>>,
    pool: Arc<Pool>,
    ready: Arc<ReadySlot>,
}

impl ToolInstances {
    /// The instances of the plugin of `plugin` (id and manifest), linked as `pre`,
    /// admitted to `runtime`'s pool; a ready instance's start code runs within
    /// `ready_wall`. Their stores name `host_shell` in their environment. None is
    /// made before the first call returns.
    pub(super) fn new(
        runtime: &Runtime,
        pre: ToolPre,
        plugin: CallInfo,
        ready_wall: Duration,
        host_shell: Option<Arc<Path>>,
    ) -> ToolInstances {
        let pool = Pool::of(runtime).clone();
        let ready: Arc<ReadySlot> = Arc::default();
        let spare: Arc<dyn Spare> = ready.clone();
        pool.register_spare(&plugin.plugin, Arc::downgrade(&spare));
        ToolInstances {
            pre,
            plugin,
            ready_wall,
            host_shell,
            pool,
            ready,
        }
    }

    /// The host's shell their stores name in their environment, if any.
    pub(super) fn host_shell(&self) -> Option<&Path> {
        self.host_shell.as_deref()
    }

    /// The component they are instances of.
    pub(super) fn pre(&self) -> &ToolPre {
        &self.pre
    }

    /// One admission for a call that makes its own instance ([`Pool::admit`]).
    ///
    /// Errors: [`CallError::Host`] with the refusal.
    pub(super) async fn admit(&self) -> Result<CallPermit, CallError> {
        self.pool
            .admit(&self.plugin.plugin)
            .await
            .map_err(|message| CallError::Host {
                plugin: self.plugin.plugin.to_string(),
                message,
            })
    }

    /// The instance for tool call `call`, with `services` and `client` attached: the
    /// ready one (its slot counts as the call's admission), waiting for one being
    /// made for at most `wall`; else the call admitted ([`Pool::admit`]) and a
    /// fresh store, in which the call instantiates.
    ///
    /// Errors: [`CallError::Limit`] (wall) when the wait for a ready instance takes
    /// `wall`; the refusal of [`ToolInstances::admit`]; [`CallError::Host`] for a
    /// preopen that is no longer the directory granted at load.
    pub(super) async fn take(
        &self,
        call: CallInfo,
        services: Option<Arc<Services>>,
        client: ClientState,
        wall: Duration,
    ) -> Result<Instance, CallError> {
        let ready = tokio::time::timeout(wall, self.take_ready())
            .await
            .map_err(|_| CallError::Limit {
                plugin: self.plugin.plugin.to_string(),
                limit: LimitExceeded::Wall { limit: wall },
            })?;
        Ok(match ready {
            Some(Ready {
                mut store,
                bindings,
                permit,
                ..
            }) => {
                attach(&mut store, call, services, client)?;
                Instance {
                    store,
                    bindings: Some(bindings),
                    permit,
                }
            }
            None => {
                let permit = self.admit().await?;
                let store =
                    new_store(self.pre.engine(), call, self.host_shell(), services, client)?;
                Instance {
                    store,
                    bindings: None,
                    permit,
                }
            }
        })
    }

    /// The ready instance, waiting for one being made; `None` when there is
    /// none and none is being made, or making them failed.
    async fn take_ready(&self) -> Option<Ready> {
        if let Some(ready) = self.ready.take() {
            return Some(ready);
        }
        if self.ready.failed.load(Ordering::Relaxed) {
            return None;
        }
        let _done = self.ready.refill.lock().await;
        self.ready.take()
    }

    /// After a tool call: `made_cleanly` says the call made its instance on its own
    /// path and ran without error, so ready instances are worth making again. Drops
    /// the call's store and then its permit in a task of its own, then, unless a
    /// refill is already under way, makes the next call's instance there: a
    /// [`blank_store`] under the plugin's limits, instantiated within the ready wall
    /// time in a pool slot taken only while its share and the plugin's quota keep
    /// another free beside it ([`Pool::try_admit`]). A call that finds the share or
    /// the quota full takes a made one's slot back ([`Spare`]); one being made holds
    /// its slot until it is made.
    pub(super) fn give_back(&self, instance: Instance, made_cleanly: bool) {
        if made_cleanly {
            self.ready.failed.store(false, Ordering::Relaxed);
        }
        let Instance { store, permit, .. } = instance;
        let guard = self.ready.refill.clone().try_lock_owned().ok();
        let refill = guard.filter(|_| !self.ready.failed.load(Ordering::Relaxed));
        let slot = Arc::downgrade(&self.ready);
        let pre = refill.as_ref().map(|_| self.pre.clone());
        let pool = self.pool.clone();
        let info = self.plugin.clone();
        let wall = self.ready_wall;
        let host_shell = self.host_shell.clone();
        tokio::spawn(async move {
            drop(store);
            drop(permit);
            let (Some(_refilling), Some(pre)) = (refill, pre) else {
                return;
            };
            if !slot.upgrade().is_some_and(|s| s.is_empty()) {
                return;
            }
            let Some(permit) = pool.try_admit(&info.plugin) else {
                return;
            };
            let plugin = info.plugin.clone();
            let made = make_ready(&pre, info, host_shell.as_deref(), wall).await;
            let Some(slot) = slot.upgrade() else {
                return; // unloaded meanwhile: the instance goes with it
            };
            match made {
                Ok((store, bindings)) => slot.put(Ready {
                    _idle: IdleMark::new(&pool.usage),
                    store,
                    bindings,
                    permit,
                }),
                // A preopen gone is the call's to refuse; the next refill tries again.
                Err(e @ CallError::Host { .. }) => {
                    tracing::debug!(plugin = %plugin, "no ready instance: {e}");
                }
                Err(e) => {
                    slot.failed.store(true, Ordering::Relaxed);
                    tracing::debug!(
                        plugin = %plugin,
                        "no ready instance for the next calls (each call makes its own): {e}"
                    );
                }
            }
        });
    }

    /// Waits until the instance for the next tool call is made (or its making is
    /// skipped) and the store of the last call is dropped.
    pub(super) async fn wait_ready(&self) {
        let _done = self.ready.refill.lock().await;
    }

    /// Whether an instance for the next tool call is ready.
    pub(super) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }
}

/// A [`Ready`] instance's store and bindings: a [`blank_store`] for the
/// plugin of `info` (naming `host_shell`) and an instance of `pre` in it, made
/// within `wall`.
///
/// Errors: as a tool call's (the start code trapped or hit a limit, a preopen
/// is gone).
async fn make_ready(
    pre: &ToolPre,
    info: CallInfo,
    host_shell: Option<&Path>,
    wall: Duration,
) -> Result<(Store<CallState>, ToolInstance), CallError> {
    let plugin = info.plugin.to_string();
    let mut store = blank_store(pre.engine(), info, host_shell)?;
    let bindings = within_wall(plugin, wall, pre.instantiate(&mut store)).await?;
    Ok((store, bindings))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spare holding a permit, as a plugin's ready instance does.
    struct Held(Mutex<Option<CallPermit>>);

    impl Spare for Held {
        fn release(&self) -> bool {
            let permit = self.0.lock().unwrap().take();
            permit.is_some()
        }
    }

    fn pool() -> Arc<Pool> {
        // 16 instances: policy 1 + 1, built-in 6, third-party 8.
        let runtime = Runtime::with_options(
            None,
            EngineOptions {
                pooling: false,
                max_instances: 16,
                max_memory_bytes: 64 << 20,
                max_calls_per_plugin: 4,
            },
        )
        .unwrap();
        Pool::of(&runtime).clone()
    }

    fn spare(pool: &Arc<Pool>, plugin: &str) -> Arc<Held> {
        let held = Arc::new(Held(Mutex::new(pool.try_admit(plugin))));
        assert!(
            held.0.lock().unwrap().is_some(),
            "room for a ready instance"
        );
        let as_spare: Arc<dyn Spare> = held.clone();
        // Registered by a weak reference: `held` keeps it alive.
        pool.register_spare(plugin, Arc::downgrade(&as_spare));
        held
    }

    #[tokio::test]
    async fn a_ready_instance_gives_its_slot_to_a_call() {
        let pool = pool();
        let held = spare(&pool, "a");
        let mut calls = Vec::new();
        for i in 0..7 {
            calls.push(pool.admit(&format!("p{i}")).await.unwrap());
        }
        // The share is full: no new ready instance, but a call gets the spare's slot.
        assert!(pool.try_admit("b").is_none());
        calls.push(pool.admit("b").await.expect("the ready instance's slot"));
        assert!(held.0.lock().unwrap().is_none());
        // Nothing left to give back: refused as without ready instances.
        let refused = pool.admit("c").await.err().unwrap();
        assert!(refused.contains("their share"), "{refused}");
    }

    #[tokio::test]
    async fn a_ready_instance_gives_its_slot_to_its_own_plugins_call() {
        let pool = pool();
        let held = spare(&pool, "a");
        let mut calls = Vec::new();
        for _ in 0..3 {
            calls.push(pool.admit("a").await.unwrap());
        }
        // 3 calls + the ready instance fill the quota (4): the fourth call
        // takes the ready instance's slot, the fifth is refused.
        calls.push(pool.admit("a").await.expect("the ready instance's slot"));
        assert!(held.0.lock().unwrap().is_none());
        let refused = pool.admit("a").await.err().unwrap();
        assert!(refused.contains("its quota"), "{refused}");
    }

    #[tokio::test]
    async fn a_ready_instance_leaves_a_slot_free_beside_it() {
        let pool = pool();
        // Quota 4: a ready instance only while the plugin has at most 2 calls.
        let mut calls = vec![
            pool.admit("a").await.unwrap(),
            pool.admit("a").await.unwrap(),
        ];
        let ready = pool.try_admit("a").expect("2 calls + 1 ready < 4");
        assert!(
            pool.try_admit("a").is_none(),
            "the quota's last slot stays free"
        );
        drop(ready);
        // Share 8: 6 taken by others leaves room for one ready instance, not two.
        for i in 0..4 {
            calls.push(pool.admit(&format!("p{i}")).await.unwrap());
        }
        let ready = pool.try_admit("b").expect("6 + 1 < 8");
        assert!(
            pool.try_admit("c").is_none(),
            "the share's last slot stays free"
        );
        drop(ready);
    }

    #[tokio::test]
    async fn a_built_in_ready_instance_takes_only_a_slot_with_another_free() {
        let pool = pool();
        let mut calls = Vec::new();
        for _ in 0..5 {
            calls.push(pool.admit(BASH_ID).await.unwrap());
        }
        // One of 6 left: kept for a call.
        assert!(pool.try_admit(BASH_ID).is_none());
        calls.pop();
        assert!(pool.try_admit(BASH_ID).is_some());
    }
}
