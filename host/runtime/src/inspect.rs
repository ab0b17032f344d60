//! `toolhost plugin inspect FILE` and the check behind `toolhost plugin add`:
//! what a component imports and exports, its tools, its manifest and what that
//! grants, and whether the host can load it (ARCHITECTURE.md, invariant "`plugin
//! inspect` exits non-zero exactly when the host could not load the plugin").
//!
//! The cheap checks come first, from the bytes alone: the manifest, the
//! `sha256` pin, and the component's import and export names against the
//! world ([`crate::plugin::check_world`]). Only a plugin that passes them is
//! compiled, through the same on-disk cache `serve` uses
//! ([`InspectOptions::cache_dir`]), and loaded as the host loads it
//! (`describe` with no session access).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::display::{escape, escape_block, escape_line};
use crate::engine::{CompileSource, EngineOptions, Runtime, sha256_hex};
use crate::host::manifest_for;
use crate::manifest::{ExecGrant, Manifest};
use crate::plugin::{
    LoadError, PluginKind, Prompt, RefusedOffer, RefusedTool, Resource, ResourceTemplate,
    ToolPlugin, ToolSpec, check_world, component_names,
};

/// Errors that stop an inspection before anything can be reported.
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
    /// The wasmtime engine could not be set up.
    #[error("cannot set up the engine to inspect {path}: {message}")]
    Engine {
        /// The component file.
        path: PathBuf,
        /// What wasmtime said.
        message: String,
    },
}

/// How to inspect.
#[derive(Debug, Clone, Default)]
pub struct InspectOptions {
    /// The manifest to judge the plugin by; `None`: `name.toml` beside
    /// `name.wasm` ([`manifest_for`]).
    pub manifest: Option<PathBuf>,
    /// The compiled-code cache (`<state-dir>/compiled`, as `serve` uses): a
    /// component compiled once is loaded from it afterwards, by inspect and
    /// by the host. `None`: compile in memory only.
    pub cache_dir: Option<PathBuf>,
}

/// What [`inspect_with`] reports while it works (the CLI prints it on
/// stderr: compiling an interpreted plugin takes tens of seconds).
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// Compiling starts (no cache entry): the file and its size in bytes.
    Compiling {
        /// The component file.
        path: &'a Path,
        /// Its size in bytes.
        size: usize,
    },
    /// The compiled code comes from the cache: no compile.
    Cached {
        /// The component file.
        path: &'a Path,
        /// Its size in bytes.
        size: usize,
    },
    /// Compiling (or loading from the cache) ended, successfully or not.
    Done {
        /// Where the code came from.
        source: CompileSource,
        /// How long it took.
        elapsed: Duration,
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
    /// Import names (interfaces such as `wasi:cli/stdout@0.2.6`, or
    /// functions), read from the bytes; empty when they are not a component.
    pub imports: Vec<String>,
    /// Export names, read from the bytes.
    pub exports: Vec<String>,
    /// The manifest in effect (a deny-all one when there is no file), or why
    /// it is invalid.
    pub manifest: Result<Manifest, String>,
    /// The manifest file, when there is one (`--manifest`, or beside the
    /// component).
    pub manifest_file: Option<PathBuf>,
    /// Its tools from `describe` that the host would offer (see
    /// [`crate::plugin::check_tools`]), or why they could not be listed: the
    /// reason the plugin cannot be loaded ([`Inspection::load_error`]).
    pub tools: Result<Vec<ToolSpec>, String>,
    /// The tools `describe` returned that the host would refuse, with why.
    pub refused_tools: Vec<RefusedTool>,
    /// The contract version the component targets, from the `tool@X.Y.Z`
    /// interface it exports (`None` when it exports none the host supports).
    pub contract: Option<crate::ContractVersion>,
    /// Its resources from `list-resources` that the host would offer
    /// (contract 0.2.0 `server-plugin` only; empty otherwise).
    pub resources: Vec<Resource>,
    /// Its resource templates from `list-templates` that the host would offer.
    pub resource_templates: Vec<ResourceTemplate>,
    /// Its prompts from `list-prompts` that the host would offer.
    pub prompts: Vec<Prompt>,
    /// The resources, templates and prompts it listed that the host would
    /// refuse, with why.
    pub refused_offers: Vec<RefusedOffer>,
    /// Where the compiled code came from, when it got that far.
    pub compiled: Option<CompileSource>,
}

/// Inspects the component at `path` with its manifest beside it, compiling
/// in memory ([`inspect_with`] with default options, no progress).
///
/// Errors: as [`inspect_with`].
pub async fn inspect(path: &Path) -> Result<Inspection, InspectError> {
    inspect_with(path, &InspectOptions::default(), &|_| {}).await
}

/// Inspects the component at `path` under `options`: the manifest, the pin
/// and the world (from the bytes, before compiling), then compile or cache
/// (`progress` is told which, and when it ends) and a real `describe` in a
/// fresh instance under the manifest's limits with no session access (as at
/// every load: [`ToolPlugin::load`]), its tools checked as the host checks
/// them. The first failing step is why the plugin cannot be loaded
/// ([`Inspection::load_error`]); later steps are then skipped.
///
/// Errors: [`InspectError`] when the file cannot be read or no engine can
/// be built; everything else is reported inside the [`Inspection`].
pub async fn inspect_with(
    path: &Path,
    options: &InspectOptions,
    progress: &(dyn Fn(Progress<'_>) + Sync),
) -> Result<Inspection, InspectError> {
    let bytes = std::fs::read(path).map_err(|source| InspectError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let sha256 = sha256_hex(&bytes);
    let (manifest, manifest_file) = match &options.manifest {
        Some(file) => (
            Manifest::load(file).map_err(|e| e.to_string()),
            Some(file.clone()),
        ),
        None => {
            let toml = path.with_extension("toml");
            (
                manifest_for(path).map_err(|e| e.to_string()),
                toml.exists().then_some(toml),
            )
        }
    };
    let id = match &manifest {
        Ok(m) => m.id.clone(),
        Err(_) => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let names = component_names(&bytes);
    let (imports, exports) = match &names {
        Ok(n) => (n.import_names(), n.exports.clone()),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let mut report = Inspection {
        path: path.to_path_buf(),
        size: bytes.len(),
        sha256,
        imports,
        exports,
        manifest,
        manifest_file,
        tools: Err(String::new()),
        refused_tools: Vec::new(),
        contract: names.as_ref().ok().and_then(crate::plugin::tool_contract),
        resources: Vec::new(),
        resource_templates: Vec::new(),
        prompts: Vec::new(),
        refused_offers: Vec::new(),
        compiled: None,
    };
    // The checks that need no compile, in the host's order.
    let early = match (&report.manifest, &names) {
        (Err(e), _) => Some(format!("the manifest is invalid: {e}")),
        (Ok(m), _) if m.sha256.as_ref().is_some_and(|p| *p != report.sha256) => Some(
            LoadError::Sha256Mismatch {
                plugin: id.clone(),
                expected: m.sha256.clone().unwrap_or_default(),
                actual: report.sha256.clone(),
            }
            .to_string(),
        ),
        (_, Err(message)) => Some(
            LoadError::Invalid {
                plugin: id.clone(),
                message: message.clone(),
            }
            .to_string(),
        ),
        (_, Ok(n)) => check_world(n, &id, PluginKind::Tool)
            .err()
            .map(|e| e.to_string()),
    };
    if let Some(why) = early {
        report.tools = Err(why);
        return Ok(report);
    }
    let Ok(manifest) = report.manifest.clone() else {
        unreachable!("an invalid manifest stops at the early checks")
    };
    let engine_error = |e: wasmtime::Error| InspectError::Engine {
        path: path.to_path_buf(),
        message: format!("{e:#}"),
    };
    let engine_options = EngineOptions {
        pooling: false,
        max_memory_bytes: manifest.limits.memory_bytes as u64,
        ..EngineOptions::default()
    };
    let runtime = match Runtime::with_options(options.cache_dir.clone(), engine_options) {
        Ok(r) => r,
        Err(e) if options.cache_dir.is_some() => {
            tracing::warn!("the compiled cache is unusable ({e:#}); compiling in memory");
            Runtime::with_options(None, engine_options).map_err(engine_error)?
        }
        Err(e) => return Err(engine_error(e)),
    };
    // Compile (or load) once here, on the blocking pool, so progress can be
    // shown; the load below then finds it in the cache.
    let size = bytes.len();
    progress(if runtime.is_cached(&bytes) {
        Progress::Cached { path, size }
    } else {
        Progress::Compiling { path, size }
    });
    let started = Instant::now();
    let compiled = {
        let (runtime, bytes) = (runtime.clone(), bytes.clone());
        tokio::task::spawn_blocking(move || runtime.compile(&bytes).map(|(_, source)| source)).await
    };
    let compiled = match compiled {
        Ok(Ok(source)) => source,
        Ok(Err(e)) => {
            progress(Progress::Done {
                source: CompileSource::Compiled,
                elapsed: started.elapsed(),
            });
            report.tools = Err(LoadError::Invalid {
                plugin: id,
                message: format!("{e:#}"),
            }
            .to_string());
            return Ok(report);
        }
        Err(e) => {
            report.tools = Err(format!("compiling failed: {e}"));
            return Ok(report);
        }
    };
    progress(Progress::Done {
        source: compiled,
        elapsed: started.elapsed(),
    });
    report.compiled = Some(compiled);
    match ToolPlugin::load(&runtime, manifest, &bytes, None).await {
        Ok(p) => {
            report.refused_tools = p.refused_tools().to_vec();
            report.tools = Ok(p.tools().to_vec());
            report.resources = p.resources().to_vec();
            report.resource_templates = p.resource_templates().to_vec();
            report.prompts = p.prompts().to_vec();
            report.refused_offers = p.refused_offers().to_vec();
        }
        Err(e) => report.tools = Err(e.to_string()),
    }
    Ok(report)
}

impl Inspection {
    /// Why the host cannot load this plugin (the first failing step: the
    /// manifest, the sha256 pin, not a component, the world, the compile or
    /// link, `describe`, too many tools), or `None` when it loads.
    pub fn load_error(&self) -> Option<&str> {
        self.tools.as_ref().err().map(String::as_str)
    }

    /// The report as JSON: `path`, `size`, `sha256`, `imports`, `exports`,
    /// `manifest_file`, `manifest` (see [`Manifest::to_json`]) or
    /// `manifest_error`, `contract` (the version it targets, or null),
    /// `tools` (`name`, `title`, `description`, `inputSchema`,
    /// `outputSchema`) or `tools_error`, `refused_tools` (`name`, `reason`),
    /// `resources` (`uri`, `name`, `title`, `description`, `mimeType`),
    /// `resourceTemplates` (`uriTemplate`, `name`, `title`, `description`,
    /// `mimeType`), `prompts` (`name`, `title`, `description`, `arguments`:
    /// `name`, `required`), `refused_offers` (`kind`, `name`, `reason`),
    /// `loads` (bool),
    /// `load_error` (why not, or null) and `compiled` (`"cache"`,
    /// `"compiled"`, or null when it did not get that far). Strings are exact
    /// (JSON escapes control characters).
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
                        let mut tool = serde_json::json!({
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": serde_json::from_str::<serde_json::Value>(&t.input_schema).ok(),
                        });
                        if let Some(title) = &t.title {
                            tool["title"] = title.clone().into();
                        }
                        if let Some(schema) = &t.output_schema {
                            tool["outputSchema"] =
                                serde_json::from_str::<serde_json::Value>(schema)
                                    .unwrap_or_default();
                        }
                        tool
                    })
                    .collect();
            }
            Err(e) => v["tools_error"] = e.clone().into(),
        }
        v["refused_tools"] = self
            .refused_tools
            .iter()
            .map(|r| serde_json::json!({"name": r.name, "reason": r.reason}))
            .collect();
        v["contract"] = self.contract.map(|c| c.as_str()).into();
        v["resources"] = self
            .resources
            .iter()
            .map(|r| {
                serde_json::json!({
                    "uri": r.uri, "name": r.name, "title": r.title,
                    "description": r.description, "mimeType": r.mime_type,
                })
            })
            .collect();
        v["resourceTemplates"] = self
            .resource_templates
            .iter()
            .map(|t| {
                serde_json::json!({
                    "uriTemplate": t.uri_template, "name": t.name, "title": t.title,
                    "description": t.description, "mimeType": t.mime_type,
                })
            })
            .collect();
        v["prompts"] = self
            .prompts
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name, "title": p.title, "description": p.description,
                    "arguments": p.arguments.iter().map(|a| serde_json::json!({
                        "name": a.name, "required": a.required,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        v["refused_offers"] = self
            .refused_offers
            .iter()
            .map(|r| serde_json::json!({"kind": r.kind.as_str(), "name": r.name, "reason": r.reason}))
            .collect();
        v["loads"] = self.load_error().is_none().into();
        v["load_error"] = self.load_error().into();
        v["compiled"] = match self.compiled {
            Some(CompileSource::Cache) => "cache".into(),
            Some(CompileSource::Compiled) => "compiled".into(),
            None => serde_json::Value::Null,
        };
        v
    }

    /// The report as text for people. Everything the plugin or its manifest
    /// wrote is escaped ([`crate::display`]): one-line fields with
    /// [`escape_line`], and the whole report once more with [`escape`], so no
    /// control character reaches the terminal.
    pub fn to_text(&self) -> String {
        escape(&self.text_unescaped()).into_owned()
    }

    /// What the plugin will be granted, as the `grants:` section of
    /// [`Inspection::to_text`] (exec patterns, preopens, env, sandbox,
    /// network, unix sockets, elicitation, sampling), escaped; `None` when
    /// its manifest is invalid.
    pub fn grants_text(&self) -> Option<String> {
        let m = self.manifest.as_ref().ok()?;
        let mut s = String::new();
        grants(&mut s, m);
        Some(escape(&s).into_owned())
    }

    fn text_unescaped(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "component  {}", self.path.display());
        let _ = writeln!(s, "size       {} bytes", self.size);
        let _ = writeln!(s, "sha256     {}", self.sha256);
        let _ = writeln!(
            s,
            "contract   {}",
            self.contract.map_or(
                "none (it exports no tool interface this host supports)",
                |c| c.as_str()
            )
        );
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
                    let _ = writeln!(s, "  {:<16} {}", escape_line(&t.name), escape_line(summary));
                }
            }
            Err(e) => {
                let _ = writeln!(s, "  (none: {})", escape_block(e, "    "));
            }
        }
        if !self.refused_tools.is_empty() {
            let _ = writeln!(s, "\nrefused tools (not offered):");
            for r in &self.refused_tools {
                let _ = writeln!(s, "  {}: {}", escape_line(&r.name), escape_line(&r.reason));
            }
        }
        let summary = |d: &Option<String>| {
            escape_line(
                d.as_deref()
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or_default(),
            )
            .into_owned()
        };
        if !self.resources.is_empty() {
            let _ = writeln!(s, "\nresources:");
            for r in &self.resources {
                let _ = writeln!(
                    s,
                    "  {:<32} {}",
                    escape_line(&r.uri),
                    summary(&r.description)
                );
            }
        }
        if !self.resource_templates.is_empty() {
            let _ = writeln!(s, "\nresource templates:");
            for t in &self.resource_templates {
                let _ = writeln!(
                    s,
                    "  {:<32} {}",
                    escape_line(&t.uri_template),
                    summary(&t.description)
                );
            }
        }
        if !self.prompts.is_empty() {
            let _ = writeln!(s, "\nprompts:");
            for p in &self.prompts {
                let args: Vec<String> = p
                    .arguments
                    .iter()
                    .map(|a| {
                        format!(
                            "{}{}",
                            escape_line(&a.name),
                            if a.required { "" } else { "?" }
                        )
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "  {:<16} ({}) {}",
                    escape_line(&p.name),
                    args.join(", "),
                    summary(&p.description)
                );
            }
        }
        if !self.refused_offers.is_empty() {
            let _ = writeln!(s, "\nrefused resources and prompts (not offered):");
            for r in &self.refused_offers {
                let _ = writeln!(
                    s,
                    "  {} {}: {}",
                    r.kind.as_str(),
                    escape_line(&r.name),
                    escape_line(&r.reason)
                );
            }
        }
        let _ = writeln!(s, "\nmanifest:");
        match (&self.manifest, &self.manifest_file) {
            (Err(e), _) => {
                let _ = writeln!(s, "  invalid: {}", escape_block(e, "    "));
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
                let _ = writeln!(s);
                grants(&mut s, m);
            }
        }
        let _ = writeln!(s, "\nverdict:");
        match self.load_error() {
            None => {
                let _ = writeln!(s, "  loads");
            }
            Some(why) => {
                let _ = writeln!(s, "  cannot be loaded: {}", escape_block(why, "    "));
            }
        }
        s
    }
}

/// The `grants:` section of [`Inspection::to_text`] for `m`, unescaped.
fn grants(s: &mut String, m: &Manifest) {
    use std::fmt::Write as _;
    let _ = writeln!(s, "grants:");
    let _ = writeln!(
        s,
        "  exec       {}",
        match &m.exec {
            ExecGrant::None => "none".to_string(),
            g => escape_line(&g.to_string()).into_owned(),
        }
    );
    if m.preopens.is_empty() {
        let _ = writeln!(s, "  preopens   none");
    }
    for p in &m.preopens {
        let _ = writeln!(
            s,
            "  preopen    {} -> {} ({})",
            escape_line(&p.host.display().to_string()),
            escape_line(&p.guest),
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
            escape_line(&keys.join(", ")).into_owned()
        }
    );
    // What its commands get under the default operator flags
    // (`--sandbox workspace-write`, no `--allow-network`): the
    // stricter of the two (`SandboxPolicy::stricter`).
    let effective = m
        .sandbox_policy()
        .stricter(&toolhost_process::SandboxPolicy::default());
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
    let _ = writeln!(
        s,
        "  unix sockets {}",
        if m.unix_sockets {
            "yes, if the operator passes --allow-unix-sockets"
        } else {
            "no"
        }
    );
    let _ = writeln!(
        s,
        "  elicitation {}",
        if m.elicitation {
            "yes: may ask the user through the MCP client"
        } else {
            "no"
        }
    );
    let _ = writeln!(
        s,
        "  sampling   {}",
        if m.sampling {
            "yes: may ask the MCP client's LLM for completions"
        } else {
            "no"
        }
    );
}

#[cfg(test)]
mod tests {
    use crate::engine::Runtime;
    use crate::plugin::component_names;

    /// The names read from the bytes before compiling are the ones wasmtime
    /// lists after compiling, in the same order (the world check relies on it).
    #[test]
    fn names_from_the_bytes_match_the_compiled_component() {
        let runtime = Runtime::with_options(
            None,
            crate::engine::EngineOptions {
                pooling: false,
                ..Default::default()
            },
        )
        .unwrap();
        for bytes in [crate::builtin::BASH, crate::builtin::POLICY] {
            let names = component_names(bytes).unwrap();
            let (component, _) = runtime.compile(bytes).unwrap();
            let ty = component.component_type();
            let engine = runtime.engine();
            let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
            let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
            assert_eq!(names.import_names(), imports);
            assert_eq!(names.exports, exports);
        }
    }

    #[test]
    fn a_core_module_is_named_as_one() {
        let module = b"\0asm\x01\0\0\0";
        let err = component_names(module).unwrap_err();
        assert!(
            err.starts_with("it is a core WebAssembly module, not a component"),
            "{err}"
        );
    }
}
