//! Seccomp filters: the *confinement* program, installed in every confined mode, and the
//! *socket* program, which refuses every socket family but `AF_UNIX` (the network block)
//! and/or new `AF_UNIX` sockets (the UNIX-socket block), each unless granted.
//!
//! # The confinement program (every confined mode, whatever the grants)
//!
//! Landlock (up to ABI 7) has no right for mode bits, and `no_new_privs` only stops a
//! setuid file from raising *this* command's privileges: a setuid or setgid file left in
//! the workspace runs with the host user's identity when another user starts it. So no
//! confined command may create one, anywhere, by any of the calls that set mode bits:
//!
//! - `chmod`, `fchmod`, `fchmodat`, `fchmodat2` with `mode & (S_ISUID|S_ISGID)`: `EPERM`;
//! - `open`, `openat` with `O_CREAT` or `__O_TMPFILE` in the flags and such a mode, `creat`
//!   with such a mode: `EPERM`;
//! - `mknod`, `mknodat` with such a mode: `EPERM`;
//! - `openat2(2)`: `ENOSYS`, always. Its mode sits in a struct behind a pointer, which a
//!   seccomp filter cannot read; glibc's `open`/`openat` never use it, and callers that do
//!   (systemd's tools, some runtimes) fall back to `openat` on `ENOSYS`;
//! - `io_uring_setup(2)`: `EPERM`, always (io_uring's `OPENAT` and `SOCKET` operations do
//!   not go through the syscall filter);
//! - `add_key`, `request_key`, `keyctl`: `EPERM`, always, so the host user's kernel
//!   keyrings (session, user, persistent) can be neither read nor changed. Docker's
//!   default profile refuses the same three. This breaks `keyctl` itself and Kerberos
//!   `KEYRING:` credential caches (docs/sandbox.md#metadata-setuid-and-keyrings).
//!
//! File capabilities (`security.capability`) need `CAP_SETFCAP`, which confined commands
//! never hold (`caps.rs`). Metadata of files outside the writable roots (mode, owner,
//! timestamps, extended attributes) is kept by the read-only mounts (`mounts.rs`), not
//! here. On x86_64 the x32-ABI filter below is installed with it in every confined mode.
//!
//! # The socket program
//!
//! ## Why seccomp rather than a fresh network namespace
//!
//! - **Works without privileges or namespaces.** It needs only `no_new_privs`, so the network
//!   block does not depend on user namespaces (disabled or AppArmor-restricted on several
//!   distributions) nor on the mount step; the two layers fail independently.
//! - **`AF_UNIX` is a separate decision.** A fresh netns would cut abstract sockets but not
//!   pathname ones; here the network grant (`--allow-network`) and the UNIX-socket grant
//!   (`--allow-unix-sockets`) are independent, and abstract sockets are confined to the
//!   sandbox's own by Landlock's `AbstractUnixSocket` scope either way.
//! - **Loopback is blocked too**, which is what the spec asks for: `socket(AF_INET*)` fails
//!   before any address is involved. (A fresh netns would have `lo` down, with the same
//!   effect, but a netns with `lo` up would let commands talk to each other, not to the host.)
//! - **Deterministic, attributable error**: `EPERM` ("Operation not permitted") at `socket(2)`,
//!   which [`denial_hint`](super::denial_hint) maps to the grant to ask for.
//!
//! Same approach as Codex CLI's Linux sandbox (`socket` allowed only for `AF_UNIX`).
//!
//! ## Why UNIX sockets are blocked at `socket(2)`
//!
//! A pathname UNIX socket is a door to whatever listens on it, often with more authority than
//! the command: the user's ssh-agent (`$SSH_AUTH_SOCK`), `/var/run/docker.sock` (root on the
//! machine), the session and system D-Bus, systemd's sockets. Landlock up to ABI 7 does not
//! mediate `connect(2)` on pathname sockets (ABI 6 scopes only abstract ones), and seccomp
//! cannot read the address `connect` is given (a pointer), so the filter refuses creating an
//! `AF_UNIX` socket at all: nothing to connect with, and nothing to `bind` either.
//!
//! `socketpair(AF_UNIX, SOCK_STREAM | SOCK_SEQPACKET)` stays allowed: the pair is connected
//! to itself at birth and cannot be re-pointed (`connect` fails with `EISCONN`/`EPROTOTYPE`,
//! a destination address given to `sendto` is refused or ignored), and shells, Python's
//! `socket.socketpair()`/`multiprocessing.Pipe()`, ssh and many daemons use one for IPC
//! between their own processes. A *datagram* pair (`SOCK_DGRAM`, or `SOCK_RAW`, which
//! `AF_UNIX` treats as datagram) is refused: a datagram socket can `connect` or `sendto` any
//! pathname datagram socket later (`/dev/log`, journald, `NOTIFY_SOCKET`).
//!
//! What breaks without the grant (all with `EPERM` at `socket(2)`): ssh-agent and
//! `ControlMaster`, `docker`/`podman` against their daemon, `dbus-send`/`busctl`, gpg
//! (gpg-agent), `tmux`/`screen` servers, git's `credential-cache` and `fsmonitor--daemon`,
//! Python `multiprocessing.connection.Listener`/`Manager` and the `forkserver` start method
//! (the default from Python 3.14), anything that binds a socket of its own in `TMPDIR`
//! (test suites included). glibc degrades silently: `getpwnam` and friends skip `nscd` and
//! `nss-systemd`'s varlink and read `/etc/passwd`, `syslog(3)` drops its messages.
//!
//! ## Rules
//!
//! Without the network grant:
//! - `socket(domain, ..)`, `socketpair(domain, ..)`: `EPERM` unless `domain == AF_UNIX`
//!   (this includes `AF_NETLINK`, `AF_PACKET`, `AF_VSOCK`, ...).
//!
//! Without the UNIX-socket grant:
//! - `socket(AF_UNIX, ..)`: `EPERM`;
//! - `socketpair(AF_UNIX, type, ..)` with `type & SOCK_TYPE_MASK` `SOCK_DGRAM` or `SOCK_RAW`:
//!   `EPERM`.
//!
//! Everything else: allowed (`io_uring_setup(2)` is the confinement program's).
//!
//! On x86_64 a hand-written filter refuses x32-ABI syscall numbers (bit 30 set), which
//! the first filter's per-number rules would not match; seccompiler's own architecture check
//! kills the process on a foreign `AUDIT_ARCH` (i386 `int 0x80`, and with it `socketcall(2)`),
//! so 32-bit binaries cannot run confined. Sockets inherited from the host are not affected:
//! the host passes only stdio (every other descriptor is closed in the child).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::SandboxError;

/// Compiles the filters (in the parent) for a command whose network (`block_network`) and/or
/// UNIX sockets (`block_unix`) are blocked; empty when neither is. Applied in order by
/// [`apply_in_child`].
pub(crate) fn socket_filters(
    block_network: bool,
    block_unix: bool,
) -> Result<Vec<BpfProgram>, SandboxError> {
    if !block_network && !block_unix {
        return Ok(Vec::new());
    }
    let arch: TargetArch = std::env::consts::ARCH.try_into()?;
    let unix = libc::AF_UNIX as u64;
    let domain = |op| SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, unix);
    // `SOCK_TYPE_MASK`: the type without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`.
    let sock_type = |t: i32| {
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(0xf),
            t as u64,
        )
    };
    // Each syscall's rules are alternatives: the call is refused if any matches (an empty
    // list matches every call).
    let mut socket = Vec::new();
    let mut socketpair = Vec::new();
    if block_network {
        socket.push(SeccompRule::new(vec![domain(SeccompCmpOp::Ne)?])?);
        socketpair.push(SeccompRule::new(vec![domain(SeccompCmpOp::Ne)?])?);
    }
    if block_unix {
        if block_network {
            socket.clear();
        } else {
            socket.push(SeccompRule::new(vec![domain(SeccompCmpOp::Eq)?])?);
        }
        for datagram in [libc::SOCK_DGRAM, libc::SOCK_RAW] {
            socketpair.push(SeccompRule::new(vec![
                domain(SeccompCmpOp::Eq)?,
                sock_type(datagram)?,
            ])?);
        }
    }
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_socketpair, socketpair);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    Ok(vec![BpfProgram::try_from(filter)?])
}

/// The confinement programs (module docs), compiled in the parent: the `EPERM` program
/// (setuid/setgid modes, io_uring, keyrings), the `ENOSYS` one (`openat2`) and, on
/// x86_64, the x32 filter.
pub(crate) fn confinement_filters() -> Result<Vec<BpfProgram>, SandboxError> {
    let arch: TargetArch = std::env::consts::ARCH.try_into()?;
    const SETID: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];
    // `(arg & bit) == bit`.
    let has = |arg: u8, bit: u64| {
        SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(bit),
            bit,
        )
    };
    // A mode argument with a set-id bit: one alternative per bit.
    let setid_mode = |arg: u8| -> Result<Vec<SeccompRule>, SandboxError> {
        SETID
            .iter()
            .map(|&bit| Ok(SeccompRule::new(vec![has(arg, bit)?])?))
            .collect()
    };
    // `open`-like calls: the mode counts only when the flags create a file.
    let creating = |flags: u8, mode: u8| -> Result<Vec<SeccompRule>, SandboxError> {
        let mut out = Vec::new();
        for create in [libc::O_CREAT as u64, TMPFILE_BIT] {
            for &bit in &SETID {
                out.push(SeccompRule::new(vec![
                    has(flags, create)?,
                    has(mode, bit)?,
                ])?);
            }
        }
        Ok(out)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_fchmod, setid_mode(1)?);
    rules.insert(libc::SYS_fchmodat, setid_mode(2)?);
    rules.insert(SYS_FCHMODAT2, setid_mode(2)?);
    rules.insert(libc::SYS_openat, creating(2, 3)?);
    rules.insert(libc::SYS_mknodat, setid_mode(2)?);
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_chmod, setid_mode(1)?);
        rules.insert(libc::SYS_open, creating(1, 2)?);
        rules.insert(libc::SYS_creat, setid_mode(1)?);
        rules.insert(libc::SYS_mknod, setid_mode(1)?);
    }
    for always in [
        libc::SYS_io_uring_setup,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
    ] {
        rules.insert(always, vec![]);
    }
    let eperm = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let enosys = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_openat2, vec![])]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    let mut progs = vec![BpfProgram::try_from(eperm)?, BpfProgram::try_from(enosys)?];
    if let Some(x32) = x32_filter() {
        progs.push(x32);
    }
    Ok(progs)
}

/// `fchmodat2(2)` (Linux 6.6): the same number on every architecture.
const SYS_FCHMODAT2: i64 = 452;

/// `__O_TMPFILE` without `O_DIRECTORY` (`O_TMPFILE` is both): the bit that makes `open`
/// create an unnamed file with the given mode.
const TMPFILE_BIT: u64 = (libc::O_TMPFILE & !libc::O_DIRECTORY) as u64;

/// Every program a confined command gets: [`confinement_filters`], then
/// [`socket_filters`] for the blocks asked for. Compiled once per process for each of
/// the four combinations (the programs depend on nothing else) and shared by every
/// command prepared afterwards (built once in the host, applied in each child by
/// `ChildPlan::apply`). Errors: as those two (a failed compilation is not cached).
pub(crate) fn filters_shared(
    block_network: bool,
    block_unix: bool,
) -> Result<std::sync::Arc<Vec<BpfProgram>>, SandboxError> {
    use std::sync::{Arc, OnceLock};
    static COMPILED: [OnceLock<Arc<Vec<BpfProgram>>>; 4] = [const { OnceLock::new() }; 4];
    let slot = &COMPILED[usize::from(block_network) * 2 + usize::from(block_unix)];
    if let Some(progs) = slot.get() {
        return Ok(progs.clone());
    }
    let mut progs = confinement_filters()?;
    progs.extend(socket_filters(block_network, block_unix)?);
    let progs = Arc::new(progs);
    Ok(slot.get_or_init(|| progs).clone())
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
