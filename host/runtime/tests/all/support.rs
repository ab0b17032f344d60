//! What the runtime's integration tests share: one allow-all policy and host
//! configuration (for tests about something other than the policy), one
//! compiled-code cache for the whole test binary, the test-only hostile plugin
//! written to disk, a component the host cannot link, and the small capped
//! session engine of the disk tests.
//!
//! The binary's suite (`tests/all`, a test of `host/toolhost`) includes this file
//! as its `runtime_support` module for the same needs, so no helper is written
//! twice; both suites include the process crate's support
//! (`host/process/tests/all/support.rs`) as `process_support`, which this file
//! uses. Not every module of either suite uses every helper.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use toolhost_process::{OutputCapPolicy, Sessions, SessionsConfig};
use toolhost_runtime::HostConfig;
use toolhost_runtime::{HostSessionLog, LogObserver};
use toolhost_test_fixtures::HOSTILE;

/// A fresh (workspace, state dir) pair, removed when dropped (the process
/// crate's test helper).
pub use crate::process_support::dirs;

/// A policy text that allows every command.
pub const ALLOW_ALL: &str = "default = \"allow\"\n";

/// A host configuration over `ws` and `state` whose policy allows everything.
pub fn allow_all_config(ws: &Path, state: &Path) -> HostConfig {
    let mut config = HostConfig::new(ws, state);
    config.policy_rules = ALLOW_ALL.into();
    config
}

/// One compiled-code cache for the whole test binary (each host still has its
/// own state dir, so session ids and output logs do not collide).
pub fn shared_cache() -> &'static Path {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    CACHE.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// Links `state/compiled` to [`shared_cache`].
pub fn use_cache(state: &Path) {
    std::os::unix::fs::symlink(shared_cache(), state.join("compiled")).ok();
}

/// The first lines of every manifest of the hostile plugin as `hostile`.
pub const HOSTILE_BASE: &str = "id = \"hostile\"\ncontract = \"0.1.0\"\n";

/// A manifest of the hostile plugin as `hostile`: [`HOSTILE_BASE`] and `extra`.
pub fn hostile_manifest(extra: &str) -> String {
    format!("{HOSTILE_BASE}{extra}")
}

/// Writes a plugin dir: `hostile.wasm` (the test-only hostile plugin,
/// `tests/plugins/hostile`), `hostile.toml` holding `manifest` if given, a
/// granted dir `granted/` holding `file.txt`, and `secret` next to it (outside).
pub fn hostile_dir(manifest: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), HOSTILE).unwrap();
    if let Some(m) = manifest {
        std::fs::write(dir.path().join("hostile.toml"), m).unwrap();
    }
    std::fs::create_dir(dir.path().join("granted")).unwrap();
    std::fs::write(dir.path().join("granted/file.txt"), "granted content").unwrap();
    std::fs::write(dir.path().join("secret"), "TOPSECRET").unwrap();
    dir
}

/// Writes the hostile component as `dir/<id>.wasm` with a manifest of that id
/// whose `describe` mode is `mode` (none: the plain tool list), plus `extra`
/// manifest lines (before the `[env]` table). Returns the component's path.
pub fn add_hostile(dir: &Path, id: &str, mode: Option<&str>, extra: &str) -> PathBuf {
    let wasm = dir.join(format!("{id}.wasm"));
    std::fs::write(&wasm, HOSTILE).unwrap();
    let mut manifest = format!("id = \"{id}\"\ncontract = \"0.1.0\"\n{extra}");
    if let Some(mode) = mode {
        manifest.push_str(&format!("[env]\nHOSTILE_DESCRIBE = \"{mode}\"\n"));
    }
    std::fs::write(dir.join(format!("{id}.toml")), manifest).unwrap();
    wasm
}

/// A component importing an interface the host does not link
/// (`wasi:http/outgoing-handler`) and re-exporting it as the tool interface.
pub fn component_importing_http() -> Vec<u8> {
    use wasm_encoder::{
        Component, ComponentExportKind, ComponentExportSection, ComponentImportSection,
        ComponentTypeRef, ComponentTypeSection, InstanceType,
    };
    let mut component = Component::new();
    let mut types = ComponentTypeSection::new();
    types.instance(&InstanceType::new());
    component.section(&types);
    let mut imports = ComponentImportSection::new();
    imports.import(
        "wasi:http/outgoing-handler@0.2.0",
        ComponentTypeRef::Instance(0),
    );
    component.section(&imports);
    let mut exports = ComponentExportSection::new();
    exports.export(
        "toolhost:plugin/tool@0.1.0",
        ComponentExportKind::Instance,
        0,
        None,
    );
    component.section(&exports);
    component.finish()
}

/// Cap of the small `output.log` the disk tests use, in bytes.
pub const CAP: u64 = 64 * 1024;
/// Head such a capped log keeps, in bytes.
pub const HEAD: u64 = 16 * 1024;
/// Tail such a capped log keeps, in bytes.
pub const TAIL: u64 = CAP - HEAD;

/// A session engine whose logs are capped at [`CAP`] (keeping [`HEAD`]), and the
/// in-memory host-session log its events go to.
pub struct CappedEnv {
    /// The workspace.
    pub ws: tempfile::TempDir,
    /// The state dir.
    pub state: tempfile::TempDir,
    /// The engine.
    pub sessions: Sessions,
    /// Its host-session log.
    pub log: Arc<HostSessionLog>,
}

/// A [`CappedEnv`] whose capped sessions get `policy`, with a 500 ms kill grace.
/// Must be called inside a tokio runtime.
pub fn capped_env(policy: OutputCapPolicy) -> CappedEnv {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let log = Arc::new(HostSessionLog::in_memory("hs_disk"));
    let mut config = SessionsConfig::new(ws.path(), state.path());
    config.kill_grace = Duration::from_millis(500);
    config.output_log_max_bytes = CAP;
    config.output_log_head_bytes = HEAD;
    config.output_cap_policy = policy;
    config.observer = Some(Arc::new(LogObserver::new(log.clone())));
    let sessions = Sessions::new(config).unwrap();
    CappedEnv {
        ws,
        state,
        sessions,
        log,
    }
}

/// What `seq 1 N` prints: every line differs, so a misplaced byte shows.
pub fn seq_output(n: u32) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Writes a finished session `id` into `state` as a crashed host would leave it:
/// `bytes` of `output.log` last written `age` ago, and 8 KiB in its `tmp/`.
pub fn fake_session(state: &Path, id: &str, bytes: usize, age: Duration) {
    let dir = state.join("sessions").join(id);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("tmp/scratch"), vec![1u8; 8192]).unwrap();
    let log = dir.join("output.log");
    std::fs::write(&log, vec![b'x'; bytes]).unwrap();
    let when = SystemTime::now() - age;
    std::fs::File::options()
        .write(true)
        .open(&log)
        .unwrap()
        .set_modified(when)
        .unwrap();
}
