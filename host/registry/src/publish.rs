//! Pushing a component in the CNCF wasm layout, so `wkg oci pull`, `oras
//! pull` and `toolhost plugin add` read it back.
//!
//! The layer is the component (`application/wasm`, annotated with
//! `org.opencontainers.image.title = ID.wasm` so `oras pull` names the file);
//! the config is what `oci-wasm`'s `WasmConfig` requires (`created`,
//! `architecture: "wasm"`, `os: "wasip2"`, `layerDigests`, `component:
//! {exports, imports, target}`); the manifest carries
//! `org.opencontainers.image.created` (and `.version`, the tag) and, with a
//! toolhost manifest, [`TOOLHOST_MANIFEST_ANNOTATION`]. toolhost holds no
//! signing identity: sign the printed digest with cosign.

use crate::error::RegistryError;
use crate::fetch::{OCI_MANIFEST, Remote};
use crate::layout::{
    TITLE_ANNOTATION, TOOLHOST_MANIFEST_ANNOTATION, TOOLHOST_MANIFEST_MAX, WASM_CONFIG, WASM_LAYER,
};
use crate::reference::{Digest, Reference};

/// What to publish.
#[derive(Clone, Debug)]
pub struct Publication {
    /// The component's bytes.
    pub component: Vec<u8>,
    /// The layer's file name (`ID.wasm`).
    pub file_name: String,
    /// The component's top-level export names.
    pub exports: Vec<String>,
    /// The component's top-level import names.
    pub imports: Vec<String>,
    /// The toolhost manifest text (TOML), at most [`TOOLHOST_MANIFEST_MAX`] bytes.
    pub toolhost_manifest: Option<String>,
    /// RFC 3339 UTC time of the publication.
    pub created: String,
}

/// Pushes `publication` to `target` (a tag) and returns the manifest digest
/// the registry now serves for it.
///
/// # Errors
/// [`RegistryError::InvalidReference`] for a digest target or an oversized
/// manifest annotation, [`RegistryError::Push`], transport errors.
pub async fn publish(
    remote: &Remote,
    target: &Reference,
    publication: &Publication,
) -> Result<Digest, RegistryError> {
    let Some(tag) = &target.tag else {
        return Err(RegistryError::InvalidReference {
            input: target.to_string(),
            rule: "publish to a tag (oci://REGISTRY/REPO:TAG)".into(),
        });
    };
    if target.digest.is_some() {
        return Err(RegistryError::InvalidReference {
            input: target.to_string(),
            rule: "publish to a tag without a digest".into(),
        });
    }
    if let Some(m) = &publication.toolhost_manifest
        && m.len() > TOOLHOST_MANIFEST_MAX
    {
        return Err(RegistryError::InvalidReference {
            input: target.to_string(),
            rule: format!(
                "the manifest is {} bytes, over the {TOOLHOST_MANIFEST_MAX}-byte annotation cap",
                m.len()
            ),
        });
    }
    let layer_digest = Digest::of(&publication.component);
    let config = serde_json::json!({
        "created": publication.created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest.as_str()],
        "component": {
            "exports": publication.exports,
            "imports": publication.imports,
            "target": null,
        },
    });
    let config = serde_json::to_vec(&config).expect("a JSON value serialises");
    let config_digest = Digest::of(&config);
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        "org.opencontainers.image.created".into(),
        publication.created.clone().into(),
    );
    annotations.insert(
        "org.opencontainers.image.version".into(),
        tag.clone().into(),
    );
    if let Some(m) = &publication.toolhost_manifest {
        annotations.insert(TOOLHOST_MANIFEST_ANNOTATION.into(), m.clone().into());
    }
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": WASM_CONFIG,
            "digest": config_digest.as_str(),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": WASM_LAYER,
            "digest": layer_digest.as_str(),
            "size": publication.component.len(),
            "annotations": { TITLE_ANNOTATION: publication.file_name },
        }],
        "annotations": annotations,
    });
    let manifest = serde_json::to_vec(&manifest).expect("a JSON value serialises");
    let push_error = |e: oci_client::errors::OciDistributionError| RegistryError::Push {
        target: target.to_string(),
        reason: e.to_string(),
    };
    let image = target.to_oci();
    remote
        .oci
        .push_blob(&image, publication.component.clone(), layer_digest.as_str())
        .await
        .map_err(push_error)?;
    remote
        .oci
        .push_blob(&image, config, config_digest.as_str())
        .await
        .map_err(push_error)?;
    remote
        .oci
        .push_manifest_raw(
            &image,
            manifest.clone(),
            reqwest::header::HeaderValue::from_static(OCI_MANIFEST),
        )
        .await
        .map_err(push_error)?;
    Ok(Digest::of(&manifest))
}
