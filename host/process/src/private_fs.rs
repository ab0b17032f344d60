//! What the host creates in its state dir is private to the host user, whatever
//! the umask it was started with: directories mode `0700` ([`PRIVATE_DIR_MODE`]),
//! files `0600` ([`PRIVATE_FILE_MODE`]). Every directory and file the host makes there
//! (output logs, temp dirs, event logs, owner files, the compiled cache, the
//! control socket, `attach`'s cursor) is made through this module, which sets
//! the mode exactly after creating (a umask can only take bits away, and one
//! like `0277` would take the owner's own write bit).
//!
//! A state dir that already exists with looser modes is tightened where the
//! host user owns it ([`tighten_private_dir`]), with a warning naming what was changed;
//! docs/operations.md ("The state dir") is the operator's side of this.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every directory the host creates in its state dir: `rwx------`.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// The mode of every file the host creates in its state dir: `rw-------`.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates one directory, mode exactly [`PRIVATE_DIR_MODE`].
///
/// Errors: mkdir(2)'s (`AlreadyExists` included, so a caller that needs a fresh
/// directory gets one) and chmod(2)'s.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .mode(PRIVATE_DIR_MODE)
        .create(path)?;
    std::fs::set_permissions(path, Permissions::from_mode(PRIVATE_DIR_MODE))
}

/// Creates `path` and every missing parent, each mode exactly [`PRIVATE_DIR_MODE`];
/// directories that already exist are left as they are (see [`tighten_private_dir`]).
///
/// Errors: as [`create_private_dir`] (but not `AlreadyExists`).
pub fn create_private_dir_all(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_private_dir_all(parent)?;
    }
    match create_private_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        other => other,
    }
}

/// [`OpenOptions`] that create a file mode [`PRIVATE_FILE_MODE`] and never follow a
/// symbolic link in the last component; the caller adds read, write, append,
/// create or truncate. Pair with [`make_private`] on the opened file when it may
/// have been created, to undo the umask.
pub fn private_open_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .mode(PRIVATE_FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW);
    options
}

/// Sets an open file's mode to exactly [`PRIVATE_FILE_MODE`].
///
/// Errors: fchmod(2)'s.
pub fn make_private(file: &File) -> io::Result<()> {
    file.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))
}

/// Creates (or truncates) `path` mode exactly [`PRIVATE_FILE_MODE`], not through a
/// symbolic link, and returns it open for writing.
///
/// Errors: open(2)'s (`ELOOP` for a link) and fchmod(2)'s.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    let file = private_open_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    make_private(&file)?;
    Ok(file)
}

/// Writes `bytes` to `path` as [`create_private_file`] creates it.
///
/// Errors: as [`create_private_file`], and write(2)'s.
pub fn write_private_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    create_private_file(path)?.write_all(bytes)
}

/// What the host keeps in a state dir, by name: its directories
/// (docs/operations.md#the-state-dir) and the sessions and host sessions
/// in them (`bg_…`, `hs_…`).
fn holds_host_state(dir: &Path) -> bool {
    const NAMES: [&str; 6] = [
        "sessions", "hosts", "owners", "compiled", "plugins", "sandbox",
    ];
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            NAMES.contains(&name.as_ref()) || name.starts_with("bg_") || name.starts_with("hs_")
        })
}

/// Makes an existing directory of the state dir private: when it is the host
/// user's and lets its group or others in, its mode becomes
/// [`PRIVATE_DIR_MODE`]. Returns the mode it had when that was changed. When
/// it already held host state (others may have read it), a warning says what
/// the mode was; a directory without any (made by `mktemp -d`, say) is
/// tightened quietly. A directory of another user is left as it is, with a
/// warning that others may read what the host keeps there.
///
/// Errors: stat(2)'s and chmod(2)'s.
pub fn tighten_private_dir(path: &Path) -> io::Result<Option<u32>> {
    let meta = std::fs::metadata(path)?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(None);
    }
    if meta.uid() != nix::unistd::Uid::current().as_raw() {
        tracing::warn!(
            "{} is owned by uid {}, not by the host's user, and has mode {mode:04o}: other \
             users may read what the host keeps there; give the host a state dir of its own",
            path.display(),
            meta.uid()
        );
        return Ok(None);
    }
    std::fs::set_permissions(path, Permissions::from_mode(PRIVATE_DIR_MODE))?;
    if holds_host_state(path) {
        tracing::warn!(
            "{} had mode {mode:04o}, so other users could read what it holds; made \
             {PRIVATE_DIR_MODE:04o} (the host's state is private to its user)",
            path.display()
        );
    } else {
        tracing::debug!(
            "{} had mode {mode:04o}; made {PRIVATE_DIR_MODE:04o}",
            path.display()
        );
    }
    Ok(Some(mode))
}

/// Creates a state dir (or a directory of one) as [`create_private_dir_all`]
/// does, or tightens the one already there ([`tighten_private_dir`]).
///
/// Errors: as those two.
pub fn prepare_private_dir(path: &Path) -> io::Result<()> {
    create_private_dir_all(path)?;
    tighten_private_dir(path).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn creates_exact_modes_and_tightens() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b/c");
        create_private_dir_all(&deep).unwrap();
        for p in ["a", "a/b", "a/b/c"] {
            assert_eq!(mode(&root.path().join(p)), 0o700, "{p}");
        }
        let f = deep.join("f");
        write_private_file(&f, b"x").unwrap();
        assert_eq!(mode(&f), 0o600);
        std::os::unix::fs::symlink(&f, deep.join("l")).unwrap();
        assert!(create_private_file(&deep.join("l")).is_err());
        std::fs::set_permissions(root.path().join("a"), Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            tighten_private_dir(&root.path().join("a")).unwrap(),
            Some(0o755)
        );
        assert_eq!(mode(&root.path().join("a")), 0o700);
        assert_eq!(tighten_private_dir(&root.path().join("a")).unwrap(), None);
    }
}
