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
/// - from git's config ([`host_config_files`]: the system and global files, the repository's
///   `config` and `config.worktree`, and every file they include): each path git runs
///   or reads hooks from (`core.hooksPath`, husky's `.husky/_`; `core.fsmonitor` when it
///   names a path), each program a value names by a path ([`COMMAND_KEYS`]), and each
///   included file, relative to the workspace (an included file: to the file that
///   includes it). One that does not exist yet is represented by its deepest existing
///   ancestor beneath the workspace (which `prepare` then binds read-only from the top
///   entry).
///
/// Paths beneath another one listed are left out (the outer bind covers them). Reads go
/// through [`small_file`]: at most [`MAX_CONFIG_FILES`] config files, includes at most
/// [`MAX_INCLUDE_DEPTH`] deep.
pub fn git_targets(workspace: &Path) -> GitTargets {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    git_targets_with(workspace, &host_config_files(home.as_deref()), home)
}

/// [`git_targets`] with the system and global config files given (`host_configs`).
fn git_targets_with(
    workspace: &Path,
    host_configs: &[PathBuf],
    home: Option<PathBuf>,
) -> GitTargets {
    let mut out = GitTargets::default();
    let Ok(real) = workspace.join(".git").canonicalize() else {
        return out;
    };
    let mut found = vec![real.clone()];
    let mut common = Some(real.clone());
    let mut worktree_dir = None;
    if real.is_file() {
        if let Some(gitdir) = linked_dir(&real, "gitdir:") {
            common = Some(gitdir.clone());
            if let Some(c) = linked_dir(&gitdir.join("commondir"), "") {
                common = Some(c.clone());
                found.push(c);
            }
            worktree_dir = Some(gitdir.clone());
            found.push(gitdir);
        } else {
            common = None;
        }
    }
    if let Some(common) = common {
        let mut reader = ConfigReader {
            workspace,
            home,
            read: 0,
            found: &mut found,
            notes: &mut out.notes,
        };
        let mut files = host_configs.to_vec();
        files.push(common.join("config"));
        files.push(common.join("config.worktree"));
        files.extend(worktree_dir.map(|w| w.join("config.worktree")));
        for file in files {
            reader.read(&file, 0);
        }
    }
    for p in &found {
        if !found.iter().any(|o| o != p && p.starts_with(o)) && !out.paths.contains(p) {
            out.paths.push(p.clone());
        }
    }
    out
}

/// Most git config files [`git_targets`] reads, includes counted.
pub(crate) const MAX_CONFIG_FILES: usize = 16;
/// Deepest chain of `include.path`s followed (git's own limit is 10).
pub(crate) const MAX_INCLUDE_DEPTH: usize = 10;

/// The system and global config files git reads (git-config(1), FILES): `/etc/gitconfig`
/// (and `/usr/local/etc/gitconfig`, of a git installed there), `$XDG_CONFIG_HOME/git/config`
/// or `~/.config/git/config`, and `~/.gitconfig`. [`git_targets`] reads them all, and the
/// repository's `config` and `config.worktree` (in the common dir, and a linked
/// worktree's own), whichever git would pick: a value in any of them that git could act
/// on is protected.
fn host_config_files(home: Option<&Path>) -> Vec<PathBuf> {
    let mut files = vec![
        PathBuf::from("/etc/gitconfig"),
        PathBuf::from("/usr/local/etc/gitconfig"),
    ];
    match std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        Some(xdg) => files.push(PathBuf::from(xdg).join("git/config")),
        None => files.extend(home.map(|h| h.join(".config/git/config"))),
    }
    files.extend(home.map(|h| h.join(".gitconfig")));
    files
}

/// Config keys whose value git runs as a shell command (git-config(1)); a first word
/// with a `/` in it names a program by path, which is then protected like the hooks.
/// `(section, key)`, lower case; `*` matches any key of the section (and any
/// subsection: `filter.<driver>.clean`).
pub(crate) const COMMAND_KEYS: &[(&str, &str)] = &[
    ("core", "sshcommand"),
    ("core", "editor"),
    ("core", "pager"),
    ("core", "askpass"),
    ("sequence", "editor"),
    ("diff", "external"),
    ("diff", "command"),
    ("diff", "textconv"),
    ("filter", "clean"),
    ("filter", "smudge"),
    ("filter", "process"),
    ("merge", "driver"),
    ("credential", "helper"),
    ("gpg", "program"),
    ("interactive", "difffilter"),
    ("pager", "*"),
    ("alias", "*"),
];

/// Reads git config files for [`git_targets`], following includes, within the bounds.
struct ConfigReader<'a> {
    workspace: &'a Path,
    home: Option<PathBuf>,
    /// Files read so far (at most [`MAX_CONFIG_FILES`]).
    read: usize,
    found: &'a mut Vec<PathBuf>,
    notes: &'a mut Vec<String>,
}

impl ConfigReader<'_> {
    /// Reads `file` (missing: nothing; a symlink is followed, by path, before the open),
    /// notes what it cannot read, and protects the file and what it names; its includes
    /// are read `depth + 1` deep.
    fn read(&mut self, file: &Path, depth: usize) {
        let Ok(file) = file.canonicalize() else {
            return;
        };
        let file = file.as_path();
        let text = match small_file(file, CONFIG_FILE_MAX) {
            Ok(text) => text,
            Err(NotRead::Missing) => return,
            Err(why) => {
                self.notes.push(format!(
                    "git config {} is {}: ignored, so nothing it names is protected",
                    file.display(),
                    match why {
                        NotRead::TooLarge => "over 64 KiB",
                        _ => "not a regular file (a FIFO, socket, device or symlink)",
                    }
                ));
                return;
            }
        };
        self.read += 1;
        // A config file in the workspace (a global one when the workspace is the home
        // directory, an included one) is as much git's config as `.git/config`.
        self.keep(file.to_path_buf());
        let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        for entry in config_entries(&String::from_utf8_lossy(&text)) {
            let section = entry.section.as_str();
            let key = entry.key.as_str();
            let value = entry.value.as_str();
            let shown = format!("{}.{}", entry.section, entry.key);
            match (section, entry.subsection.is_some(), key) {
                ("include", false, "path") | ("includeif", true, "path") => {
                    let Some(path) = self.expand(value, &base) else {
                        continue;
                    };
                    self.protect(&shown, value, &path);
                    if depth + 1 >= MAX_INCLUDE_DEPTH || self.read >= MAX_CONFIG_FILES {
                        self.notes.push(format!(
                            "git config {} includes {value}: not read (more than {} files \
                             or {} levels)",
                            file.display(),
                            MAX_CONFIG_FILES,
                            MAX_INCLUDE_DEPTH
                        ));
                        continue;
                    }
                    self.read(&path, depth + 1);
                }
                ("core", false, "hookspath") => {
                    if let Some(path) = self.expand(value, self.workspace) {
                        self.protect("core.hooksPath", value, &path);
                    }
                }
                ("core", false, "fsmonitor") if !is_boolean(value) => {
                    if let Some(path) = self.expand(value, self.workspace) {
                        self.protect("core.fsmonitor", value, &path);
                    }
                }
                _ => {
                    let runs = COMMAND_KEYS
                        .iter()
                        .any(|&(s, k)| s == section && (k == "*" || k == key));
                    let command = value.strip_prefix('!').unwrap_or(value);
                    if !runs || (section == "alias" && !value.starts_with('!')) {
                        continue;
                    }
                    let Some(program) = first_word(command).filter(|w| w.contains('/')) else {
                        continue;
                    };
                    if let Some(path) = self.expand(&program, self.workspace) {
                        self.protect(&shown, &program, &path);
                    }
                }
            }
        }
    }

    /// Keeps `path` (canonical) if it lies in the workspace: anything else is outside the
    /// writable roots, read-only already.
    fn keep(&mut self, path: PathBuf) {
        if path == self.workspace {
            self.notes.push(format!(
                "git's config names the workspace {} itself, which stays writable: what \
                 git runs from there is not protected",
                path.display()
            ));
        } else if path.starts_with(self.workspace) {
            self.found.push(path);
        }
    }

    /// `value` as a path: `~/` is the host user's home, a relative path is relative to
    /// `base`. `None` for an empty value or a `~user/` path.
    fn expand(&self, value: &str, base: &Path) -> Option<PathBuf> {
        if value.is_empty() {
            return None;
        }
        if let Some(rest) = value.strip_prefix("~/") {
            return self.home.as_ref().map(|h| h.join(rest));
        }
        if value.starts_with('~') {
            return None;
        }
        Some(base.join(value))
    }

    /// Protects `path` (named by `key`'s `value`): the path itself when it exists, else
    /// its deepest existing ancestor beneath the workspace, with a note.
    fn protect(&mut self, key: &str, value: &str, path: &Path) {
        match path.canonicalize() {
            Ok(p) => self.keep(p),
            Err(_) => match existing_ancestor(self.workspace, path) {
                Some(p) => {
                    self.notes.push(format!(
                        "{key} {value} does not exist yet: {} is kept read-only instead",
                        p.display()
                    ));
                    self.found.push(p);
                }
                None => {
                    // Outside the workspace: no command can create it there.
                    if super::lexically_normal(path).starts_with(self.workspace) {
                        self.notes.push(format!(
                            "{key} {value} does not exist and cannot be protected"
                        ));
                    }
                }
            },
        }
    }
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

/// One `key = value` of git config text.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    /// Lower case.
    section: String,
    /// As written (`[section "sub"]`), or lower case (`[section.sub]`).
    subsection: Option<String>,
    /// Lower case.
    key: String,
    /// Unquoted, comments removed (`config_value`); `""` for a bare key.
    value: String,
}

/// The entries of git config text (git-config(1) syntax: `[section]`,
/// `[section "subsection"]`, `[section.subsection]`, case-insensitive names, quoted
/// values, `#`/`;` comments). Lines it cannot read are skipped.
fn config_entries(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut subsection: Option<String> = None;
    for raw in text.lines() {
        let mut line = raw.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some((header, after)) = rest.split_once(']') else {
                continue;
            };
            let header = header.trim();
            match header.split_once(|c: char| c.is_whitespace()) {
                Some((name, sub)) => {
                    section = name.to_ascii_lowercase();
                    subsection = Some(config_value(sub));
                }
                None => match header.split_once('.') {
                    Some((name, sub)) => {
                        section = name.to_ascii_lowercase();
                        subsection = Some(sub.to_ascii_lowercase());
                    }
                    None => {
                        section = header.to_ascii_lowercase();
                        subsection = None;
                    }
                },
            }
            // `[core] hooksPath = x` on one line.
            line = after.trim();
        }
        if section.is_empty() || line.is_empty() {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), config_value(v)),
            None => (line, String::new()),
        };
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        out.push(Entry {
            section: section.clone(),
            subsection: subsection.clone(),
            key: key.to_ascii_lowercase(),
            value,
        });
    }
    out
}

/// Whether a config value is one of git's booleans.
fn is_boolean(value: &str) -> bool {
    ["true", "false", "yes", "no", "on", "off", "1", "0", ""]
        .iter()
        .any(|b| value.eq_ignore_ascii_case(b))
}

/// The first word of a shell command (a quoted one unquoted), `None` when empty.
fn first_word(command: &str) -> Option<String> {
    let command = command.trim_start();
    let word = match command.chars().next()? {
        q @ ('"' | '\'') => command[1..].split(q).next().unwrap_or(""),
        _ => command.split(char::is_whitespace).next().unwrap_or(""),
    };
    (!word.is_empty()).then(|| word.to_owned())
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
    fn entries_of_git_config() {
        let text = "[core]\n\trepositoryformatversion = 0\n\thooksPath = .husky/_\n\
                    [core \"x\"]\n\thookspath = nope\n[CORE]\n fsmonitor = true\n\
                    fsmonitor = \"tools/fs mon\" # comment\n; note\n[alias]\n bare\n\
                    [includeIf \"gitdir:~/w/\"] path = ../x.inc\n[Filter.LFS]\nclean = a\n";
        let got: Vec<(String, Option<String>, String, String)> = config_entries(text)
            .into_iter()
            .map(|e| (e.section, e.subsection, e.key, e.value))
            .collect();
        let e = |s: &str, sub: Option<&str>, k: &str, v: &str| {
            (
                s.to_owned(),
                sub.map(str::to_owned),
                k.to_owned(),
                v.to_owned(),
            )
        };
        assert_eq!(
            got,
            vec![
                e("core", None, "repositoryformatversion", "0"),
                e("core", None, "hookspath", ".husky/_"),
                e("core", Some("x"), "hookspath", "nope"),
                e("core", None, "fsmonitor", "true"),
                e("core", None, "fsmonitor", "tools/fs mon"),
                e("alias", None, "bare", ""),
                e("includeif", Some("gitdir:~/w/"), "path", "../x.inc"),
                e("filter", Some("lfs"), "clean", "a"),
            ]
        );
        assert_eq!(first_word("\"./my tool\" -x").as_deref(), Some("./my tool"));
        assert_eq!(
            first_word("  scripts/x.sh --y").as_deref(),
            Some("scripts/x.sh")
        );
        assert_eq!(first_word(" "), None);
    }

    /// `ws/.git` (a directory) with `config`, and the targets found with no system or
    /// global config.
    fn targets(ws: &Path, config: &str) -> GitTargets {
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), config).unwrap();
        git_targets_with(ws, &[], None)
    }

    #[test]
    fn includes_worktree_config_and_programs_by_path_are_targets() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        for d in ["tools", "hooks", "scripts"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        // An include in the workspace: read, and protected itself.
        std::fs::write(ws.join("tools/git.inc"), "[core]\n\thooksPath = hooks\n").unwrap();
        std::fs::write(ws.join("scripts/clean.sh"), "").unwrap();
        let t = targets(
            &ws,
            "[include]\n\tpath = ../tools/git.inc\n[filter \"x\"]\n\tclean = \
             ./scripts/clean.sh %f\n\tsmudge = cat\n[alias]\n\tst = status\n\
             \tfix = !scripts/fix.sh\n[core]\n\tpager = less -R\n",
        );
        assert_eq!(
            t.paths,
            // `scripts/clean.sh` is beneath `scripts`, which stands in for the missing
            // `scripts/fix.sh`.
            vec![
                ws.join(".git"),
                ws.join("tools/git.inc"),
                ws.join("hooks"),
                ws.join("scripts"),
            ]
        );
        assert_eq!(
            t.notes,
            vec![format!(
                "alias.fix scripts/fix.sh does not exist yet: {} is kept read-only instead",
                ws.join("scripts").display()
            )]
        );
        // `config.worktree` (extensions.worktreeConfig) is read too.
        std::fs::write(
            ws.join(".git/config.worktree"),
            "[core]\n\thooksPath = tools\n",
        )
        .unwrap();
        let t = targets(&ws, "[core]\n\tbare = false\n");
        assert_eq!(t.paths, vec![ws.join(".git"), ws.join("tools")]);
        // A global config in the workspace (the workspace is the home directory) is
        // protected, and what it names.
        std::fs::write(ws.join(".gitconfig"), "[core]\n\thooksPath = ~/hooks\n").unwrap();
        std::fs::remove_file(ws.join(".git/config.worktree")).unwrap();
        let t = git_targets_with(&ws, &[ws.join(".gitconfig")], Some(ws.clone()));
        assert_eq!(
            t.paths,
            vec![ws.join(".git"), ws.join(".gitconfig"), ws.join("hooks")]
        );
    }

    #[test]
    fn include_loops_and_chains_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::write(ws.join("a.inc"), "[include]\npath = b.inc\n").unwrap();
        std::fs::write(ws.join("b.inc"), "[include]\npath = a.inc\n").unwrap();
        let t = targets(&ws, "[include]\npath = ../a.inc\n");
        assert_eq!(
            t.paths,
            vec![ws.join(".git"), ws.join("a.inc"), ws.join("b.inc")]
        );
        assert_eq!(t.notes.len(), 1, "{:?}", t.notes);
        assert!(t.notes[0].contains("not read (more than 16 files or 10 levels)"));
    }

    #[test]
    fn hooks_path_is_a_target_and_a_fifo_config_is_noted() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join(".husky/_")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\nhooksPath = .husky/_\n").unwrap();
        let t = git_targets_with(&ws, &[], None);
        assert_eq!(t.paths, vec![ws.join(".git"), ws.join(".husky/_")]);
        // Not there yet: its existing parent beneath the workspace stands in.
        std::fs::write(ws.join(".git/config"), "[core]\nhooksPath = .husky/x/y\n").unwrap();
        let t = git_targets_with(&ws, &[], None);
        assert_eq!(t.paths, vec![ws.join(".git"), ws.join(".husky")]);
        assert!(t.notes[0].contains("does not exist yet"), "{:?}", t.notes);
        std::fs::remove_file(ws.join(".git/config")).unwrap();
        let c = std::ffi::CString::new(ws.join(".git/config").to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = git_targets_with(&ws, &[], None);
        assert_eq!(t.paths, vec![ws.join(".git")]);
        assert_eq!(
            t.notes,
            vec![format!(
                "git config {} is not a regular file (a FIFO, socket, device or symlink): \
                 ignored, so nothing it names is protected",
                ws.join(".git/config").display()
            )]
        );
    }
}
