//! Everything the host reads inside the workspace, read one way: opened non-blocking,
//! never following a final symlink, only regular files, bounded.
//!
//! Commands control the workspace. A path the host opens there with a plain blocking
//! `open(2)` can be a FIFO a command put in its place between a check and the open, and
//! then the open waits for a writer that never comes: on the one thread that starts every
//! command, that wedged every later start of every plugin. So [`small_file`] opens with
//! `O_NONBLOCK | O_NOFOLLOW | O_NOCTTY` (a FIFO opens at once, a symlink fails with
//! `ELOOP`, a terminal never becomes the host's), checks with `fstat` on the open
//! descriptor that it is a regular file, and reads at most `max` bytes. What the sandbox
//! reads of the workspace (the `.git` shape, git's config) goes through it, and the
//! session engine runs [`git_targets`] on the blocking pool with a deadline, never on the
//! spawner thread.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Most bytes of a one-line git link file (`gitdir: …`, `commondir`) read.
pub(crate) const LINK_FILE_MAX: u64 = 4 * 1024;
/// Most bytes of a git config file read.
pub(crate) const CONFIG_FILE_MAX: u64 = 64 * 1024;

/// Why [`small_file`] returned nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotRead {
    /// Not there, or not readable by the host.
    Missing,
    /// A FIFO, socket, device, directory or symlink: never read.
    NotRegular,
    /// Larger than the bound.
    TooLarge,
}

/// The whole content of the regular file at `path`, at most `max` bytes, read without
/// ever blocking on what the file is (module docs).
pub(crate) fn small_file(path: &Path, max: u64) -> Result<Vec<u8>, NotRead> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => NotRead::NotRegular,
            _ => NotRead::Missing,
        })?;
    let meta = file.metadata().map_err(|_| NotRead::Missing)?;
    if !meta.is_file() {
        return Err(NotRead::NotRegular);
    }
    if meta.len() > max {
        return Err(NotRead::TooLarge);
    }
    let mut out = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut out)
        .map_err(|_| NotRead::Missing)?;
    if out.len() as u64 > max {
        return Err(NotRead::TooLarge);
    }
    Ok(out)
}

/// What keeping the workspace's `.git` read-only protects, and what could not be read
/// ([`git_targets`]; [`SandboxPaths::git_targets`](super::SandboxPaths::git_targets)).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GitTargets {
    /// Existing canonical paths, none beneath another.
    pub paths: Vec<PathBuf>,
    /// Sentences for the sandbox's warnings (a config that is not a regular file, a hooks
    /// path that does not exist yet).
    pub notes: Vec<String>,
}

/// The workspace's git targets, whatever shape `.git` has (never an error: a shape it
/// cannot follow protects nothing):
///
/// - a directory: itself;
/// - a symlink: what it resolves to (a directory or a `.git` file, handled as such); a
///   dangling symlink or a loop: nothing;
/// - a `.git` file (worktrees, submodules: `gitdir: <dir>`): the file itself, the git dir
///   it names and, for a worktree, that dir's `commondir` (the main repository's git dir);
/// - from the repository's `config` (in the common dir): `core.hooksPath` (husky's
///   `.husky/_`) and `core.fsmonitor` when it names a path, relative to the workspace;
///   one that does not exist yet is represented by its deepest existing ancestor beneath
///   the workspace (which `prepare` then binds read-only from the top entry).
///
/// Paths beneath another one listed are left out (the outer bind covers them). Reads go
/// through [`small_file`].
pub fn git_targets(workspace: &Path) -> GitTargets {
    let mut out = GitTargets::default();
    let Ok(real) = workspace.join(".git").canonicalize() else {
        return out;
    };
    let mut found = vec![real.clone()];
    let mut common = real.clone();
    if real.is_file() {
        if let Some(gitdir) = linked_dir(&real, "gitdir:") {
            common = gitdir.clone();
            if let Some(c) = linked_dir(&gitdir.join("commondir"), "") {
                common = c.clone();
                found.push(c);
            }
            found.push(gitdir);
        } else {
            common = PathBuf::new();
        }
    }
    if !common.as_os_str().is_empty() {
        let config = common.join("config");
        match small_file(&config, CONFIG_FILE_MAX) {
            Ok(text) => {
                for (key, value) in core_paths(&String::from_utf8_lossy(&text)) {
                    let named = workspace.join(&value);
                    match named.canonicalize() {
                        Ok(p) => found.push(p),
                        Err(_) => match existing_ancestor(workspace, &named) {
                            Some(p) => {
                                out.notes.push(format!(
                                    "core.{key} {value} does not exist yet: {} is kept \
                                     read-only instead",
                                    p.display()
                                ));
                                found.push(p);
                            }
                            None => out.notes.push(format!(
                                "core.{key} {value} does not exist and cannot be protected"
                            )),
                        },
                    }
                }
            }
            Err(NotRead::Missing) => {}
            Err(why) => out.notes.push(format!(
                "{} is {}: not read",
                config.display(),
                match why {
                    NotRead::TooLarge => "over 64 KiB",
                    _ => "not a regular file",
                }
            )),
        }
    }
    for p in &found {
        if !found.iter().any(|o| o != p && p.starts_with(o)) && !out.paths.contains(p) {
            out.paths.push(p.clone());
        }
    }
    out
}

/// The deepest existing ancestor of `path` strictly beneath `workspace` (canonical).
fn existing_ancestor(workspace: &Path, path: &Path) -> Option<PathBuf> {
    let ws = workspace.canonicalize().ok()?;
    let normal = super::lexically_normal(path);
    let mut at = normal.parent();
    while let Some(p) = at {
        if let Ok(c) = p.canonicalize() {
            return (c != ws && c.starts_with(&ws)).then_some(c);
        }
        at = p.parent();
    }
    None
}

/// `core.hooksPath` and `core.fsmonitor` (when it is a path, not a boolean) from git
/// config text (git-config(1) syntax: sections, case-insensitive keys, quoted values,
/// `#`/`;` comments). `include.path` is not followed.
fn core_paths(text: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut in_core = false;
    for raw in text.lines() {
        let mut line = raw.trim();
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .split(|c: char| c == ']' || c.is_whitespace() || c == '"')
                .next()
                .unwrap_or("");
            in_core = name.eq_ignore_ascii_case("core") && !rest.contains('"');
            // `[core] hooksPath = x` on one line.
            line = rest.split_once(']').map(|(_, r)| r.trim()).unwrap_or("");
        }
        if !in_core || line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let which = if key.eq_ignore_ascii_case("hookspath") {
            "hooksPath"
        } else if key.eq_ignore_ascii_case("fsmonitor") {
            "fsmonitor"
        } else {
            continue;
        };
        let value = config_value(value);
        let boolean = ["true", "false", "yes", "no", "on", "off", "1", "0", ""]
            .iter()
            .any(|b| value.eq_ignore_ascii_case(b));
        if which == "fsmonitor" && boolean {
            continue;
        }
        if !value.is_empty() && !value.starts_with('~') {
            out.push((which, value));
        }
    }
    out
}

/// A git config value: quotes removed, an unquoted `#`/`;` starts a comment, `\"` and
/// `\\` unescaped.
fn config_value(raw: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(match n {
                        't' => '\t',
                        'n' => '\n',
                        other => other,
                    });
                }
            }
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim().to_owned()
}

/// The directory a one-line git link file names (`gitdir: ../x`, or a bare path for
/// `commondir`), relative to the file's own directory, if it exists.
fn linked_dir(file: &Path, prefix: &str) -> Option<PathBuf> {
    let text = small_file(file, LINK_FILE_MAX).ok()?;
    let text = String::from_utf8_lossy(&text);
    let named = text.lines().next()?.strip_prefix(prefix)?.trim();
    if named.is_empty() {
        return None;
    }
    let dir = file.parent()?.join(named).canonicalize().ok()?;
    dir.is_dir().then_some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn small_file_refuses_what_is_not_a_small_regular_file_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::write(d.join("big"), vec![b'x'; 1 << 20]).unwrap();
        std::fs::write(d.join("ok"), "gitdir: x\n").unwrap();
        std::os::unix::fs::symlink(d.join("ok"), d.join("link")).unwrap();
        let started = Instant::now();
        assert_eq!(small_file(&fifo, 4096), Err(NotRead::NotRegular));
        assert_eq!(small_file(&d.join("link"), 4096), Err(NotRead::NotRegular));
        assert_eq!(small_file(d, 4096), Err(NotRead::NotRegular));
        assert_eq!(small_file(&d.join("big"), 4096), Err(NotRead::TooLarge));
        assert_eq!(small_file(&d.join("none"), 4096), Err(NotRead::Missing));
        assert_eq!(small_file(&d.join("ok"), 4096).unwrap(), b"gitdir: x\n");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn core_paths_of_git_config() {
        let text = "[core]\n\trepositoryformatversion = 0\n\thooksPath = .husky/_\n\
                    [core \"x\"]\n\thookspath = nope\n[CORE]\n fsmonitor = true\n\
                    fsmonitor = \"tools/fs mon\" # comment\n[alias]\n hookspath = no\n";
        assert_eq!(
            core_paths(text),
            vec![
                ("hooksPath", ".husky/_".to_owned()),
                ("fsmonitor", "tools/fs mon".to_owned())
            ]
        );
    }

    #[test]
    fn hooks_path_is_a_target_and_a_fifo_config_is_noted() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join(".husky/_")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\nhooksPath = .husky/_\n").unwrap();
        let t = git_targets(&ws);
        assert_eq!(t.paths, vec![ws.join(".git"), ws.join(".husky/_")]);
        // Not there yet: its existing parent beneath the workspace stands in.
        std::fs::write(ws.join(".git/config"), "[core]\nhooksPath = .husky/x/y\n").unwrap();
        let t = git_targets(&ws);
        assert_eq!(t.paths, vec![ws.join(".git"), ws.join(".husky")]);
        assert!(t.notes[0].contains("does not exist yet"), "{:?}", t.notes);
        std::fs::remove_file(ws.join(".git/config")).unwrap();
        let c = std::ffi::CString::new(ws.join(".git/config").to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = git_targets(&ws);
        assert_eq!(t.paths, vec![ws.join(".git")]);
        assert!(t.notes[0].contains("not a regular file"), "{:?}", t.notes);
    }
}
