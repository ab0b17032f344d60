//! `toolhost plugin inspect FILE`: what a component imports and exports, its
//! tools, its manifest and what that grants (ARCHITECTURE.md, "Plugins").

use std::path::{Path, PathBuf};

use crate::engine::{EngineOptions, Runtime, sha256_hex};
use crate::host::manifest_for;
use crate::manifest::{ExecGrant, Manifest};
use crate::plugin::{ToolPlugin, ToolSpec, imports_and_exports};

/// Errors that stop an inspection.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The component file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The bytes are not a WebAssembly component (or the engine failed).
    #[error("{path} is not a valid component: {message}")]
    Invalid {
        /// The component file.
        path: PathBuf,
        /// What wasmtime said.
        message: String,
    },
}

/// What `plugin inspect` reports.
#[derive(Debug)]
pub struct Inspection {
    /// The component file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: usize,
    /// Its sha256 (lowercase hex): what a manifest's `sha256` pin must say.
    pub sha256: String,
    /// Import names (interfaces such as `wasi:cli/stdout@0.2.6`, or functions).
    pub imports: Vec<String>,
    /// Export names.
    pub exports: Vec<String>,
    /// The manifest in effect (a deny-all one when there is no file), or why
    /// it is invalid.
    pub manifest: Result<Manifest, String>,
    /// Whether a manifest file exists beside the component.
    pub manifest_file: Option<PathBuf>,
    /// Its tools from `describe`, or why they could not be listed (wrong
    /// world, sha256 mismatch, `describe` failed...).
    pub tools: Result<Vec<ToolSpec>, String>,
}

/// Inspects the component at `path` (and its manifest beside it). The tools
/// come from a real `describe` call in a fresh instance under the manifest's
/// limits, with no session access.
///
/// Errors: [`InspectError`] when the file cannot be read or is not a
/// component; everything else is reported inside the [`Inspection`].
pub async fn inspect(path: &Path) -> Result<Inspection, InspectError> {
    let bytes = std::fs::read(path).map_err(|source| InspectError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |message: String| InspectError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let manifest = manifest_for(path).map_err(|e| e.to_string());
    let max_memory = manifest
        .as_ref()
        .map(|m| m.limits.memory_bytes as u64)
        .unwrap_or(64 << 20);
    let runtime = Runtime::with_options(
        None,
        EngineOptions {
            pooling: false,
            max_memory_bytes: max_memory,
            ..EngineOptions::default()
        },
    )
    .map_err(|e| invalid(format!("{e:#}")))?;
    let (component, _) = runtime
        .compile(&bytes)
        .map_err(|e| invalid(format!("{e:#}")))?;
    let (imports, exports) = imports_and_exports(runtime.engine(), &component);
    let tools = match &manifest {
        Ok(m) => ToolPlugin::load(&runtime, m.clone(), &bytes, None)
            .await
            .map(|p| p.tools().to_vec())
            .map_err(|e| e.to_string()),
        Err(_) => Err("not loaded: the manifest is invalid".to_string()),
    };
    let toml = path.with_extension("toml");
    Ok(Inspection {
        path: path.to_path_buf(),
        size: bytes.len(),
        sha256: sha256_hex(&bytes),
        imports,
        exports,
        manifest,
        manifest_file: toml.exists().then_some(toml),
        tools,
    })
}

impl Inspection {
    /// The report as JSON: `path`, `size`, `sha256`, `imports`, `exports`,
    /// `manifest_file`, `manifest` (see [`Manifest::to_json`]) or
    /// `manifest_error`, `tools` (`name`, `description`, `inputSchema`) or
    /// `tools_error`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "path": self.path.display().to_string(),
            "size": self.size,
            "sha256": self.sha256,
            "imports": self.imports,
            "exports": self.exports,
            "manifest_file": self.manifest_file.as_ref().map(|p| p.display().to_string()),
        });
        match &self.manifest {
            Ok(m) => v["manifest"] = m.to_json(),
            Err(e) => v["manifest_error"] = e.clone().into(),
        }
        match &self.tools {
            Ok(tools) => {
                v["tools"] = tools
                    .iter()
                    .map(|t| {
                        serde_json::json!({
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": serde_json::from_str::<serde_json::Value>(&t.input_schema).ok(),
                        })
                    })
                    .collect();
            }
            Err(e) => v["tools_error"] = e.clone().into(),
        }
        v
    }

    /// The report as text for people.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "component  {}", self.path.display());
        let _ = writeln!(s, "size       {} bytes", self.size);
        let _ = writeln!(s, "sha256     {}", self.sha256);
        let _ = writeln!(s, "\nimports:");
        for i in &self.imports {
            let _ = writeln!(s, "  {i}");
        }
        let _ = writeln!(s, "\nexports:");
        for e in &self.exports {
            let _ = writeln!(s, "  {e}");
        }
        let _ = writeln!(s, "\ntools:");
        match &self.tools {
            Ok(tools) => {
                for t in tools {
                    let summary = t.description.lines().next().unwrap_or_default();
                    let _ = writeln!(s, "  {:<16} {summary}", t.name);
                }
            }
            Err(e) => {
                let _ = writeln!(s, "  (none: {e})");
            }
        }
        let _ = writeln!(s, "\nmanifest:");
        match (&self.manifest, &self.manifest_file) {
            (Err(e), _) => {
                let _ = writeln!(s, "  invalid: {e}");
            }
            (Ok(m), file) => {
                match file {
                    Some(f) => {
                        let _ = writeln!(s, "  file       {}", f.display());
                    }
                    None => {
                        let _ = writeln!(s, "  file       (none: no grants, default limits)");
                    }
                }
                let _ = writeln!(s, "  id         {}", m.id);
                let _ = writeln!(s, "  contract   {}", m.contract);
                let _ = writeln!(
                    s,
                    "  sha256     {}",
                    match &m.sha256 {
                        Some(p) if *p == self.sha256 => format!("{p} (matches)"),
                        Some(p) => format!("{p} (MISMATCH)"),
                        None => "(not pinned)".into(),
                    }
                );
                let _ = writeln!(
                    s,
                    "  memory     {} MiB per call",
                    m.limits.memory_bytes >> 20
                );
                let _ = writeln!(s, "  cpu        {} ms per call", m.limits.cpu.as_millis());
                let _ = writeln!(s, "  wall       {} ms per call", m.limits.wall.as_millis());
                let _ = writeln!(s, "\ngrants:");
                let _ = writeln!(
                    s,
                    "  exec       {}",
                    match &m.exec {
                        ExecGrant::None => "none".to_string(),
                        g => g.to_string(),
                    }
                );
                if m.preopens.is_empty() {
                    let _ = writeln!(s, "  preopens   none");
                }
                for p in &m.preopens {
                    let _ = writeln!(
                        s,
                        "  preopen    {} -> {} ({})",
                        p.host.display(),
                        p.guest,
                        p.mode.as_str()
                    );
                }
                let keys: Vec<&str> = m.env.iter().map(|(k, _)| k.as_str()).collect();
                let _ = writeln!(
                    s,
                    "  env        {}",
                    if keys.is_empty() {
                        "none".to_string()
                    } else {
                        keys.join(", ")
                    }
                );
                // What its commands get under the default operator flags
                // (`--sandbox workspace-write`, no `--allow-network`): the
                // stricter of the two (ARCHITECTURE.md, "Sandbox").
                let effective = m
                    .sandbox_policy()
                    .stricter(&toolhost_process::sandbox::SandboxPolicy::default());
                let _ = writeln!(
                    s,
                    "  sandbox    manifest asks {}; with the default flags its commands run under {}{}",
                    m.sandbox
                        .map_or("nothing beyond the operator's --sandbox", |s| s.as_str()),
                    effective.mode.as_str(),
                    if effective.network {
                        ", network allowed"
                    } else {
                        ", network blocked"
                    }
                );
                let _ = writeln!(
                    s,
                    "  network    {}",
                    if m.network {
                        "yes, if the operator passes --allow-network"
                    } else {
                        "no"
                    }
                );
            }
        }
        s
    }
}
