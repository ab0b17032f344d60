//! Talking to one repository of a registry: every GET capped and hashed as
//! it streams.
//!
//! oci-client reads manifest, index and error bodies whole
//! (`Response::bytes`, oras-project/rust-oci-client#206), so every GET here
//! is our own over reqwest (the same copy oci-client uses): a body over its
//! cap is refused from `Content-Length` before it is read, and stopped
//! mid-stream when the header lied. oci-client does the token dance
//! ([`oci_client::Client::auth`]), and the push (`publish.rs`).
//!
//! The caps (also in docs/limits.md):
//! [`MANIFEST_MAX`] (4 MiB, the distribution spec's guidance for manifests),
//! [`CONFIG_MAX`], [`DEFAULT_LAYER_MAX`] (`--max-size`), [`INDEX_MAX`],
//! [`BUNDLE_MANIFEST_MAX`], [`BUNDLE_MAX`], [`ERROR_BODY_MAX`].

use std::path::Path;
use std::time::Duration;

use sha2::Digest as _;
use tokio::io::AsyncWriteExt as _;

use crate::auth::{Credential, Secret};
use crate::error::RegistryError;
use crate::reference::{Digest, Insecure, Reference};

/// Most bytes of a manifest (distribution spec: registries SHOULD accept 4 MiB).
pub const MANIFEST_MAX: u64 = 4 << 20;
/// Most bytes of a wasm artifact's config blob.
pub const CONFIG_MAX: u64 = 1 << 20;
/// The default cap on the wasm layer (`--max-size`): Python and JavaScript
/// components are 13-19 MB.
pub const DEFAULT_LAYER_MAX: u64 = 256 << 20;
/// Most bytes of a referrers index.
pub const INDEX_MAX: u64 = 1 << 20;
/// Most bytes of a signature bundle's manifest.
pub const BUNDLE_MANIFEST_MAX: u64 = 64 << 10;
/// Most bytes of a Sigstore bundle.
pub const BUNDLE_MAX: u64 = 1 << 20;
/// Most bytes of an error answer that are read (for its message).
pub const ERROR_BODY_MAX: u64 = 64 << 10;
/// A connection must be made within this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait for the next bytes of an answer.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The OCI image index media type.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker's image manifest (accepted to say what it is, then refused).
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker's manifest list.
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// A content descriptor (OCI image spec, "Descriptors"), checked: the digest
/// is sha256, the size is not negative.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    /// Its media type.
    pub media_type: String,
    /// Its digest.
    pub digest: Digest,
    /// Its size in bytes.
    pub size: u64,
}

/// What the registry sent for a manifest.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The bytes exactly.
    pub bytes: Vec<u8>,
    /// Their digest (checked against the reference and `Docker-Content-Digest`).
    pub digest: Digest,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
}

/// Whether the client will read or also write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Pull.
    Pull,
    /// Pull and push.
    Push,
}

/// One repository of one registry, authenticated.
pub struct Remote {
    http: reqwest::Client,
    pub(crate) oci: oci_client::Client,
    base: String,
    registry: String,
    repository: String,
    pub(crate) credential: Credential,
    header: Option<Header>,
}

/// The `Authorization` a [`Remote`] sends.
enum Header {
    Basic(String, String),
    Bearer(String),
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("base", &self.base)
            .field("repository", &self.repository)
            .field("credential", &self.credential)
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// Connects to the repository `reference` names: looks up the
    /// credential ([`crate::auth`]), asks `GET /v2/` what authentication it
    /// wants and, for a bearer challenge, gets the token.
    ///
    /// # Errors
    /// [`RegistryError::NotTls`] when HTTPS meets a plain-HTTP port (name it
    /// with `--insecure-registry`), [`RegistryError::Unreachable`],
    /// [`RegistryError::Unauthorized`] naming the credential's origin,
    /// [`RegistryError::Credentials`].
    pub async fn connect(
        reference: &Reference,
        insecure: &Insecure,
        access: Access,
    ) -> Result<Self, RegistryError> {
        let credential = crate::auth::lookup(&reference.registry).await?;
        Self::connect_with(reference, insecure, access, credential).await
    }

    /// [`Remote::connect`] with a given credential.
    ///
    /// # Errors
    /// As [`Remote::connect`].
    pub async fn connect_with(
        reference: &Reference,
        insecure: &Insecure,
        access: Access,
        credential: Credential,
    ) -> Result<Self, RegistryError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| RegistryError::Unreachable {
                url: reference.registry.clone(),
                reason: e.to_string(),
            })?;
        let oci = oci_client::Client::new(oci_client::client::ClientConfig {
            protocol: oci_client::client::ClientProtocol::HttpsExcept(insecure.hosts().to_vec()),
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            ..Default::default()
        });
        let base = format!(
            "{}://{}",
            insecure.scheme_for(&reference.registry),
            reference.registry
        );
        let mut remote = Self {
            http,
            oci,
            base,
            registry: reference.registry.clone(),
            repository: reference.repository.clone(),
            credential,
            header: None,
        };
        let url = format!("{}/v2/", remote.base);
        let res = remote.send(&url, &[]).await?;
        let challenge = res
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let status = res.status().as_u16();
        let _ = read_capped(res, ERROR_BODY_MAX).await;
        match (status, challenge) {
            (200..=299, _) => {}
            (401, Some(c)) if c.trim_start().to_ascii_lowercase().starts_with("bearer") => {
                let op = match access {
                    Access::Pull => oci_client::RegistryOperation::Pull,
                    Access::Push => oci_client::RegistryOperation::Push,
                };
                let token = remote
                    .oci
                    .auth(&reference.to_oci(), &remote.credential.to_oci(), op)
                    .await
                    .map_err(|_| remote.unauthorized(401))?;
                remote.header = token.map(Header::Bearer);
            }
            (401, _) => match &remote.credential.secret {
                Secret::Basic { username, password } => {
                    remote.header = Some(Header::Basic(username.clone(), password.clone()));
                }
                Secret::Token(t) => remote.header = Some(Header::Bearer(t.clone())),
                Secret::Anonymous => return Err(remote.unauthorized(401)),
            },
            (s, _) => {
                return Err(RegistryError::Http {
                    url,
                    status: s,
                    body: "expected 200 or 401 from the registry's API root".into(),
                });
            }
        }
        // The push path (oci-client) authenticates itself with the same credential.
        remote
            .oci
            .store_auth_if_needed(&remote.registry, &remote.credential.to_oci())
            .await;
        Ok(remote)
    }

    /// `REGISTRY/REPO`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    fn unauthorized(&self, status: u16) -> RegistryError {
        RegistryError::Unauthorized {
            status,
            registry: self.registry.clone(),
            credential: self.credential.describe(),
        }
    }

    async fn send(&self, url: &str, accept: &[&str]) -> Result<reqwest::Response, RegistryError> {
        let mut req = self.http.get(url);
        if !accept.is_empty() {
            req = req.header(reqwest::header::ACCEPT, accept.join(", "));
        }
        req = match &self.header {
            Some(Header::Basic(user, password)) => req.basic_auth(user, Some(password)),
            Some(Header::Bearer(token)) => req.bearer_auth(token),
            None => req,
        };
        req.send().await.map_err(|e| self.transport_error(url, &e))
    }

    fn transport_error(&self, url: &str, e: &reqwest::Error) -> RegistryError {
        if url.starts_with("https://") && is_not_tls(e) {
            return RegistryError::NotTls {
                registry: self.registry.clone(),
            };
        }
        RegistryError::Unreachable {
            url: url.to_string(),
            reason: error_chain(e),
        }
    }

    /// An error answer (anything but 2xx) as a typed error.
    async fn error_answer(&self, url: &str, res: reqwest::Response) -> RegistryError {
        let status = res.status().as_u16();
        if status == 401 || status == 403 {
            return self.unauthorized(status);
        }
        let body = read_capped(res, ERROR_BODY_MAX)
            .await
            .map(|b| oci_error_text(&b))
            .unwrap_or_default();
        RegistryError::Http {
            url: url.to_string(),
            status,
            body,
        }
    }

    /// `GET /v2/<repo>/manifests/<what>` (a tag or a digest), at most `cap`
    /// bytes. `Ok(None)` on 404. When `what` is a digest the bytes must hash
    /// to it; a `Docker-Content-Digest` header must match too.
    ///
    /// # Errors
    /// [`RegistryError::DigestMismatch`], [`RegistryError::WrongSize`] past
    /// the cap, transport and HTTP errors.
    pub async fn manifest(
        &self,
        what: &str,
        accept: &[&str],
        cap: u64,
        source_ref: &str,
    ) -> Result<Option<Fetched>, RegistryError> {
        let url = format!("{}/v2/{}/manifests/{what}", self.base, self.repository);
        let res = self.send(&url, accept).await?;
        if res.status().as_u16() == 404 {
            let _ = read_capped(res, ERROR_BODY_MAX).await;
            return Ok(None);
        }
        if !res.status().is_success() {
            return Err(self.error_answer(&url, res).await);
        }
        let header = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header("content-type");
        let announced = header("docker-content-digest");
        let bytes = read_capped(res, cap).await.map_err(|e| match e {
            Capped::Over => RegistryError::WrongSize {
                what: "manifest",
                digest: what.to_string(),
                source_ref: source_ref.to_string(),
                problem: format!("is over the {cap}-byte cap for manifests"),
            },
            Capped::Transport(e) => self.transport_error(&url, &e),
        })?;
        let digest = Digest::of(&bytes);
        if what.starts_with("sha256:") && what != digest.as_str() {
            return Err(RegistryError::DigestMismatch {
                what: "manifest",
                source_ref: source_ref.to_string(),
                by: "the reference",
                expected: what.to_string(),
                got: digest.to_string(),
            });
        }
        if let Some(a) = announced
            && a.starts_with("sha256:")
            && a != digest.as_str()
        {
            return Err(RegistryError::DigestMismatch {
                what: "manifest",
                source_ref: source_ref.to_string(),
                by: "the registry's Docker-Content-Digest",
                expected: a,
                got: digest.to_string(),
            });
        }
        Ok(Some(Fetched {
            bytes,
            digest,
            content_type,
        }))
    }

    /// A small blob into memory: at most its declared size, which must be
    /// at most `cap`; its digest checked.
    ///
    /// # Errors
    /// [`RegistryError::TooLarge`] before the GET, [`RegistryError::WrongSize`],
    /// [`RegistryError::DigestMismatch`].
    pub async fn blob(
        &self,
        blob: &Blob,
        what: &'static str,
        cap: u64,
        source_ref: &str,
    ) -> Result<Vec<u8>, RegistryError> {
        let mut out = Vec::new();
        self.blob_into(blob, what, cap, "", source_ref, &mut out)
            .await?;
        Ok(out)
    }

    /// The blob into the file at `path` (created; `fsync`ed before returning),
    /// hashed as it is written. A blob over `cap` is refused before the GET.
    ///
    /// # Errors
    /// As [`Remote::blob`], and [`RegistryError::Io`] for the file. The file
    /// may hold a partial download after an error: write only to staging.
    pub async fn blob_to_file(
        &self,
        blob: &Blob,
        cap: u64,
        flag: &'static str,
        source_ref: &str,
        path: &Path,
    ) -> Result<(), RegistryError> {
        // Private to the host user (the plugins dir is in the state dir by default).
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .await
            .map_err(|e| RegistryError::io(format!("cannot create {}", path.display()), e))?;
        let mut sink = FileSink {
            file,
            path: path.to_path_buf(),
        };
        self.blob_into(blob, "layer", cap, flag, source_ref, &mut sink)
            .await?;
        sink.file
            .sync_all()
            .await
            .map_err(|e| RegistryError::io(format!("cannot sync {}", path.display()), e))
    }

    async fn blob_into(
        &self,
        blob: &Blob,
        what: &'static str,
        cap: u64,
        flag: &'static str,
        source_ref: &str,
        sink: &mut impl Sink,
    ) -> Result<(), RegistryError> {
        if blob.size > cap {
            return Err(RegistryError::TooLarge {
                what,
                digest: blob.digest.to_string(),
                declared: blob.size,
                cap,
                flag,
            });
        }
        let wrong = |problem: String| RegistryError::WrongSize {
            what,
            digest: blob.digest.to_string(),
            source_ref: source_ref.to_string(),
            problem,
        };
        let url = format!("{}/v2/{}/blobs/{}", self.base, self.repository, blob.digest);
        let mut res = self.send(&url, &[]).await?;
        if !res.status().is_success() {
            return Err(self.error_answer(&url, res).await);
        }
        match res.content_length() {
            Some(n) if n > blob.size => {
                return Err(wrong(format!(
                    "sent more than the {} bytes its manifest declares (Content-Length {n})",
                    blob.size
                )));
            }
            Some(n) if n < blob.size => {
                return Err(wrong(format!(
                    "announced {n} bytes, fewer than the {} its manifest declares",
                    blob.size
                )));
            }
            _ => {}
        }
        let mut hasher = sha2::Sha256::new();
        let mut n: u64 = 0;
        while let Some(chunk) = res
            .chunk()
            .await
            .map_err(|e| self.transport_error(&url, &e))?
        {
            n += chunk.len() as u64;
            if n > blob.size {
                return Err(wrong(format!(
                    "sent more than the {} bytes its manifest declares",
                    blob.size
                )));
            }
            hasher.update(&chunk);
            sink.write(&chunk).await?;
        }
        if n < blob.size {
            return Err(wrong(format!(
                "sent {n} bytes, fewer than the {} its manifest declares",
                blob.size
            )));
        }
        let got = Digest::from_sha256(hasher.finalize().into());
        if got != blob.digest {
            return Err(RegistryError::DigestMismatch {
                what,
                source_ref: source_ref.to_string(),
                by: "its manifest",
                expected: blob.digest.to_string(),
                got: got.to_string(),
            });
        }
        Ok(())
    }

    /// The manifests referring to `subject` with `artifact_type`: the
    /// referrers API (`GET /v2/<repo>/referrers/<digest>`), and on a 404
    /// the referrers tag schema (`sha256-<hex>`, an image index), as the
    /// distribution spec's "Listing Referrers" says. Each entry's digest
    /// and media type, at most [`INDEX_MAX`] bytes of index.
    ///
    /// # Errors
    /// Transport and HTTP errors; an index that is not JSON.
    pub async fn referrers(
        &self,
        subject: &Digest,
        artifact_types: &[&str],
        source_ref: &str,
    ) -> Result<Vec<Blob>, RegistryError> {
        let url = format!("{}/v2/{}/referrers/{subject}", self.base, self.repository);
        let res = self.send(&url, &[OCI_INDEX]).await?;
        let body = if res.status().as_u16() == 404 {
            let _ = read_capped(res, ERROR_BODY_MAX).await;
            let tag = format!("sha256-{}", subject.hex());
            match self
                .manifest(&tag, &[OCI_INDEX], INDEX_MAX, source_ref)
                .await?
            {
                Some(f) => f.bytes,
                None => return Ok(Vec::new()),
            }
        } else if res.status().is_success() {
            read_capped(res, INDEX_MAX).await.map_err(|e| match e {
                Capped::Over => RegistryError::WrongSize {
                    what: "referrers index",
                    digest: subject.to_string(),
                    source_ref: source_ref.to_string(),
                    problem: format!("is over the {INDEX_MAX}-byte cap"),
                },
                Capped::Transport(e) => self.transport_error(&url, &e),
            })?
        } else {
            return Err(self.error_answer(&url, res).await);
        };
        let index: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| RegistryError::Http {
                url: url.clone(),
                status: 200,
                body: format!("the referrers index is not JSON: {e}"),
            })?;
        let mut out = Vec::new();
        for entry in index["manifests"].as_array().into_iter().flatten() {
            let artifact_type = entry["artifactType"].as_str().unwrap_or_default();
            if !artifact_types.contains(&artifact_type) {
                continue;
            }
            let (Some(d), Some(size)) = (entry["digest"].as_str(), entry["size"].as_u64()) else {
                continue;
            };
            let Ok(digest) = Digest::parse(d) else {
                continue;
            };
            out.push(Blob {
                media_type: entry["mediaType"].as_str().unwrap_or_default().to_string(),
                digest,
                size,
            });
        }
        Ok(out)
    }

    /// Whether the tag exists (`HEAD`-like: a capped GET of its manifest).
    ///
    /// # Errors
    /// Transport and HTTP errors.
    pub async fn tag_exists(&self, tag: &str, source_ref: &str) -> Result<bool, RegistryError> {
        Ok(self
            .manifest(
                tag,
                &[OCI_MANIFEST, OCI_INDEX, "*/*"],
                MANIFEST_MAX,
                source_ref,
            )
            .await?
            .is_some())
    }
}

trait Sink {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), RegistryError>;
}

impl Sink for Vec<u8> {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), RegistryError> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

struct FileSink {
    file: tokio::fs::File,
    path: std::path::PathBuf,
}

impl Sink for FileSink {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), RegistryError> {
        self.file
            .write_all(bytes)
            .await
            .map_err(|e| RegistryError::io(format!("cannot write {}", self.path.display()), e))
    }
}

enum Capped {
    Over,
    Transport(reqwest::Error),
}

/// The body, at most `cap` bytes: refused from `Content-Length` before
/// reading, and stopped as soon as more arrives.
async fn read_capped(mut res: reqwest::Response, cap: u64) -> Result<Vec<u8>, Capped> {
    if res.content_length().is_some_and(|n| n > cap) {
        return Err(Capped::Over);
    }
    let mut out = Vec::new();
    while let Some(chunk) = res.chunk().await.map_err(Capped::Transport)? {
        if out.len() as u64 + chunk.len() as u64 > cap {
            return Err(Capped::Over);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The OCI error codes and messages of an error body (distribution spec,
/// "Error Codes"), else its text (cut to 200 characters).
fn oci_error_text(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(errors) = v["errors"].as_array()
    {
        return errors
            .iter()
            .map(|e| {
                format!(
                    "{} ({})",
                    e["code"].as_str().unwrap_or("?"),
                    e["message"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
    }
    String::from_utf8_lossy(body).chars().take(200).collect()
}

/// Whether TLS failed because the other end sent something that is not TLS
/// (a plain-HTTP server answering a ClientHello).
fn is_not_tls(e: &reqwest::Error) -> bool {
    matches!(find_rustls(e), Some(rustls::Error::InvalidMessage(_)))
}

/// The rustls error in `e`'s chain, looking inside `io::Error`s too (whose
/// `source` skips the error they wrap).
fn find_rustls<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(r) = e.downcast_ref::<rustls::Error>() {
        return Some(r);
    }
    if let Some(inner) = e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        && let Some(r) = find_rustls(inner)
    {
        return Some(r);
    }
    e.source().and_then(find_rustls)
}

/// An error and its sources, `: `-joined, each said once.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}
