//! `toolhost plugin ...`: the commands for plugin authors and operators.
//!
//! - `inspect FILE`: what a component imports, exports and is granted, its
//!   tools, and whether the host can load it (exit 1 and why when it cannot);
//!   the world is checked from the bytes before any compile, and compiled code
//!   goes to the same cache `serve` uses (`<state-dir>/compiled`).
//! - `add FILE`: the same checks, then the component and its manifest are
//!   copied into the plugins dir the host loads, compiled ahead of the first
//!   call.
//! - `add oci://REGISTRY/REPO:TAG` (or `@sha256:DIGEST`), `update ID`,
//!   `publish FILE oci://…`: plugins from OCI registries, recorded in
//!   `plugins.lock` ([`oci`]);
//! - `list`, `remove ID`, `gc`: the installed set ([`lifecycle`]);
//! - `new NAME --lang rust|python|js`: a starter project ([`toolhost::scaffold`]).
//! - `wit --out DIR`: the contract, exactly as released.
//!
//! The commands: docs/cli.md#commands; what a plugin is checked for:
//! docs/manifests.md#inspect-and-add.

mod lifecycle;
mod oci;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolhost::{err, errln, out, outln};

use toolhost::scaffold::{self, Lang};
use toolhost_runtime::CompileSource;
use toolhost_runtime::HostConfig;
use toolhost_runtime::Manifest;
use toolhost_runtime::{InspectOptions, Inspection, Progress, inspect_with};
use toolhost_runtime::{escape, escape_line};

/// The `plugin` subcommands.
#[derive(clap::Subcommand)]
pub enum PluginCommand {
    /// Show a component's imports and exports, its tools (from `describe`),
    /// its manifest and what it is granted, and whether the host can load it.
    ///
    /// Checks the manifest, the sha256 pin and the component's world from the
    /// bytes first, then compiles (progress on stderr) into the compiled cache
    /// `serve` uses, and calls `describe` with no session access. Exits 0 when
    /// the plugin loads, 1 when it cannot (the last line of stderr says why),
    /// 2 when FILE cannot be read.
    Inspect {
        /// The component file (`name.wasm`; the manifest is `name.toml` beside it).
        file: PathBuf,
        /// Judge it by this manifest instead of the one beside it.
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateDir,
    },
    /// Install a plugin: check it as `inspect` does (manifest, world,
    /// compile, describe), cache its compiled code, and copy it with its
    /// manifest into the plugins dir as ID.wasm and ID.toml.
    ///
    /// `serve`, `call` and `tools` with the same --state-dir then load it
    /// without compiling. Replaces an installed plugin of the same id. Exits
    /// 0 when added, 1 when the plugin cannot be loaded (nothing is copied),
    /// 2 for unreadable files or an unwritable plugins dir.
    ///
    /// With oci://REGISTRY/REPO:TAG or oci://REGISTRY/REPO@sha256:DIGEST, the
    /// artifact is pulled (every digest checked, sizes capped, the signature
    /// verified: refused unless signed by --verify-identity/--verify-issuer or
    /// --verify-key, or --allow-unsigned), checked the same way, its grants
    /// shown and confirmed (--yes for scripts), and recorded in the plugins
    /// dir's plugins.lock; the manifest is --manifest, else the artifact's.
    /// Exits 1 when it is refused, 2 for usage, network or I/O errors; nothing
    /// is installed unless every check passed.
    Add {
        /// The component file, or an oci:// reference.
        file: PathBuf,
        /// Its manifest (default: the `.toml` beside FILE, or the artifact's;
        /// none: no grants).
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// Where to install it (default: <state-dir>/plugins, which the host
        /// loads when it is given no --plugins-dir).
        #[arg(long, value_name = "DIR")]
        plugins_dir: Option<PathBuf>,
        #[command(flatten)]
        pull: oci::PullArgs,
        /// Install without asking (oci:// only; the grants are still shown).
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        state: StateDir,
    },
    /// List the installed plugins: id, source, digest, signer and when it was
    /// added (plugins.lock, then loose ID.wasm files).
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The plugins dir (default: <state-dir>/plugins).
        #[arg(long, value_name = "DIR")]
        plugins_dir: Option<PathBuf>,
        #[command(flatten)]
        state: StateDir,
    },
    /// Remove an installed plugin (its blob stays until `plugin gc`).
    Remove {
        /// The plugin id.
        id: String,
        /// The plugins dir (default: <state-dir>/plugins).
        #[arg(long, value_name = "DIR")]
        plugins_dir: Option<PathBuf>,
        #[command(flatten)]
        state: StateDir,
    },
    /// Re-resolve a registry plugin's tag: show the new digest and any change
    /// in its grants, and apply it only when confirmed (--yes for scripts).
    /// A digest-pinned plugin has nothing to update. The signature is checked
    /// as it was at `add` unless flags say otherwise.
    Update {
        /// The plugin id.
        id: String,
        /// A new manifest for it (default: the one it was added with, or the
        /// new artifact's).
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        #[command(flatten)]
        pull: oci::PullArgs,
        /// Apply without asking.
        #[arg(long)]
        yes: bool,
        /// The plugins dir (default: <state-dir>/plugins).
        #[arg(long, value_name = "DIR")]
        plugins_dir: Option<PathBuf>,
        #[command(flatten)]
        state: StateDir,
    },
    /// Push a component in the CNCF wasm OCI layout (`oras pull` and `wkg oci
    /// pull` read it back), its manifest as an annotation; checked as
    /// `inspect` does first. Sign the printed digest with cosign.
    Publish {
        /// The component file (its manifest is the `.toml` beside it).
        file: PathBuf,
        /// Where: oci://REGISTRY/REPO:TAG.
        target: String,
        /// Its manifest instead of the one beside it.
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// Reach this registry (HOST:PORT) over plain HTTP (repeatable).
        #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
        insecure_registry: Vec<String>,
        #[command(flatten)]
        state: StateDir,
    },
    /// Remove blobs no installed plugin uses, and compiled code (in
    /// <state-dir>/compiled) of no installed or built-in plugin.
    Gc {
        /// The plugins dir (default: <state-dir>/plugins).
        #[arg(long, value_name = "DIR")]
        plugins_dir: Option<PathBuf>,
        #[command(flatten)]
        state: StateDir,
    },
    /// Create a plugin project from the examples: a pure tool and one that runs
    /// a command through `sessions`, its manifest, the guest SDK, the contract
    /// (wit/) and build.sh. It builds and passes `inspect` with no edits, and
    /// needs nothing from the toolhost repository.
    New {
        /// The plugin id (also the project, manifest and .wasm name):
        /// [a-z][a-z0-9_-], at most 64 characters, no `__`.
        name: String,
        /// The language.
        #[arg(long, value_enum)]
        lang: Lang,
        /// Where to create it (default: ./NAME); must not exist or be empty.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Write the WIT contract plugins target (the toolhost:plugin package and
    /// the WASI packages it uses, in deps/), exactly as released.
    Wit {
        /// The directory to write it into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The contract version, e.g. 0.2.0 (default: 0.1.0, the one `plugin
        /// new` starts projects from).
        #[arg(long, value_name = "VERSION")]
        contract: Option<String>,
    },
}

/// The state dir whose compiled cache `inspect` and `add` use.
#[derive(clap::Args)]
pub struct StateDir {
    /// The state dir `serve` uses; its `compiled/` cache is shared
    /// (default: $XDG_STATE_HOME/toolhost or ~/.local/state/toolhost).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl StateDir {
    fn dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(HostConfig::default_state_dir)
    }
}

/// The plugins dir the host loads when given no `--plugins-dir`:
/// `<state-dir>/plugins` (where `plugin add` installs by default).
pub fn default_plugins_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("plugins")
}

/// Runs one `plugin` subcommand.
pub async fn run(command: PluginCommand) -> ExitCode {
    match command {
        PluginCommand::Inspect {
            file,
            manifest,
            json,
            state,
        } => {
            let report = match check(&file, manifest, &state.dir()).await {
                Ok(r) => r,
                Err(code) => return code,
            };
            if json {
                outln!("{}", report.to_json());
            } else {
                out!("{}", report.to_text());
            }
            match report.load_error() {
                None => ExitCode::SUCCESS,
                Some(why) => cannot_load(&file, why),
            }
        }
        PluginCommand::Add {
            file,
            manifest,
            plugins_dir,
            pull,
            yes,
            state,
        } => {
            let state_dir = state.dir();
            let dir = plugins_dir
                .clone()
                .unwrap_or_else(|| default_plugins_dir(&state_dir));
            if let Some(source) = file.to_str().filter(|f| f.starts_with("oci://")) {
                return match oci::add(source, manifest, &pull, yes, &dir, &state_dir).await {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(f) => f.report(),
                };
            }
            if pull.any() {
                errln!(
                    "toolhost: --insecure-registry, --allow-unsigned, --verify-*, \
                     --trusted-root and --max-size apply to oci:// sources only"
                );
                return ExitCode::from(2);
            }
            let report = match check(&file, manifest, &state_dir).await {
                Ok(r) => r,
                Err(code) => return code,
            };
            if let Some(why) = report.load_error() {
                return cannot_load(&file, why);
            }
            match install(&report, &dir) {
                Ok(installed) => {
                    let tools = report.tools.as_deref().unwrap_or_default();
                    let names: Vec<String> = tools
                        .iter()
                        .map(|t| escape_line(&t.name).into_owned())
                        .collect();
                    outln!(
                        "{} plugin `{}`: {} ({} tools: {}); compiled code cached in {}",
                        if installed.replaced {
                            "replaced"
                        } else {
                            "added"
                        },
                        installed.id,
                        installed.wasm.display(),
                        tools.len(),
                        names.join(", "),
                        state_dir.join("compiled").display()
                    );
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    errln!(
                        "toolhost: cannot add {}: {}",
                        file.display(),
                        escape(&message)
                    );
                    ExitCode::from(2)
                }
            }
        }
        PluginCommand::List {
            json,
            plugins_dir,
            state,
        } => done(lifecycle::list(&plugins_dir_or(plugins_dir, &state), json)),
        PluginCommand::Remove {
            id,
            plugins_dir,
            state,
        } => done(lifecycle::remove(&id, &plugins_dir_or(plugins_dir, &state))),
        PluginCommand::Update {
            id,
            manifest,
            pull,
            yes,
            plugins_dir,
            state,
        } => {
            let dir = plugins_dir_or(plugins_dir, &state);
            done(oci::update(&id, manifest, &pull, yes, &dir, &state.dir()).await)
        }
        PluginCommand::Publish {
            file,
            target,
            manifest,
            insecure_registry,
            state,
        } => done(oci::publish(&file, &target, manifest, insecure_registry, &state.dir()).await),
        PluginCommand::Gc { plugins_dir, state } => done(lifecycle::gc(
            &plugins_dir_or(plugins_dir, &state),
            &state.dir(),
        )),
        PluginCommand::New { name, lang, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            match scaffold::new_project(&name, lang, &dir) {
                Ok(files) => {
                    outln!(
                        "created {} plugin `{name}` in {} ({} files)",
                        lang.as_str(),
                        dir.display(),
                        files.len()
                    );
                    outln!(
                        "next: cd {} && ./build.sh && toolhost plugin inspect {name}.wasm",
                        dir.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    errln!("toolhost: {}", escape(&e.to_string()));
                    ExitCode::from(2)
                }
            }
        }
        PluginCommand::Wit { out, contract } => {
            let version =
                contract.unwrap_or_else(|| toolhost_runtime::ContractVersion::STARTER.to_string());
            match scaffold::write_contract(&version, &out) {
                Ok(files) => {
                    outln!(
                        "wrote contract toolhost:plugin@{version} ({} files) to {}",
                        files.len(),
                        out.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    errln!("toolhost: {}", escape(&e.to_string()));
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// The plugins dir given, else `<state-dir>/plugins`.
fn plugins_dir_or(dir: Option<PathBuf>, state: &StateDir) -> PathBuf {
    dir.unwrap_or_else(|| default_plugins_dir(&state.dir()))
}

/// Exit 0, or the failure reported.
fn done(result: Result<(), oci::Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.report(),
    }
}

/// Inspects `file` with progress on stderr, through `<state_dir>/compiled`.
async fn check(
    file: &Path,
    manifest: Option<PathBuf>,
    state_dir: &Path,
) -> Result<Inspection, ExitCode> {
    let options = InspectOptions {
        manifest,
        cache_dir: Some(state_dir.join("compiled")),
    };
    inspect_with(file, &options, &print_progress)
        .await
        .map_err(|e| {
            errln!("toolhost: {}", escape(&e.to_string()));
            ExitCode::from(2)
        })
}

/// Progress on stderr: `compiling NAME.wasm (13.4 MB)… done in 27.1 s`, or
/// `NAME.wasm (13.4 MB): compiled code from the cache`.
fn print_progress(progress: Progress<'_>) {
    let name = |path: &Path| {
        path.file_name()
            .map(|n| escape_line(&n.to_string_lossy()).into_owned())
            .unwrap_or_default()
    };
    match progress {
        Progress::Compiling { path, size } => {
            err!("compiling {} ({})… ", name(path), human_size(size))
        }
        Progress::Cached { path, size } => errln!(
            "{} ({}): compiled code from the cache",
            name(path),
            human_size(size)
        ),
        Progress::Done {
            source: CompileSource::Compiled,
            elapsed,
        } => errln!("done in {:.1} s", elapsed.as_secs_f64()),
        Progress::Done { .. } => true,
    };
}

/// `13.4 MB`, `117 KB`, `512 B` (decimal units, as file sizes are quoted).
fn human_size(bytes: usize) -> String {
    match bytes {
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{} KB", b / 1_000),
        b => format!("{b} B"),
    }
}

/// Prints why `file` cannot be loaded on stderr; exit code 1.
fn cannot_load(file: &Path, why: &str) -> ExitCode {
    errln!(
        "toolhost: {} cannot be loaded: {}",
        file.display(),
        escape(why)
    );
    ExitCode::from(1)
}

/// Where [`install`] put a plugin.
struct Installed {
    id: String,
    wasm: PathBuf,
    replaced: bool,
}

/// Copies the inspected component (and its manifest, if it has one) into
/// `dir` as `ID.wasm` and `ID.toml`, each written to a temporary name and
/// renamed, the manifest first. Without a manifest, a stale `ID.toml` is
/// removed (the new plugin gets no grants). The manifest is first validated
/// as it will read from `dir` (relative preopens resolve against its
/// directory); if it would not hold there, nothing is copied.
fn install(report: &Inspection, dir: &Path) -> Result<Installed, String> {
    let Ok(manifest) = &report.manifest else {
        return Err("its manifest is invalid".into());
    };
    toolhost_process::create_private_dir_all(dir)
        .map_err(|e| format!("cannot create plugins dir {}: {e}", dir.display()))?;
    let id = manifest.id.clone();
    let wasm = dir.join(format!("{id}.wasm"));
    let toml = dir.join(format!("{id}.toml"));
    let replaced = wasm.exists();
    // The manifest as it will read from its new place: relative preopens
    // resolve against the manifest's directory.
    if let Some(source) = &report.manifest_file {
        let text = std::fs::read_to_string(source)
            .map_err(|e| format!("cannot read {}: {e}", source.display()))?;
        Manifest::parse(&text, &toml, dir, &|k| std::env::var(k).ok()).map_err(|e| {
            format!(
                "its manifest would not hold in {} (relative preopens resolve against the \
                 manifest's directory): {e}",
                dir.display()
            )
        })?;
    }
    let same_file = |a: &Path, b: &Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y);
    match &report.manifest_file {
        Some(source) if !same_file(source, &toml) => copy_atomically(source, &toml)?,
        Some(_) => {}
        None => match std::fs::remove_file(&toml) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove the old {}: {e}", toml.display())),
        },
    }
    if !same_file(&report.path, &wasm) {
        copy_atomically(&report.path, &wasm)?;
    }
    Ok(Installed { id, wasm, replaced })
}

fn copy_atomically(from: &Path, to: &Path) -> Result<(), String> {
    let tmp = to.with_extension(format!("tmp{}", std::process::id()));
    // A copy keeps its source's mode; what the host keeps is private to its user.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::copy(from, &tmp)
        .and_then(|_| {
            std::fs::set_permissions(
                &tmp,
                std::fs::Permissions::from_mode(toolhost_process::PRIVATE_FILE_MODE),
            )
        })
        .map_err(|e| {
            // A partial copy would hold on to the space a full disk lacks.
            let _ = std::fs::remove_file(&tmp);
            format!("cannot copy {} to {}: {e}", from.display(), tmp.display())
        })?;
    std::fs::rename(&tmp, to).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot rename {} to {}: {e}", tmp.display(), to.display())
    })
}

#[cfg(test)]
mod tests {
    use super::human_size;

    #[test]
    fn sizes_read_as_files_are_quoted() {
        assert_eq!(human_size(13_400_000), "13.4 MB");
        assert_eq!(human_size(117_342), "117 KB");
        assert_eq!(human_size(512), "512 B");
    }
}
