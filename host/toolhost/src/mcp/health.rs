//! The HTTP door's operational endpoints beside [`super::http::MCP_PATH`]:
//! `GET /health` (liveness), `GET /ready` (readiness) and `GET /info` (what
//! this server is), for probes and monitoring
//! (docs/operations.md#health-readiness-and-info).
//!
//! They need no bearer token even when one is configured (a liveness probe
//! carries none), so they reveal nothing a stranger should not know: no
//! paths (the state dir, the workspace, the sandbox's writable roots), no
//! token, no plugin or grant, no environment, no warning text (it may name
//! paths). They still pass the `Host` / `Origin` checks of
//! [`super::http`]. Every answer is `application/json`; a method other than
//! `GET` is `405` with `Allow: GET`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::{Value, json};

use toolhost_process::Sessions;
use toolhost_runtime::{ContractVersion, Host};

use super::SUPPORTED_PROTOCOL_VERSIONS;
use super::drain::Drain;

/// Liveness: `200` `{"status":"ok"}` for as long as the process serves HTTP.
pub const HEALTH_PATH: &str = "/health";
/// Readiness: `200` when every check of [`Readiness::check`] passes, else `503`.
pub const READY_PATH: &str = "/ready";
/// Metadata: `200` with [`info`].
pub const INFO_PATH: &str = "/info";

/// Whether `path` is one of the endpoints this module answers.
pub fn is_endpoint(path: &str) -> bool {
    matches!(path, HEALTH_PATH | READY_PATH | INFO_PATH)
}

/// How long a `state_dir_writable` answer is reused (1 s): the probe file
/// is written at most once per second, however many requests `/ready` gets
/// (it needs no token, so anyone who reaches the port can send them).
pub const WRITABLE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// What `/ready` checks beyond the [`Host`]: whether the server is draining
/// (its [`Drain`]), and the last `state_dir_writable` answer.
#[derive(Default)]
pub struct Readiness {
    drain: Arc<Drain>,
    probes: AtomicU64,
    /// When `state_dir_writable` was last probed, and its answer; requests
    /// that come while one probes wait for its answer.
    writable: tokio::sync::Mutex<Option<(Instant, bool)>>,
}

impl Readiness {
    /// The readiness of a server stopped by `drain`: `/ready` answers `503`
    /// from the start of its drain on.
    pub fn new(drain: Arc<Drain>) -> Readiness {
        Readiness {
            drain,
            probes: AtomicU64::default(),
            writable: tokio::sync::Mutex::default(),
        }
    }

    /// The readiness checks, each `true` when it passes, as `(name, passed)`:
    ///
    /// - `plugins_loaded`: [`Host::new`] loaded the plugins (it returns only
    ///   once they are; the HTTP listener binds after it) and at least one
    ///   tool is served;
    /// - `state_dir_writable`: a file can be created, written and removed in
    ///   the state dir (`.ready-<pid>-<n>`, removed at once), probed at most
    ///   once per [`WRITABLE_CHECK_INTERVAL`];
    /// - `sandbox_probed`: the kernel probe has run and the operator's
    ///   sandbox is prepared (`Sessions::new`, inside [`Host::new`], does
    ///   both before the host exists);
    /// - `accepting`: no stop (control `stop`, SIGTERM, SIGINT) has begun
    ///   ([`Drain::is_draining`]; docs/operations.md#stopping-and-draining).
    pub async fn check(&self, host: &Host) -> Vec<(&'static str, bool)> {
        let writable = self.writable(&host.config().sessions.state_dir).await;
        vec![
            ("plugins_loaded", !host.tools().is_empty()),
            ("state_dir_writable", writable),
            ("sandbox_probed", true),
            ("accepting", !self.drain.is_draining()),
        ]
    }

    /// `state_dir_writable`: the last answer if it is younger than
    /// [`WRITABLE_CHECK_INTERVAL`], else a new probe.
    async fn writable(&self, state_dir: &Path) -> bool {
        let mut last = self.writable.lock().await;
        if let Some((at, writable)) = *last
            && at.elapsed() < WRITABLE_CHECK_INTERVAL
        {
            return writable;
        }
        let state_dir = state_dir.to_path_buf();
        let n = self.probes.fetch_add(1, Ordering::Relaxed);
        let writable = tokio::task::spawn_blocking(move || state_dir_writable(&state_dir, n))
            .await
            .unwrap_or(false);
        *last = Some((Instant::now(), writable));
        writable
    }
}

/// Whether a probe file (`.ready-<pid>-<n>`) can be created, written and
/// removed in `dir` (also `toolhost doctor`'s `state_dir_writable`).
pub(crate) fn state_dir_writable(dir: &Path, n: u64) -> bool {
    use std::io::Write;
    let path = dir.join(format!(".ready-{}-{n}", std::process::id()));
    let written = std::fs::File::create_new(&path).and_then(|mut f| f.write_all(b"ready\n"));
    let removed = std::fs::remove_file(&path);
    written.is_ok() && removed.is_ok()
}

/// The sandbox layers in force, without any path: the operator's prepared
/// sandbox (`Sessions::sandbox`, the [`toolhost_process::EffectiveSandbox`]
/// every command gets unless a call tightens it), what the kernel offers
/// ([`toolhost_process::probe_kernel`], cached since the host started) and
/// which layers are available ([`crate::sandbox_layers`], the same facts as
/// `toolhost doctor`).
///
/// Shape: `{"mode", "landlock_abi" (enforced, or null), "network_blocked",
/// "unix_sockets_blocked", "git_read_only", "metadata_read_only",
/// "setid_refused", "weakened" (the mode is not fully enforced), "kernel":
/// {"landlock_abi", "seccomp", "user_namespaces", "mount_namespace",
/// "private_shm", "private_pts", "read_only_root"}, "layers": {"user_namespace",
/// "mount_namespace", "landlock", "seccomp", "cgroup_v2", "network"} (each
/// `true` when available)}`.
pub fn sandbox_facts(sessions: &Sessions) -> Value {
    let s = sessions.sandbox();
    let k = toolhost_process::probe_kernel();
    json!({
        "mode": s.mode.as_str(),
        "landlock_abi": s.landlock_abi,
        "network_blocked": s.network_blocked,
        "unix_sockets_blocked": s.unix_sockets_blocked,
        "git_read_only": s.git_read_only,
        "metadata_read_only": s.metadata_read_only,
        "setid_refused": s.setid_refused,
        "weakened": !s.warnings.is_empty(),
        "kernel": {
            "landlock_abi": k.landlock_abi,
            "seccomp": k.seccomp,
            "user_namespaces": k.user_namespaces,
            "mount_namespace": k.mount_namespace,
            "private_shm": k.private_shm,
            "private_pts": k.private_pts,
            "read_only_root": k.read_only_root,
        },
        "layers": crate::sandbox_layers::availability(&crate::sandbox_layers::of_sessions(sessions)),
    })
}

/// `/info`'s body: `{"name": "toolhost", "version" (the crate's),
/// "mcp_protocol_versions" ([`SUPPORTED_PROTOCOL_VERSIONS`], newest first),
/// "contract_versions" ([`ContractVersion::ALL`], oldest first), "sandbox"
/// ([`sandbox_facts`])}`.
pub fn info(host: &Host) -> Value {
    json!({
        "name": "toolhost",
        "version": env!("CARGO_PKG_VERSION"),
        "mcp_protocol_versions": SUPPORTED_PROTOCOL_VERSIONS,
        "contract_versions": ContractVersion::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
        "sandbox": sandbox_facts(host.sessions()),
    })
}

/// The answer to `method` on `path` (one of [`is_endpoint`]'s): the status
/// and JSON body. `405` (`{"error": "method not allowed", "allow": "GET"}`)
/// for a method other than `GET`; `/ready` is `200`
/// `{"status":"ready","checks":{...}}` or `503`
/// `{"status":"not_ready","failed":[names],"checks":{...}}` (the names of
/// [`Readiness::check`]).
pub async fn answer(
    host: &Host,
    readiness: &Readiness,
    method: &Method,
    path: &str,
) -> (StatusCode, Value) {
    if method != Method::GET {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            json!({"error": "method not allowed", "allow": "GET"}),
        );
    }
    match path {
        READY_PATH => {
            let checks = readiness.check(host).await;
            let failed: Vec<&str> = checks
                .iter()
                .filter(|(_, ok)| !ok)
                .map(|(name, _)| *name)
                .collect();
            let checks: serde_json::Map<String, Value> = checks
                .into_iter()
                .map(|(name, ok)| (name.to_string(), Value::Bool(ok)))
                .collect();
            if failed.is_empty() {
                (StatusCode::OK, json!({"status": "ready", "checks": checks}))
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    json!({"status": "not_ready", "failed": failed, "checks": checks}),
                )
            }
        }
        INFO_PATH => (StatusCode::OK, info(host)),
        _ => (StatusCode::OK, json!({"status": "ok"})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_state_dir_is_probed_at_most_once_per_interval() {
        let dir = tempfile::tempdir().unwrap();
        let readiness = Readiness::default();
        for _ in 0..50 {
            assert!(readiness.writable(dir.path()).await);
        }
        assert_eq!(readiness.probes.load(Ordering::Relaxed), 1);
        // An answer older than the interval is probed again.
        let past = Instant::now().checked_sub(WRITABLE_CHECK_INTERVAL * 2);
        if let Some(past) = past {
            *readiness.writable.lock().await = Some((past, true));
            assert!(readiness.writable(dir.path()).await);
            assert_eq!(readiness.probes.load(Ordering::Relaxed), 2);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
