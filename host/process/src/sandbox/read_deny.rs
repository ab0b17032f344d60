//! Paths no confined command may read (`deny_read`): the entries, where each came from,
//! the built-in default list, and how `prepare` turns them into masks.
//!
//! Landlock rules only *allow*, and hierarchically (the kernel's
//! Documentation/userspace-api/landlock.rst): with read on `/`, nothing beneath it can be
//! taken away. So a denied path is *masked* in the command's private mount namespace
//! (`mounts.rs`): a denied directory gets an empty `tmpfs` of mode `0000` on top, read-only;
//! a denied file gets an empty file of mode `0000` bound on top, read-only
//! ([`super::SandboxPaths::mask_file`]). Every spelling that goes through the path (symlinks,
//! `..`, `/proc/self/root/...`) reaches the mask and gets `EACCES` ("Permission denied");
//! the mask is a mount point, so it cannot be renamed or removed (`EBUSY`), its mode cannot
//! be changed (`EROFS`), and Landlock keeps it from being unmounted. When the workspace or
//! the session's temp dir lies beneath a denied directory (`deny_read = ["~"]` with the
//! workspace in `~/src/x`), that directory's tmpfs has mode `0111` instead (search only:
//! the way down can be walked, nothing listed or read) and the two are bound back in.
//!
//! What the kernel mechanism cannot do, reported rather than hidden
//! (docs/sandbox.md#denied-reads): a hard link made earlier elsewhere stays readable
//! (a warning for each denied file with more than one link); a mount that shows the same
//! data at another path, or a copy of it, is not covered; without a mount namespace nothing
//! is masked (a warning); without Landlock an unconfined process's `/proc/<pid>/root` shows
//! the host's view (a warning).

use std::path::{Component, Path, PathBuf};

use super::SandboxError;

/// One path confined commands may not read, with where the rule came from.
///
/// `path` is absolute (a `~/` entry already expanded); [`SandboxPolicy::prepare`](super::SandboxPolicy::prepare)
/// resolves it (symlinks followed, by `lstat`/`readlink` only, nothing is opened) and
/// masks it if it exists.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct DeniedRead {
    /// The absolute path as written (after `~/` expansion).
    pub path: PathBuf,
    /// Where the rule came from, as hints and reports name it: `built-in default`,
    /// `policy line 3`, `plugin X's manifest`, `host: token file`.
    pub origin: String,
}

impl DeniedRead {
    /// Parses one `deny_read` entry: an absolute path, or one starting `~/` (the host
    /// user's `home`). No globs.
    ///
    /// Errors ([`SandboxError::DenyRead`]): an empty entry, a NUL byte, a relative path,
    /// a `..` component, or `~/` without a home.
    pub fn parse(
        entry: &str,
        home: Option<&Path>,
        origin: impl Into<String>,
    ) -> Result<DeniedRead, SandboxError> {
        let bad = |why: &str| SandboxError::DenyRead {
            entry: entry.to_owned(),
            why: why.to_owned(),
        };
        if entry.is_empty() {
            return Err(bad("an empty path"));
        }
        if entry.contains('\0') {
            return Err(bad("a NUL byte"));
        }
        let path = if entry == "~" {
            home.ok_or_else(|| bad("`~` but the host has no HOME"))?
                .to_path_buf()
        } else if let Some(rest) = entry.strip_prefix("~/") {
            home.ok_or_else(|| bad("`~/` but the host has no HOME"))?
                .join(rest)
        } else {
            PathBuf::from(entry)
        };
        if !path.is_absolute() {
            return Err(bad(
                "a relative path (write an absolute path or one starting `~/`)",
            ));
        }
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(bad("a `..` component"));
        }
        Ok(DeniedRead {
            path,
            origin: origin.into(),
        })
    }
}

/// The origin label of [`default_read_denied`]'s entries.
pub const DEFAULT_ORIGIN: &str = "built-in default";

/// Entries beneath the host user's home that hold credentials or keys, denied by default
/// (docs/sandbox.md#denied-reads lists them). After the lists of Claude Code's and
/// Codex's sandboxes and the usual credential files of the tools agents run.
pub const DEFAULT_HOME_DENIED: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".config/gh",
    ".config/hub",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
];

/// System paths denied by default. The first three matter for a host running as root:
/// uid 0 without capabilities still passes the owner check on root-owned `0600`/`0640`
/// files. `/proc/keys` and `/proc/key-users` list the kernel keys the host user may view
/// (ids, descriptions, owners) and their counts: the keyring calls themselves are refused
/// by seccomp (`seccomp.rs`), these are what is left of the keyrings to read (Docker's
/// default masks `/proc/keys` too).
pub const DEFAULT_SYSTEM_DENIED: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/root/.ssh",
    "/proc/keys",
    "/proc/key-users",
];

/// The built-in default list for a host user whose home is `home` (`None`: the system
/// entries only): [`DEFAULT_HOME_DENIED`] beneath it, [`DEFAULT_SYSTEM_DENIED`], and every
/// `/etc/ssh/ssh_host_*_key` (the one pattern, expanded now from a listing of `/etc/ssh`),
/// each with origin [`DEFAULT_ORIGIN`]. Paths that do not exist are listed too; `prepare`
/// masks only those that exist when a command starts.
pub fn default_read_denied(home: Option<&Path>) -> Vec<DeniedRead> {
    let entry = |path: PathBuf| DeniedRead {
        path,
        origin: DEFAULT_ORIGIN.to_owned(),
    };
    let mut out: Vec<DeniedRead> = home
        .into_iter()
        .flat_map(|h| DEFAULT_HOME_DENIED.iter().map(move |rel| h.join(rel)))
        .map(entry)
        .collect();
    out.extend(
        DEFAULT_SYSTEM_DENIED
            .iter()
            .map(|p| entry(PathBuf::from(p))),
    );
    if let Ok(dir) = std::fs::read_dir("/etc/ssh") {
        let mut keys: Vec<PathBuf> = dir
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("ssh_host_") && name.ends_with("_key")
            })
            .map(|e| e.path())
            .collect();
        keys.sort();
        out.extend(keys.into_iter().map(entry));
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|e| seen.insert(e.path.clone()));
    out
}

/// A denied path as `prepare` found it: canonical, existing, with its kind.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// Canonical path.
    pub(crate) path: PathBuf,
    /// A directory (masked with a tmpfs) rather than anything else (masked with a file).
    pub(crate) dir: bool,
    /// The entry's origin.
    pub(crate) origin: String,
}

/// Resolves `entries` for a start: canonical paths of those that exist, duplicates and
/// paths beneath another denied directory dropped (the outer mask covers them). Pushes a
/// warning for a missing entry beneath a writable root (a command could create it there
/// and read what it writes, which is harmless, but then the rule protects nothing) and for
/// a denied file with more than one hard link.
pub(crate) fn resolve(
    entries: &[DeniedRead],
    writable_roots: &[PathBuf],
    warnings: &mut Vec<String>,
) -> Vec<Resolved> {
    use std::os::unix::fs::MetadataExt;
    let mut found: Vec<Resolved> = Vec::new();
    for e in entries {
        let Ok(path) = e.path.canonicalize() else {
            if writable_roots.iter().any(|r| e.path.starts_with(r)) {
                warnings.push(format!(
                    "deny_read {} ({}) does not exist beneath a writable root: a command \
                     could create it",
                    e.path.display(),
                    e.origin
                ));
            }
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        // `/dev/null` in place of a denied file is a mask already (podman and Docker
        // bind it over `/proc/keys`): nothing is left to hide, and a mask of our own
        // cannot be bound over it (the start fails with ENOTDIR).
        if std::os::unix::fs::FileTypeExt::is_char_device(&meta.file_type())
            && std::fs::metadata("/dev/null").is_ok_and(|null| null.rdev() == meta.rdev())
        {
            continue;
        }
        if !meta.is_dir() && meta.nlink() > 1 {
            warnings.push(format!(
                "deny_read {} has {} hard links: a link elsewhere stays readable",
                path.display(),
                meta.nlink()
            ));
        }
        if found.iter().any(|f| f.path == path) {
            continue;
        }
        found.push(Resolved {
            path,
            dir: meta.is_dir(),
            origin: e.origin.clone(),
        });
    }
    let all: Vec<PathBuf> = found
        .iter()
        .filter(|f| f.dir)
        .map(|f| f.path.clone())
        .collect();
    found.retain(|f| !all.iter().any(|d| *d != f.path && f.path.starts_with(d)));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let home = Some(Path::new("/home/u"));
        let ok = |e: &str| DeniedRead::parse(e, home, "t").map(|d| d.path);
        assert_eq!(ok("~/.ssh").unwrap(), PathBuf::from("/home/u/.ssh"));
        assert_eq!(ok("~").unwrap(), PathBuf::from("/home/u"));
        assert_eq!(ok("/etc/shadow").unwrap(), PathBuf::from("/etc/shadow"));
        for bad in ["", "rel/x", "./x", "~user/x", "/a/../b", "/a\0b"] {
            let err = DeniedRead::parse(bad, home, "t").unwrap_err().to_string();
            assert!(err.contains("deny_read"), "{bad:?}: {err}");
        }
        assert!(DeniedRead::parse("~/.ssh", None, "t").is_err());
    }

    #[test]
    fn defaults_name_the_home_and_system_entries() {
        let d = default_read_denied(Some(Path::new("/home/u")));
        let paths: Vec<_> = d.iter().map(|e| e.path.clone()).collect();
        assert!(paths.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(paths.contains(&PathBuf::from("/home/u/.aws")));
        assert!(paths.contains(&PathBuf::from("/etc/shadow")));
        assert!(paths.contains(&PathBuf::from("/proc/keys")));
        assert!(d.iter().all(|e| e.origin == DEFAULT_ORIGIN));
        assert!(
            default_read_denied(None)
                .iter()
                .all(|e| !e.path.starts_with("/home/u"))
        );
    }

    #[test]
    fn resolve_drops_missing_and_nested() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "x").unwrap();
        std::fs::write(root.join("g"), "x").unwrap();
        std::fs::hard_link(root.join("g"), root.join("g2")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("link")).unwrap();
        let e = |p: &str| DeniedRead {
            path: root.join(p),
            origin: "t".into(),
        };
        let mut warnings = Vec::new();
        let r = resolve(
            &[e("a/b/f"), e("link"), e("missing"), e("g"), e("a")],
            std::slice::from_ref(&root),
            &mut warnings,
        );
        let paths: Vec<_> = r.iter().map(|r| r.path.clone()).collect();
        assert_eq!(paths, vec![root.join("a"), root.join("g")]);
        assert!(r[0].dir && !r[1].dir);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("does not exist"), "{warnings:?}");
        assert!(warnings[1].contains("2 hard links"), "{warnings:?}");
    }
}
