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
//!   `plugins::limits`);
//! - guest stack bounded ([`MAX_WASM_STACK`]) so deep recursion traps instead of
//!   exhausting the host.
//!
//! Compiled components are cached on disk, keyed by the engine's precompile
//! compatibility hash and the component's sha256 (see [`Runtime::compile`]).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::Result;
use wasmtime::component::Component;
use wasmtime::error::Context;
use wasmtime::{Config, Engine};

/// How often the epoch advances: the granularity of CPU-time limits (10 ms).
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Maximum guest stack (bytes): deep recursion traps with "call stack exhausted".
pub const MAX_WASM_STACK: usize = 1 << 20;

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
    stop: Arc<AtomicBool>,
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
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .concurrency_support(false);
        let engine = Engine::new(&config).context("configuring the wasmtime engine")?;
        if let Some(dir) = &cache_dir {
            create_private_dir(dir)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.weak(), stop.clone())?;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                engine,
                cache_dir,
                stop,
            }),
        })
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
        let path = dir.join(format!(
            "{}-{:016x}.cwasm",
            sha256_hex(bytes),
            self.engine_hash()
        ));
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

    fn engine_hash(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine()
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        hasher.finish()
    }
}

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
