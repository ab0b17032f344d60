//! toolhost-installed: the installed plugin set of a plugins dir.
//!
//! ```text
//! <plugins-dir>/
//!   plugins.lock          the installed set (TOML, `Lock`): the one commit point
//!   .lock                 the writer lock (flock; holds the writer's pid)
//!   blobs/sha256/<hex>    components, content-addressed
//!   staging/<pid>-<n>/    downloads in progress (swept by the next writer)
//!   ID.wasm + ID.toml     loose plugins, copied by hand (loaded as before)
//! ```
//!
//! **Nothing is installed unless every check passed**, and a crash never
//! leaves half an install: a writer downloads into staging, checks, moves
//! the component into `blobs/` (a new name: nothing installed refers to it
//! yet), and only then replaces `plugins.lock` with one `rename(2)`
//! ([`Writer::commit`], the only writer of `plugins.lock`). A kill before the
//! rename leaves the previous lock, which names only blobs that were there
//! before; after it the install is complete. Readers ([`PluginsDir::read`],
//! the host) see either lock, never a mix, and re-hash each blob against it
//! ([`PluginsDir::installed`]).
//!
//! A moved tag never changes an installed plugin: the lock records the
//! digest, and hosts load the blob of that digest.

mod lock;

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::Digest as _;

pub use lock::{Entry, LOCK_VERSION, Lock, SignatureRecord, now};

/// The lock file's name in a plugins dir.
pub const LOCK_FILE: &str = "plugins.lock";
/// The writer lock's name.
pub const WRITER_LOCK: &str = ".lock";

/// The largest `plugins.lock` [`PluginsDir::read`] reads: 4 MiB (an entry is
/// a few hundred bytes, so thousands of plugins fit), so a huge file is a
/// clear error instead of unbounded memory.
pub const MAX_LOCK_BYTES: u64 = 4 << 20;

/// An error about the plugins dir.
#[derive(Debug, thiserror::Error)]
pub enum InstalledError {
    /// File-system I/O.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// `plugins.lock` does not parse or breaks a rule.
    #[error("{}: {reason}", path.display())]
    InvalidLock {
        /// The file.
        path: PathBuf,
        /// Why (with line and column for syntax).
        reason: String,
    },
    /// A blob does not hash to the digest the lock records.
    #[error("{} should hold sha256:{expected} but holds sha256:{got}: it was changed after install", path.display())]
    CorruptBlob {
        /// The blob.
        path: PathBuf,
        /// The digest the lock names.
        expected: String,
        /// What the bytes hash to.
        got: String,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> InstalledError {
    let context = context.into();
    move |source| InstalledError::Io { context, source }
}

/// A plugins dir.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginsDir {
    root: PathBuf,
}

/// What [`PluginsDir::installed`] found.
#[derive(Debug)]
pub struct InstalledSet {
    /// The lock read.
    pub lock: Lock,
    /// Its plugins whose blob checked, in lock order.
    pub plugins: Vec<Installed>,
    /// The others: id and why.
    pub failed: Vec<(String, InstalledError)>,
}

/// One plugin of the lock, ready to load: its blob checked.
#[derive(Clone, Debug)]
pub struct Installed {
    /// The lock entry.
    pub entry: Entry,
    /// The component's path (`blobs/sha256/<hex>`).
    pub wasm: PathBuf,
    /// The manifest as TOML text (`[plugin.manifest]`, verbatim).
    pub manifest: String,
}

impl PluginsDir {
    /// The plugins dir at `root` (nothing is created until a writer comes).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Its path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/plugins.lock`.
    pub fn lock_path(&self) -> PathBuf {
        self.root.join(LOCK_FILE)
    }

    /// Where the component with sha256 `hex` lives.
    pub fn blob_path(&self, hex: &str) -> PathBuf {
        self.root.join("blobs/sha256").join(hex)
    }

    /// The committed lock (an empty one when there is none yet).
    ///
    /// # Errors
    /// [`InstalledError::InvalidLock`] naming line and column, or a file over
    /// [`MAX_LOCK_BYTES`] (read no further); I/O.
    pub fn read(&self) -> Result<Lock, InstalledError> {
        use std::io::Read as _;
        let path = self.lock_path();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Lock::default()),
            Err(e) => return Err(io(format!("cannot read {}", path.display()))(e)),
        };
        let mut text = String::new();
        file.take(MAX_LOCK_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(io(format!("cannot read {}", path.display())))?;
        if text.len() as u64 > MAX_LOCK_BYTES {
            return Err(InstalledError::InvalidLock {
                path,
                reason: format!(
                    "larger than {MAX_LOCK_BYTES} bytes, more than any set of installed \
                     plugins needs; not read"
                ),
            });
        }
        Lock::parse(&text, &path)
    }

    /// Every locked plugin with its blob re-hashed against the lock (a blob
    /// changed after install is refused, naming it, with the rest kept).
    ///
    /// # Errors
    /// The lock cannot be read. Per-plugin failures are in
    /// [`InstalledSet::failed`].
    pub fn installed(&self) -> Result<InstalledSet, InstalledError> {
        let lock = self.read()?;
        let mut ok = Vec::new();
        let mut failed = Vec::new();
        for entry in &lock.plugins {
            let wasm = self.blob_path(&entry.component_sha256);
            match hash_file(&wasm) {
                Ok(got) if got == entry.component_sha256 => ok.push(Installed {
                    entry: entry.clone(),
                    wasm,
                    manifest: entry.manifest_text(),
                }),
                Ok(got) => failed.push((
                    entry.id.clone(),
                    InstalledError::CorruptBlob {
                        path: wasm,
                        expected: entry.component_sha256.clone(),
                        got,
                    },
                )),
                Err(e) => failed.push((entry.id.clone(), e)),
            }
        }
        Ok(InstalledSet {
            lock,
            plugins: ok,
            failed,
        })
    }

    /// Takes the writer lock (creating the dir, mode 0700, and its parts),
    /// waiting for another writer; `on_wait` is called once with that
    /// writer's pid if it must wait. Then sweeps what killed writers left
    /// in `staging/` and reads the lock.
    ///
    /// # Errors
    /// I/O, or an invalid lock.
    pub fn writer(&self, on_wait: impl FnOnce(Option<u32>)) -> Result<Writer, InstalledError> {
        for dir in [
            self.root.clone(),
            self.root.join("blobs/sha256"),
            self.root.join("staging"),
        ] {
            create_private_dir(&dir)?;
        }
        let path = self.root.join(WRITER_LOCK);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io(format!("cannot open {}", path.display())))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                on_wait(holder);
                file.lock()
                    .map_err(io(format!("cannot lock {}", path.display())))?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(io(format!("cannot lock {}", path.display()))(e));
            }
        }
        file.set_len(0)
            .and_then(|()| write!(file, "{}", std::process::id()))
            .map_err(io(format!("cannot write {}", path.display())))?;
        let writer = Writer {
            dir: self.clone(),
            _file: file,
            lock: self.read()?,
            #[cfg(test)]
            fail_at: None,
        };
        writer.sweep_staging()?;
        Ok(writer)
    }
}

/// The plugins dir's one writer (holds the flock until dropped).
pub struct Writer {
    dir: PluginsDir,
    _file: File,
    lock: Lock,
    #[cfg(test)]
    fail_at: Option<Step>,
}

/// A staging directory for one download; removed when dropped.
#[derive(Debug)]
pub struct Staging {
    path: PathBuf,
}

impl Staging {
    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The steps of a commit, in order (for the crash tests).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    WriteTemp,
    Rename,
}

impl Writer {
    /// The plugins dir.
    pub fn dir(&self) -> &PluginsDir {
        &self.dir
    }

    /// The lock as read under this writer (the one [`Writer::commit`] replaces).
    pub fn current(&self) -> &Lock {
        &self.lock
    }

    /// A fresh staging dir (`staging/<pid>-<n>`).
    ///
    /// # Errors
    /// I/O.
    pub fn staging(&self) -> Result<Staging, InstalledError> {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let path = self
            .dir
            .root
            .join("staging")
            .join(format!("{}-{nanos}", std::process::id()));
        create_private_dir(&path)?;
        Ok(Staging { path })
    }

    /// Removes everything in `staging/` (this writer holds the lock, so it
    /// is what killed writers left). Returns how many entries went.
    ///
    /// # Errors
    /// I/O.
    pub fn sweep_staging(&self) -> Result<usize, InstalledError> {
        let staging = self.dir.root.join("staging");
        let mut n = 0;
        for e in
            std::fs::read_dir(&staging).map_err(io(format!("cannot read {}", staging.display())))?
        {
            let e = e.map_err(io(format!("cannot read {}", staging.display())))?;
            let _ = std::fs::remove_dir_all(e.path()).or_else(|_| std::fs::remove_file(e.path()));
            n += 1;
        }
        Ok(n)
    }

    /// Moves `file` (in staging, already `fsync`ed) into
    /// `blobs/sha256/<hex>` after hashing it, and syncs the directory.
    /// Returns the hex digest. A blob already there is kept (same bytes).
    ///
    /// # Errors
    /// I/O.
    pub fn add_blob(&self, file: &Path) -> Result<String, InstalledError> {
        let hex = hash_file(file)?;
        let target = self.dir.blob_path(&hex);
        if target.exists() {
            let _ = std::fs::remove_file(file);
        } else {
            std::fs::rename(file, &target).map_err(io(format!(
                "cannot move {} to {}",
                file.display(),
                target.display()
            )))?;
            sync_dir(target.parent().expect("blob paths have a parent"))?;
        }
        Ok(hex)
    }

    /// Replaces `plugins.lock` with `plugins` (generation + 1): written to
    /// `plugins.lock.tmp`, `fsync`ed, renamed over, the dir `fsync`ed. The
    /// only writer of `plugins.lock`, and the last step of every install,
    /// update and remove. Returns the new generation.
    ///
    /// # Errors
    /// I/O; the previous lock is then still the committed one.
    pub fn commit(&mut self, plugins: Vec<Entry>) -> Result<u64, InstalledError> {
        let next = Lock {
            version: LOCK_VERSION,
            generation: self.lock.generation + 1,
            plugins,
        };
        let text = next.to_text();
        let path = self.dir.lock_path();
        let tmp = self.dir.root.join(format!("{LOCK_FILE}.tmp"));
        // A failed write or rename removes the temp file (a partial one would
        // hold on to the space a full disk lacks).
        let written = self.write_lock_temp(&tmp, &text).and_then(|()| {
            #[cfg(test)]
            if self.fail_at == Some(Step::Rename) {
                return Err(io("injected failure")(std::io::Error::other(
                    "before the rename",
                )));
            }
            std::fs::rename(&tmp, &path).map_err(io(format!("cannot replace {}", path.display())))
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        sync_dir(&self.dir.root)?;
        self.lock = next;
        Ok(self.lock.generation)
    }

    /// Writes `text` to the lock's temp file `tmp` and `fsync`s it.
    fn write_lock_temp(&self, tmp: &Path, text: &str) -> Result<(), InstalledError> {
        let mut f = create_private_file(tmp)?;
        #[cfg(test)]
        if self.fail_at == Some(Step::WriteTemp) {
            f.write_all(&text.as_bytes()[..text.len() / 2]).ok();
            return Err(io("injected failure")(std::io::Error::other(
                "before the rename",
            )));
        }
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(io(format!("cannot write {}", tmp.display())))
    }

    /// Removes blobs no lock entry names and not modified for `min_age`;
    /// returns `(removed, bytes)`.
    ///
    /// # Errors
    /// I/O.
    pub fn gc_blobs(&self, min_age: Duration) -> Result<(usize, u64), InstalledError> {
        let dir = self.dir.root.join("blobs/sha256");
        let keep: std::collections::BTreeSet<&str> = self
            .lock
            .plugins
            .iter()
            .map(|e| e.component_sha256.as_str())
            .collect();
        let now = SystemTime::now();
        let (mut removed, mut bytes) = (0, 0);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
            Err(e) => return Err(io(format!("cannot read {}", dir.display()))(e)),
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(meta) = e.metadata() else { continue };
            let old = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age >= min_age);
            if !keep.contains(name.as_str()) && old && std::fs::remove_file(e.path()).is_ok() {
                removed += 1;
                bytes += meta.len();
            }
        }
        Ok((removed, bytes))
    }
}

/// The sha256 hex of a file's bytes.
///
/// # Errors
/// I/O.
pub fn hash_file(path: &Path) -> Result<String, InstalledError> {
    let mut f = File::open(path).map_err(io(format!("cannot open {}", path.display())))?;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(io(format!("cannot read {}", path.display())))?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Creates `dir` and its missing parents, each mode exactly `0700` whatever the
/// umask (what the host keeps is private to its user:
/// docs/operations.md#the-state-dir); directories already there are left as they are.
fn create_private_dir(dir: &Path) -> Result<(), InstalledError> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    let fail = |e| io(format!("cannot create {}", dir.display()))(e);
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_private_dir(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(fail(e)),
    }
}

/// Creates (or truncates) `path` for writing, mode exactly `0600` whatever the umask.
fn create_private_file(path: &Path) -> Result<File, InstalledError> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|f| {
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map(|()| f)
        })
        .map_err(io(format!("cannot create {}", path.display())))
}

fn sync_dir(dir: &Path) -> Result<(), InstalledError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("cannot sync {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, hex: &str) -> Entry {
        let mut manifest = toml::Table::new();
        manifest.insert("id".into(), id.into());
        manifest.insert("contract".into(), "0.2.0".into());
        manifest.insert("exec".into(), toml::Value::Array(vec!["git status".into()]));
        Entry {
            id: id.into(),
            source: format!("oci://127.0.0.1:5000/plugins/{id}:1"),
            resolved: Some(format!(
                "127.0.0.1:5000/plugins/{id}@sha256:{}",
                "a".repeat(64)
            )),
            component_sha256: hex.into(),
            size: 3,
            insecure: true,
            contract: "0.2.0".into(),
            added: "2026-12-02T05:20:00Z".parse().unwrap(),
            updated: None,
            manifest_from: "artifact".into(),
            signature: SignatureRecord {
                kind: "keyless".into(),
                identity: Some("signer@example.test".into()),
                issuer: Some("https://issuer.example.test".into()),
                ..SignatureRecord::default()
            },
            manifest,
        }
    }

    fn install(w: &mut Writer, id: &str, bytes: &[u8]) -> String {
        let staging = w.staging().unwrap();
        let f = staging.path().join("layer.part");
        std::fs::write(&f, bytes).unwrap();
        let hex = w.add_blob(&f).unwrap();
        let mut plugins = w.current().plugins.clone();
        plugins.retain(|e| e.id != id);
        plugins.push(entry(id, &hex));
        w.commit(plugins).unwrap();
        hex
    }

    #[test]
    fn a_commit_round_trips_and_counts_generations() {
        let d = tempfile::tempdir().unwrap();
        let dir = PluginsDir::new(d.path().join("plugins"));
        assert_eq!(dir.read().unwrap(), Lock::default());
        let mut w = dir.writer(|_| panic!("nobody else writes")).unwrap();
        let hex = install(&mut w, "notes", b"one");
        install(&mut w, "other", b"two");
        drop(w);
        let lock = dir.read().unwrap();
        assert_eq!(lock.generation, 2);
        assert_eq!(lock.plugins.len(), 2);
        assert_eq!(lock.plugins[0], entry("notes", &hex));
        let text = std::fs::read_to_string(dir.lock_path()).unwrap();
        assert!(text.starts_with("# toolhost plugins.lock"), "{text}");
        assert!(text.contains("[plugin.manifest]\n"), "{text}");
        let set = dir.installed().unwrap();
        let installed = set.plugins;
        assert!(set.failed.is_empty());
        assert_eq!(std::fs::read(&installed[0].wasm).unwrap(), b"one");
        assert!(
            installed[0].manifest.contains("exec = [\"git status\"]"),
            "{}",
            installed[0].manifest
        );
    }

    #[test]
    fn a_failed_commit_leaves_the_previous_lock_byte_for_byte() {
        let d = tempfile::tempdir().unwrap();
        let dir = PluginsDir::new(d.path());
        let mut w = dir.writer(|_| {}).unwrap();
        install(&mut w, "notes", b"v1");
        let before = std::fs::read(dir.lock_path()).unwrap();
        for step in [Step::WriteTemp, Step::Rename] {
            w.fail_at = Some(step);
            let staging = w.staging().unwrap();
            let f = staging.path().join("layer.part");
            std::fs::write(&f, b"v2").unwrap();
            let hex = w.add_blob(&f).unwrap();
            assert!(w.commit(vec![entry("notes", &hex)]).is_err());
            assert_eq!(std::fs::read(dir.lock_path()).unwrap(), before, "{step:?}");
            assert!(!d.path().join("plugins.lock.tmp").exists(), "{step:?}");
            let set = dir.installed().unwrap();
            assert_eq!(set.lock.generation, 1);
            assert_eq!(std::fs::read(&set.plugins[0].wasm).unwrap(), b"v1");
        }
        // The next writer sweeps staging and a good commit goes through.
        drop(w);
        let mut w = dir.writer(|_| {}).unwrap();
        assert!(
            std::fs::read_dir(d.path().join("staging"))
                .unwrap()
                .next()
                .is_none()
        );
        install(&mut w, "notes", b"v2");
        assert_eq!(dir.read().unwrap().generation, 2);
        // The blob of v1 is unreferenced now: gc takes it (age 0 here).
        assert_eq!(w.gc_blobs(Duration::ZERO).unwrap(), (1, 2));
    }

    #[test]
    fn a_changed_blob_is_refused_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let dir = PluginsDir::new(d.path());
        let mut w = dir.writer(|_| {}).unwrap();
        let hex = install(&mut w, "notes", b"v1");
        std::fs::write(dir.blob_path(&hex), b"v9").unwrap();
        let set = dir.installed().unwrap();
        assert!(set.plugins.is_empty());
        let e = set.failed[0].1.to_string();
        assert!(e.contains(&format!("should hold sha256:{hex}")), "{e}");
        assert!(e.contains("it was changed after install"), "{e}");
    }

    #[test]
    fn a_second_writer_waits_naming_the_first() {
        let d = tempfile::tempdir().unwrap();
        let dir = PluginsDir::new(d.path());
        let w = dir.writer(|_| {}).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let dir2 = dir.clone();
        let t = std::thread::spawn(move || {
            let _w2 = dir2.writer(|pid| tx.send(pid).unwrap()).unwrap();
        });
        assert_eq!(rx.recv().unwrap(), Some(std::process::id()));
        drop(w);
        t.join().unwrap();
    }
}
