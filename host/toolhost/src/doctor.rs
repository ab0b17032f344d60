//! `toolhost doctor`: whether this machine (or container) can run toolhost
//! as configured, and what is missing (docs/cli.md#toolhost-doctor).
//!
//! It starts the host the way `serve` would with the same options
//! ([`Host::new`]: the plugins loaded, the kernel probed, the sandbox
//! prepared, process tracking picked), then reports: each sandbox layer
//! ([`crate::sandbox_layers`], the same facts as `/info`'s `sandbox.layers`),
//! the sandbox commands would run under, whether the state dir is writable
//! (the check `/ready` makes), the contract and MCP versions (as `/info`), and
//! whether every plugin loaded. It records no host session and serves nothing.

use std::path::Path;
use std::process::ExitCode;

use serde_json::json;
use toolhost_process::Sessions;
use toolhost_runtime::{ContractVersion, Host, HostConfig};

use crate::mcp::SUPPORTED_PROTOCOL_VERSIONS;
use crate::mcp::health::{sandbox_facts, state_dir_writable};
use crate::sandbox_layers::{self, LayerStatus};
use crate::{errln, outln};

/// The exit code of a doctor run that found something missing: a layer not
/// available, the state dir not writable, or a plugin that did not load.
pub const EXIT_SOMETHING_MISSING: u8 = 1;

/// Whether the plugins load, as `doctor` found out.
struct Plugins {
    /// The ids of the plugins serving tools, in the order of their tools.
    ids: Vec<String>,
    /// How many tools are served.
    tools: usize,
    /// `--plugins-dir` plugins that were skipped: (file, error).
    skipped: Vec<(String, String)>,
    /// Why the host could not start at all.
    error: Option<String>,
}

impl Plugins {
    fn loadable(&self) -> bool {
        self.error.is_none() && self.skipped.is_empty() && self.tools > 0
    }
}

/// Runs `toolhost doctor` with the host configuration `config` (from the same
/// options `serve` takes); prints the report on stdout (JSON with `json`) and
/// returns exit 0 when every check passes, else [`EXIT_SOMETHING_MISSING`].
pub async fn run(config: HostConfig, json: bool) -> ExitCode {
    let state_dir = config.sessions.state_dir.clone();
    let sessions_config = config.sessions.clone();
    let (host, plugins) = match Host::new(config).await {
        Ok(host) => {
            let mut ids: Vec<String> = Vec::new();
            for t in host.tools() {
                if !ids.iter().any(|id| id == t.plugin.id()) {
                    ids.push(t.plugin.id().to_owned());
                }
            }
            let plugins = Plugins {
                ids,
                tools: host.tools().len(),
                skipped: host
                    .skipped_plugins()
                    .iter()
                    .map(|p| (p.file.display().to_string(), p.error.clone()))
                    .collect(),
                error: None,
            };
            (Some(host), plugins)
        }
        Err(e) => (
            None,
            Plugins {
                ids: Vec::new(),
                tools: 0,
                skipped: Vec::new(),
                error: Some(e.to_string()),
            },
        ),
    };
    // Without a host, the session engine alone still tells the sandbox.
    let own_sessions = match &host {
        Some(_) => None,
        None => tokio::task::spawn_blocking(move || Sessions::new(sessions_config))
            .await
            .ok()
            .and_then(Result::ok),
    };
    let sessions = host
        .as_ref()
        .map(|h| h.sessions())
        .or(own_sessions.as_ref());
    let layers = match sessions {
        Some(s) => sandbox_layers::of_sessions(s),
        // Nothing could start: the kernel's facts alone, process tracking unknown.
        None => sandbox_layers::layers(
            &toolhost_process::probe_kernel(),
            toolhost_process::TrackingMechanism::Subreaper,
            "unknown: the session engine could not start",
        ),
    };
    let dir = state_dir.clone();
    let writable = tokio::task::spawn_blocking(move || state_dir_writable(&dir, 0))
        .await
        .unwrap_or(false);
    let mut failed: Vec<&str> = layers
        .iter()
        .filter(|l| !l.available)
        .map(|l| l.layer.as_str())
        .collect();
    if !writable {
        failed.push("state_dir_writable");
    }
    if !plugins.loadable() {
        failed.push("plugins_loadable");
    }
    if json {
        let report = json!({
            "ok": failed.is_empty(),
            "failed": failed,
            "name": "toolhost",
            "version": env!("CARGO_PKG_VERSION"),
            "mcp_protocol_versions": SUPPORTED_PROTOCOL_VERSIONS,
            "contract_versions": ContractVersion::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
            "layers": layers,
            "sandbox": sessions.map(sandbox_facts),
            "commands_run_under": sessions.map(|s| s.sandbox().to_string()),
            "process_tracking": sessions.map(|s| s.tracking().to_owned()),
            "warnings": sessions.map(|s| s.sandbox().warnings.clone()).unwrap_or_default(),
            "state_dir": {"path": state_dir.display().to_string(), "writable": writable},
            "plugins": {
                "loadable": plugins.loadable(),
                "ids": plugins.ids,
                "tools": plugins.tools,
                "skipped": plugins.skipped.iter().map(|(file, error)| json!({"file": file, "error": error})).collect::<Vec<_>>(),
                "error": plugins.error,
            },
        });
        outln!("{report}");
    } else {
        print_text(&layers, sessions, &state_dir, writable, &plugins, &failed);
    }
    if let Some(s) = sessions {
        s.shutdown().await;
    }
    drop(host);
    drop(own_sessions);
    toolhost_process::remove_own_cgroups();
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_SOMETHING_MISSING)
    }
}

/// The report for a person (paths and plugin text escaped).
fn print_text(
    layers: &[LayerStatus],
    sessions: Option<&Sessions>,
    state_dir: &Path,
    writable: bool,
    plugins: &Plugins,
    failed: &[&str],
) {
    use toolhost_runtime::escape_line;
    let versions = |v: Vec<&str>| v.join(", ");
    outln!(
        "toolhost {}: contract versions {}; MCP {}",
        env!("CARGO_PKG_VERSION"),
        versions(ContractVersion::ALL.iter().map(|v| v.as_str()).collect()),
        versions(
            SUPPORTED_PROTOCOL_VERSIONS
                .iter()
                .map(|v| v.as_str())
                .collect()
        )
    );
    outln!("sandbox layers:");
    for l in layers {
        outln!(
            "  {:<16} {:<3}  {}",
            l.layer.as_str(),
            if l.available { "yes" } else { "NO" },
            escape_line(l.reason.as_deref().unwrap_or(&l.detail))
        );
        if let (Some(needs), Some(without)) = (l.needs, l.without) {
            outln!("  {:<16}      needs: {needs}", "");
            outln!("  {:<16}      without it: {without}", "");
        }
    }
    match sessions {
        Some(s) => {
            outln!(
                "commands run under: {}",
                escape_line(&s.sandbox().to_string())
            );
            for w in &s.sandbox().warnings {
                outln!("  warning: {}", escape_line(w));
            }
            outln!("process tracking: {}", escape_line(s.tracking()));
        }
        None => {
            outln!("commands run under: unknown (the session engine could not start)");
        }
    }
    outln!(
        "state dir {}: {}",
        escape_line(&state_dir.display().to_string()),
        if writable { "writable" } else { "NOT writable" }
    );
    match &plugins.error {
        Some(e) => {
            outln!("plugins: NOT loadable: {}", escape_line(e));
        }
        None => {
            outln!(
                "plugins: {} ({} tools)",
                escape_line(&plugins.ids.join(", ")),
                plugins.tools
            );
        }
    }
    for (file, error) in &plugins.skipped {
        outln!("  skipped {}: {}", escape_line(file), escape_line(error));
    }
    if failed.is_empty() {
        outln!("everything toolhost uses is available");
    } else {
        errln!("toolhost doctor: missing: {}", failed.join(", "));
    }
}
