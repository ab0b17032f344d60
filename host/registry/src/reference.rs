//! `oci://` references and the registries that may be reached over plain HTTP.
//!
//! Syntax (the OCI distribution spec's reference grammar, with the registry
//! always named: no implicit `docker.io`):
//!
//! ```text
//! oci://REGISTRY/REPO:TAG
//! oci://REGISTRY/REPO@sha256:HEX
//! oci://REGISTRY/REPO:TAG@sha256:HEX     (the digest pins; the tag is recorded)
//! ```
//!
//! `REGISTRY` is `host[:port]` and must hold a `.` or a `:` or be `localhost`
//! (Docker's rule for telling a registry from a repository's first segment).
//! `REPO` is `/`-separated path components of `[a-z0-9]+([._-][a-z0-9]+)*`;
//! `TAG` is `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`; the digest is `sha256:` and 64
//! lowercase hex digits (distribution spec, "Pulling manifests").

use std::fmt;

use crate::error::RegistryError;

/// The scheme a source names to come from a registry.
pub const SCHEME: &str = "oci://";

/// A `sha256:<64 lowercase hex>` content digest (OCI image spec, "Digests").
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// Parses `sha256:<64 lowercase hex>`.
    ///
    /// # Errors
    /// [`RegistryError::InvalidReference`] naming the rule for anything else
    /// (another algorithm, uppercase, a wrong length).
    pub fn parse(s: &str) -> Result<Self, RegistryError> {
        let Some(hex) = s.strip_prefix("sha256:") else {
            return Err(invalid(s, "a digest is sha256:<64 hex digits>"));
        };
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(invalid(
                s,
                "a digest is sha256: and 64 lowercase hex digits",
            ));
        }
        Ok(Self(s.to_string()))
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Self::from_sha256(sha2::Sha256::digest(bytes).into())
    }

    /// The digest of a finished SHA-256.
    pub fn from_sha256(hash: [u8; 32]) -> Self {
        let mut s = String::with_capacity(71);
        s.push_str("sha256:");
        for b in hash {
            s.push_str(&format!("{b:02x}"));
        }
        Self(s)
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0[7..]
    }

    /// The first 12 hex digits, as listings show a digest.
    pub fn short(&self) -> &str {
        &self.0[7..19]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A parsed `oci://` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]`, as written.
    pub registry: String,
    /// The repository path, e.g. `plugins/notes`.
    pub repository: String,
    /// The tag, if one was written.
    pub tag: Option<String>,
    /// The digest, if one was written (it then decides what is pulled).
    pub digest: Option<Digest>,
}

impl Reference {
    /// Parses `oci://REGISTRY/REPO[:TAG][@sha256:HEX]` (module docs).
    ///
    /// # Errors
    /// [`RegistryError::InvalidReference`] naming the part that breaks the
    /// grammar; a reference with neither tag nor digest is refused (no
    /// implicit `latest`: what is installed must be what was named).
    pub fn parse(source: &str) -> Result<Self, RegistryError> {
        let Some(rest) = source.strip_prefix(SCHEME) else {
            return Err(invalid(source, "a registry reference starts with oci://"));
        };
        let (rest, digest) = match rest.split_once('@') {
            Some((r, d)) => (
                r,
                Some(Digest::parse(d).map_err(|_| {
                    invalid(
                        source,
                        "the part after @ must be sha256: and 64 lowercase hex digits",
                    )
                })?),
            ),
            None => (rest, None),
        };
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(invalid(source, "expected oci://REGISTRY/REPO:TAG"));
        };
        if !valid_registry(registry) {
            return Err(invalid(
                source,
                "the registry must be named as host[:port] (with a `.` or a port, or localhost)",
            ));
        }
        // A tag follows the last `:` after the last `/`.
        let last_slash = path.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match path[last_slash..].rfind(':') {
            Some(i) => (&path[..last_slash + i], Some(&path[last_slash + i + 1..])),
            None => (path, None),
        };
        if !valid_repository(repository) {
            return Err(invalid(
                source,
                "the repository is lowercase path components of [a-z0-9] separated by one of . _ - \
                 and joined by /",
            ));
        }
        if let Some(t) = tag
            && !valid_tag(t)
        {
            return Err(invalid(
                source,
                "a tag is [A-Za-z0-9_][A-Za-z0-9._-], at most 128",
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(invalid(
                source,
                "name a tag (:TAG) or a digest (@sha256:...); there is no implicit latest",
            ));
        }
        Ok(Self {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// This reference pinned to `digest` (the tag kept for the record).
    pub fn with_digest(&self, digest: Digest) -> Self {
        Self {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// What the manifest endpoint is asked for: the digest if any, else the tag.
    pub fn manifest_ref(&self) -> &str {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.as_str(),
            (None, Some(t)) => t,
            (None, None) => unreachable!("Reference::parse requires a tag or a digest"),
        }
    }

    /// `REGISTRY/REPO`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `REGISTRY/REPO@sha256:…` when a digest is known, else with the tag.
    pub fn pinned(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => format!("{}@{d}", self.name()),
            (None, Some(t)) => format!("{}:{t}", self.name()),
            (None, None) => self.name(),
        }
    }

    /// The oci-client form of this reference.
    pub(crate) fn to_oci(&self) -> oci_client::Reference {
        match (&self.tag, &self.digest) {
            (Some(t), Some(d)) => oci_client::Reference::with_tag_and_digest(
                self.registry.clone(),
                self.repository.clone(),
                t.clone(),
                d.to_string(),
            ),
            (_, Some(d)) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                d.to_string(),
            ),
            (Some(t), None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                t.clone(),
            ),
            (None, None) => unreachable!("Reference::parse requires a tag or a digest"),
        }
    }
}

impl fmt::Display for Reference {
    /// The reference as written: `oci://REGISTRY/REPO[:TAG][@DIGEST]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}", self.name())?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The registries the operator named with `--insecure-registry HOST:PORT`:
/// the only ones reached over plain HTTP. Everything else is HTTPS, and a
/// TLS failure is never retried over HTTP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Insecure(Vec<String>);

impl Insecure {
    /// Each entry must be a registry as references write it (`host[:port]`);
    /// matching is exact (`127.0.0.1:5000` does not cover `localhost:5000`).
    ///
    /// # Errors
    /// [`RegistryError::InvalidReference`] for an entry with a scheme or a path.
    pub fn new(hosts: impl IntoIterator<Item = String>) -> Result<Self, RegistryError> {
        let hosts: Vec<String> = hosts.into_iter().collect();
        for h in &hosts {
            if !valid_registry(h) {
                return Err(invalid(
                    h,
                    "--insecure-registry takes HOST:PORT as references write the registry \
                     (no scheme, no path)",
                ));
            }
        }
        Ok(Self(hosts))
    }

    /// Whether `registry` was named.
    pub fn contains(&self, registry: &str) -> bool {
        self.0.iter().any(|h| h == registry)
    }

    /// `http` for a named registry, else `https`.
    pub fn scheme_for(&self, registry: &str) -> &'static str {
        if self.contains(registry) {
            "http"
        } else {
            "https"
        }
    }

    /// The named registries.
    pub fn hosts(&self) -> &[String] {
        &self.0
    }
}

fn invalid(input: &str, rule: &str) -> RegistryError {
    RegistryError::InvalidReference {
        input: input.to_string(),
        rule: rule.to_string(),
    }
}

fn valid_registry(r: &str) -> bool {
    if r.is_empty() || r.len() > 255 {
        return false;
    }
    let (host, port) = match r.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, Some(p)),
        _ => (r, None),
    };
    if let Some(p) = port
        && (p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        !v6.is_empty() && v6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':')
    } else {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    };
    host_ok && (port.is_some() || host.contains('.') || host == "localhost")
}

fn valid_repository(repo: &str) -> bool {
    !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|component| {
            let bytes = component.as_bytes();
            !bytes.is_empty()
                && bytes[0].is_ascii_lowercase() | bytes[0].is_ascii_digit()
                && bytes[bytes.len() - 1].is_ascii_lowercase()
                    | bytes[bytes.len() - 1].is_ascii_digit()
                && bytes.iter().all(|&b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
                && !bytes
                    .windows(2)
                    .any(|w| matches!(w[0], b'.' | b'-') && matches!(w[1], b'.' | b'_' | b'-'))
        })
}

fn valid_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "3faee8c4792144423e1798ac7dcc12811cfd5ef25ed202218b171793efad40a8";

    #[test]
    fn tags_and_digests_parse() {
        let r = Reference::parse("oci://127.0.0.1:5055/plugins/x:1.0.0").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5055", "plugins/x", Some("1.0.0"))
        );
        assert_eq!(r.digest, None);
        assert_eq!(r.manifest_ref(), "1.0.0");
        let d = Reference::parse(&format!("oci://ghcr.io/acme/notes@sha256:{HEX}")).unwrap();
        assert_eq!(d.tag, None);
        assert_eq!(d.manifest_ref(), format!("sha256:{HEX}"));
        assert_eq!(
            d.to_string(),
            format!("oci://ghcr.io/acme/notes@sha256:{HEX}")
        );
        let both = Reference::parse(&format!("oci://localhost/a/b/c:v1@sha256:{HEX}")).unwrap();
        assert_eq!(both.tag.as_deref(), Some("v1"));
        assert_eq!(both.manifest_ref(), format!("sha256:{HEX}"));
        assert_eq!(both.pinned(), format!("localhost/a/b/c@sha256:{HEX}"));
    }

    #[test]
    fn bad_references_name_the_rule() {
        for (input, rule) in [
            ("docker.io/x:1", "starts with oci://"),
            ("oci://notes:1", "expected oci://REGISTRY/REPO:TAG"),
            ("oci://acme/notes:1", "the registry must be named"),
            ("oci://ghcr.io/Acme/notes:1", "the repository is lowercase"),
            ("oci://ghcr.io/acme/notes", "there is no implicit latest"),
            ("oci://ghcr.io/acme/notes:-x", "a tag is"),
            ("oci://ghcr.io/acme/notes@sha256:ABC", "the part after @"),
            ("oci://ghcr.io/acme/notes@sha512:00", "the part after @"),
            ("oci://ghcr.io//notes:1", "the repository is lowercase"),
            ("oci://ghcr.io:99999x/notes:1", "the registry must be named"),
        ] {
            let e = Reference::parse(input).unwrap_err().to_string();
            assert!(e.contains(rule), "{input}: {e}");
            assert!(e.contains(input), "{input}: {e}");
        }
    }

    #[test]
    fn insecure_is_exact() {
        let i = Insecure::new(["127.0.0.1:5055".to_string()]).unwrap();
        assert_eq!(i.scheme_for("127.0.0.1:5055"), "http");
        assert_eq!(i.scheme_for("localhost:5055"), "https");
        assert_eq!(i.scheme_for("127.0.0.1:5056"), "https");
        assert!(Insecure::new(["http://127.0.0.1:5055".to_string()]).is_err());
        assert!(Insecure::new(["127.0.0.1:5055/v2".to_string()]).is_err());
    }

    #[test]
    fn digests_are_sha256_lowercase() {
        let d = Digest::of(b"");
        assert_eq!(
            d.as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(d.short(), "e3b0c44298fc");
        assert!(Digest::parse(&format!("sha256:{}", HEX.to_uppercase())).is_err());
        assert!(Digest::parse(&format!("sha256:{}", &HEX[1..])).is_err());
    }
}
