//! Registry credentials from the standard places, never from the command line.
//!
//! Order (the first file that has an entry for the registry wins; none:
//! anonymous):
//!
//! 1. `$REGISTRY_AUTH_FILE`, if set, and then only it (as podman and skopeo do);
//! 2. `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json` (`auths`
//!    with `auth` or `username`/`password` or `identitytoken`, `credHelpers`,
//!    `credsStore`: Docker's `config.json` format);
//! 3. `$XDG_RUNTIME_DIR/containers/auth.json`, then
//!    `$XDG_CONFIG_HOME/containers/auth.json` (default
//!    `~/.config/containers/auth.json`): containers-auth.json(5).
//!
//! Each file is opened here and parsed by `docker_credential`: a missing
//! file is skipped, an unreadable or malformed one is an error naming it.
//! Credential helpers (`docker-credential-NAME` on `PATH`) run on the
//! blocking pool, at most [`HELPER_TIMEOUT`]; their output is never shown
//! (it holds the secret). An identity token is sent as a bearer token.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use docker_credential::{CredentialRetrievalError, DockerCredential};

use crate::error::RegistryError;

/// The longest a credential helper may take.
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// A credential for one registry and where it came from.
#[derive(Clone)]
pub struct Credential {
    /// What to send.
    pub secret: Secret,
    /// The file it came from (`None`: anonymous).
    pub origin: Option<PathBuf>,
}

/// What a [`Credential`] sends.
#[derive(Clone)]
pub enum Secret {
    /// Nothing.
    Anonymous,
    /// HTTP Basic (or exchanged for a bearer token at the registry's realm).
    Basic {
        /// User name.
        username: String,
        /// Password (never printed).
        password: String,
    },
    /// An identity token, sent as a bearer token.
    Token(String),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Credential {
    /// No credential.
    pub fn anonymous() -> Self {
        Self {
            secret: Secret::Anonymous,
            origin: None,
        }
    }

    /// `with the credential for REGISTRY in FILE`, or `without a credential`
    /// (and where none was found): how a 401 names what was sent.
    pub fn describe(&self) -> String {
        match (&self.secret, &self.origin) {
            (Secret::Anonymous, _) => "without a credential (none found in $REGISTRY_AUTH_FILE, \
                                       ~/.docker/config.json or containers/auth.json)"
                .to_string(),
            (Secret::Basic { username, .. }, Some(o)) => {
                format!(
                    "with the credential of user `{username}` in {}",
                    o.display()
                )
            }
            (Secret::Token(_), Some(o)) => format!("with the identity token in {}", o.display()),
            (_, None) => "with a credential".to_string(),
        }
    }

    pub(crate) fn to_oci(&self) -> oci_client::secrets::RegistryAuth {
        use oci_client::secrets::RegistryAuth;
        match &self.secret {
            Secret::Anonymous => RegistryAuth::Anonymous,
            Secret::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            Secret::Token(t) => RegistryAuth::Bearer(t.clone()),
        }
    }
}

/// The files looked at, in order (module docs), from the environment.
pub fn credential_files() -> Vec<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(f) = env("REGISTRY_AUTH_FILE") {
        return vec![f];
    }
    let home = env("HOME");
    let mut files = Vec::new();
    match (env("DOCKER_CONFIG"), &home) {
        (Some(d), _) => files.push(d.join("config.json")),
        (None, Some(h)) => files.push(h.join(".docker/config.json")),
        (None, None) => {}
    }
    if let Some(r) = env("XDG_RUNTIME_DIR") {
        files.push(r.join("containers/auth.json"));
    }
    match (env("XDG_CONFIG_HOME"), &home) {
        (Some(c), _) => files.push(c.join("containers/auth.json")),
        (None, Some(h)) => files.push(h.join(".config/containers/auth.json")),
        (None, None) => {}
    }
    files
}

/// The credential for `registry` (`host[:port]`) from [`credential_files`].
///
/// # Errors
/// [`RegistryError::Credentials`] naming the file when one is unreadable or
/// malformed, or its helper fails or times out.
pub async fn lookup(registry: &str) -> Result<Credential, RegistryError> {
    let registry = registry.to_string();
    let files = credential_files();
    let task = tokio::task::spawn_blocking(move || {
        for file in files {
            if let Some(c) = from_file(&file, &registry)? {
                return Ok(c);
            }
        }
        Ok(Credential::anonymous())
    });
    match tokio::time::timeout(HELPER_TIMEOUT, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(RegistryError::Credentials {
            file: PathBuf::from("(credential lookup)"),
            reason: e.to_string(),
        }),
        Err(_) => Err(RegistryError::Credentials {
            file: PathBuf::from("(credential helper)"),
            reason: format!("no answer within {} s", HELPER_TIMEOUT.as_secs()),
        }),
    }
}

/// The entry for `registry` in one file: `Ok(None)` when the file does not
/// exist or has no entry for it.
pub fn from_file(file: &Path, registry: &str) -> Result<Option<Credential>, RegistryError> {
    let bad = |reason: String| RegistryError::Credentials {
        file: file.to_path_buf(),
        reason,
    };
    let text = match std::fs::read(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    let found = docker_credential::get_credential_from_reader(text.as_slice(), registry);
    let secret = match found {
        Ok(DockerCredential::UsernamePassword(username, password)) => {
            Secret::Basic { username, password }
        }
        Ok(DockerCredential::IdentityToken(t)) => Secret::Token(t),
        Err(CredentialRetrievalError::NoCredentialConfigured) => return Ok(None),
        Err(CredentialRetrievalError::HelperFailure { helper, .. }) => {
            // The helper's output may hold the secret: not shown.
            return Err(bad(format!(
                "credential helper `{helper}` failed for {registry}"
            )));
        }
        Err(CredentialRetrievalError::ConfigReadError) => {
            return Err(bad("not a valid JSON credentials file".into()));
        }
        Err(e) => return Err(bad(format!("{e} (for {registry})"))),
    };
    Ok(Some(Credential {
        secret,
        origin: Some(file.to_path_buf()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_files_and_malformed_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("config.json");
        // "user:pw" in base64.
        std::fs::write(
            &f,
            r#"{"auths":{"127.0.0.1:5056":{"auth":"dXNlcjpwdw=="}}}"#,
        )
        .unwrap();
        let c = from_file(&f, "127.0.0.1:5056").unwrap().unwrap();
        assert!(
            matches!(&c.secret, Secret::Basic { username, password } if username == "user" && password == "pw")
        );
        assert!(c.describe().contains("user `user`"), "{}", c.describe());
        assert!(!c.describe().contains("pw"));
        assert!(from_file(&f, "127.0.0.1:5055").unwrap().is_none());
        assert!(
            from_file(&dir.path().join("missing.json"), "x")
                .unwrap()
                .is_none()
        );
        std::fs::write(&f, "{not json").unwrap();
        let e = from_file(&f, "127.0.0.1:5056").unwrap_err().to_string();
        assert!(e.contains(&f.display().to_string()), "{e}");
    }
}
