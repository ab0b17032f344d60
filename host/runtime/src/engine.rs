//! The wasmtime engine: the one place that configures `wasmtime::Config`.
//!
//! Everything else asks this module for an [`Engine`] and for compiled
//! [`Component`]s. The configuration is fixed here:
//!
//! - component model on, WASI p2 host functions async on tokio;
//! - component-model async (`concurrency_support`) off: it makes every call
//!   about 4x slower and no plugin needs it;
//! - epoch interruption on, with a ticker thread advancing the epoch every
//!   [`EPOCH_TICK`]; each call's CPU budget is counted in ticks (see
//!   `crate::limits` and `crate::plugin`);
//! - guest stack bounded ([`MAX_WASM_STACK`]) so deep recursion traps instead of
//!   exhausting the host;
//! - the pooling instance allocator ([`EngineOptions`]): instance, memory,
//!   table and stack slots reserved once, so a call's fresh instance costs a
//!   few microseconds; if the pool cannot be reserved (e.g. a low `ulimit -v`
//!   or strict overcommit) the engine falls back to on-demand allocation
//!   with a warning;
//! - call admission ([`Runtime::admit`]): the pool is split into shares (the
//!   policy, the built-in `bash`, third-party plugins; [`PoolShares`]) so no
//!   class of calls can take the pool from another and no call ever fails to
//!   find an instance: built-in calls wait for a slot of their share, a
//!   third-party call past its quota is refused at once, naming it.
//!
//! Compiled components are cached on disk, keyed by the engine's precompile
//! compatibility hash and the component's sha256 (see [`Runtime::compile`]).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::Result;
use wasmtime::component::Component;
use wasmtime::error::Context;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances: the granularity of CPU-time limits (10 ms).
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Maximum guest stack (bytes): deep recursion traps with "call stack exhausted".
pub const MAX_WASM_STACK: usize = 1 << 20;

/// Largest linear memory a pool slot is sized for (4 GiB: a whole wasm32
/// memory, which is also the engine's default virtual reservation).
pub const MAX_POOL_MEMORY: u64 = 4 << 30;

/// How to build the engine. `Default`: pooling for 128 concurrent
/// instances, slots sized for 64 MiB memories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// Use the pooling allocator (falls back to on-demand if the pool cannot
    /// be reserved). Default: true.
    pub pooling: bool,
    /// Most component instances alive at once (calls in flight, all plugins
    /// together). Default: 128. A call beyond it fails to instantiate.
    ///
    /// Each slot is reserved up front and its async stack is a separate mapping
    /// with a guard page, so the slot count sets how many mappings the host
    /// process has and how long setting up and tearing down the pool takes
    /// (benchmark P6). It also caps plugin calls in flight: 128 is far above what
    /// an agent runs at once; `toolhost call` uses 8.
    pub max_instances: u32,
    /// The largest memory any loaded plugin may grow to (the largest manifest
    /// `memory`); capped at [`MAX_POOL_MEMORY`]. Default: 64 MiB.
    pub max_memory_bytes: u64,
    /// Most calls one third-party plugin may have in flight at once; past it a call
    /// is refused at once, naming this quota ([`Runtime::admit`]). The built-in plugins
    /// are exempt. Default: 16.
    pub max_calls_per_plugin: u32,
}

/// How [`EngineOptions::max_instances`] is split between the classes of calls
/// ([`EngineOptions::shares`]). The three shares add up to at most
/// `max_instances`, so the pool itself is never exhausted: a call that is
/// admitted always finds its instance.
///
/// - `policy_builtin` and `policy_third_party`: decisions of the policy plugin on
///   starts of the built-in `bash` and of third-party plugins (`max_instances /
///   16` each, at least 1; 8 and 8 of 128). A tool call holds its own instance
///   while the policy decides on a process it starts, so the policy has shares
///   of its own, and a decision waits for a slot. Two shares, so third-party
///   plugins asking for slow decisions (a 1 MiB command) never make a `bash`
///   call wait for its decision.
/// - `builtin`: calls of the built-in `bash` plugin (`3 × max_instances / 8`, at
///   least 1; 48 of 128). They wait for a slot rather than fail: a burst of an
///   agent's shell calls queues, whatever third-party plugins hold.
/// - `third_party`: calls of all third-party plugins together (the rest, at least
///   1; 64 of 128), each plugin at most [`EngineOptions::max_calls_per_plugin`].
///   Past either quota a call is refused at once, naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolShares {
    /// Policy decisions for the built-in `bash` in flight at most.
    pub policy_builtin: u32,
    /// Policy decisions for third-party plugins in flight at most.
    pub policy_third_party: u32,
    /// Built-in `bash` calls in flight at most.
    pub builtin: u32,
    /// Third-party calls in flight at most, all plugins together.
    pub third_party: u32,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions {
            pooling: true,
            max_instances: 128,
            max_memory_bytes: 64 << 20,
            max_calls_per_plugin: 16,
        }
    }
}

impl EngineOptions {
    /// The split of the pool between policy decisions, built-in calls and
    /// third-party calls (see [`PoolShares`]).
    pub fn shares(&self) -> PoolShares {
        let n = self.max_instances.max(4);
        let policy = (n / 16).max(1);
        let builtin = (n * 3 / 8).max(1);
        PoolShares {
            policy_builtin: policy,
            policy_third_party: policy,
            builtin,
            third_party: (n - 2 * policy - builtin).max(1),
        }
    }
}

/// Which of the policy's two shares of the pool ([`PoolShares`]) a decision
/// takes its slot from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionShare {
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
    pub fn of(requester: &str) -> DecisionShare {
        if requester == crate::builtin::BASH_ID
            || requester == crate::builtin::POLICY_ID
            || requester.is_empty()
        {
            DecisionShare::Builtin
        } else {
            DecisionShare::ThirdParty
        }
    }
}

/// Calls in flight: per third-party plugin and for all of them together (see
/// [`EngineOptions::max_calls_per_plugin`], [`PoolShares`]), and the slots the
/// built-in plugins wait for.
struct Admission {
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
}

/// A third-party plugin's ready-instance holder, by plugin id.
type RegisteredSpare = (Arc<str>, std::sync::Weak<dyn Spare>);

/// Something holding a spare instance with its [`CallPermit`] (a tool plugin's
/// ready instance, ARCHITECTURE.md "Per-call store"), which it gives up when a
/// call needs the slot: a made ready instance never makes [`Runtime::admit`]
/// refuse a call it would admit without it.
pub trait Spare: Send + Sync {
    /// Drops the held instance and its permit, if it holds one; true if it did.
    fn release(&self) -> bool;
}

#[derive(Default)]
struct AdmissionState {
    total: u32,
    by_plugin: HashMap<Arc<str>, u32>,
}

/// A call admitted by [`Runtime::admit`]; it counts against the quotas until dropped.
pub struct CallPermit {
    /// `None` for a built-in plugin (not counted).
    counted: Option<(Arc<Admission>, Arc<str>)>,
    /// The slot of a built-in plugin's share, freed on drop.
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        if let Some((admission, plugin)) = self.counted.take() {
            let mut st = admission.state.lock().unwrap_or_else(|e| e.into_inner());
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

/// Waits for a slot of `share` (a semaphore that is never closed).
async fn wait_for_slot(share: &Arc<tokio::sync::Semaphore>) -> CallPermit {
    let slot = share.clone().acquire_owned().await.ok();
    CallPermit {
        counted: None,
        _slot: slot,
    }
}

/// Why a third-party call was not admitted (the message names the quota).
enum Refusal {
    /// The plugin is at its own quota.
    Plugin(String),
    /// Third-party plugins together are at their share.
    Share(String),
}

/// Which instance allocator the engine ended up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocation {
    /// The pooling allocator (slots reserved up front).
    Pooling,
    /// On-demand allocation (`mmap` per instance): pooling was off or failed.
    OnDemand,
}

/// The engine plus its epoch ticker and compiled-code cache.
///
/// Dropping the last clone stops the ticker thread.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    engine: Engine,
    cache_dir: Option<PathBuf>,
    allocation: Allocation,
    stop: Arc<AtomicBool>,
    admission: Arc<Admission>,
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Where a compiled component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileSource {
    /// Loaded from the on-disk cache: no compilation.
    Cache,
    /// Compiled now (and written to the cache when one is configured).
    Compiled,
}

impl Runtime {
    /// Builds the engine. `cache_dir`: where compiled components are kept
    /// (created with mode 0700 if missing); `None` disables the disk cache.
    ///
    /// Errors: an invalid wasmtime configuration for this CPU, or a cache dir
    /// that cannot be created.
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Runtime> {
        Runtime::with_options(cache_dir, EngineOptions::default())
    }

    /// As [`Runtime::new`], with explicit [`EngineOptions`].
    pub fn with_options(cache_dir: Option<PathBuf>, options: EngineOptions) -> Result<Runtime> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .concurrency_support(false);
        let (engine, allocation) = if options.pooling {
            let mut pooled = config.clone();
            pooled.allocation_strategy(InstanceAllocationStrategy::Pooling(pool_config(&options)));
            match Engine::new(&pooled) {
                Ok(engine) => (engine, Allocation::Pooling),
                Err(e) => {
                    tracing::warn!(
                        "the pooling allocator is unavailable ({e:#}); falling back to \
                         on-demand instance allocation (slower instantiation)"
                    );
                    let engine = Engine::new(&config).context("configuring the wasmtime engine")?;
                    (engine, Allocation::OnDemand)
                }
            }
        } else {
            let engine = Engine::new(&config).context("configuring the wasmtime engine")?;
            (engine, Allocation::OnDemand)
        };
        if let Some(dir) = &cache_dir {
            create_private_dir(dir)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.weak(), stop.clone())?;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                engine,
                cache_dir,
                allocation,
                stop,
                admission: {
                    let shares = options.shares();
                    Arc::new(Admission {
                        per_plugin: options.max_calls_per_plugin.max(1),
                        third_party: shares.third_party,
                        state: Mutex::default(),
                        builtin: Arc::new(tokio::sync::Semaphore::new(shares.builtin as usize)),
                        policy_builtin: Arc::new(tokio::sync::Semaphore::new(
                            shares.policy_builtin as usize,
                        )),
                        policy_third_party: Arc::new(tokio::sync::Semaphore::new(
                            shares.policy_third_party as usize,
                        )),
                        spares: Mutex::default(),
                    })
                },
            }),
        })
    }

    /// Admits one policy decision on a start asked for by plugin `requester`
    /// (the host itself, e.g. validating the rules, counts as built-in), for as
    /// long as the returned permit lives: it waits for a slot of the policy's
    /// share for built-in or for third-party requesters ([`PoolShares`]).
    pub async fn admit_decision(&self, requester: &str) -> CallPermit {
        wait_for_slot(self.decision_semaphore(DecisionShare::of(requester))).await
    }

    /// How many slots of the policy's `share` are free now: decisions that
    /// [`Runtime::admit_decision`] would admit without waiting. Zero while a
    /// decision waits for one (a freed slot goes to a waiter first). A policy
    /// plugin keeps an idle instance, with its slot, only while this is not
    /// zero, so an idle instance never makes a decision wait (`PolicyPlugin`,
    /// ARCHITECTURE.md "Plugins").
    pub fn decision_slots_free(&self, share: DecisionShare) -> usize {
        self.decision_semaphore(share).available_permits()
    }

    fn decision_semaphore(&self, share: DecisionShare) -> &Arc<tokio::sync::Semaphore> {
        let admission = &self.inner.admission;
        match share {
            DecisionShare::Builtin => &admission.policy_builtin,
            DecisionShare::ThirdParty => &admission.policy_third_party,
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
    pub async fn admit(&self, plugin: &str) -> std::result::Result<CallPermit, String> {
        let admission = &self.inner.admission;
        if plugin == crate::builtin::BASH_ID {
            return Ok(wait_for_slot(&admission.builtin).await);
        }
        if plugin == crate::builtin::POLICY_ID {
            return Ok(wait_for_slot(&admission.policy_builtin).await);
        }
        // A full share (or quota) first takes back the slots of ready
        // instances ([`Spare`]): any third-party plugin's for the share, the
        // plugin's own for its quota.
        let mut tries = admission.third_party;
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
    pub fn try_admit(&self, plugin: &str) -> Option<CallPermit> {
        let admission = &self.inner.admission;
        let share = if plugin == crate::builtin::BASH_ID {
            &admission.builtin
        } else if plugin == crate::builtin::POLICY_ID {
            &admission.policy_builtin
        } else {
            let st = admission.state.lock().unwrap_or_else(|e| e.into_inner());
            let mine = st.by_plugin.get(plugin).copied().unwrap_or(0);
            if mine + 1 >= admission.per_plugin || st.total + 1 >= admission.third_party {
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
        })
    }

    /// Registers `spare`, the ready instance holder of `plugin`, which
    /// [`Runtime::admit`] asks to give up its instance when the third-party
    /// share or the plugin's quota is full. Built-in plugins' are not kept
    /// (their next call takes their ready instance; no other waits for their
    /// share). Dropped holders are forgotten.
    pub fn register_spare(&self, plugin: &str, spare: std::sync::Weak<dyn Spare>) {
        if plugin == crate::builtin::BASH_ID || plugin == crate::builtin::POLICY_ID {
            return;
        }
        let mut spares = self
            .inner
            .admission
            .spares
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        spares.retain(|(_, s)| s.strong_count() > 0);
        spares.push((plugin.into(), spare));
    }

    /// Asks the registered spares (of `plugin` only, when given), in turn, to
    /// give up their instance; true if one did.
    fn release_spare(&self, plugin: Option<&str>) -> bool {
        let live: Vec<Arc<dyn Spare>> = {
            let mut spares = self
                .inner
                .admission
                .spares
                .lock()
                .unwrap_or_else(|e| e.into_inner());
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
    fn admit_third_party(&self, plugin: &str) -> std::result::Result<CallPermit, Refusal> {
        let admission = &self.inner.admission;
        let mut st = admission.state.lock().unwrap_or_else(|e| e.into_inner());
        let mine = st.by_plugin.get(plugin).copied().unwrap_or(0);
        if mine >= admission.per_plugin {
            return Err(Refusal::Plugin(format!(
                "resource-limit: plugin `{plugin}` has {mine} calls in flight, its quota \
                 (max_calls_per_plugin = {}, default 16); wait for one to end",
                admission.per_plugin
            )));
        }
        if st.total >= admission.third_party {
            return Err(Refusal::Share(format!(
                "resource-limit: third-party plugins have {} calls in flight, their share of \
                 the instance pool (max_instances - max_instances / 8 - 3 × max_instances / 8 = \
                 {}, default 64); wait for one to end",
                st.total, admission.third_party
            )));
        }
        let plugin: Arc<str> = plugin.into();
        st.total += 1;
        *st.by_plugin.entry(plugin.clone()).or_default() += 1;
        Ok(CallPermit {
            counted: Some((admission.clone(), plugin)),
            _slot: None,
        })
    }

    /// Which instance allocator is in use.
    pub fn allocation(&self) -> Allocation {
        self.inner.allocation
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Compiles `bytes` (a component binary), or loads the compiled artifact
    /// from the cache. The cache key is `sha256(bytes)` plus a hash of the
    /// engine's precompile compatibility settings, so a wasmtime upgrade or a
    /// config change never loads stale code. Cache files are written
    /// atomically (temp file + rename).
    ///
    /// Errors: the bytes are not a valid component.
    pub fn compile(&self, bytes: &[u8]) -> Result<(Component, CompileSource)> {
        let engine = self.engine();
        let Some(dir) = &self.inner.cache_dir else {
            let component = Component::new(engine, bytes)?;
            return Ok((component, CompileSource::Compiled));
        };
        let path = self.cache_file(dir, bytes);
        if path.exists() {
            // SAFETY: the file was written by `Component::serialize` of an
            // engine with the same compatibility hash, into a directory only
            // this user can write (created 0700 above).
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok((component, CompileSource::Cache)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring unusable compiled cache entry: {e}")
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Err(e) = write_atomically(&path, &component.serialize()?) {
            tracing::warn!(path = %path.display(), "could not write the compiled cache: {e:#}");
        }
        Ok((component, CompileSource::Compiled))
    }

    /// Whether [`Runtime::compile`] would load `bytes` from the on-disk cache
    /// (an entry for this component and engine exists) instead of compiling:
    /// front doors say which before a compile that can take half a minute.
    pub fn is_cached(&self, bytes: &[u8]) -> bool {
        self.inner
            .cache_dir
            .as_ref()
            .is_some_and(|dir| self.cache_file(dir, bytes).exists())
    }

    /// The cache entry of `bytes` in `dir`: `<sha256>-<engine hash>.cwasm`.
    fn cache_file(&self, dir: &Path, bytes: &[u8]) -> PathBuf {
        let digest = crate::builtin::known_sha256(bytes)
            .map(str::to_owned)
            .unwrap_or_else(|| sha256_hex(bytes));
        dir.join(format!("{digest}-{:016x}.cwasm", self.engine_hash()))
    }

    fn engine_hash(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine()
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        hasher.finish()
    }
}

/// The pool: `max_instances` component instances, each with up to 16 core
/// instances and tables and 2 memories (Rust components have one; adapter
/// based ones two), memories up to `max_memory_bytes`. Virtual address space
/// is reserved up front (4 GiB + guard per memory slot); physical memory is
/// only used by live instances.
fn pool_config(options: &EngineOptions) -> PoolingAllocationConfig {
    let n = options.max_instances.max(1);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(8))
        .total_memories(n)
        .total_tables(n.saturating_mul(8))
        .total_stacks(n)
        .max_core_instances_per_component(16)
        .max_memories_per_component(2)
        .max_tables_per_component(16)
        .max_memory_size(options.max_memory_bytes.clamp(1 << 20, MAX_POOL_MEMORY) as usize)
        // Every call is a fresh instance in a reused slot. Resetting a slot with
        // `madvise` makes the next call page-fault in every page it touches again;
        // instead keep up to KEEP_RESIDENT bytes resident and reset only the pages
        // the call dirtied (found with the PAGEMAP_SCAN ioctl on Linux 6.7+, else a
        // `memset` of the low bytes). Benchmark P1 in BENCHMARKS.md.
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT / 16)
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
}

/// Bytes of each pooled linear memory kept resident between calls (see
/// `pool_config`): 2 MiB, enough for a plugin's stack, data and a call's heap.
const KEEP_RESIDENT: usize = 2 << 20;

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn spawn_ticker(engine: wasmtime::EngineWeak, stop: Arc<AtomicBool>) -> Result<()> {
    std::thread::Builder::new()
        .name("toolhost-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .context("starting the epoch ticker thread")?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
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

    fn runtime() -> Runtime {
        // 16 instances: policy 1 + 1, built-in 6, third-party 8.
        Runtime::with_options(
            None,
            EngineOptions {
                pooling: false,
                max_instances: 16,
                max_memory_bytes: 64 << 20,
                max_calls_per_plugin: 4,
            },
        )
        .unwrap()
    }

    fn spare(rt: &Runtime, plugin: &str) -> Arc<Held> {
        let held = Arc::new(Held(Mutex::new(rt.try_admit(plugin))));
        assert!(
            held.0.lock().unwrap().is_some(),
            "room for a ready instance"
        );
        let as_spare: Arc<dyn Spare> = held.clone();
        // Registered by a weak reference: `held` keeps it alive.
        rt.register_spare(plugin, Arc::downgrade(&as_spare));
        held
    }

    #[tokio::test]
    async fn a_ready_instance_gives_its_slot_to_a_call() {
        let rt = runtime();
        let held = spare(&rt, "a");
        let mut calls = Vec::new();
        for i in 0..7 {
            calls.push(rt.admit(&format!("p{i}")).await.unwrap());
        }
        // The share is full: no new ready instance, but a call gets the spare's slot.
        assert!(rt.try_admit("b").is_none());
        calls.push(rt.admit("b").await.expect("the ready instance's slot"));
        assert!(held.0.lock().unwrap().is_none());
        // Nothing left to give back: refused as without ready instances.
        let refused = rt.admit("c").await.err().unwrap();
        assert!(refused.contains("their share"), "{refused}");
    }

    #[tokio::test]
    async fn a_ready_instance_gives_its_slot_to_its_own_plugins_call() {
        let rt = runtime();
        let held = spare(&rt, "a");
        let mut calls = Vec::new();
        for _ in 0..3 {
            calls.push(rt.admit("a").await.unwrap());
        }
        // 3 calls + the ready instance fill the quota (4): the fourth call
        // takes the ready instance's slot, the fifth is refused.
        calls.push(rt.admit("a").await.expect("the ready instance's slot"));
        assert!(held.0.lock().unwrap().is_none());
        let refused = rt.admit("a").await.err().unwrap();
        assert!(refused.contains("its quota"), "{refused}");
    }

    #[tokio::test]
    async fn a_ready_instance_leaves_a_slot_free_beside_it() {
        let rt = runtime();
        // Quota 4: a ready instance only while the plugin has at most 2 calls.
        let mut calls = vec![rt.admit("a").await.unwrap(), rt.admit("a").await.unwrap()];
        let ready = rt.try_admit("a").expect("2 calls + 1 ready < 4");
        assert!(
            rt.try_admit("a").is_none(),
            "the quota's last slot stays free"
        );
        drop(ready);
        // Share 8: 6 taken by others leaves room for one ready instance, not two.
        for i in 0..4 {
            calls.push(rt.admit(&format!("p{i}")).await.unwrap());
        }
        let ready = rt.try_admit("b").expect("6 + 1 < 8");
        assert!(
            rt.try_admit("c").is_none(),
            "the share's last slot stays free"
        );
        drop(ready);
    }

    #[tokio::test]
    async fn a_built_in_ready_instance_takes_only_a_slot_with_another_free() {
        let rt = runtime();
        let mut calls = Vec::new();
        for _ in 0..5 {
            calls.push(rt.admit(crate::builtin::BASH_ID).await.unwrap());
        }
        // One of 6 left: kept for a call.
        assert!(rt.try_admit(crate::builtin::BASH_ID).is_none());
        calls.pop();
        assert!(rt.try_admit(crate::builtin::BASH_ID).is_some());
    }
}
