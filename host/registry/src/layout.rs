//! The CNCF wasm OCI artifact layout (CNCF TAG Runtime, "Wasm OCI Artifact
//! layout", as `wkg` and `oras` push it): an OCI image manifest whose
//! config has media type [`WASM_CONFIG`] and whose one layer is the
//! component, [`WASM_LAYER`].
//!
//! [`check`] refuses anything else naming what it found (an image, an index,
//! a Sigstore bundle, two layers), before any blob is fetched.

use std::collections::BTreeMap;

use crate::error::RegistryError;
use crate::fetch::{Blob, DOCKER_LIST, Fetched, OCI_INDEX};
use crate::reference::{Digest, Reference};

/// The config media type of a wasm artifact.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The layer media type of a wasm component.
pub const WASM_LAYER: &str = "application/wasm";
/// The manifest annotation holding the plugin's toolhost manifest (TOML),
/// written by `toolhost plugin publish --manifest` and covered by the
/// manifest digest a signature signs.
pub const TOOLHOST_MANIFEST_ANNOTATION: &str = "dev.toolhost.plugin.manifest";
/// The most bytes of that annotation.
pub const TOOLHOST_MANIFEST_MAX: usize = 64 << 10;
/// The layer annotation `oras pull` names the file by.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// A manifest that passed [`check`].
#[derive(Clone, Debug)]
pub struct WasmArtifact {
    /// The reference, pinned to the manifest digest.
    pub reference: Reference,
    /// The manifest digest (what a signature signs, what is installed).
    pub digest: Digest,
    /// The manifest's bytes exactly.
    pub manifest: Vec<u8>,
    /// The config blob.
    pub config: Blob,
    /// The component.
    pub layer: Blob,
    /// The [`TOOLHOST_MANIFEST_ANNOTATION`] text, if present.
    pub toolhost_manifest: Option<String>,
    /// All manifest annotations.
    pub annotations: BTreeMap<String, String>,
}

/// Checks that `fetched` is one wasm component artifact.
///
/// # Errors
/// [`RegistryError::NotWasm`] naming the media types (or the index, or the
/// annotation) found.
pub fn check(reference: &Reference, fetched: &Fetched) -> Result<WasmArtifact, RegistryError> {
    let source_ref = reference.to_string();
    let not_wasm = |found: String| RegistryError::NotWasm {
        source_ref: source_ref.clone(),
        digest: fetched.digest.to_string(),
        found,
    };
    let v: serde_json::Value = serde_json::from_slice(&fetched.bytes)
        .map_err(|e| not_wasm(format!("its manifest is not JSON ({e})")))?;
    let media_type = v["mediaType"]
        .as_str()
        .map(str::to_string)
        .or_else(|| fetched.content_type.clone())
        .unwrap_or_default();
    if media_type == OCI_INDEX || media_type == DOCKER_LIST || v.get("manifests").is_some() {
        return Err(not_wasm(format!(
            "an image index ({media_type}), not one wasm manifest"
        )));
    }
    let descriptor = |d: &serde_json::Value, what: &str| -> Result<Blob, RegistryError> {
        let media_type = d["mediaType"].as_str().unwrap_or_default().to_string();
        let digest = d["digest"].as_str().unwrap_or_default();
        let digest = Digest::parse(digest)
            .map_err(|_| not_wasm(format!("its {what} digest `{digest}` is not sha256")))?;
        let size = d["size"]
            .as_u64()
            .ok_or_else(|| not_wasm(format!("its {what} has no valid size")))?;
        Ok(Blob {
            media_type,
            digest,
            size,
        })
    };
    let config_type = v["config"]["mediaType"].as_str().unwrap_or("(none)");
    let layer_types: Vec<&str> = v["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| l["mediaType"].as_str().unwrap_or("(none)"))
        .collect();
    if config_type != WASM_CONFIG || layer_types != [WASM_LAYER] {
        let mut found = format!("config {config_type}, layers [{}]", layer_types.join(", "));
        if let Some(a) = v["artifactType"].as_str() {
            found.push_str(&format!(", artifactType {a}"));
        }
        found.push_str(&format!(
            " (expected config {WASM_CONFIG} and one {WASM_LAYER} layer)"
        ));
        return Err(not_wasm(found));
    }
    let config = descriptor(&v["config"], "config")?;
    let layer = descriptor(&v["layers"][0], "layer")?;
    let annotations: BTreeMap<String, String> = v["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    let toolhost_manifest = annotations.get(TOOLHOST_MANIFEST_ANNOTATION).cloned();
    if let Some(m) = &toolhost_manifest
        && m.len() > TOOLHOST_MANIFEST_MAX
    {
        return Err(not_wasm(format!(
            "its {TOOLHOST_MANIFEST_ANNOTATION} annotation is {} bytes, over {TOOLHOST_MANIFEST_MAX}",
            m.len()
        )));
    }
    Ok(WasmArtifact {
        reference: reference.with_digest(fetched.digest.clone()),
        digest: fetched.digest.clone(),
        manifest: fetched.bytes.clone(),
        config,
        layer,
        toolhost_manifest,
        annotations,
    })
}

/// Whether `bytes` start like a component (`\0asm`, layer `0d 00 01 00`),
/// not a core module.
pub fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [0x0d, 0x00, 0x01, 0x00]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetched(json: &str) -> Fetched {
        Fetched {
            bytes: json.as_bytes().to_vec(),
            digest: Digest::of(json.as_bytes()),
            content_type: None,
        }
    }

    const D: &str = "sha256:2042382f0e4a1ad5b2e0e3fc3e8c4c3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e";

    #[test]
    fn the_wasm_layout_passes() {
        let json = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "config":{{"mediaType":"{WASM_CONFIG}","digest":"{D}","size":128}},
            "layers":[{{"mediaType":"{WASM_LAYER}","digest":"{D}","size":117400}}],
            "annotations":{{"{TOOLHOST_MANIFEST_ANNOTATION}":"id = \"x\""}}}}"#
        );
        let r = Reference::parse("oci://127.0.0.1:5/p/x:1").unwrap();
        let a = check(&r, &fetched(&json)).unwrap();
        assert_eq!(a.layer.size, 117400);
        assert_eq!(a.toolhost_manifest.as_deref(), Some("id = \"x\""));
        assert_eq!(a.reference.digest.as_ref(), Some(&a.digest));
    }

    #[test]
    fn images_and_indexes_are_refused_naming_what_they_are() {
        let r = Reference::parse("oci://127.0.0.1:5/p/x:1").unwrap();
        let image = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{D}","size":1}},
            "layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{D}","size":1}}]}}"#
        );
        let e = check(&r, &fetched(&image)).unwrap_err().to_string();
        assert!(
            e.contains("not a wasm component artifact: config application/vnd.oci.image.config.v1+json, layers [application/vnd.oci.image.layer.v1.tar]"),
            "{e}"
        );
        let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        let e = check(&r, &fetched(index)).unwrap_err().to_string();
        assert!(e.contains("an image index"), "{e}");
        let two = format!(
            r#"{{"config":{{"mediaType":"{WASM_CONFIG}","digest":"{D}","size":1}},
            "layers":[{{"mediaType":"{WASM_LAYER}","digest":"{D}","size":1}},{{"mediaType":"{WASM_LAYER}","digest":"{D}","size":1}}]}}"#
        );
        let e = check(&r, &fetched(&two)).unwrap_err().to_string();
        assert!(
            e.contains("layers [application/wasm, application/wasm]"),
            "{e}"
        );
    }

    #[test]
    fn components_are_told_from_core_modules() {
        assert!(is_component(b"\0asm\x0d\x00\x01\x00rest"));
        assert!(!is_component(b"\0asm\x01\x00\x00\x00"));
    }
}
