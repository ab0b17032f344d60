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
//! - the split of the pool into shares ([`PoolShares`]: the policy, the built-in
//!   `bash`, third-party plugins), which the plugin layer admits each call by
//!   (`plugin/instances.rs`), so no class of calls can take the pool from another
//!   and no admitted call fails to find an instance.
//!
//! Compiled components are cached on disk, keyed by the engine's precompile
//! compatibility hash and the component's sha256 (see [`Runtime::compile`]).

use std::any::Any;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
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
    /// is refused at once, naming this quota (`plugin/instances.rs::Pool::admit`). The built-in plugins
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
    options: EngineOptions,
    /// See [`Runtime::plugin_state`].
    plugin_state: OnceLock<Box<dyn Any + Send + Sync>>,
    /// See [`Runtime::report_compiles`].
    compile_progress: OnceLock<CompileProgress>,
}

/// Told when [`Runtime::compile_plugin`] compiles a component the cache does
/// not hold (a Python or JS plugin takes 15-20 s on first use): `plugin` and
/// `None` before the compile, then `plugin` and how long it took. Whoever
/// serves the host says so where its user looks (`toolhost call` and `serve`
/// on stderr); the runtime knows no front door. Called on the loading thread;
/// must return quickly.
#[derive(Clone)]
pub struct CompileProgress(pub Arc<CompileProgressFn>);

/// What a [`CompileProgress`] calls: the plugin's id, then `None` (starting)
/// or how long the compile took.
pub type CompileProgressFn = dyn Fn(&str, Option<std::time::Duration>) + Send + Sync;

impl std::fmt::Debug for CompileProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompileProgress(..)")
    }
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
                options,
                plugin_state: OnceLock::new(),
                compile_progress: OnceLock::new(),
            }),
        })
    }

    /// The options the engine was built with.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.options
    }

    /// The state the plugin layer keeps for this runtime, made by `make` from the
    /// options on first use: the instance pool's admission
    /// (`plugin/instances.rs::Pool`), shared by every plugin loaded on this runtime.
    /// Typed as `Any` because the engine sits below the plugin layer and names none
    /// of its types; there is one such state per runtime, always of that one type.
    pub(crate) fn plugin_state<T: Any + Send + Sync>(
        &self,
        make: impl FnOnce(&EngineOptions) -> T,
    ) -> &T {
        self.inner
            .plugin_state
            .get_or_init(|| Box::new(make(&self.inner.options)))
            .downcast_ref()
            .expect("a runtime keeps one type of plugin state")
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

    /// Reports every compile [`Runtime::compile_plugin`] does from now on to
    /// `progress` (the first call wins; later ones are ignored).
    pub fn report_compiles(&self, progress: CompileProgress) {
        let _ = self.inner.compile_progress.set(progress);
    }

    /// [`Runtime::compile`] of plugin `plugin`'s `bytes`, told to the
    /// [`CompileProgress`] set with [`Runtime::report_compiles`] when it is
    /// not in the cache and not a built-in plugin (before and after the
    /// compile).
    ///
    /// Errors: as [`Runtime::compile`].
    pub fn compile_plugin(&self, plugin: &str, bytes: &[u8]) -> Result<(Component, CompileSource)> {
        // The built-in plugins compile in about a second: not worth a word.
        let progress =
            self.inner.compile_progress.get().filter(|_| {
                crate::builtin::known_sha256(bytes).is_none() && !self.is_cached(bytes)
            });
        let Some(CompileProgress(progress)) = progress else {
            return self.compile(bytes);
        };
        progress(plugin, None);
        let began = std::time::Instant::now();
        let compiled = self.compile(bytes);
        if compiled.is_ok() {
            progress(plugin, Some(began.elapsed()));
        }
        compiled
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

    /// Where [`Runtime::compile`] keeps the compiled code of `bytes` (`None`
    /// without a cache dir): what `toolhost plugin gc` keeps for each
    /// installed component.
    pub fn cache_path(&self, bytes: &[u8]) -> Option<PathBuf> {
        self.inner
            .cache_dir
            .as_ref()
            .map(|dir| self.cache_file(dir, bytes))
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
    toolhost_process::create_private_dir_all(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// Writes `bytes` to `path` through a temp file beside it, renamed over. A
/// write or rename that fails removes the temp file: a partial one left on a
/// full disk would keep it full, one more per host that tries (each pid
/// names its own).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = toolhost_process::write_private_file(&tmp, bytes)
        .with_context(|| format!("writing {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_cache_write_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        // A rename over a directory fails after the temp file was written.
        let path = dir.path().join("taken.cwasm");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), b"x").unwrap();
        assert!(write_atomically(&path, b"compiled").is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["taken.cwasm"]);
        let ok = dir.path().join("ok.cwasm");
        write_atomically(&ok, b"compiled").unwrap();
        assert_eq!(std::fs::read(&ok).unwrap(), b"compiled");
    }
}
