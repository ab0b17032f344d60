//! Disk retention (docs/disk.md#retention-and-gc): what the state dir keeps of
//! finished process sessions (`<state>/sessions/<id>/`: `output.log` and the private
//! `tmp/`) and of host-session logs (`<state>/hosts/<hs_id>/`), and the sweep that
//! removes the rest (`toolhost gc`, and `toolhost serve` on start and every
//! [`SWEEP_INTERVAL`]).
//!
//! An entry is in use while a lock says so, and the sweep skips whatever it finds
//! locked, so it never removes the log or temp dir of a running session, whichever
//! host process runs it:
//!
//! - a running process session's directory holds a symlink `owner` naming its
//!   engine's owner file, `<state>/owners/<pid>-<start>-<random>` ([`OwnerLock`]: a
//!   name no later engine reuses, pid reuse in containers included), which that
//!   engine keeps locked (`flock`, exclusive) for its life, and the link is removed
//!   when the session ends. The sweep takes only the link's file name and looks it
//!   up in its own `<state>/owners/`, so a `sessions/` directory reached through a
//!   symlink changes nothing. One lock per engine instead of one per session: a
//!   session holds no descriptor for it (benchmark P5). A link whose owner file is
//!   gone or unlocked was left by a host that is gone: that session has ended. (A
//!   session of an older toolhost holds a shared `flock` on its `output.log`
//!   instead; that is honoured too. An older toolhost's sweep does not know the
//!   links, so it takes a newer host's running sessions for ended ones: do not
//!   share a state dir between versions while one sweeps.)
//! - a running host session's `events.jsonl` holds an exclusive `flock`.
//!
//! Entries younger than [`SWEEP_GRACE`] are never removed (a session being created
//! has no link yet).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// How long a finished session's directory (its `output.log`) is kept after its
/// last write: 24 hours, long enough to read a night's background job next morning.
pub const FINISHED_SESSION_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// Most bytes (allocated on disk) the finished sessions' directories keep together:
/// 1 GiB (1 073 741 824). Beyond it the oldest are removed first.
pub const FINISHED_SESSIONS_MAX_BYTES: u64 = 1 << 30;

/// How long a stopped or interrupted host session's directory (`events.jsonl`,
/// `attach.cursor`) is kept after its last event: 7 days, the span in which
/// `serve --host-session` resumes are useful.
pub const HOST_SESSION_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Most bytes the stopped host sessions' directories keep together: 256 MiB
/// (268 435 456). Beyond it the oldest are removed first.
pub const HOST_SESSIONS_MAX_BYTES: u64 = 256 << 20;

/// How often `toolhost serve` sweeps: every 10 minutes (and once on start).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// Entries modified less than this long ago are never removed: 60 s.
pub(crate) const SWEEP_GRACE: Duration = Duration::from_secs(60);

/// The name of the symlink in a running session's directory to its engine's owner
/// file (module docs).
const OWNER_LINK: &str = "owner";

/// An engine's claim on the sessions it runs (module docs): `<state>/owners/<name>`,
/// locked for as long as this lives and removed on drop. Holds one descriptor.
pub(crate) struct OwnerLock {
    file: std::fs::File,
    path: PathBuf,
    /// What a session's `owner` link points to: `../../owners/<name>`.
    target: PathBuf,
}

impl OwnerLock {
    /// Creates and locks a new owner file in `<state_dir>/owners/`.
    ///
    /// Errors: the directory or the file cannot be created or locked.
    pub(crate) fn acquire(state_dir: &Path) -> std::io::Result<OwnerLock> {
        let dir = state_dir.join("owners");
        crate::private_fs::create_private_dir_all(&dir)?;
        // The process's start time (clock ticks since boot, `/proc/self/stat` field
        // 22) and a random part: a pid alone repeats (every container's first
        // process is pid 1), and a stale link must never name a live engine.
        let start =
            super::proc_scan::read_stat(std::process::id() as i32).map_or(0, |s| s.start_time);
        loop {
            use std::hash::{BuildHasher, Hasher};
            let mut random = std::collections::hash_map::RandomState::new().build_hasher();
            random.write_u64(start);
            let name = format!("{}-{start}-{:016x}", std::process::id(), random.finish());
            let path = dir.join(&name);
            match crate::private_fs::private_open_options()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    crate::private_fs::make_private(&file)?;
                    file.lock()?;
                    let target = Path::new("../../owners").join(&name);
                    // Above the range children copy (`spawn.rs`).
                    let file = std::fs::File::from(crate::spawn::move_above_low_fds(file.into()));
                    return Ok(OwnerLock { file, path, target });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Marks `session_dir` (a new session's) as run by this engine.
    ///
    /// Errors: the link cannot be created.
    pub(crate) fn mark(&self, session_dir: &Path) -> std::io::Result<()> {
        std::os::unix::fs::symlink(&self.target, session_dir.join(OWNER_LINK))
    }
}

impl OwnerLock {
    /// Removes the owner file now, for an engine whose sessions have all ended
    /// (`Sessions::shutdown`): a host leaving through `std::process::exit`
    /// (`toolhost serve`) runs no destructor. A session started after this counts
    /// as ended for a sweep.
    pub(crate) fn release(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for OwnerLock {
    fn drop(&mut self) {
        self.release();
        let _ = self.file.unlock();
    }
}

/// Marks `session_dir` as no longer running (its `owner` link goes). Blocking;
/// errors are logged (the sweep then takes the session for a running one until
/// its engine ends).
pub(crate) fn unmark(session_dir: &Path) {
    let link = session_dir.join(OWNER_LINK);
    if let Err(e) = std::fs::remove_file(&link)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %link.display(), error = %e, "cannot unmark a finished session");
    }
}

/// Whether `dir` is a session run by a live engine: its `owner` link names an
/// owner file in `owners` (the sweeping state dir's) that someone holds locked
/// (module docs). Errors other than "no such link or file" are returned.
fn owned_by_live_engine(dir: &Path, owners: &Path) -> std::io::Result<bool> {
    let target = match std::fs::read_link(dir.join(OWNER_LINK)) {
        Ok(target) => target,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match target.file_name() {
        Some(name) => locked_elsewhere(&owners.join(name)),
        None => Ok(false),
    }
}

/// Whether someone holds a lock on the file at `path` (false when there is no
/// such file). The probe's own lock goes with its descriptor.
fn locked_elsewhere(path: &Path) -> std::io::Result<bool> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => Ok(false),
        Err(std::fs::TryLockError::WouldBlock) => Ok(true),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// What the sweep keeps; [`RetentionPolicy::default`] holds the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionPolicy {
    /// Finished sessions older than this (since their last output) are removed.
    /// Default: [`FINISHED_SESSION_MAX_AGE`] (24 h).
    pub finished_max_age: Duration,
    /// Most bytes the finished sessions keep on disk together. Default:
    /// [`FINISHED_SESSIONS_MAX_BYTES`] (1 GiB).
    pub finished_max_bytes: u64,
    /// Host sessions not running whose last event is older than this are removed.
    /// Default: [`HOST_SESSION_MAX_AGE`] (7 days).
    pub host_max_age: Duration,
    /// Most bytes the host sessions not running keep together. Default:
    /// [`HOST_SESSIONS_MAX_BYTES`] (256 MiB).
    pub host_max_bytes: u64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            finished_max_age: FINISHED_SESSION_MAX_AGE,
            finished_max_bytes: FINISHED_SESSIONS_MAX_BYTES,
            host_max_age: HOST_SESSION_MAX_AGE,
            host_max_bytes: HOST_SESSIONS_MAX_BYTES,
        }
    }
}

/// What one [`sweep_state_dir`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepReport {
    /// Finished sessions removed (ids), oldest first.
    pub sessions_removed: Vec<String>,
    /// Sessions skipped because they are running (their log is locked).
    pub sessions_running: usize,
    /// Finished sessions kept.
    pub sessions_kept: usize,
    /// Private temp dirs of finished sessions removed (their logs may stay).
    pub tmp_dirs_removed: usize,
    /// Host sessions removed (ids), oldest first.
    pub host_sessions_removed: Vec<String>,
    /// Host sessions skipped because they are running.
    pub host_sessions_running: usize,
    /// Bytes (allocated on disk) freed.
    pub bytes_freed: u64,
    /// What could not be removed, and why.
    pub errors: Vec<String>,
}

/// Removes from `state_dir` what `policy` does not keep, as of `now`: every finished
/// session's `tmp/` (sessions end with theirs removed; this catches those of a host
/// that crashed); finished sessions older than `finished_max_age`, then the
/// oldest ones while all together exceed `finished_max_bytes`; the same for host
/// sessions not running. Running sessions and host sessions (locked, see the module
/// doc) and entries younger than 60 s (`SWEEP_GRACE`) are kept. Blocking (file system
/// work): call it on a blocking thread. Never fails; problems are in
/// [`SweepReport::errors`].
pub fn sweep_state_dir(state_dir: &Path, policy: &RetentionPolicy, now: SystemTime) -> SweepReport {
    let mut report = SweepReport::default();
    let sessions = sweep_dir(
        &state_dir.join("sessions"),
        "output.log",
        policy.finished_max_age,
        policy.finished_max_bytes,
        now,
        true,
        &mut report,
    );
    report.sessions_removed = sessions.removed;
    report.sessions_running = sessions.running;
    report.sessions_kept = sessions.kept;
    let hosts = sweep_dir(
        &state_dir.join("hosts"),
        "events.jsonl",
        policy.host_max_age,
        policy.host_max_bytes,
        now,
        false,
        &mut report,
    );
    report.host_sessions_removed = hosts.removed;
    report.host_sessions_running = hosts.running;
    sweep_owners(&state_dir.join("owners"), now, &mut report);
    report
}

/// Tidies a finished session's directory (the one holding `output_path`): its
/// `owner` link goes at once ([`unmark`], one unlink), and its private temp dir (it
/// does not outlive its session) at once too when empty, else on the blocking pool
/// when called inside a tokio runtime. `done` runs once both are gone, so a host
/// about to exit can wait for it (`Sessions::shutdown`; a sweep removes a temp dir
/// left by a host that exited first).
pub(crate) fn session_ended(output_path: &Path, done: impl FnOnce() + Send + 'static) {
    let Some(dir) = output_path.parent() else {
        return done();
    };
    unmark(dir);
    let tmp = dir.join("tmp");
    // Most commands leave it empty: one rmdir here, no hop to the blocking pool.
    match std::fs::remove_dir(&tmp) {
        Ok(()) => return done(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return done(),
        Err(_) => {}
    }
    let remove = move || {
        if let Err(e) = std::fs::remove_dir_all(&tmp)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %tmp.display(), error = %e, "cannot remove a session's temp dir");
        }
        done();
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => drop(handle.spawn_blocking(remove)),
        Err(_) => remove(),
    }
}

/// Removes the owner files of engines that are gone (unlocked) and older than
/// [`SWEEP_GRACE`] (an engine locks its file right after creating it). Their
/// sessions' links then lead nowhere, which means ended, as before.
fn sweep_owners(dir: &Path, now: SystemTime, report: &mut SweepReport) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in read.flatten() {
        let path = entry.path();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|m| now.duration_since(m).unwrap_or_default() >= SWEEP_GRACE);
        if !old {
            continue;
        }
        if matches!(locked_elsewhere(&path), Ok(false))
            && let Err(e) = std::fs::remove_file(&path)
        {
            report
                .errors
                .push(format!("cannot remove {}: {e}", path.display()));
        }
    }
}

struct DirSweep {
    removed: Vec<String>,
    running: usize,
    kept: usize,
}

struct Entry {
    name: String,
    path: PathBuf,
    modified: SystemTime,
    bytes: u64,
    /// Held until the entry is removed or kept.
    _lock: Option<std::fs::File>,
}

/// Sweeps the entries (directories) of `root`, each in use while `lock_name` in it
/// is locked.
fn sweep_dir(
    root: &Path,
    lock_name: &str,
    max_age: Duration,
    max_bytes: u64,
    now: SystemTime,
    sessions: bool,
    report: &mut SweepReport,
) -> DirSweep {
    let mut out = DirSweep {
        removed: Vec::new(),
        running: 0,
        kept: 0,
    };
    // The state dir's `owners/`, by path (`root` is `<state>/sessions`).
    let owners = root.with_file_name("owners");
    let Ok(read) = std::fs::read_dir(root) else {
        return out;
    };
    let mut entries = Vec::new();
    for entry in read.flatten() {
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if sessions {
            match owned_by_live_engine(&path, &owners) {
                // A link left by a host that is gone (killed) means ended.
                Ok(false) => unmark(&path),
                Ok(true) => {
                    out.running += 1;
                    continue;
                }
                Err(e) => {
                    report
                        .errors
                        .push(format!("cannot check {}'s owner: {e}", path.display()));
                    continue;
                }
            }
        }
        let lock_path = path.join(lock_name);
        let lock = match std::fs::File::open(&lock_path) {
            Ok(file) => match file.try_lock() {
                Ok(()) => Some(file),
                Err(std::fs::TryLockError::WouldBlock) => {
                    out.running += 1;
                    continue;
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    report
                        .errors
                        .push(format!("cannot lock {}: {e}", lock_path.display()));
                    continue;
                }
            },
            Err(_) => None,
        };
        let modified = std::fs::metadata(&lock_path)
            .or_else(|_| std::fs::metadata(&path))
            .and_then(|m| m.modified())
            .unwrap_or(now);
        let young = now.duration_since(modified).unwrap_or_default() < SWEEP_GRACE;
        if sessions && !young {
            let tmp = path.join("tmp");
            if tmp.exists() {
                let bytes = allocated_bytes(&tmp);
                match std::fs::remove_dir_all(&tmp) {
                    Ok(()) => {
                        report.tmp_dirs_removed += 1;
                        report.bytes_freed += bytes;
                    }
                    Err(e) => report
                        .errors
                        .push(format!("cannot remove {}: {e}", tmp.display())),
                }
            }
        }
        entries.push(Entry {
            name,
            bytes: allocated_bytes(&path),
            path,
            modified,
            _lock: lock,
        });
    }
    // Oldest first.
    entries.sort_by(|a, b| a.modified.cmp(&b.modified).then(a.name.cmp(&b.name)));
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    for entry in entries {
        let age = now.duration_since(entry.modified).unwrap_or_default();
        let remove = age >= SWEEP_GRACE && (age > max_age || total > max_bytes);
        if !remove {
            out.kept += 1;
            continue;
        }
        match std::fs::remove_dir_all(&entry.path) {
            Ok(()) => {
                total = total.saturating_sub(entry.bytes);
                report.bytes_freed += entry.bytes;
                out.removed.push(entry.name);
            }
            Err(e) => {
                out.kept += 1;
                report
                    .errors
                    .push(format!("cannot remove {}: {e}", entry.path.display()));
            }
        }
    }
    out
}

/// Bytes allocated on disk under `path` (a sparse `output.log` counts only what it
/// holds), not following symlinks.
fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    let own = meta.blocks() * 512;
    if !meta.is_dir() {
        return own;
    }
    let children = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| allocated_bytes(&e.path()))
        .sum::<u64>();
    own + children
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two engines of one process (or of processes that reuse a pid) never get the
    /// same owner file, and each holds its own locked.
    #[test]
    fn owner_files_are_unique_and_locked() {
        let state = tempfile::tempdir().unwrap();
        let a = OwnerLock::acquire(state.path()).unwrap();
        let b = OwnerLock::acquire(state.path()).unwrap();
        assert_ne!(a.path, b.path);
        let name = a.path.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(
            name.starts_with(&format!("{}-", std::process::id())),
            "{name}"
        );
        let other = std::fs::File::open(&a.path).unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        let path = a.path.clone();
        drop(a);
        assert!(!path.exists(), "removed with its engine");
        drop(b);
    }
}
