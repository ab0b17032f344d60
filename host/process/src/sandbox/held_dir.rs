//! Directories granted by handle, not by path: a plugin's WASI preopens
//! (ARCHITECTURE.md, invariant "A preopen is the directory granted at load, never
//! what its path names later").
//!
//! A path names whatever sits there *now*. A preopen re-opened by path on every call
//! would follow a directory that a plugin, or a command it started in the workspace,
//! replaced by a symlink (`data -> /`), and hand the guest the host's root. So the
//! directory is opened exactly once, when the manifest is validated (one `open(2)`
//! with `O_PATH | O_DIRECTORY`: what was checked is what is granted), and every call
//! is given that very directory again through `/proc/self/fd/N`, which names the open
//! file, never a path. Before each call [`HeldDir::verify`] also checks that the
//! granted path still leads to that directory (same device and inode, not a symlink),
//! so a swap is refused with a clear error rather than silently ignored.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// A directory opened once (`O_PATH | O_DIRECTORY | O_CLOEXEC`) and held for the
/// life of the value; clones share the one descriptor.
///
/// Equality is identity: two values are equal when they hold the same directory
/// (device and inode).
#[derive(Clone)]
pub struct HeldDir {
    fd: Arc<OwnedFd>,
    /// The real path read back from `/proc/self/fd` right after opening.
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// How a [`HeldDir`]'s path no longer leads to the directory that was opened.
/// `Display` gives the reason as a clause, e.g. `it was replaced by a symlink`.
#[derive(Debug, thiserror::Error)]
pub enum DirReplaced {
    /// Nothing can be found at the path any more (removed or renamed).
    #[error("it no longer exists ({0})")]
    Missing(std::io::Error),
    /// The path itself is now a symbolic link.
    #[error("it was replaced by a symlink")]
    Symlink,
    /// The path is now something other than a directory.
    #[error("it is no longer a directory")]
    NotDirectory,
    /// The path leads to another directory (`real`: where it resolves now, e.g.
    /// through a parent replaced by a symlink).
    #[error("it now leads to another directory ({})", real.display())]
    OtherDirectory {
        /// Where the path resolves now, symlinks included (or the path itself when it
        /// cannot be resolved).
        real: PathBuf,
    },
}

impl HeldDir {
    /// Opens the directory at `path` (symlinks in `path` are followed, once, here).
    ///
    /// Errors: the `open(2)` error (`ENOENT`, `ENOTDIR` for a non-directory, `EACCES`,
    /// ...), or the `fstat`/`readlink` error reading back what was opened.
    pub fn open(path: &Path) -> std::io::Result<HeldDir> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        let st = nix::sys::stat::fstat(&fd).map_err(std::io::Error::from)?;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        Ok(HeldDir {
            fd: Arc::new(fd),
            path: real,
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }

    /// The directory's real path when it was opened (absolute, symlinks resolved).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path that opens the held directory itself, whatever now sits at
    /// [`path`](HeldDir::path): `/proc/self/fd/N` (valid in this process only, while
    /// this value or a clone lives). Needs `/proc`.
    pub fn reopen_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// Whether `other` is this directory or lies beneath it. Two tests, either
    /// suffices: `other`'s real path starts with this one's, or walking up from
    /// `other`'s held directory (`..` from the descriptor, one level at a time, to the
    /// root) meets this directory's device and inode. The walk follows no path, so it
    /// sees through a symlinked or bind-mounted spelling of this directory and through
    /// parents renamed since either was opened. (A bind mount that shows a directory
    /// *beneath* this one at a second place outside it is not seen: `..` there leads
    /// to the mount point's parent.)
    ///
    /// Errors: an `openat`/`fstat` of a parent failed (the caller should refuse).
    pub fn contains(&self, other: &HeldDir) -> std::io::Result<bool> {
        if other.path.starts_with(&self.path) {
            return Ok(true);
        }
        /// Deeper than `PATH_MAX / 2` levels cannot be named; stop there.
        const MAX_DEPTH: usize = 2048;
        let mut cur: OwnedFd = nix::fcntl::openat(
            &*other.fd,
            ".",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        let mut id = (other.dev, other.ino);
        for _ in 0..MAX_DEPTH {
            if id == (self.dev, self.ino) {
                return Ok(true);
            }
            let parent = nix::fcntl::openat(
                &cur,
                "..",
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(std::io::Error::from)?;
            let st = nix::sys::stat::fstat(&parent).map_err(std::io::Error::from)?;
            if (st.st_dev, st.st_ino) == id {
                // `..` of the root is the root.
                return Ok(false);
            }
            id = (st.st_dev, st.st_ino);
            cur = parent;
        }
        Ok(false)
    }

    /// Checks that [`path`](HeldDir::path) still leads to the held directory: a
    /// directory, not a symlink, with the same device and inode.
    ///
    /// Errors: [`DirReplaced`] saying what is there instead.
    pub fn verify(&self) -> Result<(), DirReplaced> {
        let meta = std::fs::symlink_metadata(&self.path).map_err(DirReplaced::Missing)?;
        if meta.file_type().is_symlink() {
            return Err(DirReplaced::Symlink);
        }
        if !meta.is_dir() {
            return Err(DirReplaced::NotDirectory);
        }
        if (meta.dev(), meta.ino()) != (self.dev, self.ino) {
            let real = self
                .path
                .canonicalize()
                .unwrap_or_else(|_| self.path.clone());
            return Err(DirReplaced::OtherDirectory { real });
        }
        Ok(())
    }
}

impl PartialEq for HeldDir {
    fn eq(&self, other: &Self) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

impl Eq for HeldDir {}

impl std::fmt::Debug for HeldDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldDir")
            .field("path", &self.path)
            .field("fd", &self.fd.as_raw_fd())
            .field("dev", &self.dev)
            .field("ino", &self.ino)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swapped_directory_is_detected_and_the_handle_keeps_the_original() {
        let root = tempfile::tempdir().unwrap();
        let granted = root.path().join("granted");
        std::fs::create_dir(&granted).unwrap();
        std::fs::write(granted.join("f"), "inside").unwrap();
        let held = HeldDir::open(&granted).unwrap();
        assert_eq!(held.path(), granted.canonicalize().unwrap());
        held.verify().unwrap();

        std::fs::rename(&granted, root.path().join("old")).unwrap();
        std::os::unix::fs::symlink("/", &granted).unwrap();
        assert!(matches!(held.verify(), Err(DirReplaced::Symlink)));
        // The held directory is still the granted one.
        assert_eq!(
            std::fs::read_to_string(held.reopen_path().join("f")).unwrap(),
            "inside"
        );

        std::fs::remove_file(&granted).unwrap();
        std::fs::create_dir(&granted).unwrap();
        let e = held.verify().unwrap_err();
        assert!(matches!(e, DirReplaced::OtherDirectory { .. }), "{e}");
        std::fs::remove_dir(&granted).unwrap();
        assert!(matches!(held.verify(), Err(DirReplaced::Missing(_))));
        assert!(HeldDir::open(&root.path().join("old/f")).is_err());
    }

    #[test]
    fn contains_sees_nesting_by_path_and_by_walking_up_after_a_rename() {
        let root = tempfile::tempdir().unwrap();
        let outer = root.path().join("ws");
        let inner = outer.join("a/st");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::create_dir(root.path().join("beside")).unwrap();
        let o = HeldDir::open(&outer).unwrap();
        let i = HeldDir::open(&inner).unwrap();
        let beside = HeldDir::open(&root.path().join("beside")).unwrap();
        assert!(o.contains(&i).unwrap());
        assert!(o.contains(&o).unwrap());
        assert!(!i.contains(&o).unwrap());
        assert!(!beside.contains(&i).unwrap() && !i.contains(&beside).unwrap());
        // Renamed parents: the paths read at open no longer nest, the walk still does.
        std::fs::rename(&outer, root.path().join("moved")).unwrap();
        let o2 = HeldDir::open(&root.path().join("moved")).unwrap();
        assert!(!i.path().starts_with(o2.path()));
        assert!(o2.contains(&i).unwrap());
    }
}
