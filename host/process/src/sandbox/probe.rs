//! What the running kernel supports, computed once per process.

use std::io;
use std::sync::OnceLock;

/// Kernel features relevant to the sandbox, as found by [`probe_kernel`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelSupport {
    /// Landlock ABI version reported by the kernel (`None`: not built in or not enabled at
    /// boot, see `lsm=` on the kernel command line).
    pub landlock_abi: Option<i32>,
    /// seccomp filters available (`prctl(PR_GET_SECCOMP)` succeeds).
    pub seccomp: bool,
    /// A process can create a user namespace (`unshare(CLONE_NEWUSER)` in a throwaway child).
    pub user_namespaces: bool,
    /// Why the user namespace probe failed, if it did (e.g. `Operation not permitted
    /// (os error 1)` where a container's seccomp profile refuses `unshare`).
    #[serde(default)]
    pub user_namespaces_error: Option<String>,
    /// A child can get a private mount namespace the way `mounts.rs` does it (directly
    /// with `CAP_SYS_ADMIN`, else through a user namespace) and make `/` private.
    pub mount_namespace: bool,
    /// Why the mount namespace probe failed, if it did.
    pub mount_namespace_error: Option<String>,
    /// In such a namespace a fresh `tmpfs` can be mounted on `/dev/shm` (which exists), so
    /// commands can get a private, writable `/dev/shm`.
    pub private_shm: bool,
    /// In such a namespace a new `devpts` instance can be mounted on `/dev/pts` (and
    /// `/dev/ptmx` exists), so commands can get private ptys.
    pub private_pts: bool,
    /// In such a namespace `/` can be made read-only recursively with `mount_setattr(2)`
    /// (Linux 5.12), so metadata outside the writable roots is read-only too.
    #[serde(default)]
    pub read_only_root: bool,
}

/// Probes the kernel once (the first call starts up to five short-lived children at once,
/// each sharing the host's memory until it exits, that only issue
/// `unshare`/`mount` syscalls and `_exit`); later calls return the cached answer.
/// Mounts made by a probe child exist only in its own private mount namespace.
pub fn probe_kernel() -> KernelSupport {
    static SUPPORT: OnceLock<KernelSupport> = OnceLock::new();
    SUPPORT
        .get_or_init(|| {
            // The five children run at once, each from a thread of its own (a
            // child only blocks the thread that started it): a start waits for
            // the slowest, not the sum (BENCHMARKS.md, P6 and P9).
            let in_namespace = |mount: fn() -> io::Result<()>| {
                crate::spawn::in_child(&|| {
                    super::mounts::enter_namespace()?;
                    super::mounts::make_root_private()?;
                    mount()
                })
                .is_ok()
            };
            let shm_exists = std::path::Path::new(super::mounts::DEV_SHM).is_dir();
            let pts_exist = std::path::Path::new(super::mounts::DEV_PTS).is_dir()
                && std::path::Path::new(super::mounts::DEV_PTMX).exists();
            let (mount, userns, shm, pts, ro_root) = std::thread::scope(|scope| {
                let userns = scope.spawn(|| {
                    crate::spawn::in_child(&|| {
                        // SAFETY: plain syscall in the throwaway child.
                        if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
                            return Err(io::Error::last_os_error());
                        }
                        Ok(())
                    })
                });
                let shm = shm_exists
                    .then(|| scope.spawn(|| in_namespace(super::mounts::mount_private_shm)));
                let pts = pts_exist
                    .then(|| scope.spawn(|| in_namespace(super::mounts::mount_private_pts)));
                let ro_root = scope.spawn(|| in_namespace(super::mounts::read_only_root_works));
                let mount = crate::spawn::in_child(&|| {
                    super::mounts::enter_namespace()?;
                    super::mounts::make_root_private()
                });
                let joined = |h: Option<std::thread::ScopedJoinHandle<'_, bool>>| {
                    h.is_some_and(|h| h.join().unwrap_or(false))
                };
                let userns = userns
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("the probe thread panicked")));
                (
                    mount,
                    userns,
                    joined(shm),
                    joined(pts),
                    joined(Some(ro_root)),
                )
            });
            let mount_ok = mount.is_ok();
            let private_shm = mount_ok && shm;
            let private_pts = mount_ok && pts;
            // SAFETY: plain prctl.
            let seccomp = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } >= 0;
            let support = KernelSupport {
                landlock_abi: super::landlock::kernel_abi(),
                seccomp,
                user_namespaces: userns.is_ok(),
                user_namespaces_error: userns.err().map(|e| e.to_string()),
                mount_namespace: mount_ok,
                mount_namespace_error: mount.err().map(|e| e.to_string()),
                private_shm,
                private_pts,
                read_only_root: mount_ok && ro_root,
            };
            tracing::debug!(?support, "sandbox kernel probe");
            support
        })
        .clone()
}
