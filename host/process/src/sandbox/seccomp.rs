//! Network block: a seccomp filter that refuses every socket family but `AF_UNIX`.
//!
//! # Why seccomp rather than a fresh network namespace
//!
//! - **Works without privileges or namespaces.** It needs only `no_new_privs`, so the network
//!   block does not depend on user namespaces (disabled or AppArmor-restricted on several
//!   distributions) nor on the mount step; the two layers fail independently.
//! - **Keeps `AF_UNIX`.** Local IPC that many tools rely on (pathname sockets, `socketpair`)
//!   keeps working; a fresh netns would also cut abstract sockets, which Landlock's
//!   `AbstractUnixSocket` scope already restricts to the sandbox's own.
//! - **Loopback is blocked too**, which is what the spec asks for: `socket(AF_INET*)` fails
//!   before any address is involved. (A fresh netns would have `lo` down, with the same
//!   effect, but a netns with `lo` up would let commands talk to each other, not to the host.)
//! - **Deterministic, attributable error**: `EPERM` ("Operation not permitted") at `socket(2)`,
//!   which [`denial_hint`](super::denial_hint) maps to "network is blocked".
//!
//! Same approach as Codex CLI's Linux sandbox (`socket` allowed only for `AF_UNIX`).
//!
//! # Rules
//!
//! - `socket(domain, ..)`, `socketpair(domain, ..)`: `EPERM` unless `domain == AF_UNIX`
//!   (this includes `AF_NETLINK`, `AF_PACKET`, `AF_VSOCK`, ...);
//! - `io_uring_setup(2)`: `EPERM` (io_uring's `IORING_OP_SOCKET` does not go through the
//!   syscall filter);
//! - everything else: allowed.
//!
//! On x86_64 a second, hand-written filter refuses x32-ABI syscall numbers (bit 30 set), which
//! the first filter's per-number rules would not match; seccompiler's own architecture check
//! kills the process on a foreign `AUDIT_ARCH` (i386 `int 0x80`), so 32-bit binaries cannot
//! run confined. Sockets inherited from the host are not affected: the host must not leak
//! them (std's `Command` only passes stdio).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::SandboxError;

/// Compiles the filters (in the parent). Applied in order by [`apply_in_child`].
pub(crate) fn network_filters() -> Result<Vec<BpfProgram>, SandboxError> {
    let arch: TargetArch = std::env::consts::ARCH.try_into()?;
    let not_unix = || {
        SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, vec![not_unix()?]);
    rules.insert(libc::SYS_socketpair, vec![not_unix()?]);
    rules.insert(libc::SYS_io_uring_setup, vec![]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let mut progs = vec![BpfProgram::try_from(filter)?];
    if let Some(x32) = x32_filter() {
        progs.push(x32);
    }
    Ok(progs)
}

/// x86_64 only: `EPERM` for any syscall number with `__X32_SYSCALL_BIT` set.
fn x32_filter() -> Option<BpfProgram> {
    if std::env::consts::ARCH != "x86_64" {
        return None;
    }
    const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    let ins = |code, jt, jf, k| seccompiler::sock_filter { code, jt, jf, k };
    Some(vec![
        // seccomp_data.nr is at offset 0; arch is already validated by the main filter.
        ins(BPF_LD_W_ABS, 0, 0, 0),
        ins(BPF_JGE_K, 0, 1, X32_SYSCALL_BIT),
        ins(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::EPERM as u32),
        ins(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ])
}

/// Runs in the child: install one filter. `no_new_privs` must already be set.
pub(crate) fn apply_in_child(prog: &BpfProgram) -> std::io::Result<()> {
    // seccompiler::apply_filter only builds a `sock_fprog` on the stack and calls prctl and
    // seccomp(2); on failure errno is still the syscall's (nothing runs in between).
    if seccompiler::apply_filter(prog).is_err() {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
