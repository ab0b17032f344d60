//! The crate's one error type.
//!
//! Every message names what was expected and what was found. Two classes
//! ([`RegistryError::is_refusal`]): a *refusal* (the artifact is not what it
//! must be: a digest, media type, size or signature check failed; exit 1 in
//! the CLI) and everything else (usage, I/O, an unreachable or unauthorised
//! registry; exit 2). Nothing is ever installed after either.

use std::path::PathBuf;

/// An error from a registry operation.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A reference, digest or `--insecure-registry` entry breaks the grammar.
    #[error("invalid reference `{input}`: {rule}")]
    InvalidReference {
        /// What was given.
        input: String,
        /// The rule it breaks.
        rule: String,
    },
    /// A credential file exists but cannot be used.
    #[error("cannot use the registry credentials in {}: {reason}", file.display())]
    Credentials {
        /// The file.
        file: PathBuf,
        /// Why (never the secret itself).
        reason: String,
    },
    /// HTTPS was tried and the other end did not speak TLS.
    #[error(
        "https://{registry} did not answer TLS; if it is a plain-HTTP registry, name it with \
         --insecure-registry {registry}"
    )]
    NotTls {
        /// `host[:port]`.
        registry: String,
    },
    /// A connection or TLS failure (the message of the HTTP stack).
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The registry refused the credential (or wanted one).
    #[error("{status} from {registry} {credential}")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// `host[:port]`.
        registry: String,
        /// Where the credential came from, or that there was none.
        credential: String,
    },
    /// The manifest asked for does not exist.
    #[error("manifest {what} not found in {name}")]
    ManifestUnknown {
        /// The tag or digest.
        what: String,
        /// `REGISTRY/REPO`.
        name: String,
    },
    /// Any other answer the protocol does not expect.
    #[error("{url} answered {status}: {body}")]
    Http {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
        /// The start of the body (at most 64 KiB read), or the OCI error codes.
        body: String,
    },
    /// Bytes that do not hash to the digest that names them.
    #[error(
        "{what} of {source_ref} is not what {by} says: expected {expected}, got {got}; nothing was installed"
    )]
    DigestMismatch {
        /// `layer`, `config`, `manifest`, `bundle`.
        what: &'static str,
        /// The reference.
        source_ref: String,
        /// What named the digest (`its manifest`, `the reference`, `the registry`).
        by: &'static str,
        /// The expected digest.
        expected: String,
        /// What the bytes hash to.
        got: String,
    },
    /// A declared size above a cap: refused before anything was downloaded.
    #[error(
        "{what} {digest} declares {declared} bytes, over the {cap}-byte cap{flag}: nothing was downloaded"
    )]
    TooLarge {
        /// `layer`, `config`.
        what: &'static str,
        /// Its digest.
        digest: String,
        /// The size the manifest declares.
        declared: u64,
        /// The cap.
        cap: u64,
        /// ` (--max-size)` where the operator can raise it.
        flag: &'static str,
    },
    /// The registry sent (or announced) more or fewer bytes than declared.
    #[error("{what} {digest} of {source_ref}: {problem}; nothing was installed")]
    WrongSize {
        /// `layer`, `config`, `manifest`, ...
        what: &'static str,
        /// Its digest (or tag, for a manifest).
        digest: String,
        /// The reference.
        source_ref: String,
        /// e.g. `sent more than the 1000 bytes its manifest declares`.
        problem: String,
    },
    /// The artifact is not a wasm component in the CNCF layout.
    #[error("{source_ref} ({digest}): not a wasm component artifact: {found}")]
    NotWasm {
        /// The reference.
        source_ref: String,
        /// The manifest digest.
        digest: String,
        /// What it is instead (media types, an index, ...).
        found: String,
    },
    /// The signature policy refused the artifact.
    #[error("refused {source_ref} ({digest}): {summary}\n  expected: {expected}\n{found}")]
    SignatureRefused {
        /// The reference.
        source_ref: String,
        /// The manifest digest.
        digest: String,
        /// `unsigned`, `not signed by the expected signer`, ...
        summary: String,
        /// The policy, in words.
        expected: String,
        /// What was found, one indented line per bundle (and a hint).
        found: String,
    },
    /// No signature policy was chosen.
    #[error(
        "no signature policy given: pass --verify-identity ID --verify-issuer URL, \
         --verify-key PEM, or --allow-unsigned"
    )]
    NoPolicy,
    /// A trusted root or key file that cannot be used.
    #[error("cannot use {}: {reason}", file.display())]
    TrustMaterial {
        /// The file.
        file: PathBuf,
        /// Why.
        reason: String,
    },
    /// Local I/O (staging files).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A push failed (the message of oci-client).
    #[error("cannot push to {target}: {reason}")]
    Push {
        /// The reference.
        target: String,
        /// Why.
        reason: String,
    },
}

impl RegistryError {
    /// Whether the artifact itself was refused (a failed check: exit 1), as
    /// opposed to usage, I/O or an unreachable registry (exit 2).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::ManifestUnknown { .. }
                | Self::DigestMismatch { .. }
                | Self::TooLarge { .. }
                | Self::WrongSize { .. }
                | Self::NotWasm { .. }
                | Self::SignatureRefused { .. }
        )
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
