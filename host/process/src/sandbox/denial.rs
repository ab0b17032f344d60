//! Attributing a failed command to the sandbox rule that most likely refused it.
//!
//! Modelled on Codex CLI's `is_likely_sandbox_denied`: the kernel does not tell the parent
//! *why* a child got `EACCES`/`EPERM`/`EROFS`, so the host looks at the failed command's output
//! for the messages those errnos produce (`strerror` texts as printed by coreutils, shells,
//! Python, curl, git...) and, when a sandbox is active, names the rule and the escalation to
//! ask for. The command's own error text is left untouched; the hint is extra.

use std::path::{Path, PathBuf};

use super::{EffectiveSandbox, SandboxMode};

/// Output fragments (lower-case) that mean a network operation failed.
const NETWORK_MARKERS: &[&str] = &[
    "network is unreachable",
    "could not resolve host",
    "temporary failure in name resolution",
    "name or service not known",
    "failed to establish a new connection",
    "couldn't connect to server",
    "could not connect to server",
    "failed to create socket",
    "socket: operation not permitted",
    "address family not supported",
];
/// Words that, next to "operation not permitted", point at a socket call.
const NETWORK_CONTEXT: &[&str] = &[
    "socket", "connect", "network", "http", "urlopen", "resolve", "dns",
];
/// Words that, next to "operation not permitted", point at a UNIX socket (the refused
/// `socket(AF_UNIX)` of a client of ssh-agent, Docker, D-Bus, or of a server of its own).
/// A path ending in `.sock` counts too ([`names_a_sock_path`]).
const UNIX_CONTEXT: &[&str] = &["unix", "agent", "dbus", "d-bus", "docker", "podman", "tmux"];

/// Whether `text` names a `*.sock` path (`.sock` not followed by a word character, so
/// Python's `_socket.socket` does not count).
fn names_a_sock_path(text: &str) -> bool {
    text.match_indices(".sock").any(|(at, m)| {
        !text[at + m.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}
/// Words that, next to "operation not permitted", point at a keyring call.
const KEYRING_CONTEXT: &[&str] = &["keyctl", "add_key", "request_key", "keyring"];

/// Whether an `Operation not permitted` line is `chmod`'s on a file the host user owns
/// (`chmod: changing permissions of 'x': Operation not permitted`): the owner may change
/// every mode bit but the set-id ones, which the confinement program refuses.
fn setid_refused(output: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    output.lines().any(|line| {
        let lower = line.to_ascii_lowercase();
        let Some(at) = lower.find("operation not permitted") else {
            return false;
        };
        lower.contains("changing permissions of")
            && named_path(line, at, "operation not permitted".len())
                .and_then(|p| std::fs::metadata(p).ok())
                .is_some_and(|m| m.uid() == nix::unistd::getuid().as_raw())
    })
}

/// `strerror` texts of the errnos the filesystem layers produce.
const FS_MARKERS: &[&str] = &[
    "permission denied",       // EACCES (Landlock)
    "operation not permitted", // EPERM
    "read-only file system",   // EROFS (read-only binds)
];

/// For a command that *failed* (`exit_code` non-zero or `None`, i.e. killed) under an active
/// sandbox, returns a one-line hint naming the rule that most likely refused it and what to ask
/// the operator for; `None` if the command succeeded, ran under full-access, or its output
/// shows no sign of a denial.
///
/// A hint appears only where the sandbox is the likely *cause*, decided from what the sandbox
/// does rather than from the text alone. The sandbox refuses writes (and sockets), never
/// reads, exec or path lookups, so:
/// - exit 126 (found but not executable) and 127 (not found) never get a hint: the same
///   happens under full-access;
/// - for each error line that names a path (`touch: cannot touch 'x': Permission denied`,
///   `sh: 1: cannot create /x: ...`, `bash: ./run.sh: ...`, `... Permission denied: '/x'`),
///   the path (symlinks resolved; a relative one against the workspace, when it exists there)
///   is checked: if the sandbox lets the command write it (beneath a writable root, not under
///   a read-only bind), or if the host user could not write it either (`access(2)` in the
///   host), the sandbox is not the cause and that line gets no hint;
/// - a line whose path cannot be placed (relative after a `cd`, no path at all) falls back to
///   the text.
///
/// Hints (first match wins):
/// - UNIX sockets blocked and `operation not permitted` next to a word about UNIX sockets
///   (`unix`, a `*.sock` path, `agent`, `dbus`, `docker`...), or next to a socket word while the
///   network is granted: `UNIX sockets are blocked ...; needs --allow-unix-sockets`;
/// - network blocked and a network failure in the output: `network is blocked ...; needs
///   --allow-network` (when UNIX sockets are blocked too, the hint names both grants: a bare
///   `socket: Operation not permitted` does not say which family was refused);
/// - a protected host path refused: `<path> is host state ...`;
/// - `.git` read-only and a `.git` path refused: `<workspace>/.git is read-only ...; ask the
///   operator to grant .git writes with --allow-git-writes`;
/// - otherwise, for a refused write: under read-only, `the read-only sandbox blocks all
///   writes except /dev/null; ask ... workspace-write`; under workspace-write, `writes outside
///   <workspace> and <tmp> are blocked by the workspace-write sandbox; ask the operator for
///   --sandbox full-access`.
pub fn denial_hint(
    effective: &EffectiveSandbox,
    exit_code: Option<i32>,
    output: &str,
) -> Option<String> {
    if !effective.is_confined() || matches!(exit_code, Some(0 | 126 | 127)) {
        return None;
    }
    let out = output.to_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| out.contains(n));

    let refused = out.contains("operation not permitted");
    if effective.unix_sockets_blocked
        && refused
        && (has(UNIX_CONTEXT)
            || names_a_sock_path(&out)
            || (!effective.network_blocked && has(NETWORK_CONTEXT)))
    {
        return Some(
            "sandbox denial (likely): UNIX sockets are blocked by the sandbox (socket(AF_UNIX) \
             is refused, so ssh-agent, Docker, D-Bus and other local services cannot be \
             reached); needs --allow-unix-sockets"
                .to_owned(),
        );
    }
    if effective.network_blocked && (has(NETWORK_MARKERS) || (refused && has(NETWORK_CONTEXT))) {
        return Some(if effective.unix_sockets_blocked {
            "sandbox denial (likely): network is blocked by the sandbox (every socket(2) is \
             refused; a UNIX socket needs --allow-unix-sockets); needs --allow-network"
                .to_owned()
        } else {
            "sandbox denial (likely): network is blocked by the sandbox (sockets other than \
             AF_UNIX are refused); needs --allow-network"
                .to_owned()
        });
    }
    // The confinement program's refusals (`seccomp.rs`): a set-id mode on a file the
    // host user owns (so the owner check was not what refused it), or a keyring call.
    if effective.setid_refused && refused && (setid_refused(output) || has(KEYRING_CONTEXT)) {
        return Some(
            "sandbox denial (likely): setuid/setgid modes, io_uring and the kernel keyrings \
             are refused in every confined mode; only --sandbox full-access allows them"
                .to_owned(),
        );
    }
    if !has(FS_MARKERS) {
        return None;
    }
    let roots: Vec<&Path> = effective
        .writable
        .iter()
        .map(|p| p.as_path())
        .filter(|p| !p.starts_with("/dev"))
        .collect();
    let workspace = (effective.mode == SandboxMode::WorkspaceWrite)
        .then(|| roots.first().copied())
        .flatten();
    let causes = Causes::new(effective, workspace);
    // The strongest measured cause over all error lines, and the lines that name no path
    // the host can place (judged by their text, as before).
    let mut measured: Option<Cause> = None;
    let mut unplaced = String::new();
    for line in output.lines() {
        let lower = line.to_ascii_lowercase();
        let Some((at, len)) = FS_MARKERS
            .iter()
            .find_map(|m| lower.find(m).map(|at| (at, m.len())))
        else {
            continue;
        };
        match named_path(line, at, len).and_then(|p| causes.classify(p)) {
            Some(Cause::NotSandbox) => {}
            Some(cause) => {
                if measured.as_ref().is_none_or(|m| cause.rank() < m.rank()) {
                    measured = Some(cause);
                }
            }
            None => {
                unplaced.push_str(line);
                unplaced.push('\n');
            }
        }
    }
    let cause = match measured {
        Some(cause) => cause,
        None if unplaced.is_empty() => return None,
        None => {
            let text = unplaced.to_lowercase();
            if let Some(p) = effective
                .protected
                .iter()
                .find(|p| unplaced.contains(&*p.to_string_lossy()))
            {
                Cause::Protected(p.clone())
            } else if effective.git_read_only
                && (text.contains("/.git") || text.contains(".git/") || text.contains("'.git'"))
            {
                Cause::Git
            } else {
                Cause::Outside
            }
        }
    };
    match (cause, effective.mode) {
        (Cause::ReadDenied(d), _) => Some(format!(
            "sandbox denial (likely): reads of {} are denied by deny_read ({}): no confined \
             command may read it",
            d.path.display(),
            d.origin
        )),
        (Cause::Protected(p), _) => Some(format!(
            "sandbox denial (likely): {} is host state, kept read-only for commands in every \
             confined mode",
            p.display()
        )),
        (Cause::Git, _) => {
            let ws = workspace
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            Some(format!(
                "sandbox denial (likely): {ws}/.git is read-only under the workspace-write \
                 sandbox; ask the operator to grant .git writes with --allow-git-writes"
            ))
        }
        (_, SandboxMode::ReadOnly) => Some(
            "sandbox denial (likely): the read-only sandbox blocks all writes except /dev/null; \
             ask the operator for --sandbox workspace-write"
                .to_owned(),
        ),
        (_, SandboxMode::WorkspaceWrite) => {
            let list = roots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ");
            Some(format!(
                "sandbox denial (likely): writes outside {list} are blocked by the \
                 workspace-write sandbox; ask the operator for --sandbox full-access"
            ))
        }
        (_, SandboxMode::FullAccess) => None,
    }
}

/// Why one refused path was refused.
#[derive(Debug)]
enum Cause {
    /// The sandbox would have let the command write it, or the host user could not write it
    /// either: the same failure under full-access.
    NotSandbox,
    /// Beneath a denied read (`deny_read`), with its rule.
    ReadDenied(super::DeniedRead),
    /// A protected host path (the state dir).
    Protected(PathBuf),
    /// The workspace's read-only `.git`.
    Git,
    /// Outside the writable roots.
    Outside,
}

impl Cause {
    /// Which hint wins when lines disagree (lower first).
    fn rank(&self) -> u8 {
        match self {
            Cause::ReadDenied(_) => 0,
            Cause::Protected(_) => 1,
            Cause::Git => 2,
            Cause::Outside => 3,
            Cause::NotSandbox => 4,
        }
    }
}

/// What the sandbox lets a command write, for placing refused paths.
struct Causes<'a> {
    effective: &'a EffectiveSandbox,
    /// The workspace (workspace-write only): the base for relative paths.
    workspace: Option<&'a Path>,
    /// What `.git` protection covers (`workspace_read::git_targets`), when `.git` is read-only.
    git: Vec<PathBuf>,
}

impl<'a> Causes<'a> {
    fn new(effective: &'a EffectiveSandbox, workspace: Option<&'a Path>) -> Self {
        let git = match workspace {
            Some(ws) if effective.git_read_only => super::workspace_read::git_targets(ws).paths,
            _ => Vec::new(),
        };
        Causes {
            effective,
            workspace,
            git,
        }
    }

    /// The cause for a refused `named` path, or `None` when it cannot be placed (a relative
    /// path with no workspace to resolve it against, or one that does not exist there: the
    /// command may have changed directory).
    fn classify(&self, named: &str) -> Option<Cause> {
        let named = Path::new(named);
        let path = if named.is_absolute() {
            named.to_path_buf()
        } else {
            let joined = self.workspace?.join(named);
            joined.symlink_metadata().ok()?;
            joined
        };
        let real = real_path(&super::lexically_normal(&path), 0);
        if let Some(d) = self
            .effective
            .read_denied
            .iter()
            .find(|d| real.starts_with(&d.path))
        {
            return Some(Cause::ReadDenied(d.clone()));
        }
        let binds: Vec<&PathBuf> = self.effective.protected.iter().chain(&self.git).collect();
        let writable = self.effective.writable.iter().any(|root| {
            real.starts_with(root)
                && !binds
                    .iter()
                    .any(|b| real.starts_with(b) && b.starts_with(root) && *b != root)
        });
        if writable || !host_may_write(&real) {
            return Some(Cause::NotSandbox);
        }
        if let Some(p) = self
            .effective
            .protected
            .iter()
            .find(|p| real.starts_with(p))
        {
            return Some(Cause::Protected(p.clone()));
        }
        if self.git.iter().any(|g| real.starts_with(g)) {
            return Some(Cause::Git);
        }
        Some(Cause::Outside)
    }
}

/// The path an error line names before or after its errno text at `at..at + len`, e.g.
/// `touch: cannot touch 'x': Permission denied` → `x`, `sh: 1: cannot create /x: Permission
/// denied` → `/x`, `bash: line 1: ./run.sh: Permission denied` → `./run.sh`,
/// `PermissionError: [Errno 13] Permission denied: '/x'` → `/x`.
fn named_path(line: &str, at: usize, len: usize) -> Option<&str> {
    let after = &line[at + len..];
    if after.starts_with([':', ','])
        && let Some(q) = first_quoted(after)
    {
        return Some(q);
    }
    let before = line[..at].trim_end().strip_suffix(':')?.trim_end();
    if let Some(q) = last_quoted(before) {
        return Some(q);
    }
    let token = before.rsplit(": ").next()?.rsplit(' ').next()?;
    (!token.is_empty()).then_some(token)
}

/// Quote pairs error messages use (coreutils uses ‘…’ in UTF-8 locales).
const QUOTES: &[(char, char)] = &[
    ('\'', '\''),
    ('"', '"'),
    ('‘', '’'),
    ('“', '”'),
    ('`', '\''),
];

fn first_quoted(text: &str) -> Option<&str> {
    let (start, open) = text
        .char_indices()
        .find(|(_, c)| QUOTES.iter().any(|(o, _)| o == c))?;
    let close = QUOTES.iter().find(|(o, _)| *o == open)?.1;
    let inner = &text[start + open.len_utf8()..];
    inner.find(close).map(|end| &inner[..end])
}

fn last_quoted(text: &str) -> Option<&str> {
    let close = text.chars().next_back()?;
    let inner = &text[..text.len() - close.len_utf8()];
    let open = match close {
        '\'' if inner.contains('\'') => '\'',
        '\'' => '`',
        close => QUOTES.iter().find(|(_, c)| *c == close)?.0,
    };
    inner
        .rfind(open)
        .map(|start| &inner[start + open.len_utf8()..])
}

/// `path` with the symlinks of its existing part resolved (a dangling symlink followed to
/// its target); the missing tail is kept as is.
fn real_path(path: &Path, depth: u8) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    if depth < 40
        && let Ok(target) = std::fs::read_link(path)
    {
        let next = match path.parent() {
            Some(dir) => dir.join(target),
            None => target,
        };
        return real_path(&super::lexically_normal(&next), depth + 1);
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) if depth < 40 => real_path(dir, depth + 1).join(name),
        _ => path.to_path_buf(),
    }
}

/// Whether the host user (unconfined, as under full-access) may write `path`: `access(2)`
/// on it, or, when it does not exist, write and search on its nearest existing ancestor.
fn host_may_write(path: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    let mut flags = AccessFlags::W_OK;
    let mut at = path;
    loop {
        if at.symlink_metadata().is_ok() {
            return access(at, flags).is_ok();
        }
        flags = AccessFlags::W_OK | AccessFlags::X_OK;
        match at.parent() {
            Some(parent) => at = parent,
            None => return false,
        }
    }
}
