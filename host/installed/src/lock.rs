//! The `plugins.lock` schema: human-readable TOML, reviewed with `git diff`.
//!
//! ```toml
//! # toolhost plugins.lock, written by `toolhost plugin add/update/remove`
//! version = 1
//! generation = 7          # +1 per commit; hosts report the one they serve
//!
//! [[plugin]]
//! id = "notes"
//! source = "oci://ghcr.io/acme/notes:1.2.0"       # what the operator asked for
//! resolved = "ghcr.io/acme/notes@sha256:3faee8c4…" # what it resolved to
//! component_sha256 = "a9c88e85…"                    # blobs/sha256/<this>
//! size = 117400
//! contract = "0.2.0"
//! added = 2026-12-02T05:20:00Z
//! manifest_from = "artifact"   # "artifact" | "file:/abs/notes.toml" | "deny-all"
//!
//! [plugin.signature]
//! kind = "keyless"             # keyless | key | none | local-file
//! identity = "https://github.com/acme/notes/.github/workflows/release.yml@refs/tags/v1.2.0"
//! issuer = "https://token.actions.githubusercontent.com"
//! trusted_root = "sigstore-public (sigstore-trust-root 0.15.1)"
//! bundle = "sha256:f84bd698…"
//! verified = 2026-12-02T05:20:00Z
//!
//! [plugin.manifest]            # the plugin's manifest itself: its grants, as served
//! id = "notes"
//! contract = "0.2.0"
//! exec = ["git status", "git log *"]
//! ```
//!
//! `[plugin.manifest]` is the manifest schema (docs/manifests.md) verbatim:
//! grants live in one place. Unknown keys are refused (a hand edit with a
//! typo is an error naming line and column, not a silent default).

use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::value::Datetime;

use crate::InstalledError;

/// The lock format's version.
pub const LOCK_VERSION: u32 = 1;

const HEADER: &str = "# toolhost plugins.lock, written by `toolhost plugin add/update/remove`.\n\
# Hosts load exactly what it names; edit it only to review or remove entries.\n";

/// The whole lock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// [`LOCK_VERSION`].
    pub version: u32,
    /// +1 per commit.
    pub generation: u64,
    /// The installed plugins, in install order (load order).
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<Entry>,
}

impl Default for Lock {
    fn default() -> Self {
        Self {
            version: LOCK_VERSION,
            generation: 0,
            plugins: Vec::new(),
        }
    }
}

/// One installed plugin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The plugin id (the manifest's).
    pub id: String,
    /// What the operator named: `oci://…` or `file:/abs/path.wasm`.
    pub source: String,
    /// For a registry source: `REGISTRY/REPO@sha256:<manifest digest>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// The component's sha256 (hex): its blob's name.
    pub component_sha256: String,
    /// The component's size in bytes.
    pub size: u64,
    /// Reached over plain HTTP (`--insecure-registry`), for `update`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// The contract version of the component's world.
    pub contract: String,
    /// When it was first added (RFC 3339, UTC).
    pub added: Datetime,
    /// When it was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<Datetime>,
    /// Where its manifest came from: `artifact`, `file:/abs`, `deny-all`.
    pub manifest_from: String,
    /// How its signature was judged.
    pub signature: SignatureRecord,
    /// The manifest itself (docs/manifests.md).
    pub manifest: toml::Table,
}

/// How an entry's signature was judged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureRecord {
    /// `keyless`, `key`, `none` (`--allow-unsigned`) or `local-file`.
    pub kind: String,
    /// The certificate identity (keyless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The OIDC issuer (keyless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// `sha256:` of the public key's DER (key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_sha256: Option<String>,
    /// The key file given with `--verify-key` (key), for `update`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    /// The trust root: `sigstore-public (…)` or `file:/path sha256:…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_root: Option<String>,
    /// The manifest digest of the bundle that verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// When it was verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<Datetime>,
}

impl Lock {
    /// Parses a lock's text; `path` names it in errors.
    ///
    /// # Errors
    /// [`InstalledError::InvalidLock`]: TOML syntax or schema (with line and
    /// column), another version, a duplicate id, an entry whose manifest id
    /// differs or whose digest is not 64 hex digits.
    pub fn parse(text: &str, path: &Path) -> Result<Self, InstalledError> {
        let invalid = |reason: String| InstalledError::InvalidLock {
            path: path.to_path_buf(),
            reason,
        };
        let lock: Self = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if lock.version != LOCK_VERSION {
            return Err(invalid(format!(
                "version {} is not {LOCK_VERSION}, the one this toolhost writes",
                lock.version
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for e in &lock.plugins {
            if !seen.insert(e.id.as_str()) {
                return Err(invalid(format!("plugin `{}` is listed twice", e.id)));
            }
            if e.component_sha256.len() != 64
                || !e
                    .component_sha256
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            {
                return Err(invalid(format!(
                    "plugin `{}`: component_sha256 must be 64 lowercase hex digits",
                    e.id
                )));
            }
            if e.manifest.get("id").and_then(|v| v.as_str()) != Some(e.id.as_str()) {
                return Err(invalid(format!(
                    "plugin `{}`: its [plugin.manifest] id must be `{}`",
                    e.id, e.id
                )));
            }
        }
        Ok(lock)
    }

    /// The lock's text (with its header comment).
    pub fn to_text(&self) -> String {
        format!(
            "{HEADER}{}",
            toml::to_string(self).expect("the lock schema serialises")
        )
    }

    /// The entry of `id`.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.plugins.iter().find(|e| e.id == id)
    }
}

impl Entry {
    /// The manifest as TOML text, with `sha256` pinned to the component.
    pub fn manifest_text(&self) -> String {
        let mut m = self.manifest.clone();
        m.insert("sha256".into(), self.component_sha256.clone().into());
        toml::to_string(&m).expect("a TOML table serialises")
    }
}

/// Now, to the second, as a TOML datetime (RFC 3339, UTC).
pub fn now() -> Datetime {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string()
        .parse()
        .expect("jiff writes RFC 3339")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_edits_are_checked() {
        let p = Path::new("/x/plugins.lock");
        let e = Lock::parse("version = 1\ngeneration = 1\nbogus = 2\n", p)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/x/plugins.lock: "), "{e}");
        assert!(e.contains("bogus"), "{e}");
        let e = Lock::parse("version = 2\ngeneration = 1\n", p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("version 2 is not 1"), "{e}");
        assert!(now().to_string().ends_with('Z'));
    }
}
