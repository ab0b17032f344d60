//! A real OCI registry on loopback for the registry tests, and the tools no
//! one here wrote that push to it and sign for it.
//!
//! [`TestRegistry::start`] runs the CNCF distribution registry (Debian's
//! `docker-registry` 2.8, installed by `.ci/run`) with a temp config on
//! `127.0.0.1:<free port>`, anonymous or with an htpasswd user, and kills it
//! by pid when dropped. Pushes and pulls go through oras-py, signatures
//! through sigstore-js (`tests/registry/*.js`), keys and the htpasswd line
//! through pyca/cryptography and bcrypt (`tests/registry/oras_tool.py`); all
//! are pinned by `tests/setup.sh`. A missing tool is an error naming the
//! script that installs it, never a skip.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

/// The htpasswd user of [`Auth::Htpasswd`] registries.
pub const USER: &str = "tester";
/// Its password.
pub const PASSWORD: &str = "s3cret-pw";

/// How clients authenticate to a [`TestRegistry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Anyone may push and pull.
    Anonymous,
    /// HTTP Basic as [`USER`]/[`PASSWORD`] (the registry sends a challenge,
    /// which sigstore-js's OCI client needs).
    Htpasswd,
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn need(path: PathBuf, what: &str) -> Result<PathBuf> {
    if path.exists() {
        Ok(path)
    } else {
        bail!("{} is missing: {what} (run tests/setup.sh)", path.display())
    }
}

/// `.venv/bin/python` (oras-py, requests, bcrypt, cryptography).
pub fn python() -> Result<PathBuf> {
    need(repo_root().join(".venv/bin/python"), "the test venv")
}

/// `tests/registry/node_modules` holds sigstore-js.
fn signers_dir() -> Result<PathBuf> {
    let dir = repo_root().join("tests/registry");
    need(dir.join("node_modules/@sigstore/sign"), "sigstore-js")?;
    Ok(dir)
}

/// Runs `cmd`, returns stdout (trimmed); an error with stderr otherwise.
fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A running registry; stopped (SIGKILL by pid, reaped) on drop.
pub struct TestRegistry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// How it authenticates.
    pub auth: Auth,
    dir: tempfile::TempDir,
}

impl TestRegistry {
    /// Starts one and waits (at most 5 s) until `GET /v2/` answers.
    ///
    /// # Errors
    /// No `docker-registry` binary (naming `.ci/run`), a tool missing, or a
    /// registry that does not come up.
    pub fn start(auth: Auth) -> Result<Self> {
        let binary = ["/usr/bin/docker-registry", "/usr/local/bin/docker-registry"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .context("docker-registry is not installed (.ci/run installs the Debian package)")?;
        let dir = tempfile::tempdir()?;
        let mut auth_yaml = String::new();
        if auth == Auth::Htpasswd {
            let line = run(Command::new(python()?)
                .arg(repo_root().join("tests/registry/oras_tool.py"))
                .args(["htpasswd", USER, PASSWORD]))?;
            std::fs::write(dir.path().join("htpasswd"), format!("{line}\n"))?;
            auth_yaml = format!(
                "auth:\n  htpasswd:\n    realm: toolhost-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            );
        }
        for _attempt in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            let host = format!("127.0.0.1:{port}");
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: false\n\
                     storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                     http:\n  addr: {host}\n{auth_yaml}",
                    dir.path().join("data").display()
                ),
            )?;
            let log = std::fs::File::create(dir.path().join("registry.log"))?;
            let mut child = Command::new(&binary)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .with_context(|| format!("cannot start {}", binary.display()))?;
            if wait_ready(&mut child, &host, Duration::from_secs(5))? {
                return Ok(Self {
                    child,
                    host,
                    auth,
                    dir,
                });
            }
            // The port was taken between bind and serve: try another.
            let _ = child.kill();
            let _ = child.wait();
        }
        bail!(
            "docker-registry did not start: {}",
            std::fs::read_to_string(dir.path().join("registry.log")).unwrap_or_default()
        )
    }

    /// `[USER, PASSWORD]` for an htpasswd registry, else nothing.
    fn credential_args(&self) -> Vec<&'static str> {
        match self.auth {
            Auth::Htpasswd => vec![USER, PASSWORD],
            Auth::Anonymous => vec![],
        }
    }

    fn oras_tool(&self) -> Result<Command> {
        let mut cmd = Command::new(python()?);
        cmd.arg(repo_root().join("tests/registry/oras_tool.py"));
        Ok(cmd)
    }

    /// Pushes `file` as the one layer (`media`) with `config` (`config_media`)
    /// to `repo_tag` with oras-py; returns the manifest digest.
    ///
    /// # Errors
    /// oras-py failed.
    pub fn push(
        &self,
        repo_tag: &str,
        file: &Path,
        media: &str,
        config: &Path,
        config_media: &str,
    ) -> Result<String> {
        run(self
            .oras_tool()?
            .arg("push")
            .arg(&self.host)
            .arg(repo_tag)
            .arg(file)
            .arg(media)
            .arg(config)
            .arg(config_media)
            .args(self.credential_args()))
    }

    /// Pushes `component` in the CNCF wasm layout (config
    /// `application/vnd.wasm.config.v0+json`, one `application/wasm`
    /// layer) with oras-py; returns the manifest digest.
    ///
    /// # Errors
    /// oras-py failed.
    pub fn push_wasm(&self, repo_tag: &str, component: &[u8]) -> Result<String> {
        let work = tempfile::tempdir()?;
        let file = work.path().join("plugin.wasm");
        std::fs::write(&file, component)?;
        let config = work.path().join("config.json");
        std::fs::write(
            &config,
            r#"{"architecture":"wasm","os":"wasip2","created":"2026-12-01T00:00:00Z"}"#,
        )?;
        self.push(
            repo_tag,
            &file,
            "application/wasm",
            &config,
            "application/vnd.wasm.config.v0+json",
        )
    }

    /// PUTs `manifest` (OCI image manifest JSON) at `repo`/`reference`;
    /// returns its digest.
    ///
    /// # Errors
    /// The PUT failed.
    pub fn put_manifest(&self, repo: &str, reference: &str, manifest: &str) -> Result<String> {
        let work = tempfile::tempdir()?;
        let file = work.path().join("manifest.json");
        std::fs::write(&file, manifest)?;
        run(self
            .oras_tool()?
            .args(["put-manifest", &self.host, repo, reference])
            .arg(&file)
            .args(self.credential_args()))
    }

    /// The manifest bytes of `repo`/`reference` (GET by requests).
    ///
    /// # Errors
    /// The GET failed.
    pub fn manifest(&self, repo: &str, reference: &str) -> Result<Vec<u8>> {
        let work = tempfile::tempdir()?;
        let file = work.path().join("manifest.json");
        run(self
            .oras_tool()?
            .args(["get-manifest", &self.host, repo, reference])
            .arg(&file)
            .args(self.credential_args()))?;
        Ok(std::fs::read(file)?)
    }

    /// `oras pull` of `repo_tag` into `outdir`; the files it wrote.
    ///
    /// # Errors
    /// oras-py failed.
    pub fn pull(&self, repo_tag: &str, outdir: &Path) -> Result<Vec<PathBuf>> {
        let out = run(self
            .oras_tool()?
            .args(["pull", &self.host, repo_tag])
            .arg(outdir)
            .args(self.credential_args()))?;
        Ok(out.lines().map(PathBuf::from).collect())
    }

    /// Keyless-signs with sigstore-js and a mocked Fulcio/Rekor, attaching
    /// each bundle as a referrer: `jobs` are `(identity, repo, digest,
    /// predicate type or None for cosign's)`. Needs [`Auth::Htpasswd`].
    /// Returns the trusted root (`trusted_root.json`) the mock signed under.
    ///
    /// # Errors
    /// node or sigstore-js failed.
    pub fn sign_keyless(
        &self,
        out: &Path,
        jobs: &[(&str, &str, &str, Option<&str>)],
    ) -> Result<PathBuf> {
        let dir = signers_dir()?;
        let mut cmd = Command::new("node");
        cmd.arg(dir.join("sign.js")).arg(out).current_dir(&dir);
        for (identity, repo, digest, predicate) in jobs {
            let mut job = format!("{identity}|{}/{repo}|{digest}", self.host);
            if let Some(p) = predicate {
                job.push('|');
                job.push_str(p);
            }
            cmd.arg(job);
        }
        run(cmd.env("REG_USER", USER).env("REG_PASS", PASSWORD))?;
        Ok(out.join("trusted_root.json"))
    }

    /// Makes a P-256 key pair with pyca/cryptography: `(private, public)` PEM files.
    ///
    /// # Errors
    /// Python failed.
    pub fn make_key(&self, out: &Path, name: &str) -> Result<(PathBuf, PathBuf)> {
        std::fs::create_dir_all(out)?;
        let (private, public) = (
            out.join(format!("{name}.key.pem")),
            out.join(format!("{name}.pub.pem")),
        );
        run(self.oras_tool()?.arg("key").arg(&private).arg(&public))?;
        Ok((private, public))
    }

    /// Signs `repo`@`digest` with `key` the way `cosign sign --key` does
    /// (sigstore-js, a mocked Rekor), attaching the bundle. Needs
    /// [`Auth::Htpasswd`]. Returns the trusted root holding the mock Rekor key.
    ///
    /// # Errors
    /// node or sigstore-js failed.
    pub fn sign_with_key(
        &self,
        out: &Path,
        key: &Path,
        repo: &str,
        digest: &str,
    ) -> Result<PathBuf> {
        let dir = signers_dir()?;
        std::fs::create_dir_all(out)?;
        let manifest = out.join("signed-manifest.json");
        std::fs::write(&manifest, self.manifest(repo, digest)?)?;
        run(Command::new("node")
            .arg(dir.join("keysign.js"))
            .arg(out)
            .arg(key)
            .arg(&manifest)
            .arg(format!("{}/{repo}", self.host))
            .arg(digest)
            .current_dir(&dir)
            .env("REG_USER", USER)
            .env("REG_PASS", PASSWORD))?;
        Ok(out.join("rekor_root.json"))
    }

    /// Where the registry stores the blob `digest` (to tamper with it).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The access log so far (`"GET /v2/... HTTP/1.1" 200 ...` lines).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Whether the access log shows a GET of blob `digest`.
    pub fn blob_was_fetched(&self, digest: &str) -> bool {
        self.access_log()
            .lines()
            .any(|l| l.contains("\"GET /v2/") && l.contains(&format!("/blobs/{digest}")))
    }

    /// A docker `config.json` with this registry's credential (`auths`).
    pub fn docker_config(&self, user: &str, password: &str) -> String {
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{}"}}}}}}"#,
            self.host,
            base64_basic(user, password)
        )
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `GET /v2/` until it answers (`true`) or the process exits or
/// `limit` passes (`false`).
fn wait_ready(child: &mut Child, host: &str, limit: Duration) -> Result<bool> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait()?.is_some() {
            return Ok(false);
        }
        if let Ok(mut s) = TcpStream::connect(host) {
            let _ = write!(s, "GET /v2/ HTTP/1.0\r\nHost: {host}\r\n\r\n");
            let mut head = [0u8; 12];
            if s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") {
                return Ok(true);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(false)
}

/// `user:password` in base64, as `config.json`'s `auth` holds it.
fn base64_basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// A minimal distinct component: the component header plus a custom
/// section naming `tag` (so each test's blob is its own).
pub fn tiny_component(tag: &str) -> Vec<u8> {
    let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
    let name = b"toolhost-test";
    let payload_len = 1 + name.len() + tag.len();
    bytes.push(0);
    bytes.push(payload_len as u8);
    bytes.push(name.len() as u8);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(tag.as_bytes());
    bytes
}
