//! `plugin add oci://…`, `plugin update ID` and `plugin publish`: plugins
//! from OCI registries (toolhost-registry) installed into `plugins.lock`
//! (toolhost-installed).
//!
//! An install resolves the reference (manifest, layout, sizes, signature:
//! `toolhost_registry::resolve`), downloads the config and the component
//! into the writer's staging dir, checks the component as `plugin inspect`
//! does (world, manifest, compile into the shared cache, `describe`), shows
//! what it will be granted and asks (`--yes` for scripts), and only then
//! moves the blob into `blobs/` and commits the lock: a refusal at any step
//! leaves `plugins.lock` byte for byte as it was.

use std::io::{BufRead as _, IsTerminal as _};

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolhost::{err, errln, outln};

use toolhost_installed::{Entry, PluginsDir, SignatureRecord, Staging, Writer};
use toolhost_registry::{
    Access, Digest, Insecure, Policy, PullOptions, Reference, RegistryError, Remote, Resolved,
    TrustRoot, Verified,
};
use toolhost_runtime::{Inspection, Manifest, escape, escape_line};

/// How a registry pull is judged: the flags `plugin add oci://…` and
/// `plugin update` share.
#[derive(clap::Args, Debug, Default)]
pub struct PullArgs {
    /// Reach this registry (HOST:PORT) over plain HTTP (repeatable). Every
    /// other registry is HTTPS, and a TLS failure is never retried over HTTP.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    insecure_registry: Vec<String>,
    /// Install without checking any signature.
    #[arg(long, conflicts_with_all = ["verify_identity", "verify_issuer", "verify_key"])]
    allow_unsigned: bool,
    /// Require a keyless (cosign) signature by this certificate identity
    /// (an email or a workflow URI), with --verify-issuer.
    #[arg(long, value_name = "ID", requires = "verify_issuer")]
    verify_identity: Option<String>,
    /// The OIDC issuer of --verify-identity.
    #[arg(long, value_name = "URL", requires = "verify_identity")]
    verify_issuer: Option<String>,
    /// Require a signature by the key in this PEM file (`cosign sign --key`).
    #[arg(long, value_name = "PEM", conflicts_with = "verify_identity")]
    verify_key: Option<PathBuf>,
    /// Verify against this Sigstore trusted root (`trusted_root.json`)
    /// instead of the public one.
    #[arg(long, value_name = "FILE")]
    trusted_root: Option<PathBuf>,
    /// The most bytes the component may have (e.g. 64MiB; default 256MiB):
    /// a larger declared size is refused before anything is downloaded.
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
}

impl PullArgs {
    /// Whether any flag was given (they mean nothing for a local file).
    pub fn any(&self) -> bool {
        !self.insecure_registry.is_empty()
            || self.allow_unsigned
            || self.verify_identity.is_some()
            || self.verify_key.is_some()
            || self.trusted_root.is_some()
            || self.max_size.is_some()
    }

    /// The pull options, the flags first, else what `recorded` was verified
    /// with (for `update`).
    fn options(
        &self,
        reference: &Reference,
        recorded: Option<&Entry>,
    ) -> Result<PullOptions, String> {
        let mut hosts = self.insecure_registry.clone();
        if recorded.is_some_and(|e| e.insecure) && !hosts.contains(&reference.registry) {
            hosts.push(reference.registry.clone());
        }
        let insecure = Insecure::new(hosts).map_err(|e| e.to_string())?;
        let max_size = match &self.max_size {
            None => toolhost_registry::fetch::DEFAULT_LAYER_MAX,
            Some(s) => match s.parse::<u64>() {
                Ok(n) => n,
                Err(_) => {
                    toolhost_runtime::parse_size(s).map_err(|e| format!("--max-size {s}: {e}"))?
                }
            },
        };
        let signature = recorded.map(|e| &e.signature);
        let policy = if self.allow_unsigned {
            Policy::AllowUnsigned
        } else if let (Some(identity), Some(issuer)) = (&self.verify_identity, &self.verify_issuer)
        {
            Policy::Keyless {
                identity: identity.clone(),
                issuer: issuer.clone(),
            }
        } else if let Some(key) = &self.verify_key {
            Policy::key_file(key).map_err(|e| e.to_string())?
        } else {
            match signature {
                Some(SignatureRecord {
                    kind,
                    identity: Some(identity),
                    issuer: Some(issuer),
                    ..
                }) if kind == "keyless" => Policy::Keyless {
                    identity: identity.clone(),
                    issuer: issuer.clone(),
                },
                Some(SignatureRecord {
                    kind,
                    key_file: Some(key),
                    ..
                }) if kind == "key" => {
                    Policy::key_file(Path::new(key)).map_err(|e| e.to_string())?
                }
                Some(s) if s.kind == "none" => Policy::AllowUnsigned,
                _ => return Err(RegistryError::NoPolicy.to_string()),
            }
        };
        let root = match (
            &self.trusted_root,
            signature.and_then(|s| s.trusted_root.as_deref()),
        ) {
            (Some(file), _) => TrustRoot::file(file).map_err(|e| e.to_string())?,
            (None, Some(recorded)) if recorded.starts_with("file:") => {
                let path = recorded["file:".len()..]
                    .rsplit_once(' ')
                    .map_or(&recorded["file:".len()..], |(p, _)| p);
                TrustRoot::file(Path::new(path)).map_err(|e| e.to_string())?
            }
            _ => TrustRoot::Public,
        };
        Ok(PullOptions {
            insecure,
            max_size,
            policy,
            root,
        })
    }
}

/// Why an install did not happen, and its exit code.
pub(super) struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    pub(super) fn usage(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
        }
    }

    pub(super) fn refused(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
        }
    }

    /// Prints it (escaped) on stderr and returns its exit code.
    pub(super) fn report(self) -> ExitCode {
        errln!("toolhost: {}", escape(&self.message));
        ExitCode::from(self.code)
    }
}

impl From<RegistryError> for Failure {
    fn from(e: RegistryError) -> Self {
        Self {
            code: if e.is_refusal() { 1 } else { 2 },
            message: e.to_string(),
        }
    }
}

impl From<toolhost_installed::InstalledError> for Failure {
    fn from(e: toolhost_installed::InstalledError) -> Self {
        Self::usage(e.to_string())
    }
}

/// Where an installed plugin's manifest comes from.
enum ManifestChoice {
    /// `--manifest FILE`.
    File(PathBuf),
    /// The artifact's `dev.toolhost.plugin.manifest` annotation, else no
    /// grants.
    Artifact,
    /// What the lock recorded (a `--manifest` file given at `add`).
    Recorded(toml::Table, String),
}

/// An artifact downloaded into staging and checked.
struct Pulled {
    resolved: Resolved,
    _staging: Staging,
    wasm: PathBuf,
    report: Inspection,
    manifest: toml::Table,
    manifest_from: String,
}

/// Opens the plugins dir's writer, saying whom it waits for.
fn writer(dir: &Path) -> Result<Writer, Failure> {
    Ok(PluginsDir::new(dir).writer(|pid| {
        errln!(
            "waiting for another toolhost writing {} (pid {})…",
            dir.display(),
            pid.map_or("unknown".into(), |p| p.to_string())
        );
    })?)
}

/// Downloads what `resolved` names into staging and checks it.
async fn fetch(
    writer: &Writer,
    resolved: Resolved,
    choice: ManifestChoice,
    state_dir: &Path,
) -> Result<Pulled, Failure> {
    let source = resolved.artifact.reference.to_string();
    resolved.config().await?;
    let (text, manifest_from) = match choice {
        ManifestChoice::File(file) => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", file.display())))?;
            let abs = std::path::absolute(&file).unwrap_or(file);
            (Some(text), format!("file:{}", abs.display()))
        }
        ManifestChoice::Artifact => match &resolved.artifact.toolhost_manifest {
            Some(text) => (Some(text.clone()), "artifact".to_string()),
            None => (None, "deny-all".to_string()),
        },
        ManifestChoice::Recorded(table, from) => (
            Some(toml::to_string(&table).expect("a TOML table serialises")),
            from,
        ),
    };
    let id = match &text {
        Some(text) => toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| t.get("id").and_then(|v| v.as_str()).map(str::to_string))
            .ok_or_else(|| {
                Failure::refused(format!(
                    "the manifest of {source} ({manifest_from}) has no valid `id`"
                ))
            })?,
        None => {
            let repo = &resolved.artifact.reference.repository;
            let last = repo.rsplit('/').next().unwrap_or(repo).to_string();
            toolhost_runtime::validate_id(&last).map_err(|e| {
                Failure::refused(format!(
                    "{source} carries no toolhost manifest and its repository name `{last}` is \
                     not a plugin id ({e}): pass --manifest FILE"
                ))
            })?;
            last
        }
    };
    toolhost_runtime::validate_id(&id)
        .map_err(|e| Failure::refused(format!("the manifest of {source}: id `{id}`: {e}")))?;
    let staging = writer.staging()?;
    let wasm = staging.path().join(format!("{id}.wasm"));
    resolved.download_layer(&wasm).await?;
    let toml_file = staging.path().join(format!("{id}.toml"));
    if let Some(text) = &text {
        toolhost_process::write_private_file(&toml_file, text.as_bytes())
            .map_err(|e| Failure::usage(format!("cannot write {}: {e}", toml_file.display())))?;
    }
    let report = super::check(&wasm, text.as_ref().map(|_| toml_file), state_dir)
        .await
        .map_err(|_| Failure::usage(format!("cannot inspect the component of {source}")))?;
    if let Some(why) = report.load_error() {
        return Err(Failure::refused(format!(
            "{source} cannot be loaded: {why}"
        )));
    }
    let manifest = match &text {
        Some(text) => {
            // As the host will read it: from the lock, relative preopens
            // resolving against the plugins dir.
            let dir = writer.dir();
            Manifest::parse(text, &dir.lock_path(), dir.root(), &|k| {
                std::env::var(k).ok()
            })
            .map_err(|e| {
                Failure::refused(format!(
                    "its manifest would not hold in {} (relative preopens resolve against \
                         the plugins dir): {e}",
                    dir.root().display()
                ))
            })?;
            let mut table: toml::Table = toml::from_str(text).expect("the manifest parsed above");
            table.remove("sha256");
            table
        }
        None => {
            let mut table = toml::Table::new();
            table.insert("id".into(), id.clone().into());
            table.insert(
                "contract".into(),
                report
                    .contract
                    .map_or(toolhost_runtime::ContractVersion::STARTER, |c| c)
                    .to_string()
                    .into(),
            );
            table
        }
    };
    Ok(Pulled {
        resolved,
        _staging: staging,
        wasm,
        report,
        manifest,
        manifest_from,
    })
}

/// `keyless: identity X, issuer Y`, `key sha256:…`, `unsigned (--allow-unsigned)`.
pub(super) fn signer(s: &SignatureRecord) -> String {
    match s.kind.as_str() {
        "keyless" => format!(
            "{} ({})",
            s.identity.as_deref().unwrap_or_default(),
            s.issuer.as_deref().unwrap_or_default()
        ),
        "key" => format!("key {}", s.key_sha256.as_deref().unwrap_or_default()),
        "none" => "unsigned (--allow-unsigned)".into(),
        other => other.to_string(),
    }
}

/// The lock entry of `pulled`, installed now as `id` from `reference` with its
/// blob stored under `component_sha256` (hex): the digest it resolved to, its
/// size, contract, signature and manifest as checked, never updated.
fn lock_entry(
    id: String,
    reference: &Reference,
    pulled: &Pulled,
    options: &PullOptions,
    signature: SignatureRecord,
    component_sha256: String,
) -> Entry {
    Entry {
        id,
        source: reference.to_string(),
        resolved: Some(pulled.resolved.artifact.reference.pinned()),
        component_sha256,
        size: pulled.report.size as u64,
        insecure: options.insecure.contains(&reference.registry),
        contract: pulled
            .report
            .contract
            .map_or("", |c| c.as_str())
            .to_string(),
        added: toolhost_installed::now(),
        updated: None,
        manifest_from: pulled.manifest_from.clone(),
        signature,
        manifest: pulled.manifest.clone(),
    }
}

fn record(verified: &Verified, policy: &Policy) -> SignatureRecord {
    SignatureRecord {
        kind: verified.kind.to_string(),
        identity: verified.identity.clone(),
        issuer: verified.issuer.clone(),
        key_sha256: verified.key_sha256.clone(),
        key_file: match policy {
            Policy::Key { path, .. } => Some(
                std::path::absolute(path)
                    .unwrap_or_else(|_| path.clone())
                    .display()
                    .to_string(),
            ),
            _ => None,
        },
        trusted_root: verified.trusted_root.clone(),
        bundle: verified.bundle.as_ref().map(Digest::to_string),
        verified: (verified.kind != "none").then(toolhost_installed::now),
    }
}

/// What the operator is shown before an install or update: the source,
/// the digest, the signer, the tools and the grants.
fn summary(pulled: &Pulled, signature: &SignatureRecord) -> String {
    let tools: Vec<String> = pulled
        .report
        .tools
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|t| escape_line(&t.name).into_owned())
        .collect();
    format!(
        "source     {}\nresolved   {}\ncomponent  sha256:{} ({} bytes, contract {})\n\
         signature  {}\nmanifest   {}\ntools      {}\n{}",
        pulled.resolved.artifact.reference,
        pulled.resolved.artifact.reference.pinned(),
        pulled.report.sha256,
        pulled.report.size,
        pulled.report.contract.map_or("none", |c| c.as_str()),
        signer(signature),
        pulled.manifest_from,
        tools.join(", "),
        pulled.report.grants_text().unwrap_or_default()
    )
}

/// Asks `question` on the terminal; `--yes` answers for scripts. Without a
/// terminal and without `--yes`, refuses.
fn confirm(question: &str, yes: bool, what: &str) -> Result<(), Failure> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(Failure::usage(format!(
            "not {what}: no terminal to confirm on (pass --yes to accept these grants \
             non-interactively)"
        )));
    }
    // A question that could not be shown is not answered.
    if !err!("{question} [y/N] ") {
        return Err(Failure::refused(format!(
            "not {what}: the question could not be written to stderr"
        )));
    }
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    match line.trim() {
        "y" | "Y" | "yes" => Ok(()),
        _ => Err(Failure::refused(format!(
            "not {what}: the operator declined"
        ))),
    }
}

/// `plugin add oci://…`.
pub(super) async fn add(
    source: &str,
    manifest: Option<PathBuf>,
    pull: &PullArgs,
    yes: bool,
    dir: &Path,
    state_dir: &Path,
) -> Result<(), Failure> {
    let reference = Reference::parse(source)?;
    let options = pull.options(&reference, None).map_err(Failure::usage)?;
    let mut writer = writer(dir)?;
    let before = writer.current().clone();
    let resolved = toolhost_registry::resolve(&reference, &options).await?;
    let choice = manifest.map_or(ManifestChoice::Artifact, ManifestChoice::File);
    let pulled = fetch(&writer, resolved, choice, state_dir).await?;
    let id = pulled
        .report
        .manifest
        .as_ref()
        .map(|m| m.id.clone())
        .unwrap_or_default();
    if let Some(e) = before.get(&id) {
        return Err(Failure::refused(format!(
            "plugin `{id}` is already installed from {}: `toolhost plugin update {id}` \
             re-resolves it, `toolhost plugin remove {id}` removes it",
            e.source
        )));
    }
    let loose = dir.join(format!("{id}.wasm"));
    if loose.exists() {
        return Err(Failure::refused(format!(
            "plugin `{id}` is installed as {}: remove it first (`toolhost plugin remove {id}`)",
            loose.display()
        )));
    }
    let signature = record(&pulled.resolved.signature, &options.policy);
    err!(
        "plugin `{id}` will be installed:\n{}",
        summary(&pulled, &signature)
    );
    confirm(&format!("install plugin `{id}`?"), yes, "installed")?;
    let component_sha256 = writer.add_blob(&pulled.wasm)?;
    let entry = lock_entry(
        id.clone(),
        &reference,
        &pulled,
        &options,
        signature,
        component_sha256,
    );
    let mut plugins = before.plugins;
    plugins.push(entry);
    writer.commit(plugins)?;
    outln!(
        "added plugin `{id}` from {} ({}); compiled code cached in {}",
        reference,
        pulled.resolved.artifact.digest,
        state_dir.join("compiled").display()
    );
    Ok(())
}

/// The manifest keys whose values differ: `- key = old` / `+ key = new`.
fn grant_changes(old: &toml::Table, new: &toml::Table) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut out = Vec::new();
    for k in keys {
        let (a, b) = (old.get(k), new.get(k));
        if a == b {
            continue;
        }
        if let Some(a) = a {
            out.push(format!("- {k} = {a}"));
        }
        if let Some(b) = b {
            out.push(format!("+ {k} = {b}"));
        }
    }
    out
}

/// `plugin update ID`.
pub(super) async fn update(
    id: &str,
    manifest: Option<PathBuf>,
    pull: &PullArgs,
    yes: bool,
    dir: &Path,
    state_dir: &Path,
) -> Result<(), Failure> {
    let mut writer = writer(dir)?;
    let before = writer.current().clone();
    let Some(entry) = before.get(id).cloned() else {
        return Err(Failure::refused(format!(
            "no plugin `{id}` is installed in {} (plugins.lock)",
            dir.display()
        )));
    };
    if !entry.source.starts_with("oci://") {
        return Err(Failure::refused(format!(
            "plugin `{id}` comes from {}, not a registry: add the new file instead",
            entry.source
        )));
    }
    let reference = Reference::parse(&entry.source)?;
    if reference.digest.is_some() {
        outln!(
            "plugin `{id}` is pinned to {}: nothing to update",
            entry.resolved.as_deref().unwrap_or(&entry.source)
        );
        return Ok(());
    }
    let options = pull
        .options(&reference, Some(&entry))
        .map_err(Failure::usage)?;
    let resolved = toolhost_registry::resolve(&reference, &options).await?;
    let new_pinned = resolved.artifact.reference.pinned();
    if entry.resolved.as_deref() == Some(new_pinned.as_str()) && manifest.is_none() {
        outln!(
            "plugin `{id}` is up to date: {} still resolves to {}",
            entry.source,
            resolved.artifact.digest
        );
        return Ok(());
    }
    let choice = match manifest {
        Some(file) => ManifestChoice::File(file),
        None if entry.manifest_from.starts_with("file:") => {
            ManifestChoice::Recorded(entry.manifest.clone(), entry.manifest_from.clone())
        }
        None => ManifestChoice::Artifact,
    };
    let pulled = fetch(&writer, resolved, choice, state_dir).await?;
    let new_id = pulled
        .report
        .manifest
        .as_ref()
        .map(|m| m.id.as_str())
        .unwrap_or_default();
    if new_id != id {
        return Err(Failure::refused(format!(
            "{} now holds plugin `{new_id}`, not `{id}`: not updated",
            entry.source
        )));
    }
    let signature = record(&pulled.resolved.signature, &options.policy);
    let changes = grant_changes(&entry.manifest, &pulled.manifest);
    errln!(
        "plugin `{id}`: {} moved from {} to {}",
        entry.source,
        entry
            .resolved
            .as_deref()
            .and_then(|r| r.rsplit_once('@'))
            .map_or("(unknown)", |(_, d)| d),
        pulled.resolved.artifact.digest
    );
    if changes.is_empty() {
        errln!("manifest changes: none");
    } else {
        errln!("manifest changes:");
        for c in &changes {
            errln!("  {}", escape_line(c));
        }
    }
    err!("{}", summary(&pulled, &signature));
    confirm(&format!("update plugin `{id}`?"), yes, "updated")?;
    let component_sha256 = writer.add_blob(&pulled.wasm)?;
    // What the operator named and when it was first added stay as they were.
    let updated = Entry {
        source: entry.source,
        added: entry.added,
        updated: Some(toolhost_installed::now()),
        ..lock_entry(
            id.to_string(),
            &reference,
            &pulled,
            &options,
            signature,
            component_sha256,
        )
    };
    let plugins = before
        .plugins
        .into_iter()
        .map(|e| if e.id == id { updated.clone() } else { e })
        .collect();
    writer.commit(plugins)?;
    outln!(
        "updated plugin `{id}` to {} ({})",
        pulled.resolved.artifact.digest,
        updated.source
    );
    Ok(())
}

/// `plugin publish FILE oci://…`.
pub(super) async fn publish(
    file: &Path,
    target: &str,
    manifest: Option<PathBuf>,
    insecure_registry: Vec<String>,
    state_dir: &Path,
) -> Result<(), Failure> {
    let reference = Reference::parse(target)?;
    let insecure = Insecure::new(insecure_registry)?;
    let report = super::check(file, manifest, state_dir)
        .await
        .map_err(|_| Failure::usage(format!("cannot inspect {}", file.display())))?;
    if let Some(why) = report.load_error() {
        return Err(Failure::refused(format!(
            "{} cannot be loaded, not published: {why}",
            file.display()
        )));
    }
    let id = report
        .manifest
        .as_ref()
        .map(|m| m.id.clone())
        .unwrap_or_default();
    let toolhost_manifest = match &report.manifest_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", f.display())))?,
        ),
        None => None,
    };
    let component = std::fs::read(file)
        .map_err(|e| Failure::usage(format!("cannot read {}: {e}", file.display())))?;
    let publication = toolhost_registry::publish::Publication {
        component,
        file_name: format!("{id}.wasm"),
        exports: report.exports.clone(),
        imports: report.imports.clone(),
        toolhost_manifest,
        created: toolhost_installed::now().to_string(),
    };
    let remote = Remote::connect(&reference, &insecure, Access::Push).await?;
    let digest = toolhost_registry::publish::publish(&remote, &reference, &publication).await?;
    outln!(
        "published plugin `{id}` to {reference} as {}",
        reference.with_digest(digest).pinned()
    );
    Ok(())
}
