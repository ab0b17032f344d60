//! Process creation without copying the host: `clone(CLONE_VM | CLONE_VFORK)`.
//!
//! `fork` copies every mapping and page table of the host (its wasmtime pools, JIT
//! code and heap) only for `exec` to throw the copy away; on the 2-core VMs we measure
//! on that is 1-1.5 ms per command and most of a `true` tool call (benchmark P2 in
//! BENCHMARKS.md). `posix_spawn` avoids it with `CLONE_VM | CLONE_VFORK`, but cannot
//! run our child-side setup (session, death signal, working directory, the kernel
//! sandbox). [`spawn`] does the same as `posix_spawn` and runs that setup:
//!
//! - the child shares the host's memory and the calling thread is suspended until
//!   the child calls `execve` or `_exit`, so everything the child uses is built
//!   beforehand ([`Program`]) and the child only makes system calls: no allocation,
//!   no locks (the same contract as a `pre_exec` closure, which the setup already
//!   met);
//! - all signals are blocked around `clone`; the child resets every handler to its
//!   default (the host's handlers must never run on the child's stack) and unblocks
//!   all signals before `exec`, as `posix_spawn` does;
//! - a failing step or `execve` sends its errno through a close-on-exec pipe, so a
//!   spawn error is reported as the step's `io::Error` and no process is left;
//! - only the standard streams (and [`Stdio::extra`]) reach the program: every
//!   other descriptor, whatever the host inherited from its own launcher, is marked
//!   close-on-exec last (`close_range(CLOSE_RANGE_CLOEXEC)`), so a command cannot
//!   write through an fd the host never meant to give it.
//!
//! The child's pidfd comes from `CLONE_PIDFD`; [`Spawned::pidfd`] is how the sessions
//! engine waits for the exit (readiness on the pidfd, then `waitid(P_PIDFD)`).
//!
//! **Born in its cgroup.** A child that moves itself into a cgroup (writing to
//! `cgroup.procs`) is a cgroup migration, which takes the kernel's global
//! `cgroup_threadgroup_rwsem` for writing; after an idle spell that waits for a
//! whole RCU grace period (`rcu_sync_enter`, 9-16 ms on the benchmark machine:
//! the first tool call after an agent's pause). So when the
//! caller names a cgroup v2 directory ([`Cgroup`]), the child is created inside it
//! by `clone3(CLONE_INTO_CGROUP)` (Linux 5.7), which takes that lock only for
//! reading, through a small per-architecture trampoline ([`clone3_vfork`]: the
//! child starts on its own stack, as glibc's `clone3.S` does). Where `clone3` is
//! missing (an older kernel, a container seccomp profile answering `ENOSYS`) the
//! first such spawn reports [`io::ErrorKind::Unsupported`] and every later one does
//! at once ([`clone3_usable`]); the caller then has the child join by writing
//! `cgroup.procs` itself, as before.
//!
//! **The descriptor table.** A child made without `CLONE_FILES` starts with a copy of
//! the host's whole descriptor table, and `execve` then closes every copied
//! close-on-exec descriptor again: work in proportion to what the host holds, which
//! is several descriptors per running session (benchmark P5: starting a session cost
//! 1.5 ms with 500 alive and 2.8 ms with 3,000). So when every descriptor the child
//! uses is below [`LOW_FDS`], the child shares the host's table (`CLONE_FILES`) and
//! its first step is `close_range(LOW_FDS, ~0, CLOSE_RANGE_UNSHARE)`, which gives it
//! a private copy of only the descriptors below [`LOW_FDS`] (Linux 5.9; on an older
//! kernel it falls back to `unshare(CLONE_FILES)`, a copy of all). Once the host
//! holds more than a few hundred descriptors, the sessions engine keeps what a
//! session holds for its life above [`LOW_FDS`] ([`move_above_low_fds`]), so the
//! low range holds at most a few hundred long-lived descriptors, the host's own
//! and what a start uses. Until that first step the child touches no descriptor.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

/// What to run: built in the parent, read by the child.
pub(crate) struct Program {
    path: CString,
    // Owned strings behind the pointer arrays.
    _argv: Vec<CString>,
    _envp: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp_ptrs: Vec<*const libc::c_char>,
}

// SAFETY: the raw pointers point into the CStrings owned by the same struct.
unsafe impl Send for Program {}

impl Program {
    /// `path` with arguments `argv` (including `argv[0]`) and exactly `env`.
    ///
    /// Errors: `InvalidInput` for a NUL byte anywhere.
    pub(crate) fn new(
        path: &OsStr,
        argv: &[&OsStr],
        env: &[(OsString, OsString)],
    ) -> io::Result<Program> {
        let c = |s: &[u8]| {
            CString::new(s).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "argument contains a NUL byte")
            })
        };
        let path = c(path.as_bytes())?;
        let argv: Vec<CString> = argv
            .iter()
            .map(|a| c(a.as_bytes()))
            .collect::<io::Result<_>>()?;
        let envp: Vec<CString> = env
            .iter()
            .map(|(k, v)| {
                let mut pair = k.as_bytes().to_vec();
                pair.push(b'=');
                pair.extend_from_slice(v.as_bytes());
                c(&pair)
            })
            .collect::<io::Result<_>>()?;
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        Ok(Program {
            argv_ptrs: ptrs(&argv),
            envp_ptrs: ptrs(&envp),
            path,
            _argv: argv,
            _envp: envp,
        })
    }
}

/// The child's standard streams: `fds[i]` becomes fd `i` (`-1`: left as the host's,
/// which callers never want; use `/dev/null`), plus at most one more descriptor
/// `extra = (fd, target)` that becomes `target` (e.g. a long command's script).
pub(crate) struct Stdio {
    pub(crate) fds: [RawFd; 3],
    pub(crate) extra: Option<(RawFd, RawFd)>,
}

/// A started child.
#[derive(Debug)]
pub(crate) struct Spawned {
    /// Its pid.
    pub(crate) pid: u32,
    /// A pidfd for it (readable once it has exited).
    pub(crate) pidfd: OwnedFd,
}

/// Everything the child reads, behind one pointer.
struct ChildArgs<'a> {
    program: &'a Program,
    stdio: &'a Stdio,
    setup: &'a (dyn Fn() -> io::Result<()> + Sync),
    error_pipe: RawFd,
    /// The child shares the host's descriptor table until its first step (module
    /// docs).
    shared_table: bool,
    /// Set by the child when it could not make its table private (the kernel or
    /// a seccomp profile refuses both `close_range` and `unshare`).
    unshare_refused: std::sync::atomic::AtomicBool,
}

/// False once a child could not make a shared table private: later children
/// get a copy of the host's table from `clone` (the module docs' slow path).
/// The children [`spawn`] made that their owner has not reaped yet (a session's
/// exit waiter, the error path below, [`in_child`]): a zombie child of the host
/// that is not in this set is an orphan the host adopted as subreaper, which the
/// adopted-orphan reaper (`sessions/reaper.rs`) may reap. Locked across `clone`,
/// so that no child of ours exists unregistered while the reaper looks.
static OWN_CHILDREN: std::sync::Mutex<std::collections::BTreeSet<u32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// [`OWN_CHILDREN`], locked (a poisoned lock is still the set).
pub(crate) fn own_children() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<u32>> {
    OWN_CHILDREN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The owner of child `pid` (one [`spawn`] made) has reaped it: its pid may now
/// name an adopted orphan.
pub(crate) fn reaped(pid: u32) {
    own_children().remove(&pid);
}

static SHARE_TABLES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Stack for the child: it only makes system calls, but the sandbox setup nests a
/// few frames.
const CHILD_STACK: usize = 256 * 1024;

/// Descriptors below this (1,024) are the ones a child made with a shared table
/// copies (see the module docs).
pub(crate) const LOW_FDS: RawFd = 1024;

/// Descriptors below this (512) are left where they are by
/// [`move_above_low_fds`]: a host holding fewer than that has a small table to
/// copy anyway, and moving one above [`LOW_FDS`] would first grow the table, which
/// in a process with threads waits for an RCU grace period (`expand_fdtable`,
/// 15-30 ms on the benchmark machine: most of a short-lived `toolhost call`).
const MOVE_FROM: RawFd = LOW_FDS / 2;

/// `fd` moved to the lowest free number at or above [`LOW_FDS`] (close-on-exec),
/// for a descriptor held for a session's life, so children do not copy it (module
/// docs), once the host holds enough descriptors for that to matter ([`MOVE_FROM`]:
/// `fd` itself is at least 512). Left where it is otherwise, or when moving fails
/// (a soft open-file limit of at most [`LOW_FDS`], or none free): then starts only
/// lose the speed-up.
pub(crate) fn move_above_low_fds(fd: OwnedFd) -> OwnedFd {
    if fd.as_raw_fd() < MOVE_FROM || fd.as_raw_fd() >= LOW_FDS {
        return fd;
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own makes a new one we then own.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, LOW_FDS) };
    if moved < 0 {
        return fd;
    }
    // SAFETY: a new descriptor nothing else owns; the old one closes with `fd`.
    unsafe { OwnedFd::from_raw_fd(moved) }
}

/// Starts `program` with `stdio`, running `setup` in the child first (it must make
/// only async-signal-safe system calls and must not allocate; see the module docs).
/// `setup_fds` are the descriptors `setup` uses (besides those it opens itself).
/// The fds in `stdio` stay open in the parent (the caller closes its copies).
///
/// Errors: the errno of the first failing step (`clone`, a `setup` step, a `dup2`
/// or `execve`); then no process is left behind.
pub(crate) fn spawn(
    program: &Program,
    stdio: &Stdio,
    setup: &(dyn Fn() -> io::Result<()> + Sync),
    setup_fds: &[RawFd],
    cgroup: Option<Cgroup>,
) -> io::Result<Spawned> {
    if cgroup.is_some() && !clone3_usable() {
        return Err(clone3_unsupported());
    }
    let (err_read, err_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
    let shared_table = SHARE_TABLES.load(std::sync::atomic::Ordering::Relaxed)
        && (stdio.fds.iter().copied())
            .chain(stdio.extra.map(|(fd, _)| fd))
            .chain(setup_fds.iter().copied())
            .chain([err_write.as_raw_fd()])
            .all(|fd| fd < LOW_FDS);
    let args = ChildArgs {
        program,
        stdio,
        setup,
        error_pipe: err_write.as_raw_fd(),
        shared_table,
        unshare_refused: std::sync::atomic::AtomicBool::new(false),
    };
    let files = if shared_table { libc::CLONE_FILES } else { 0 };
    let stack = ChildStack::new()?;
    let (pid, pidfd) = {
        let mut own = own_children();
        let _blocked = BlockedSignals::all()?;
        let mut pidfd: libc::c_int = -1;
        let arg: *mut libc::c_void = (&args as *const ChildArgs<'_>).cast_mut().cast();
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | files;
        let pid = match cgroup {
            Some(Cgroup(dir)) => {
                let clone_args = CloneArgs {
                    flags: flags as u64 | CLONE_INTO_CGROUP,
                    pidfd: &mut pidfd as *mut libc::c_int as u64,
                    exit_signal: libc::SIGCHLD as u64,
                    stack: stack.base as u64,
                    stack_size: stack.len as u64,
                    cgroup: dir as u64,
                    ..CloneArgs::default()
                };
                // SAFETY: as for `clone` below; `clone_args` lives on our stack
                // until the call returns in the parent.
                match unsafe { clone3_vfork(&clone_args, child_main, arg) } {
                    Ok(pid) => pid,
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::E2BIG)) => {
                        CLONE3.store(CLONE3_UNUSABLE, std::sync::atomic::Ordering::Relaxed);
                        return Err(clone3_unsupported());
                    }
                    Err(e) => return Err(e),
                }
            }
            None => {
                // SAFETY: the stack is ours and outlives the child's use of it
                // (CLONE_VFORK: we are suspended until it execs or exits); `args`
                // lives on our stack for as long. `child_main` only makes system
                // calls.
                let pid = unsafe {
                    libc::clone(
                        child_main,
                        stack.top(),
                        flags | libc::SIGCHLD,
                        arg,
                        &mut pidfd as *mut libc::c_int,
                    )
                };
                if pid < 0 {
                    return Err(io::Error::last_os_error());
                }
                pid
            }
        };
        own.insert(pid as u32);
        (pid, pidfd)
    };
    drop(stack);
    // SAFETY: CLONE_PIDFD stored a new fd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    drop(err_write);
    let mut errno = [0u8; 4];
    let n = nix::unistd::read(&err_read, &mut errno).unwrap_or(0);
    if n == errno.len() {
        // The child failed and has exited: reap it.
        let mut status = 0;
        // SAFETY: plain waitpid on our own child.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        reaped(pid as u32);
        if args
            .unshare_refused
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            // Not the command's fault: from now on children copy the table.
            SHARE_TABLES.store(false, std::sync::atomic::Ordering::Relaxed);
            return spawn(program, stdio, setup, setup_fds, cgroup);
        }
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
    }
    Ok(Spawned {
        pid: pid as u32,
        pidfd,
    })
}

/// Runs `f` in a `CLONE_VM | CLONE_VFORK` child and returns its result (the child
/// `_exit`s; nothing is executed). For probing what a child may do (unshare, ...)
/// without forking the host. `f` has the same contract as `spawn`'s `setup`.
pub(crate) fn in_child(f: &(dyn Fn() -> io::Result<()> + Sync)) -> io::Result<()> {
    in_child_born_in(f, None)
}

/// [`in_child`] with the child born in cgroup v2 directory `cgroup`, as [`spawn`]
/// does it (errors as there: [`io::ErrorKind::Unsupported`] without `clone3`).
pub(crate) fn in_child_born_in(
    f: &(dyn Fn() -> io::Result<()> + Sync),
    cgroup: Option<Cgroup>,
) -> io::Result<()> {
    let program = Program::new(OsStr::new("/"), &[], &[])?;
    let stdio = Stdio {
        fds: [-1, -1, -1],
        extra: None,
    };
    let run = || -> io::Result<()> {
        f()?;
        // Report success as "errno 0" and stop before exec.
        Err(io::Error::from_raw_os_error(0))
    };
    match spawn(&program, &stdio, &run, &[], cgroup) {
        Err(e) if e.raw_os_error() == Some(0) => Ok(()),
        Err(e) => Err(e),
        Ok(spawned) => {
            // Unreachable (the child never execs), but never leave a process.
            let mut status = 0;
            // SAFETY: waitpid on our own child.
            unsafe { libc::waitpid(spawned.pid as i32, &mut status, 0) };
            reaped(spawned.pid);
            Err(io::Error::other("the probe child did not stop"))
        }
    }
}

/// A cgroup v2 directory (an open descriptor of it, `O_PATH` is enough) that
/// [`spawn`] creates the child in (`CLONE_INTO_CGROUP`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cgroup(pub(crate) RawFd);

/// `CLONE_INTO_CGROUP` (linux/sched.h, Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, 88 bytes;
/// linux/sched.h).
#[repr(C, align(8))]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// [`CLONE3`]: not tried yet, worked, unusable here.
const CLONE3_UNKNOWN: u8 = 0;
const CLONE3_WORKS: u8 = 1;
const CLONE3_UNUSABLE: u8 = 2;

/// Whether `clone3` can be used here (one value for the process: the kernel and
/// any seccomp profile are the same for every spawn).
static CLONE3: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        CLONE3_UNKNOWN
    } else {
        CLONE3_UNUSABLE
    },
);

/// False once a spawn found `clone3` missing (`ENOSYS`, or `E2BIG`: a kernel
/// before 5.7 without `CLONE_INTO_CGROUP`), and on architectures without a
/// trampoline ([`clone3_vfork`]); true before the first try.
pub(crate) fn clone3_usable() -> bool {
    CLONE3.load(std::sync::atomic::Ordering::Relaxed) != CLONE3_UNUSABLE
}

fn clone3_unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "clone3 with CLONE_INTO_CGROUP is not available (Linux 5.7 or a seccomp profile \
         allowing clone3 needed): children join their cgroups themselves",
    )
}

/// `clone3(args)`: in the parent, the child's pid; the child starts on the stack
/// `args` names and runs `f(arg)`, then `exit`s with its result (it never returns
/// here). The trampoline is glibc's `clone3.S` for the two architectures we build
/// for: after the system call the child has no valid frame of ours, so it must
/// not run any compiled code of this function.
///
/// # Safety
///
/// As for `clone(2)` with `CLONE_VM`: `args.stack` is a mapping the child may use
/// for as long as it runs, `f` only makes system calls (it shares our memory), and
/// everything `arg` points to outlives the child's use of it (`CLONE_VFORK`).
#[cfg(target_arch = "x86_64")]
unsafe fn clone3_vfork(
    args: &CloneArgs,
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> io::Result<libc::pid_t> {
    let ret: i64;
    // SAFETY: the caller's contract; `syscall` preserves every register but rax,
    // rcx and r11, so the child finds `f` and `arg` in r9 and r8.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            // The child, on its own stack: no frame to return to.
            "xor ebp, ebp",
            "and rsp, -16",
            "mov rdi, r8",
            "call r9",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r8") arg,
            in("r9") f,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    clone3_result(ret)
}

/// `clone3` on aarch64: see the x86_64 version.
///
/// # Safety
///
/// As for the x86_64 version.
#[cfg(target_arch = "aarch64")]
unsafe fn clone3_vfork(
    args: &CloneArgs,
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> io::Result<libc::pid_t> {
    let ret: i64;
    // SAFETY: the caller's contract; `svc` preserves every register but x0.
    unsafe {
        std::arch::asm!(
            "svc 0",
            "cbnz x0, 2f",
            // The child, on its own stack: no frame to return to.
            "mov x29, xzr",
            "mov x30, xzr",
            "mov x0, x3",
            "blr x2",
            "mov x8, {exit}",
            "svc 0",
            "brk #0",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("x0") args as *const CloneArgs as i64 => ret,
            in("x1") std::mem::size_of::<CloneArgs>(),
            in("x2") f,
            in("x3") arg,
            in("x8") libc::SYS_clone3,
            options(nostack),
        );
    }
    clone3_result(ret)
}

/// Elsewhere there is no trampoline: `clone3` counts as missing.
///
/// # Safety
///
/// Nothing to uphold: it never creates a child.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn clone3_vfork(
    _args: &CloneArgs,
    _f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _arg: *mut libc::c_void,
) -> io::Result<libc::pid_t> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// The parent's side of a raw `clone3` return: a pid, or `-errno`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn clone3_result(ret: i64) -> io::Result<libc::pid_t> {
    if ret < 0 {
        return Err(io::Error::from_raw_os_error(-ret as i32));
    }
    CLONE3.store(CLONE3_WORKS, std::sync::atomic::Ordering::Relaxed);
    Ok(ret as libc::pid_t)
}

/// The child's stack: its own mapping with a `PROT_NONE` guard page below it, so
/// an overflow faults instead of writing over the host's memory (the child shares
/// it). Unmapped on drop.
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

impl ChildStack {
    fn new() -> io::Result<ChildStack> {
        // SAFETY: a fresh anonymous mapping we own; sysconf is a plain query.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE).max(4096) as usize;
            let len = CHILD_STACK + page;
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = ChildStack { base, len };
            if libc::mprotect(base, page, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// The initial stack pointer: the end of the mapping (page-aligned, so
    /// 16-byte aligned as the ABI wants).
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of our own mapping.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Blocks every signal for the current thread until dropped.
struct BlockedSignals {
    old: libc::sigset_t,
}

impl BlockedSignals {
    fn all() -> io::Result<BlockedSignals> {
        // SAFETY: sigset manipulation on local values.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            let mut old: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(BlockedSignals { old })
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// The child: runs on its own stack in the host's memory until `execve`.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` the parent keeps alive while suspended.
    let args = unsafe { &*(arg as *const ChildArgs<'_>) };
    let errno = match child_steps(args) {
        Ok(()) => libc::EINVAL, // execve returned without an error: cannot happen.
        Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL),
    };
    let bytes = errno.to_ne_bytes();
    // SAFETY: write + _exit only.
    unsafe {
        libc::write(args.error_pipe, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(127)
    }
}

fn child_steps(args: &ChildArgs<'_>) -> io::Result<()> {
    let last = io::Error::last_os_error;
    // SAFETY (whole function): system calls on data prepared by the parent.
    unsafe {
        if args.shared_table {
            // A private table before anything else: a copy of the low range only
            // (module docs), or of all of it on a kernel without
            // CLOSE_RANGE_UNSHARE. Until then this child must not change a
            // descriptor: the table is the host's.
            let low = LOW_FDS as libc::c_uint;
            let unshared = libc::syscall(
                libc::SYS_close_range,
                low,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_UNSHARE,
            ) == 0;
            if !unshared && libc::unshare(libc::CLONE_FILES) != 0 {
                args.unshare_refused
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(last());
            }
        }
        // The host's handlers live in its memory and must not run here; ignored
        // signals stay ignored except SIGPIPE, which Rust ignores for itself,
        // and SIGTTOU and SIGTTIN when the host ignores them for itself
        // (`terminal::ignore_terminal_stops`).
        let own_stops = crate::terminal::terminal_stops_ignored();
        for sig in 1..=libc::SIGRTMAX() {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut current) != 0 {
                continue;
            }
            let ignored = current.sa_sigaction == libc::SIG_IGN;
            let own = sig == libc::SIGPIPE
                || (own_stops && (sig == libc::SIGTTOU || sig == libc::SIGTTIN));
            if current.sa_sigaction != libc::SIG_DFL && (!ignored || own) {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        let std_fds = args
            .stdio
            .fds
            .iter()
            .enumerate()
            .map(|(target, &fd)| (fd, target as RawFd));
        for (fd, target) in std_fds.chain(args.stdio.extra) {
            if fd < 0 {
                continue;
            }
            if fd == target {
                // dup2 onto itself would keep close-on-exec set.
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(last());
                }
            } else if libc::dup2(fd, target) < 0 {
                return Err(last());
            }
        }
        (args.setup)()?;
        close_other_fds(args.stdio.extra.map(|(_, target)| target))?;
        libc::execve(
            args.program.path.as_ptr(),
            args.program.argv_ptrs.as_ptr(),
            args.program.envp_ptrs.as_ptr(),
        );
        Err(last())
    }
}

/// In the child: marks every descriptor from 3 up close-on-exec, except `keep`
/// (the `extra` target). Async-signal-safe. `close_range` needs Linux 5.11 for
/// `CLOSE_RANGE_CLOEXEC`; on older kernels each fd below the hard open-file limit
/// (at most 2^20) is marked with `fcntl`.
fn close_other_fds(keep: Option<RawFd>) -> io::Result<()> {
    let keep = keep.filter(|&k| k >= 3);
    let ranges: [(u32, u32); 2] = match keep {
        Some(k) => [(3, k as u32 - 1), (k as u32 + 1, u32::MAX)],
        None => [(3, u32::MAX), (1, 0)],
    };
    for (low, high) in ranges {
        if low > high {
            continue;
        }
        // SAFETY: close_range only changes descriptor flags of this process.
        let rc =
            unsafe { libc::syscall(libc::SYS_close_range, low, high, libc::CLOSE_RANGE_CLOEXEC) };
        if rc == 0 {
            continue;
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit on a local; fcntl on our own descriptors.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return Err(io::Error::last_os_error());
            }
            let end = limit.rlim_max.min(1 << 20) as u32;
            for fd in low..end.min(high.saturating_add(1)) {
                let flags = libc::fcntl(fd as RawFd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd as RawFd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(pid: u32) -> i32 {
        let mut status = 0;
        unsafe { libc::waitpid(pid as i32, &mut status, 0) };
        status
    }

    #[test]
    fn runs_a_program_with_exact_args_and_env() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let program = Program::new(
            OsStr::new("/bin/sh"),
            &[
                OsStr::new("sh"),
                OsStr::new("-c"),
                OsStr::new("printf '%s:%s' \"$1\" \"$X\"; exit 3"),
                OsStr::new("sh"),
                OsStr::new("a b"),
            ],
            &[("X".into(), "y=z".into())],
        )
        .unwrap();
        let stdio = Stdio {
            fds: [null.as_raw_fd(), w.as_raw_fd(), w.as_raw_fd()],
            extra: None,
        };
        let spawned = spawn(&program, &stdio, &|| Ok(()), &[], None).unwrap();
        drop(w);
        let mut out = String::new();
        use std::io::Read;
        std::fs::File::from(r).read_to_string(&mut out).unwrap();
        assert_eq!(out, "a b:y=z");
        let status = wait(spawned.pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), 3);
    }

    #[test]
    fn a_failing_setup_step_or_exec_is_the_spawn_error() {
        let program = Program::new(OsStr::new("/bin/true"), &[OsStr::new("true")], &[]).unwrap();
        let stdio = Stdio {
            fds: [-1, -1, -1],
            extra: None,
        };
        let err = spawn(
            &program,
            &stdio,
            &|| Err(io::Error::from_raw_os_error(libc::EPERM)),
            &[],
            None,
        )
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
        let missing = Program::new(OsStr::new("/no/such"), &[OsStr::new("x")], &[]).unwrap();
        let err = spawn(&missing, &stdio, &|| Ok(()), &[], None).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn only_the_standard_streams_and_extra_reach_the_program() {
        use std::io::Read;
        // A descriptor without close-on-exec, as a launcher may leave one.
        let (r, w) = nix::unistd::pipe().unwrap();
        let leaked = w.as_raw_fd();
        let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let extra = std::fs::File::open("/dev/null").unwrap();
        let script =
            format!("ls /proc/self/fd | sort -n | tr '\\n' ' '; echo x >&{leaked} && echo leaked");
        let program = Program::new(
            OsStr::new("/bin/sh"),
            &[OsStr::new("sh"), OsStr::new("-c"), OsStr::new(&script)],
            &[],
        )
        .unwrap();
        let stdio = Stdio {
            fds: [-1, out_w.as_raw_fd(), out_w.as_raw_fd()],
            extra: Some((extra.as_raw_fd(), 63)),
        };
        let spawned = spawn(&program, &stdio, &|| Ok(()), &[], None).unwrap();
        drop(out_w);
        let mut out = String::new();
        std::fs::File::from(out_r).read_to_string(&mut out).unwrap();
        wait(spawned.pid);
        drop(w);
        let mut written = String::new();
        std::fs::File::from(r).read_to_string(&mut written).unwrap();
        assert_eq!(written, "", "{out}");
        assert!(!out.contains("leaked"), "{out}");
        // 0-2, 63 (extra) and the fd `ls` reads /proc/self/fd through.
        let fds: Vec<&str> = out
            .split_whitespace()
            .take_while(|w| w.parse::<u32>().is_ok())
            .collect();
        assert!(fds.contains(&"63"), "{out}");
        assert!(!fds.contains(&leaked.to_string().as_str()), "{out}");
        assert!(fds.len() <= 5, "{out}");
    }

    /// `fd` duplicated to a number at or above `min` (the original closed).
    fn at_or_above(fd: OwnedFd, min: RawFd) -> OwnedFd {
        let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
        assert!(new >= min, "{}", io::Error::last_os_error());
        unsafe { OwnedFd::from_raw_fd(new) }
    }

    /// What the host's descriptors 0-2 are (their `/proc/self/fd` links).
    fn std_links() -> Vec<std::path::PathBuf> {
        (0..3)
            .map(|fd| std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_default())
            .collect()
    }

    /// A child that shares the host's table until it unshares it (every fd it uses
    /// is low) and one that cannot (its stdout is above `LOW_FDS`) both get their
    /// streams, and neither changes the host's own descriptors 0-2.
    #[test]
    fn children_get_their_streams_and_leave_the_hosts_table_alone() {
        use std::io::Read;
        // Room above LOW_FDS (a hard limit of 1,024 would leave none: then only
        // the shared-table case can run).
        let room = crate::raise_fd_limit().is_ok_and(|l| l.current > LOW_FDS as u64);
        for high in [false, true].into_iter().filter(|&h| !h || room) {
            let before = std_links();
            let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
            let w = if high {
                move_above_low_fds(at_or_above(w, MOVE_FROM))
            } else {
                w
            };
            assert_eq!(w.as_raw_fd() >= LOW_FDS, high, "{}", w.as_raw_fd());
            let program = Program::new(
                OsStr::new("/bin/sh"),
                &[
                    OsStr::new("sh"),
                    OsStr::new("-c"),
                    OsStr::new("echo out; echo err >&2"),
                ],
                &[],
            )
            .unwrap();
            let null = std::fs::File::open("/dev/null").unwrap();
            let stdio = Stdio {
                fds: [null.as_raw_fd(), w.as_raw_fd(), w.as_raw_fd()],
                extra: None,
            };
            let spawned = spawn(&program, &stdio, &|| Ok(()), &[null.as_raw_fd()], None).unwrap();
            drop(w);
            let mut out = String::new();
            std::fs::File::from(r).read_to_string(&mut out).unwrap();
            assert_eq!(out, "out\nerr\n", "high: {high}");
            assert_eq!(wait(spawned.pid), 0);
            assert_eq!(std_links(), before, "the host's 0-2 (high: {high})");
        }
    }

    #[test]
    fn a_moved_descriptor_is_above_the_low_range_and_close_on_exec() {
        let _ = crate::raise_fd_limit();
        let (r, _w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        // Low descriptors stay where they are (a small table is cheap to copy).
        let r = move_above_low_fds(r);
        assert!(r.as_raw_fd() < MOVE_FROM, "{}", r.as_raw_fd());
        let r = at_or_above(r, MOVE_FROM);
        let low = r.as_raw_fd();
        let moved = move_above_low_fds(r);
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        if limit.rlim_cur > LOW_FDS as u64 {
            assert!(moved.as_raw_fd() >= LOW_FDS, "{}", moved.as_raw_fd());
            let flags = unsafe { libc::fcntl(moved.as_raw_fd(), libc::F_GETFD) };
            assert_ne!(flags & libc::FD_CLOEXEC, 0);
        } else {
            assert_eq!(moved.as_raw_fd(), low, "left where it was");
        }
    }

    #[test]
    fn in_child_reports_what_the_child_may_do() {
        assert!(in_child(&|| Ok(())).is_ok());
        let err = in_child(&|| Err(io::Error::from_raw_os_error(libc::EACCES))).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    }
}
