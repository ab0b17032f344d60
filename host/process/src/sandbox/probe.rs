//! What the running kernel supports, computed once per process.

use std::io;
use std::sync::OnceLock;

/// Kernel features relevant to the sandbox, as found by [`probe`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelSupport {
    /// Landlock ABI version reported by the kernel (`None`: not built in or not enabled at
    /// boot, see `lsm=` on the kernel command line).
    pub landlock_abi: Option<i32>,
    /// seccomp filters available (`prctl(PR_GET_SECCOMP)` succeeds).
    pub seccomp: bool,
    /// A process can create a user namespace (`unshare(CLONE_NEWUSER)` in a throwaway child).
    pub user_namespaces: bool,
    /// A child can get a private mount namespace the way [`super::mounts`] does it (directly
    /// with `CAP_SYS_ADMIN`, else through a user namespace) and make `/` private.
    pub mount_namespace: bool,
    /// Why the mount namespace probe failed, if it did.
    pub mount_namespace_error: Option<String>,
}

/// Probes the kernel once (the first call starts two short-lived children, sharing the
/// host's memory until they exit, that only issue
/// `unshare`/`mount` syscalls and `_exit`); later calls return the cached answer.
pub fn probe() -> KernelSupport {
    static SUPPORT: OnceLock<KernelSupport> = OnceLock::new();
    SUPPORT
        .get_or_init(|| {
            let mount = crate::spawn::in_child(&|| {
                super::mounts::enter_namespace()?;
                super::mounts::make_root_private()
            });
            let userns = crate::spawn::in_child(&|| {
                // SAFETY: plain syscall in the throwaway child.
                if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
            // SAFETY: plain prctl.
            let seccomp = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } >= 0;
            let support = KernelSupport {
                landlock_abi: super::landlock::kernel_abi(),
                seccomp,
                user_namespaces: userns.is_ok(),
                mount_namespace: mount.is_ok(),
                mount_namespace_error: mount.err().map(|e| e.to_string()),
            };
            tracing::debug!(?support, "sandbox kernel probe");
            support
        })
        .clone()
}
