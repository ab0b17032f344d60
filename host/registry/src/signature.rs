//! Sigstore signatures of wasm artifacts: found as OCI referrers, verified
//! offline with `sigstore-verify` (sigstore/sigstore-rust), refused unless
//! signed.
//!
//! What is signed is the artifact's **manifest digest** (it covers config,
//! layer digests and sizes, and the toolhost-manifest annotation), as for
//! cosign image signatures. A signature is a Sigstore bundle attached as a
//! referrer of that manifest (cosign's `specs/BUNDLE_SPEC.md`, the default
//! of cosign 3 and `cosign sign --new-bundle-format` from 2.4; sigstore-js
//! `@sigstore/oci`): an OCI manifest with `subject` = the artifact and one
//! layer of [`BUNDLE_V03`]. Discovery is the referrers API, else the
//! referrers tag schema (`fetch.rs`); the tag index can be written by any
//! pusher, so only what each bundle's own digest and `subject` say is
//! trusted, and every bundle is verified against the artifact digest.
//!
//! Accepted content: a DSSE envelope of an in-toto Statement whose subject
//! is the manifest digest and whose predicate type is [`COSIGN_PREDICATE`]
//! (what `cosign sign` signs; an SBOM attestation by the same identity is
//! not a signature), or a message signature whose digest is the manifest
//! digest. Cosign's legacy signatures (`sha256-<hex>.sig` tags) are not
//! verified: they are named in the refusal, with how to re-sign.

use std::path::{Path, PathBuf};

use sha2::Digest as _;
use sigstore_types::{Bundle, SignatureContent};
use sigstore_verify::{PublicKeyVerificationPolicy, VerificationPolicy, Verifier};

use crate::error::RegistryError;
use crate::fetch::{BUNDLE_MANIFEST_MAX, BUNDLE_MAX, Blob, OCI_MANIFEST, Remote};
use crate::layout::WasmArtifact;
use crate::reference::Digest;

/// The Sigstore bundle media type (v0.3).
pub const BUNDLE_V03: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The bundle media types accepted (v0.3 in both spellings, v0.2).
pub const BUNDLE_TYPES: &[&str] = &[
    BUNDLE_V03,
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
];
/// The in-toto predicate type of a cosign signature.
pub const COSIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";
/// The in-toto payload type of a DSSE envelope.
pub const IN_TOTO: &str = "application/vnd.in-toto+json";
/// Most bundles examined per artifact.
pub const MAX_BUNDLES: usize = 16;

/// Who must have signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Keyless (Fulcio certificate): the exact SAN identity and OIDC issuer.
    Keyless {
        /// `--verify-identity`: e.g. an email or a workflow URI.
        identity: String,
        /// `--verify-issuer`: e.g. `https://token.actions.githubusercontent.com`.
        issuer: String,
    },
    /// A managed key: the signature verifies with this public key.
    Key {
        /// `--verify-key`: the PEM file.
        path: PathBuf,
        /// Its text.
        pem: String,
    },
    /// `--allow-unsigned`: nothing is verified.
    AllowUnsigned,
}

impl Policy {
    /// A key policy from a PEM file.
    ///
    /// # Errors
    /// [`RegistryError::TrustMaterial`] when it cannot be read or is not a
    /// `PUBLIC KEY` PEM block.
    pub fn key_file(path: &Path) -> Result<Self, RegistryError> {
        let bad = |reason: String| RegistryError::TrustMaterial {
            file: path.to_path_buf(),
            reason,
        };
        let pem = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        sigstore_types::DerPublicKey::from_pem(&pem).map_err(|e| bad(e.to_string()))?;
        Ok(Self::Key {
            path: path.to_path_buf(),
            pem,
        })
    }

    fn describe(&self, root: &TrustRoot) -> String {
        match self {
            Self::Keyless { identity, issuer } => format!(
                "keyless signature by identity {identity}, issuer {issuer} (trusted root {})",
                root.describe()
            ),
            Self::Key { path, pem } => format!(
                "signature by the key in {} ({}) (trusted root {})",
                path.display(),
                key_sha256(pem).unwrap_or_default(),
                root.describe()
            ),
            Self::AllowUnsigned => "nothing (--allow-unsigned)".into(),
        }
    }
}

/// The trust root bundles are verified against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustRoot {
    /// The public Sigstore root (Fulcio, Rekor, CT log, TSA keys), embedded
    /// in `sigstore-trust-root` at build time.
    Public,
    /// `--trusted-root FILE` (`trusted_root.json`, e.g. from `cosign
    /// trusted-root create`).
    File {
        /// The file.
        path: PathBuf,
        /// Its contents' digest, recorded so `update` can tell it changed.
        sha256: Digest,
        /// Its text.
        json: String,
    },
}

/// The crate version whose public root [`TrustRoot::Public`] embeds.
pub const PUBLIC_ROOT: &str = "sigstore-public (sigstore-trust-root 0.15.1)";

impl TrustRoot {
    /// Reads a `trusted_root.json`.
    ///
    /// # Errors
    /// [`RegistryError::TrustMaterial`] when it cannot be read or parsed.
    pub fn file(path: &Path) -> Result<Self, RegistryError> {
        let bad = |reason: String| RegistryError::TrustMaterial {
            file: path.to_path_buf(),
            reason,
        };
        let json = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        sigstore_trust_root::TrustedRoot::from_json(&json).map_err(|e| bad(e.to_string()))?;
        Ok(Self::File {
            path: path.to_path_buf(),
            sha256: Digest::of(json.as_bytes()),
            json,
        })
    }

    /// `sigstore-public (…)` or `file:/path sha256:…`, as the lock records it.
    pub fn describe(&self) -> String {
        match self {
            Self::Public => PUBLIC_ROOT.to_string(),
            Self::File { path, sha256, .. } => format!("file:{} {sha256}", path.display()),
        }
    }

    fn load(&self) -> Result<sigstore_trust_root::TrustedRoot, RegistryError> {
        let (json, file) = match self {
            Self::Public => (
                sigstore_trust_root::SIGSTORE_PRODUCTION_TRUSTED_ROOT,
                PathBuf::from("(embedded public root)"),
            ),
            Self::File { json, path, .. } => (json.as_str(), path.clone()),
        };
        sigstore_trust_root::TrustedRoot::from_json(json).map_err(|e| {
            RegistryError::TrustMaterial {
                file,
                reason: e.to_string(),
            }
        })
    }
}

/// How an artifact was judged, for the lock and `plugin list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// `keyless`, `key` or `none`.
    pub kind: &'static str,
    /// The certificate identity (keyless).
    pub identity: Option<String>,
    /// The OIDC issuer (keyless).
    pub issuer: Option<String>,
    /// The SHA-256 of the public key's DER (SPKI), `sha256:…` (key).
    pub key_sha256: Option<String>,
    /// [`TrustRoot::describe`] (keyless and key).
    pub trusted_root: Option<String>,
    /// The manifest digest of the bundle that verified.
    pub bundle: Option<Digest>,
}

/// `sha256:<hex>` of a PEM public key's DER.
pub fn key_sha256(pem: &str) -> Option<String> {
    let key = sigstore_types::DerPublicKey::from_pem(pem).ok()?;
    Some(Digest::from_sha256(sha2::Sha256::digest(key.as_bytes()).into()).to_string())
}

/// Finds the artifact's bundles and accepts it when any one verifies under
/// `policy`; [`Policy::AllowUnsigned`] accepts without looking.
///
/// Only the manifests and the bundles are downloaded, never the layer.
///
/// # Errors
/// [`RegistryError::SignatureRefused`] naming the policy and, per bundle
/// found, why it did not verify (or that there is none, or only a legacy
/// signature); [`RegistryError::TrustMaterial`]; transport errors.
pub async fn verify(
    remote: &Remote,
    artifact: &WasmArtifact,
    policy: &Policy,
    root: &TrustRoot,
) -> Result<Verified, RegistryError> {
    if *policy == Policy::AllowUnsigned {
        return Ok(Verified {
            kind: "none",
            identity: None,
            issuer: None,
            key_sha256: None,
            trusted_root: None,
            bundle: None,
        });
    }
    let verifier = verifier(root)?;
    let source_ref = artifact.reference.to_string();
    let refused = |summary: String, found: String| RegistryError::SignatureRefused {
        source_ref: artifact.reference.to_string(),
        digest: artifact.digest.to_string(),
        summary,
        expected: policy.describe(root),
        found,
    };
    let entries = remote
        .referrers(&artifact.digest, BUNDLE_TYPES, &source_ref)
        .await?;
    if entries.is_empty() {
        let legacy = format!("sha256-{}.sig", artifact.digest.hex());
        if remote.tag_exists(&legacy, &source_ref).await? {
            return Err(refused(
                format!("found only a legacy cosign signature (tag {legacy})"),
                "  toolhost verifies Sigstore bundles attached as OCI referrers: re-sign with \
                 cosign 3 (or cosign 2.4+ --new-bundle-format)"
                    .into(),
            ));
        }
        return Err(refused(
            "unsigned".into(),
            format!(
                "  found no Sigstore bundle referring to {}\n  (install it anyway with --allow-unsigned)",
                artifact.digest
            ),
        ));
    }
    let mut reasons = Vec::new();
    for entry in entries.iter().take(MAX_BUNDLES) {
        match check_one(
            remote,
            artifact,
            entry,
            &verifier,
            policy,
            root,
            &source_ref,
        )
        .await
        {
            Ok(v) => return Ok(v),
            Err(why) => reasons.push(format!("    {}: {why}", entry.digest.short())),
        }
    }
    let mut found = format!(
        "  found {} Sigstore bundle{}{}:\n",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
        if entries.len() > MAX_BUNDLES {
            format!(" (the first {MAX_BUNDLES} examined)")
        } else {
            String::new()
        }
    );
    found.push_str(&reasons.join("\n"));
    Err(refused("not signed by the expected signer".into(), found))
}

/// One referrer: its manifest, its bundle, the content rules, the policy.
/// `Err` is the reason in words.
async fn check_one(
    remote: &Remote,
    artifact: &WasmArtifact,
    entry: &Blob,
    verifier: &Verifier,
    policy: &Policy,
    root: &TrustRoot,
    source_ref: &str,
) -> Result<Verified, String> {
    let fetched = remote
        .manifest(
            entry.digest.as_str(),
            &[OCI_MANIFEST],
            BUNDLE_MANIFEST_MAX,
            source_ref,
        )
        .await
        .map_err(|e| e.to_string())?
        .ok_or("its manifest is gone")?;
    let m: serde_json::Value =
        serde_json::from_slice(&fetched.bytes).map_err(|e| format!("manifest not JSON: {e}"))?;
    if m["subject"]["digest"].as_str() != Some(artifact.digest.as_str()) {
        return Err(format!(
            "its subject is {}, not this artifact",
            m["subject"]["digest"].as_str().unwrap_or("(none)")
        ));
    }
    let layers = m["layers"].as_array().cloned().unwrap_or_default();
    let [layer] = layers.as_slice() else {
        return Err(format!("{} layers, expected one bundle", layers.len()));
    };
    let media_type = layer["mediaType"].as_str().unwrap_or_default();
    if !BUNDLE_TYPES.contains(&media_type) {
        return Err(format!("layer {media_type} is not a Sigstore bundle"));
    }
    let blob = Blob {
        media_type: media_type.to_string(),
        digest: Digest::parse(layer["digest"].as_str().unwrap_or_default())
            .map_err(|e| e.to_string())?,
        size: layer["size"].as_u64().ok_or("layer without a size")?,
    };
    let bytes = remote
        .blob(&blob, "bundle", BUNDLE_MAX, source_ref)
        .await
        .map_err(|e| e.to_string())?;
    let json = std::str::from_utf8(&bytes).map_err(|_| "the bundle is not UTF-8".to_string())?;
    let bundle = Bundle::from_json(json).map_err(|e| format!("not a Sigstore bundle: {e}"))?;
    let verified = verify_bundle(verifier, &bundle, &artifact.digest, policy, root)?;
    Ok(Verified {
        bundle: Some(entry.digest.clone()),
        ..verified
    })
}

/// Verifies one bundle for the manifest digest `subject` under `policy`
/// (the content rules of the module docs first). `Err` is the reason.
pub fn verify_bundle(
    verifier: &Verifier,
    bundle: &Bundle,
    subject: &Digest,
    policy: &Policy,
    root: &TrustRoot,
) -> Result<Verified, String> {
    if let SignatureContent::DsseEnvelope(envelope) = &bundle.content {
        if envelope.payload_type != IN_TOTO {
            return Err(format!(
                "DSSE payload type {}, expected {IN_TOTO}",
                envelope.payload_type
            ));
        }
        let statement: serde_json::Value = serde_json::from_slice(envelope.payload.as_bytes())
            .map_err(|e| format!("the in-toto statement is not JSON: {e}"))?;
        let predicate = statement["predicateType"].as_str().unwrap_or("(none)");
        if predicate != COSIGN_PREDICATE {
            return Err(format!(
                "an attestation of predicate type {predicate}, not a signature ({COSIGN_PREDICATE})"
            ));
        }
    }
    let hash = sigstore_types::Sha256Hash::from_hex(subject.hex()).map_err(|e| e.to_string())?;
    match policy {
        Policy::Keyless { identity, issuer } => {
            let p = VerificationPolicy::new(identity.as_str(), issuer.as_str());
            let r = verifier
                .verify(hash, bundle, &p)
                .map_err(|e| e.to_string())?;
            Ok(Verified {
                kind: "keyless",
                identity: r
                    .identity()
                    .map(|s| s.to_string())
                    .or(Some(identity.clone())),
                issuer: r.issuer().map(str::to_string).or(Some(issuer.clone())),
                key_sha256: None,
                trusted_root: Some(root.describe()),
                bundle: None,
            })
        }
        Policy::Key { pem, .. } => {
            let key = sigstore_types::DerPublicKey::from_pem(pem).map_err(|e| e.to_string())?;
            let p = PublicKeyVerificationPolicy::new(key);
            verifier
                .verify(hash, bundle, &p)
                .map_err(|e| e.to_string())?;
            Ok(Verified {
                kind: "key",
                identity: None,
                issuer: None,
                key_sha256: key_sha256(pem),
                trusted_root: Some(root.describe()),
                bundle: None,
            })
        }
        Policy::AllowUnsigned => Err("no policy".into()),
    }
}

/// A verifier over `root` (for [`verify_bundle`]).
///
/// # Errors
/// [`RegistryError::TrustMaterial`].
pub fn verifier(root: &TrustRoot) -> Result<Verifier, RegistryError> {
    let trusted = root.load()?;
    Verifier::new(&trusted).map_err(|e| RegistryError::TrustMaterial {
        file: PathBuf::from(root.describe()),
        reason: e.to_string(),
    })
}
