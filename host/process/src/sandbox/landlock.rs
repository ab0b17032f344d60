//! Landlock layer: "read and execute everywhere, write only beneath the writable roots".
//!
//! The ruleset is built in the parent with the `landlock` crate (which opens each
//! rule's path with `O_PATH` and degrades best-effort on older kernels); only the resulting
//! ruleset fd (`O_CLOEXEC`, so it disappears at `exec`) is kept. The child calls
//! `landlock_restrict_self(2)` on it directly, which is a single async-signal-safe syscall
//! and, unlike `RulesetCreated::restrict_self`, does not consume the ruleset, so one
//! [`Confinement`](super::Confinement) can confine many commands.
//!
//! Rules (see the kernel's Documentation/userspace-api/landlock.rst):
//! - handled: every filesystem right of [`TARGET_ABI`] (so anything not granted is denied);
//! - `/`: `Execute | ReadFile | ReadDir` (`AccessFs::from_read`);
//! - each writable root: all rights (`AccessFs::from_all`) except `MakeChar`/`MakeBlock`,
//!   hierarchical. Creating device nodes is never granted: a process with `CAP_MKNOD` could
//!   otherwise create e.g. a block device node for the root disk inside the workspace and
//!   write the disk through it, since the node's *path* is beneath a writable rule;
//! - `/dev/null`: the file rights (read, write, truncate, ioctl on the device);
//! - `/dev/shm`, only when the child mounts a private `tmpfs` there
//!   ([`super::mounts`]): the rights of a writable root;
//! - `/dev/ptmx` and `/dev/pts`, only when the child mounts a private `devpts` instance on
//!   `/dev/pts`: the file rights, so `openpty(3)`/`posix_openpt(3)` work on ptys of that
//!   instance alone (not the host's terminals, not other sessions');
//! - scopes (ABI ≥ 6): `Signal` and `AbstractUnixSocket`, so the command can neither signal
//!   processes outside its domain (the host, other sessions) nor reach host services through
//!   abstract UNIX sockets. Signals *to* the command from the host are unaffected.
//!
//! Landlock ignores rules on a mount point hidden by another mount, so a rule on the
//! host's `/dev/shm` or `/dev/pts` inode would not reach the private mounts on top of them
//! (and must not: it would grant the host's shared ones). Those two rules are therefore
//! added by the child itself ([`ChildRule`]), after mounting and right before enforcing,
//! on the new mounts' root inodes, which exist only in its namespace. The ruleset object
//! is shared by every command spawned from one [`super::Confinement`], so it keeps those
//! rules afterwards; they name inodes no other command can reach, so that is harmless.
//!
//! Rules attach to inodes, not path strings: a symlink inside the workspace pointing outside
//! resolves to an inode with no write rule, so it never opens a write path. A denied access
//! fails with `EACCES` ("Permission denied"); renames/links across rule boundaries with
//! `EXDEV`.
//!
//! A Landlock domain also forbids `mount`, `umount`, remounts and `pivot_root`, which is what
//! keeps the read-only binds of [`super::mounts`] in place even for root.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use ::landlock::{
    ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::SandboxError;

/// The Landlock ABI this code is written and tested against (Linux 6.15). Newer kernels are
/// used at this level; older ones get the subset they support (reported in
/// [`EffectiveSandbox::landlock_abi`](super::EffectiveSandbox::landlock_abi)).
pub const TARGET_ABI: i32 = 7;
const ABI_VETTED: ABI = ABI::V7;

/// The one device node writable in every confined mode.
pub const DEV_NULL: &str = "/dev/null";

/// A rule the child adds, in its own mount namespace, right before enforcing the ruleset:
/// `access` (handled rights only) beneath the directory at `path`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildRule {
    path: &'static CStr,
    access: u64,
}

/// The rules for the private `/dev/shm` (`shm`) and `/dev/pts` (`pts`) the child mounts, with
/// the rights the ruleset handles on a kernel of Landlock ABI `abi`.
pub(crate) fn child_rules(abi: i32, shm: bool, pts: bool) -> Vec<ChildRule> {
    let abi = ABI::from(abi.min(TARGET_ABI));
    let mut rules = Vec::new();
    if shm {
        rules.push(ChildRule {
            path: c"/dev/shm",
            access: (AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock)).bits(),
        });
    }
    if pts {
        rules.push(ChildRule {
            path: c"/dev/pts",
            access: AccessFs::from_file(abi).bits(),
        });
    }
    rules
}

/// Builds the ruleset in the parent and returns its fd. `ptmx`: read/write on `/dev/ptmx`
/// (only when the child mounts a private `devpts`, see [`super::mounts::MountPlan`]).
pub(crate) fn build_ruleset(
    writable_roots: &[PathBuf],
    ptmx: bool,
) -> Result<OwnedFd, SandboxError> {
    let open = |p: &std::path::Path| {
        PathFd::new(p).map_err(|source| SandboxError::LandlockPath {
            path: p.to_path_buf(),
            source,
        })
    };
    let mut created = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_VETTED))?
        .scope(Scope::from_all(ABI_VETTED))?
        .create()?
        .add_rule(PathBeneath::new(
            open("/".as_ref())?,
            AccessFs::from_read(ABI_VETTED),
        ))?
        .add_rule(PathBeneath::new(
            open(DEV_NULL.as_ref())?,
            AccessFs::from_file(ABI_VETTED),
        ))?;
    let writable = AccessFs::from_all(ABI_VETTED) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    for root in writable_roots {
        created = created.add_rule(PathBeneath::new(open(root)?, writable))?;
    }
    if ptmx {
        created = created.add_rule(PathBeneath::new(
            open(super::mounts::DEV_PTMX.as_ref())?,
            AccessFs::from_file(ABI_VETTED),
        ))?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or(SandboxError::LandlockUnavailable)
}

/// Runs in the child: adds `rules` (for mounts it made) to the ruleset, then enforces it
/// on the calling (only) thread. `no_new_privs` must already be set.
pub(crate) fn restrict_self_in_child(fd: &OwnedFd, rules: &[ChildRule]) -> std::io::Result<()> {
    /// `struct landlock_path_beneath_attr` (packed, 12 bytes).
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;
    for rule in rules {
        // SAFETY: a static NUL-terminated path; the attr lives on the stack for the call;
        // the O_PATH fd is closed on every path.
        unsafe {
            let dir = libc::open(
                rule.path.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            if dir < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let attr = PathBeneathAttr {
                allowed_access: rule.access,
                parent_fd: dir,
            };
            let rc = libc::syscall(
                libc::SYS_landlock_add_rule,
                fd.as_raw_fd(),
                LANDLOCK_RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            );
            let err = std::io::Error::last_os_error();
            libc::close(dir);
            if rc != 0 {
                return Err(err);
            }
        }
    }
    // SAFETY: raw syscall on a valid fd; no memory is passed.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's Landlock ABI version (`landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)`), or `None` if Landlock is absent or disabled.
pub(crate) fn kernel_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: documented way to query the ABI; NULL attr with size 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (rc > 0).then_some(rc as i32)
}
