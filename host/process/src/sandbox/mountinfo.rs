//! The host's mount table (`/proc/self/mountinfo`, proc(5)), read in `prepare`: which
//! mounts beneath a writable root were writable (so the read-only root of `mounts.rs`
//! gives back exactly those), and where else a protected path shows (its *aliases*: every
//! other mount of the same filesystem subtree, such as a bind mount of a parent).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One line of `mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    /// `major:minor` of the filesystem.
    pub(crate) dev: String,
    /// The directory of that filesystem shown at `mount_point` (field 4).
    pub(crate) root: PathBuf,
    /// Where it is mounted (field 5).
    pub(crate) mount_point: PathBuf,
    /// Mounted read-write (`rw` in the per-mount options, field 6).
    pub(crate) writable: bool,
}

/// Parses `mountinfo` text; lines it cannot read are skipped.
pub(crate) fn parse(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let (_id, _parent) = (f.next()?, f.next()?);
            let dev = f.next()?.to_owned();
            let root = unescape(f.next()?);
            let mount_point = unescape(f.next()?);
            let options = f.next()?;
            Some(Mount {
                dev,
                root,
                mount_point,
                writable: options.split(',').any(|o| o == "rw"),
            })
        })
        .collect()
}

/// The kernel escapes space, tab, newline and backslash as `\ooo` (`seq_file`'s
/// `mangle_path`).
fn unescape(field: &str) -> PathBuf {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsStr::from_bytes(&out))
}

/// The host's mounts now (empty when `/proc/self/mountinfo` cannot be read).
pub(crate) fn current() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse(&t))
        .unwrap_or_default()
}

/// The mount points strictly beneath `root` whose visible mount is writable: for each
/// mount point the last line wins (a later mount on the same point hides the earlier).
pub(crate) fn writable_beneath(mounts: &[Mount], root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    for m in mounts {
        if m.mount_point != root && m.mount_point.starts_with(root) {
            match out.iter_mut().find(|(p, _)| *p == m.mount_point) {
                Some(slot) => slot.1 = m.writable,
                None => out.push((m.mount_point.clone(), m.writable)),
            }
        }
    }
    out.into_iter()
        .filter(|(_, w)| *w)
        .map(|(p, _)| p)
        .collect()
}

/// Every other path at which `path` (canonical) shows through a mount: for the mount
/// `path` lies in (the longest mount point it starts with), the same filesystem (`dev`)
/// and the same directory of it, as seen through each other mount whose root contains
/// it. At most 16, nested aliases included once.
pub(crate) fn aliases(mounts: &[Mount], path: &Path) -> Vec<PathBuf> {
    let Some(home) = mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len())
    else {
        return Vec::new();
    };
    let Ok(rest) = path.strip_prefix(&home.mount_point) else {
        return Vec::new();
    };
    // The path within its filesystem.
    let inner = home.root.join(rest);
    let mut out = Vec::new();
    for m in mounts {
        if m.dev != home.dev || m.mount_point == home.mount_point {
            continue;
        }
        if let Ok(below) = inner.strip_prefix(&m.root) {
            let alias = m.mount_point.join(below);
            if alias != path && !out.contains(&alias) && out.len() < 16 {
                out.push(alias);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
30 22 0:30 / /tmp rw,nosuid,nodev shared:5 - tmpfs tmpfs rw
31 30 0:31 / /tmp/ws/ro ro,relatime shared:6 - tmpfs tmpfs ro
32 30 0:32 / /tmp/ws/rw rw,relatime shared:7 - tmpfs tmpfs rw
33 22 8:1 /srv /mnt/alias rw,relatime shared:1 - ext4 /dev/sda1 rw
34 22 0:30 /ws /tmp/ws\\040copy rw shared:5 - tmpfs tmpfs rw
";

    #[test]
    fn parses_and_unescapes() {
        let m = parse(SAMPLE);
        assert_eq!(m.len(), 7);
        assert_eq!(m[3].mount_point, PathBuf::from("/tmp/ws/ro"));
        assert!(!m[3].writable && m[4].writable);
        assert_eq!(m[6].mount_point, PathBuf::from("/tmp/ws copy"));
        assert_eq!(m[5].root, PathBuf::from("/srv"));
    }

    #[test]
    fn writable_submounts_of_a_root() {
        let m = parse(SAMPLE);
        assert_eq!(
            writable_beneath(&m, Path::new("/tmp/ws")),
            vec![PathBuf::from("/tmp/ws/rw")]
        );
        assert!(writable_beneath(&m, Path::new("/tmp/ws/rw")).is_empty());
    }

    #[test]
    fn aliases_through_binds() {
        let m = parse(SAMPLE);
        assert_eq!(
            aliases(&m, Path::new("/srv/state")),
            vec![PathBuf::from("/mnt/alias/state")]
        );
        assert_eq!(
            aliases(&m, Path::new("/tmp/ws/.git")),
            vec![PathBuf::from("/tmp/ws copy/.git")]
        );
        assert!(aliases(&m, Path::new("/etc")).is_empty());
    }
}
