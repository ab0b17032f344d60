//! toolhost-registry: plugins from OCI registries.
//!
//! A plugin is published as a CNCF wasm OCI artifact ([`layout`]) and
//! signed with Sigstore ([`signature`]). Pulling one ([`resolve`], then
//! [`Resolved::download_layer`]) runs every check in this order, cheapest
//! first, and reports the first that fails:
//!
//! 1. the reference and scheme ([`reference`]: HTTPS unless the registry was
//!    named with `--insecure-registry`; never a fallback);
//! 2. credentials from the standard files ([`auth`]);
//! 3. the manifest, capped, its digest checked against the reference and the
//!    registry ([`fetch`]);
//! 4. the layout: a wasm config and one `application/wasm` layer;
//! 5. declared sizes against the caps (nothing is downloaded past one);
//! 6. the signature policy, on the manifest digest (only manifests and
//!    bundles are downloaded for it);
//! 7. the config blob, then the layer, each hashed as it streams.
//!
//! Installing (the lockfile, staging, the atomic commit) is the caller's;
//! this crate writes only the file it is given. No wasmtime, no other
//! toolhost crate.

pub mod auth;
pub mod error;
pub mod fetch;
pub mod layout;
pub mod publish;
pub mod reference;
pub mod signature;

use std::path::Path;

pub use error::RegistryError;
pub use fetch::{Access, Remote};
pub use layout::WasmArtifact;
pub use reference::{Digest, Insecure, Reference};
pub use signature::{Policy, TrustRoot, Verified};

/// What a pull may do.
#[derive(Clone, Debug)]
pub struct PullOptions {
    /// Registries reached over plain HTTP.
    pub insecure: Insecure,
    /// The layer cap in bytes (`--max-size`; default [`fetch::DEFAULT_LAYER_MAX`]).
    pub max_size: u64,
    /// Who must have signed.
    pub policy: Policy,
    /// What signatures are verified against.
    pub root: TrustRoot,
}

/// An artifact whose manifest, layout, sizes and signature passed.
pub struct Resolved {
    /// The connection it came over.
    pub remote: Remote,
    /// The checked manifest.
    pub artifact: WasmArtifact,
    /// How its signature was judged.
    pub signature: Verified,
    max_size: u64,
}

/// Steps 1-6 of the crate docs for `reference`.
///
/// # Errors
/// The first failed check's [`RegistryError`].
pub async fn resolve(
    reference: &Reference,
    options: &PullOptions,
) -> Result<Resolved, RegistryError> {
    let remote = Remote::connect(reference, &options.insecure, Access::Pull).await?;
    resolve_with(remote, reference, options).await
}

/// [`resolve`] over an existing connection.
///
/// # Errors
/// As [`resolve`].
pub async fn resolve_with(
    remote: Remote,
    reference: &Reference,
    options: &PullOptions,
) -> Result<Resolved, RegistryError> {
    let source_ref = reference.to_string();
    let fetched = remote
        .manifest(
            reference.manifest_ref(),
            &[
                fetch::OCI_MANIFEST,
                fetch::DOCKER_MANIFEST,
                fetch::OCI_INDEX,
                fetch::DOCKER_LIST,
            ],
            fetch::MANIFEST_MAX,
            &source_ref,
        )
        .await?
        .ok_or_else(|| RegistryError::ManifestUnknown {
            what: reference.manifest_ref().to_string(),
            name: reference.name(),
        })?;
    let artifact = layout::check(reference, &fetched)?;
    if artifact.layer.size > options.max_size {
        return Err(RegistryError::TooLarge {
            what: "layer",
            digest: artifact.layer.digest.to_string(),
            declared: artifact.layer.size,
            cap: options.max_size,
            flag: " (--max-size)",
        });
    }
    if artifact.config.size > fetch::CONFIG_MAX {
        return Err(RegistryError::TooLarge {
            what: "config",
            digest: artifact.config.digest.to_string(),
            declared: artifact.config.size,
            cap: fetch::CONFIG_MAX,
            flag: "",
        });
    }
    let signature = signature::verify(&remote, &artifact, &options.policy, &options.root).await?;
    Ok(Resolved {
        remote,
        artifact,
        signature,
        max_size: options.max_size,
    })
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("artifact", &self.artifact.reference.to_string())
            .field("signature", &self.signature)
            .finish_non_exhaustive()
    }
}

impl Resolved {
    /// The config blob, digest-checked, as JSON (an object; no field is
    /// required: configs hold what their pusher wrote).
    ///
    /// # Errors
    /// [`RegistryError::WrongSize`], [`RegistryError::DigestMismatch`], or
    /// [`RegistryError::NotWasm`] when it is not a JSON object.
    pub async fn config(&self) -> Result<serde_json::Value, RegistryError> {
        let source_ref = self.artifact.reference.to_string();
        let bytes = self
            .remote
            .blob(
                &self.artifact.config,
                "config",
                fetch::CONFIG_MAX,
                &source_ref,
            )
            .await?;
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) if v.is_object() => Ok(v),
            _ => Err(RegistryError::NotWasm {
                source_ref,
                digest: self.artifact.digest.to_string(),
                found: format!(
                    "its config {} is not a JSON object",
                    self.artifact.config.digest
                ),
            }),
        }
    }

    /// The component into `path` (created, `fsync`ed), hashed as it
    /// streams; then checked to start like a component.
    ///
    /// # Errors
    /// [`RegistryError::WrongSize`], [`RegistryError::DigestMismatch`],
    /// [`RegistryError::NotWasm`] for a core module or other bytes,
    /// [`RegistryError::Io`]. `path` may hold a partial download after an
    /// error: give a staging path.
    pub async fn download_layer(&self, path: &Path) -> Result<(), RegistryError> {
        let source_ref = self.artifact.reference.to_string();
        self.remote
            .blob_to_file(
                &self.artifact.layer,
                self.max_size,
                " (--max-size)",
                &source_ref,
                path,
            )
            .await?;
        let mut head = [0u8; 8];
        let n = {
            use std::io::Read as _;
            let mut f = std::fs::File::open(path)
                .map_err(|e| RegistryError::io(format!("cannot open {}", path.display()), e))?;
            f.read(&mut head)
                .map_err(|e| RegistryError::io(format!("cannot read {}", path.display()), e))?
        };
        if !layout::is_component(&head[..n]) {
            return Err(RegistryError::NotWasm {
                source_ref,
                digest: self.artifact.digest.to_string(),
                found: "its layer is not a WebAssembly component (a core module, or other bytes)"
                    .into(),
            });
        }
        Ok(())
    }
}
