//! Kernel confinement of the OS processes toolhost spawns for plugins (the modes:
//! docs/sandbox.md#modes; the order of the layers: `ChildPlan::apply`).
//!
//! Plugins themselves are sandboxed by wasmtime; the shell commands the host starts on their
//! behalf are confined by the kernel. This module decides *what a started command can touch*;
//! the policy layer decides *whether* it runs at all.
//!
//! # Modes
//!
//! | mode | filesystem | network | UNIX sockets |
//! |------|-----------|---------|--------------|
//! | [`SandboxMode::ReadOnly`] | everything readable/executable; writable only: `/dev/null`, the private temp dir (`TMPDIR`), a private `/dev/shm`, private ptys | blocked unless granted | blocked unless granted |
//! | [`SandboxMode::WorkspaceWrite`] (default) | as read-only, plus the workspace root writable; `.git` (unless granted) and host-protected paths stay read-only | blocked unless granted | blocked unless granted |
//! | [`SandboxMode::FullAccess`] | no confinement at all (must be asked for explicitly), the state dir readable too | unrestricted | unrestricted |
//!
//! In both confined modes the host's state dir ([`SandboxPaths::hidden`]) is neither
//! readable nor writable: only the session's own temp dir shows through.
//!
//! A plugin's WASI preopens are held as [`HeldDir`]s (opened once, never re-opened by path).
//!
//! The operator's `--sandbox` and a plugin manifest each yield a [`SandboxPolicy`];
//! [`SandboxPolicy::stricter`] combines them.
//!
//! # Linux mechanism (applied in the child between `clone` and `exec`)
//!
//! In this order, by the closure [`Confinement::install`] registers:
//!
//! 1. **Mount namespace** (`mounts.rs`), whenever the kernel allows one
//!    (`unshare(CLONE_NEWNS)`; as non-root `CLONE_NEWUSER|CLONE_NEWNS` with an identity
//!    uid/gid map, like `unshare -r`), `/` made `MS_REC|MS_PRIVATE` (nothing propagates back
//!    to the host), then:
//!    - **a read-only root**: `mount_setattr("/", AT_RECURSIVE, RDONLY|NOSUID)`, with each
//!      writable root (and the mounts beneath it that were writable in the host,
//!      `mountinfo.rs`) bound back writable. Landlock has no right for metadata, so this
//!      is what keeps mode bits, times and extended attributes outside the writable roots
//!      (`EROFS`); a write there now fails with `EROFS` before Landlock's `EACCES`;
//!    - the host's state dir ([`SandboxPaths::hidden`]) covered by an empty read-only
//!      `tmpfs`, with the session's own temp dir bound back in (Landlock cannot take *read*
//!      access away beneath `/`);
//!    - read-only binds for what must stay read-only under a writable root (`.git` and
//!      what git's config points at, [`SandboxPaths::protected`]), at every other mount of
//!      the same path too (`mountinfo::aliases`);
//!    - **denied reads** ([`SandboxPaths::read_denied`], `read_deny.rs`): a mode-`0000`
//!      `tmpfs` over each denied directory, the mode-`0000` mask file over each denied file;
//!    - a fresh `tmpfs` on `/dev/shm` and a new `devpts` instance on `/dev/pts`, private to
//!      the command.
//!
//!    Binds are made read-only recursively with `mount_setattr(MOUNT_ATTR_RDONLY,
//!    AT_RECURSIVE)` (falling back to a `MS_REMOUNT|MS_BIND|MS_RDONLY` remount on kernels
//!    without it). The mounts exist only in the child's namespace and vanish with it. A
//!    Landlock-restricted process can no longer mount, unmount or remount anything, so even
//!    a command running as root cannot peel a bind or a mask off.
//! 2. **Capability drop** (`caps.rs`): the command keeps no capabilities, even when the host
//!    runs as root (bounding, ambient and inheritable sets emptied).
//! 3. **`no_new_privs`** (`prctl(PR_SET_NO_NEW_PRIVS)`), always when confined: setuid binaries
//!    cannot regain privileges, and it is required for unprivileged Landlock and seccomp.
//! 4. **Landlock** (`landlock.rs`): read+execute on `/`, full access beneath the writable
//!    roots (except creating device nodes), read/write on `/dev/null`, and, when the mount
//!    step made them private, read/write on `/dev/ptmx` and, through rules the child adds on
//!    its own new mounts, full access to `/dev/shm` and read/write on `/dev/pts` (never the
//!    host's). Rules are attached to inodes opened in the parent, so
//!    a symlink in the workspace pointing outside resolves to an inode that has no write rule:
//!    it cannot open a write path. With ABI ≥ 6 the domain is also *scoped*: it can neither
//!    signal processes outside the sandbox (the host, other sessions) nor connect to abstract
//!    UNIX sockets created outside it.
//! 5. **seccomp** (`seccomp.rs`), in every confined mode: the *confinement* program (no
//!    setuid/setgid modes by any call, no `openat2`, no io_uring, no kernel keyrings), and
//!    the *socket* program for each block asked for: `socket(2)`/`socketpair(2)` for every
//!    family but `AF_UNIX` fail with `EPERM` (unless [`SandboxPolicy::network`]), and
//!    `socket(AF_UNIX, ..)` and datagram `socketpair(AF_UNIX, ..)` too (unless
//!    [`SandboxPolicy::unix_sockets`]): Landlock (ABI ≤ 7) does not mediate `connect(2)` on
//!    pathname UNIX sockets, so without this a command could reach the user's ssh-agent, a
//!    Docker daemon or D-Bus. Connected stream `socketpair`s stay allowed. See that module
//!    for why seccomp rather than a fresh network namespace, and what the UNIX block breaks.
//!
//! What the sandbox reads in the workspace (`.git` and git's config) is read through
//! `workspace_read.rs`: non-blocking, never a FIFO or a symlink, bounded, and by the session
//! engine on the blocking pool with a deadline ([`SandboxPaths::git_targets`]).
//!
//! Everything that allocates or opens files happens in [`SandboxPolicy::prepare`], in the
//! parent; the child only issues syscalls on pre-built data (async-signal-safe).
//!
//! # Never a silent downgrade
//!
//! When the kernel lacks a feature the sandbox degrades *visibly*: the missing layer is left
//! out of [`EffectiveSandbox`] (e.g. `landlock_abi: None`, `git_read_only: false`) and a
//! sentence is pushed to [`EffectiveSandbox::warnings`]. `prepare` logs them only at `debug`
//! (it runs once per started command); the caller reports them to the operator, e.g. the
//! session engine logs each distinct warning once with `tracing::warn!`.
//! Conversely, whatever `EffectiveSandbox` claims is enforced: if a layer that `prepare`
//! promised fails in the child, the closure returns the error and `Command::spawn` fails
//! (fail closed) instead of running the command less confined than reported.
//!
//! # Denials
//!
//! The command's own error is kept (`EACCES` from Landlock, `EROFS` from a read-only bind,
//! `EPERM` from seccomp); [`denial_hint`] maps a failed command's output to the rule that most
//! likely refused it, so an agent can ask for escalation instead of retrying blindly (after
//! Codex CLI's `is_likely_sandbox_denied`). It names a rule only where the sandbox is the
//! cause: the sandbox refuses writes, sockets, set-id modes, keyrings and the reads of
//! denied paths, never other reads, exec or lookups, so exit 126/127 and a refused path that
//! the sandbox lets the command write, or that the host user could not write either, get no
//! hint.

mod caps;
mod denial;
mod held_dir;
mod landlock;
mod mountinfo;
mod mounts;
mod probe;
mod read_deny;
mod seccomp;
pub(crate) mod workspace_read;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

pub use denial::denial_hint;
pub use held_dir::{DirReplaced, HeldDir};
pub use probe::{KernelSupport, probe_kernel};
pub use read_deny::{
    DEFAULT_HOME_DENIED, DEFAULT_ORIGIN, DEFAULT_SYSTEM_DENIED, DeniedRead, default_read_denied,
};
pub use workspace_read::{GitTargets, git_targets};

/// How much a spawned command may touch. Ordered from strictest to loosest
/// (`ReadOnly < WorkspaceWrite < FullAccess`), which [`SandboxPolicy::stricter`] relies on.
///
/// Parsed from and displayed as `"read-only"`, `"workspace-write"`, `"full-access"` (the
/// `--sandbox` values, after Codex CLI's `--sandbox` modes). Default: `WorkspaceWrite`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Whole filesystem readable and executable, except the [`SandboxPaths::hidden`]
    /// directories (the host's state dir); nothing writable except `/dev/null`, the
    /// session's private temp dir (`TMPDIR`) and, when the kernel allows a private mount
    /// namespace, a private `/dev/shm` and private ptys: what a command needs to run at all
    /// without writing anything that outlives it outside the state dir (output reaches the
    /// host through pipes, which are not filesystem paths).
    ReadOnly,
    /// As `ReadOnly`, plus the workspace root writable; `.git` in the workspace (unless
    /// [`SandboxPolicy::git_writable`]) and [`SandboxPaths::protected`] paths stay read-only.
    #[default]
    WorkspaceWrite,
    /// No confinement at all. Must be requested explicitly; shown in inspect and events.
    FullAccess,
}

impl SandboxMode {
    /// The `--sandbox` spelling of this mode.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = SandboxError;

    /// Accepts exactly `read-only`, `workspace-write` or `full-access`;
    /// anything else is [`SandboxError::UnknownMode`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read-only" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "full-access" => Ok(SandboxMode::FullAccess),
            other => Err(SandboxError::UnknownMode(other.to_owned())),
        }
    }
}

/// What the operator (or a plugin manifest) allows spawned commands to do.
///
/// `Default` is the safe default: `workspace-write`, no network, no UNIX sockets, `.git`
/// read-only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct SandboxPolicy {
    /// Filesystem confinement mode.
    pub mode: SandboxMode,
    /// Network grant (`--allow-network` / manifest). Off by default. Ignored (always allowed)
    /// under [`SandboxMode::FullAccess`], which confines nothing.
    pub network: bool,
    /// UNIX-socket grant (`--allow-unix-sockets` / manifest `unix_sockets`): whether a command
    /// may create `AF_UNIX` sockets, and so connect to pathname sockets it can reach (an
    /// ssh-agent, `/var/run/docker.sock`, D-Bus) or bind its own. Off by default; independent
    /// of [`network`](SandboxPolicy::network) (the network grant does not include it).
    /// Abstract sockets stay confined to the sandbox's own (Landlock scope, ABI ≥ 6) either
    /// way. Ignored (always allowed) under [`SandboxMode::FullAccess`].
    #[serde(default)]
    pub unix_sockets: bool,
    /// Whether `.git` at the workspace root may be written (`--allow-git-writes`; only
    /// meaningful under `workspace-write`). Off by default.
    pub git_writable: bool,
}

impl SandboxPolicy {
    /// Combines the operator's policy with a plugin manifest's: the stricter of the two wins,
    /// field by field. Mode: the lower of `read-only < workspace-write < full-access`;
    /// network, UNIX sockets and `.git` writes only if *both* grant them. Pure and
    /// commutative.
    ///
    /// A full-access policy confines nothing, so it never forbids `.git` writes: combined
    /// with a confined policy, the confined one's `git_writable` decides (a manifest without
    /// a `sandbox` mode is full-access and has no `.git` setting, so the operator's
    /// `--allow-git-writes` holds; a manifest that asks for a confined mode keeps `.git`
    /// read-only).
    pub fn stricter(&self, other: &SandboxPolicy) -> SandboxPolicy {
        let full = SandboxMode::FullAccess;
        let git_writable = match (self.mode == full, other.mode == full) {
            (true, false) => other.git_writable,
            (false, true) => self.git_writable,
            _ => self.git_writable && other.git_writable,
        };
        SandboxPolicy {
            mode: self.mode.min(other.mode),
            network: self.network && other.network,
            unix_sockets: self.unix_sockets && other.unix_sockets,
            git_writable,
        }
    }

    /// Builds everything the child needs, in the parent: canonicalises the paths, creates the
    /// private temp dir if missing, probes the kernel ([`probe_kernel`]), creates the Landlock
    /// ruleset (opening each rule's path with `O_PATH`), compiles the seccomp filter and
    /// pre-formats the mount plan. The returned [`Confinement`] is then installed on one or
    /// more `Command`s.
    ///
    /// Unavailable kernel features are not errors: they are reported in
    /// [`EffectiveSandbox::warnings`] (logged here at `debug` only; surfacing them is the
    /// caller's job). Errors are for things that make the requested sandbox
    /// impossible to describe: [`SandboxError::Workspace`] if the workspace cannot be
    /// resolved, [`SandboxError::Io`] for the temp dir, [`SandboxError::Landlock`] /
    /// [`SandboxError::Seccomp`] if building the ruleset/filter fails on a kernel that
    /// supports them.
    pub fn prepare(&self, paths: &SandboxPaths) -> Result<Confinement, SandboxError> {
        // TMPDIR points at the private temp dir in every mode, full-access included.
        crate::private_fs::create_private_dir_all(&paths.private_tmp).map_err(|source| {
            SandboxError::Io {
                what: "creating the private temp dir",
                path: paths.private_tmp.clone(),
                source,
            }
        })?;
        if self.mode == SandboxMode::FullAccess {
            tracing::debug!("sandbox: full-access requested, spawned commands are not confined");
            return Ok(Confinement {
                effective: EffectiveSandbox::full_access(),
                plan: None,
            });
        }
        let support = probe_kernel();
        let mut warnings = Vec::new();

        let workspace =
            paths
                .workspace
                .canonicalize()
                .map_err(|source| SandboxError::Workspace {
                    path: paths.workspace.clone(),
                    source,
                })?;
        let private_tmp = paths
            .private_tmp
            .canonicalize()
            .map_err(|source| SandboxError::Io {
                what: "resolving the private temp dir",
                path: paths.private_tmp.clone(),
                source,
            })?;

        // The private temp dir is writable in every confined mode (read-only included).
        let writable_roots: Vec<PathBuf> = match self.mode {
            SandboxMode::WorkspaceWrite => vec![workspace.clone(), private_tmp.clone()],
            _ => vec![private_tmp.clone()],
        };
        let mut writable = writable_roots.clone();
        writable.push(PathBuf::from(landlock::DEV_NULL));

        // Paths that must stay read-only although a writable root contains them.
        let mut read_only_binds = Vec::new();
        let wants_git_ro = self.mode == SandboxMode::WorkspaceWrite && !self.git_writable;
        // Whatever `.git`'s shape: only existing targets, and only those a writable root
        // contains, need a bind (elsewhere Landlock already refuses writes).
        let git_targets = if wants_git_ro {
            let found = match &paths.git_targets {
                Some(given) => given.clone(),
                None => workspace_read::git_targets(&workspace),
            };
            warnings.extend(found.notes);
            found.paths
        } else {
            Vec::new()
        };
        // A target beneath a writable root is bound read-only from the entry right
        // beneath that root (`sub` for a `gitdir: sub/realgit`), so no command can rename
        // a parent away and put a git dir of its own in its place. A target that IS a
        // writable root (`.git -> .`) cannot be protected.
        let mut git_binds: Vec<PathBuf> = Vec::new();
        let mut git_unprotectable = false;
        for p in &git_targets {
            match writable_roots.iter().find(|r| p.starts_with(r)) {
                Some(root) if p == root => git_unprotectable = true,
                Some(root) => {
                    let top = p
                        .strip_prefix(root)
                        .ok()
                        .and_then(|rest| rest.components().next())
                        .map(|first| root.join(first))
                        .unwrap_or_else(|| p.clone());
                    if !git_binds.contains(&top) {
                        git_binds.push(top);
                    }
                }
                None => {}
            }
        }
        // A `.git` symlink is an entry of the (writable) workspace root: its target is
        // protected, but the link itself can be replaced, so `.git` is not reported as
        // read-only.
        let git_link = workspace
            .join(".git")
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink());
        if wants_git_ro && !git_targets.is_empty() && (git_link || git_unprotectable) {
            warnings.push(if git_unprotectable {
                "`.git` resolves to the workspace itself, which stays writable: `.git` cannot be \
                 kept read-only"
                    .to_string()
            } else {
                "`.git` is a symlink: what it points to is read-only, but a command can replace \
                 the link itself"
                    .to_string()
            });
        }
        read_only_binds.extend(git_binds.iter().cloned());
        let mut protected = Vec::new();
        for p in &paths.protected {
            match p.canonicalize() {
                Ok(c) => {
                    if writable_roots.iter().any(|r| c.starts_with(r)) {
                        read_only_binds.push(c.clone());
                    }
                    protected.push(c);
                }
                Err(e) => {
                    // Only a problem if a command could create it under a writable root.
                    let abs = absolute_lexical(p);
                    if writable_roots.iter().any(|r| abs.starts_with(r)) {
                        warnings.push(format!(
                            "protected path {} does not exist ({e}); a command could create it",
                            p.display()
                        ));
                    }
                }
            }
        }
        // Host paths no command may read (the state dir): each is covered by an empty
        // read-only tmpfs, with the private temp dir (and the workspace) that lie beneath it
        // bound back in. Every ancestor of it beneath a writable root is pinned (bound onto
        // itself, still writable) so no command can rename one away and have the host
        // write into a directory of its own making; the hidden dir itself is a mount point
        // too, so it cannot be renamed either.
        let mut hidden: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
        let mut pins: Vec<PathBuf> = Vec::new();
        for h in &paths.hidden {
            let dir = match h.canonicalize() {
                Ok(c) => c,
                Err(e) => {
                    let abs = absolute_lexical(h);
                    if writable_roots.iter().any(|r| abs.starts_with(r)) {
                        warnings.push(format!(
                            "hidden path {} does not exist ({e}); a command could create it",
                            h.display()
                        ));
                    }
                    continue;
                }
            };
            let mut holes: Vec<PathBuf> = [&private_tmp, &workspace]
                .into_iter()
                .filter(|p| p.starts_with(&dir))
                .cloned()
                .collect();
            if holes.contains(&dir) {
                warnings.push(format!(
                    "{} cannot be hidden from commands: it is the workspace or the temp dir \
                     itself; it stays READABLE",
                    dir.display()
                ));
                continue;
            }
            // A hole inside another hole comes along with it.
            let all = holes.clone();
            holes.retain(|p| !all.iter().any(|o| o != p && p.starts_with(o)));
            for root in writable_roots.iter().filter(|r| dir.starts_with(r)) {
                let mut at = root.clone();
                for part in dir.strip_prefix(root).unwrap_or(Path::new("")).components() {
                    at.push(part);
                    if at != dir && !pins.contains(&at) {
                        pins.push(at.clone());
                    }
                }
            }
            if !protected.contains(&dir) {
                protected.push(dir.clone());
            }
            hidden.push((dir, holes));
        }
        // A read-only bind inside a hidden dir (and not inside one of its holes) is
        // hidden already; in the child its path would not even exist.
        let in_hidden = |b: &PathBuf| {
            hidden
                .iter()
                .any(|(h, holes)| b.starts_with(h) && !holes.iter().any(|o| b.starts_with(o)))
        };
        read_only_binds.retain(|b| !in_hidden(b));
        git_binds.retain(|b| !in_hidden(b));

        // Every other mount of a protected path (e.g. a bind of a parent elsewhere) gets
        // what the path gets: a hidden dir is covered whole there too, and a read-only
        // bind beneath a writable root is made there too. Outside the writable roots the
        // read-only root below keeps an alias read-only; without it (no `mount_setattr`)
        // the alias gets its own read-only bind, since Landlock's rules are on inodes and
        // a bind of the workspace elsewhere shows the same inodes, writable.
        let mount_table = mountinfo::current();
        let mut masks: Vec<(PathBuf, Vec<PathBuf>, u32)> = Vec::new();
        let holes_in = |dir: &Path| -> Vec<PathBuf> {
            let mut holes: Vec<PathBuf> = [&private_tmp, &workspace]
                .into_iter()
                .filter(|p| p.starts_with(dir))
                .cloned()
                .collect();
            let all = holes.clone();
            holes.retain(|p| !all.iter().any(|o| o != p && p.starts_with(o)));
            holes
        };
        for (h, _) in &hidden {
            for alias in mountinfo::aliases(&mount_table, h) {
                if holes_in(&alias).is_empty() && !masks.iter().any(|m| m.0 == alias) {
                    masks.push((alias, Vec::new(), 0));
                }
            }
        }
        for bind in read_only_binds.clone() {
            for alias in mountinfo::aliases(&mount_table, &bind) {
                if (writable_roots.iter().any(|r| alias.starts_with(r)) || !support.read_only_root)
                    && !read_only_binds.contains(&alias)
                    && !in_hidden(&alias)
                {
                    read_only_binds.push(alias.clone());
                    git_binds.push(alias);
                }
            }
        }

        // Denied reads (`read_deny.rs`): a directory gets an empty tmpfs of mode 0000 on
        // top (0111 with the workspace or the temp dir bound back in), anything else the
        // mask file; at each alias too. What lies in a hidden dir is hidden already.
        let mask_file = paths.mask_file.as_ref().filter(|f| {
            use std::os::unix::fs::MetadataExt;
            std::fs::symlink_metadata(f)
                .is_ok_and(|m| m.is_file() && m.len() == 0 && m.mode() & 0o7777 == 0)
        });
        let mut file_masks: Vec<PathBuf> = Vec::new();
        let mut read_denied: Vec<DeniedRead> = Vec::new();
        for r in read_deny::resolve(&paths.read_denied, &writable_roots, &mut warnings) {
            if in_hidden(&r.path) {
                continue;
            }
            if !r.dir && mask_file.is_none() {
                warnings.push(format!(
                    "deny_read {} ({}) stays READABLE: no mask file to cover a file with",
                    r.path.display(),
                    r.origin
                ));
                continue;
            }
            let mut at = vec![r.path.clone()];
            at.extend(mountinfo::aliases(&mount_table, &r.path));
            let mut masked = false;
            for target in at {
                if !r.dir {
                    file_masks.push(target);
                    masked = true;
                    continue;
                }
                let holes = holes_in(&target);
                if holes.contains(&target) {
                    warnings.push(format!(
                        "deny_read {} ({}) is the workspace or the temp dir itself: it stays \
                         READABLE",
                        target.display(),
                        r.origin
                    ));
                    continue;
                }
                let mode = if holes.is_empty() { 0 } else { 0o111 };
                masks.push((target, holes, mode));
                masked = true;
            }
            if masked {
                read_denied.push(DeniedRead {
                    path: r.path,
                    origin: r.origin,
                });
            }
        }

        // Metadata outside the writable roots (mode bits, times, extended attributes;
        // Landlock has no right for them) is kept by a read-only `/`, with each writable
        // root and the writable mounts beneath it bound back writable.
        let read_only_root: Option<Vec<(PathBuf, Vec<PathBuf>)>> =
            support.read_only_root.then(|| {
                writable_roots
                    .iter()
                    .map(|r| (r.clone(), mountinfo::writable_beneath(&mount_table, r)))
                    .collect()
            });
        if support.mount_namespace && !support.read_only_root {
            warnings.push(
                "the kernel cannot make / read-only in the command's mount namespace \
                 (mount_setattr, Linux 5.12): metadata (mode bits, times, extended \
                 attributes) outside the writable roots can be changed"
                    .to_owned(),
            );
        }

        // Writable roots that sit beneath a read-only bind get re-bound writable on top.
        let rw_rebinds: Vec<PathBuf> = writable_roots
            .iter()
            .filter(|r| {
                read_only_binds
                    .iter()
                    .any(|b| r.starts_with(b) && r.as_path() != b.as_path())
            })
            .cloned()
            .collect();

        // The private namespace also gives every confined command its own /dev/shm and ptys,
        // so it is entered whenever it is available, binds or not.
        let mut mount_plan = None;
        let (shm, pts) = (
            support.mount_namespace && support.private_shm,
            support.mount_namespace && support.private_pts,
        );
        if support.mount_namespace {
            mount_plan = Some(mounts::MountPlan::new(mounts::MountSpec {
                read_only_root: read_only_root.as_deref(),
                masks: &masks,
                file_masks: &file_masks,
                mask_file,
                pins: &pins,
                hidden: &hidden,
                read_only: &read_only_binds,
                optional: &git_binds,
                writable: &rw_rebinds,
                shm,
                pts,
            })?);
        }
        if !shm || !pts {
            // Less usable, not less confined: the host's shared /dev/shm and terminals are
            // never granted instead.
            tracing::debug!(
                private_shm = shm,
                private_ptys = pts,
                "sandbox: the kernel refused a private /dev/shm or devpts; commands cannot \
                 write what is missing"
            );
        }
        if shm {
            writable.push(PathBuf::from(mounts::DEV_SHM));
        }
        if pts {
            writable.push(PathBuf::from(mounts::DEV_PTMX));
            writable.push(PathBuf::from(mounts::DEV_PTS));
        }
        if mount_plan.is_none() {
            warnings.push(format!(
                "cannot create a private mount namespace ({}); metadata outside the writable \
                 roots (mode bits, owner, times, extended attributes, file flags) can be \
                 changed wherever the host user may change it: Landlock does not confine \
                 metadata",
                support
                    .mount_namespace_error
                    .as_deref()
                    .unwrap_or("unknown")
            ));
        }
        let git_read_only = !git_targets.is_empty()
            && !git_unprotectable
            && !git_link
            && (git_binds.is_empty() || mount_plan.is_some());
        if !hidden.is_empty() && mount_plan.is_none() {
            warnings.push(format!(
                "cannot create a private mount namespace ({}); {} stay(s) READABLE by commands",
                support
                    .mount_namespace_error
                    .as_deref()
                    .unwrap_or("unknown"),
                join_paths(&hidden.iter().map(|(h, _)| h.clone()).collect::<Vec<_>>())
            ));
        }
        if !read_denied.is_empty() && mount_plan.is_none() {
            warnings.push(format!(
                "cannot create a private mount namespace ({}); deny_read is NOT enforced: {} \
                 stay(s) READABLE",
                support
                    .mount_namespace_error
                    .as_deref()
                    .unwrap_or("unknown"),
                join_paths(
                    &read_denied
                        .iter()
                        .map(|d| d.path.clone())
                        .collect::<Vec<_>>()
                )
            ));
            read_denied.clear();
        }
        if !read_denied.is_empty() && support.landlock_abi.is_none() {
            warnings.push(
                "without Landlock, a command can read denied paths through another \
                 process's /proc/<pid>/root"
                    .to_owned(),
            );
        }
        if !read_only_binds.is_empty() && mount_plan.is_none() {
            warnings.push(format!(
                "cannot create a private mount namespace ({}); {} stay(s) WRITABLE",
                support
                    .mount_namespace_error
                    .as_deref()
                    .unwrap_or("unknown"),
                join_paths(&read_only_binds)
            ));
        }

        let landlock_fd = match support.landlock_abi {
            Some(abi) if abi >= 1 => Some(landlock::build_ruleset(&writable_roots, pts)?),
            _ => {
                warnings.push(
                    "Landlock is not available on this kernel: filesystem writes are NOT confined"
                        .to_owned(),
                );
                None
            }
        };
        let landlock_abi = landlock_fd
            .as_ref()
            .map(|_| support.landlock_abi.unwrap_or(0).min(landlock::TARGET_ABI));
        if matches!(landlock_abi, Some(abi) if abi < 3) {
            warnings.push(format!(
                "Landlock ABI {} cannot restrict truncate (ABI 3): files outside the writable \
                 paths can be truncated",
                landlock_abi.unwrap_or(0)
            ));
        }
        if matches!(landlock_abi, Some(abi) if abi < 6) {
            warnings.push(format!(
                "Landlock ABI {} lacks scoping (ABI 6): commands can signal host processes",
                landlock_abi.unwrap_or(0)
            ));
        }

        // The confinement program goes on in every confined mode; the socket program
        // joins it for each block asked for (`seccomp.rs`).
        let mut seccomp_filters = Arc::new(Vec::new());
        let (mut network_blocked, mut unix_sockets_blocked) = (false, false);
        if support.seccomp {
            seccomp_filters = seccomp::filters_shared(!self.network, !self.unix_sockets)?;
            network_blocked = !self.network;
            unix_sockets_blocked = !self.unix_sockets;
        } else {
            let what = match (self.network, self.unix_sockets) {
                (false, false) => "; network and UNIX sockets are NOT blocked",
                (false, true) => "; network is NOT blocked",
                (true, false) => "; UNIX sockets are NOT blocked",
                (true, true) => "",
            };
            warnings.push(format!(
                "seccomp is not available on this kernel: setuid/setgid modes, io_uring and \
                 the kernel keyrings are NOT refused{what}"
            ));
        }

        for w in &warnings {
            tracing::debug!("sandbox: {w}");
        }
        let effective = EffectiveSandbox {
            mode: self.mode,
            network_blocked,
            unix_sockets_blocked,
            landlock_abi,
            git_read_only,
            writable,
            protected,
            read_denied,
            metadata_read_only: mount_plan.is_some() && read_only_root.is_some(),
            setid_refused: support.seccomp,
            warnings,
        };
        tracing::debug!("sandbox prepared: {effective}");
        Ok(Confinement {
            effective,
            plan: Some(Arc::new(ChildPlan {
                mounts: mount_plan,
                landlock_rules: match (&landlock_fd, support.landlock_abi) {
                    (Some(_), Some(abi)) => landlock::child_rules(abi, shm, pts),
                    _ => Vec::new(),
                },
                landlock_fd,
                seccomp: seccomp_filters,
            })),
        })
    }
}

/// Host paths the sandbox is built around. All paths should be absolute; they are
/// canonicalised by [`SandboxPolicy::prepare`] (symlinks resolved).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxPaths {
    /// The workspace root (must exist). Writable under `workspace-write`.
    pub workspace: PathBuf,
    /// A per-session temp dir (created if missing, in every mode). Writable in every confined
    /// mode; the engine points `TMPDIR` at it.
    pub private_tmp: PathBuf,
    /// Host paths that must never be writable by a command (the host's state dir, other
    /// sessions' logs), even when they sit under the workspace or the temp dir. Paths outside
    /// the writable roots are already read-only through Landlock; paths beneath them are
    /// bind-mounted read-only. A protected path that does not exist yet but would be under a
    /// writable root yields a warning (a command could create it first).
    pub protected: Vec<PathBuf>,
    /// Host directories no confined command may read or write at all, by any spelling
    /// (the host's state dir: session logs and temp dirs, event logs, the control socket,
    /// the compiled-plugin cache). In the command's private mount namespace each is
    /// covered by an empty read-only `tmpfs`; the private temp dir and the workspace, when
    /// they lie beneath it, are bound back in at their own paths, and nothing else of it
    /// can be reached. Its ancestors beneath a writable root are pinned (bound onto
    /// themselves) so they cannot be renamed. Needs the mount namespace (a warning
    /// otherwise); not applied under full-access. A hidden dir that is the workspace or
    /// the temp dir itself cannot be hidden (a warning).
    pub hidden: Vec<PathBuf>,
    /// Paths no confined command may read (`deny_read`: the host's own secrets, the
    /// built-in defaults, the operator's and a manifest's rules), each masked in the
    /// command's mount namespace (`read_deny.rs`): `EACCES` by every spelling. Entries
    /// that do not exist when the command starts are skipped. Needs the mount namespace
    /// (a warning otherwise); not applied under full-access.
    pub read_denied: Vec<DeniedRead>,
    /// An empty regular file of mode `0000` that no command can write (the engine keeps
    /// `<state_dir>/sandbox/mask`), bound read-only over each denied *file*. `None`, or
    /// not such a file: denied files stay readable (a warning); denied directories are
    /// masked either way (a fresh `tmpfs`).
    pub mask_file: Option<PathBuf>,
    /// The workspace's `.git` targets, when the caller inspected them already off the
    /// spawner thread (`workspace_read::git_targets`, bounded); `None`: `prepare`
    /// inspects them itself (non-blocking, bounded reads, `workspace_read.rs`).
    pub git_targets: Option<GitTargets>,
}

/// The sandbox actually in force, as reported in every session snapshot and event.
///
/// `Display` gives a one-line summary, e.g.
/// `workspace-write (landlock abi 7, network blocked, .git read-only, unix sockets blocked)`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EffectiveSandbox {
    /// The mode requested (after [`SandboxPolicy::stricter`]).
    pub mode: SandboxMode,
    /// `true` if non-`AF_UNIX` sockets are refused by the seccomp filter.
    pub network_blocked: bool,
    /// `true` if new `AF_UNIX` sockets (and datagram `socketpair`s) are refused by the
    /// seccomp filter, so pathname UNIX sockets outside the sandbox cannot be reached.
    #[serde(default)]
    pub unix_sockets_blocked: bool,
    /// Landlock ABI enforced (the kernel's, capped at the ABI this code was vetted against),
    /// or `None` when Landlock is not applied (full-access, or kernel without Landlock).
    pub landlock_abi: Option<i32>,
    /// `true` only if the workspace's `.git` leads to something that exists (see
    /// `git_paths`) and all of it is kept read-only (bind-mounted read-only, or outside the
    /// writable roots). `false` when git writes were granted, when there is no `.git` or
    /// only a dangling symlink, or when the mount step is unavailable (then with a warning).
    pub git_read_only: bool,
    /// Paths writable by the command. `["/"]` under full-access.
    pub writable: Vec<PathBuf>,
    /// Existing [`SandboxPaths::protected`] paths (canonical) kept read-only, then the
    /// existing [`SandboxPaths::hidden`] ones (canonical), which are also unreadable.
    pub protected: Vec<PathBuf>,
    /// The denied reads in force: each existing [`SandboxPaths::read_denied`] entry that
    /// is masked, by its canonical path, with its origin (`read_deny.rs`).
    #[serde(default)]
    pub read_denied: Vec<DeniedRead>,
    /// `true` when everything outside the writable roots is mounted read-only in the
    /// command's namespace, so its metadata (mode bits, times, extended attributes) cannot
    /// change either (`EROFS`).
    #[serde(default)]
    pub metadata_read_only: bool,
    /// `true` when the confinement seccomp program is installed: no setuid/setgid modes,
    /// no io_uring, no kernel keyrings (`seccomp.rs`).
    #[serde(default)]
    pub setid_refused: bool,
    /// Every way in which the sandbox is weaker than the mode asks for. Empty when the mode
    /// is fully enforced.
    pub warnings: Vec<String>,
}

impl EffectiveSandbox {
    fn full_access() -> Self {
        EffectiveSandbox {
            mode: SandboxMode::FullAccess,
            network_blocked: false,
            unix_sockets_blocked: false,
            landlock_abi: None,
            git_read_only: false,
            writable: vec![PathBuf::from("/")],
            protected: Vec::new(),
            read_denied: Vec::new(),
            metadata_read_only: false,
            setid_refused: false,
            warnings: Vec::new(),
        }
    }

    /// `true` when some confinement is applied (any mode but full-access).
    pub fn is_confined(&self) -> bool {
        self.mode != SandboxMode::FullAccess
    }
}

impl fmt::Display for EffectiveSandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.mode)?;
        if !self.is_confined() {
            return f.write_str(" (no confinement)");
        }
        match self.landlock_abi {
            Some(abi) => write!(f, " (landlock abi {abi}")?,
            None => f.write_str(" (NO landlock")?,
        }
        f.write_str(if self.network_blocked {
            ", network blocked"
        } else {
            ", network allowed"
        })?;
        if self.mode == SandboxMode::WorkspaceWrite {
            f.write_str(if self.git_read_only {
                ", .git read-only"
            } else {
                ", .git writable"
            })?;
        }
        f.write_str(if self.unix_sockets_blocked {
            ", unix sockets blocked"
        } else {
            ", unix sockets allowed"
        })?;
        match self.read_denied.len() {
            0 => {}
            1 => f.write_str(", 1 read denied")?,
            n => write!(f, ", {n} reads denied")?,
        }
        if !self.warnings.is_empty() {
            write!(f, ", {} warning(s)", self.warnings.len())?;
        }
        f.write_str(")")
    }
}

/// A prepared sandbox: the [`EffectiveSandbox`] report plus the pre-built kernel objects
/// (Landlock ruleset fd, compiled seccomp filter, mount plan). Cheap to install on several
/// commands; the pre-built data is shared and never consumed.
pub struct Confinement {
    effective: EffectiveSandbox,
    plan: Option<Arc<ChildPlan>>,
}

impl fmt::Debug for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Confinement")
            .field("effective", &self.effective)
            .finish_non_exhaustive()
    }
}

impl Confinement {
    /// The sandbox that [`install`](Confinement::install) enforces.
    pub fn effective(&self) -> &EffectiveSandbox {
        &self.effective
    }

    /// Registers a `pre_exec` closure on `cmd` that confines the child. A no-op under
    /// full-access.
    ///
    /// The closure is async-signal-safe (no allocation, no locks; only syscalls on data built
    /// by [`SandboxPolicy::prepare`]) and independent of other `pre_exec` closures (e.g. the
    /// engine's `setsid`/`PR_SET_PDEATHSIG`), whichever order they run in. If any layer
    /// reported in [`effective`](Confinement::effective) cannot be applied, the closure fails
    /// and `spawn` returns that errno: the command never runs less confined than reported.
    pub fn install(self, cmd: &mut std::process::Command) {
        self.install_ref(cmd);
    }

    /// Same as [`install`](Confinement::install) without consuming the confinement, for
    /// spawning several commands from one `prepare`.
    pub fn install_ref(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let Some(plan) = self.plan.clone() else {
            return;
        };
        // SAFETY: the closure only reads `plan` (built in the parent) and issues raw syscalls;
        // it allocates nothing and takes no locks, so it is safe between fork and exec.
        unsafe {
            cmd.pre_exec(move || plan.apply());
        }
    }
}

impl Confinement {
    /// The host descriptors [`Confinement::apply_in_child`] uses (the Landlock
    /// ruleset), for `spawn`'s table sharing (`spawn.rs`).
    pub(crate) fn child_fds(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.plan
            .as_ref()
            .and_then(|p| p.landlock_fd.as_ref())
            .map(|fd| fd.as_raw_fd())
    }

    /// Whether the child gets a private mount namespace (every mode but
    /// full-access, where the kernel has them).
    pub(crate) fn unshares_mounts(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| p.mounts.is_some())
    }

    /// Applies the sandbox in the calling process: for the child side of
    /// [`crate::spawn`] (between `clone` and `exec`). Async-signal-safe and
    /// allocation-free, like the `pre_exec` closure of
    /// [`install`](Confinement::install). A no-op under full-access.
    pub(crate) fn apply_in_child(&self) -> std::io::Result<()> {
        match &self.plan {
            Some(plan) => plan.apply(),
            None => Ok(()),
        }
    }
}

/// Data the child applies between fork and exec. Built entirely in the parent.
struct ChildPlan {
    mounts: Option<mounts::MountPlan>,
    landlock_fd: Option<std::os::fd::OwnedFd>,
    /// Rules the child adds for the private `/dev/shm` and `/dev/pts` it mounts.
    landlock_rules: Vec<landlock::ChildRule>,
    /// Compiled once per process (`seccomp::socket_filters_shared`).
    seccomp: Arc<Vec<seccompiler::BpfProgram>>,
}

impl ChildPlan {
    /// Runs in the child. Order matters: mounts before Landlock (a Landlock domain may no
    /// longer mount), seccomp last (it does not filter anything the earlier steps need, but
    /// keeping it last keeps the reasoning simple).
    fn apply(&self) -> std::io::Result<()> {
        if let Some(m) = &self.mounts {
            m.apply_in_child()?;
        }
        caps::drop_all_in_child()?;
        // SAFETY: plain prctl.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let Some(fd) = &self.landlock_fd {
            landlock::restrict_self_in_child(fd, &self.landlock_rules)?;
        }
        for prog in self.seccomp.iter() {
            seccomp::apply_in_child(prog)?;
        }
        Ok(())
    }
}

/// Errors building a sandbox. Kernel features that are merely missing are *not* errors (see
/// [`EffectiveSandbox::warnings`]).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// `--sandbox` / manifest value that is not one of the three modes.
    #[error("unknown sandbox mode {0:?} (expected read-only, workspace-write or full-access)")]
    UnknownMode(String),
    /// The workspace root does not exist or cannot be resolved.
    #[error("sandbox workspace {}: {source}", path.display())]
    Workspace {
        /// The path as given.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Filesystem error while preparing (temp dir, mount paths).
    #[error("sandbox: {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A path contains a NUL byte and cannot be passed to the kernel.
    #[error("sandbox path contains a NUL byte: {}", .0.display())]
    NulInPath(PathBuf),
    /// Building the Landlock ruleset failed.
    #[error("building the Landlock ruleset: {0}")]
    Landlock(#[from] ::landlock::RulesetError),
    /// A Landlock rule's path could not be opened.
    #[error("opening {} for a Landlock rule: {source}", path.display())]
    LandlockPath {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        source: ::landlock::PathFdError,
    },
    /// The kernel reported Landlock support but no ruleset could be created.
    #[error("Landlock ruleset could not be created although the kernel reports support")]
    LandlockUnavailable,
    /// Compiling the seccomp filter failed.
    #[error("compiling the seccomp filter: {0}")]
    Seccomp(#[from] seccompiler::BackendError),
    /// A `deny_read` entry that is not an absolute path or one starting `~/`.
    #[error("deny_read entry {entry:?} is {why}")]
    DenyRead {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        why: String,
    },
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn absolute_lexical(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Lexical normalisation (`.` dropped, `..` pops), without touching the filesystem:
/// for wording errors about paths that cannot be opened and for judging denials.
pub(crate) fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
