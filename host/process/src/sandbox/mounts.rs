//! Read-only carve-outs inside writable roots, and a private `/dev/shm` and `/dev/pts`, via a
//! private mount namespace.
//!
//! Landlock cannot subtract: write on the workspace implies write on `.git` and on any
//! protected host dir beneath it. And commands need a writable `/dev/shm` and ptys, which
//! must not be the host's shared ones. So, whenever the kernel allows it, the child:
//!
//! 1. enters a new mount namespace: `unshare(CLONE_NEWNS)` when it has `CAP_SYS_ADMIN`
//!    (root), otherwise `unshare(CLONE_NEWUSER | CLONE_NEWNS)` and writes
//!    `/proc/self/setgroups` = `deny`, `/proc/self/uid_map` and `gid_map` = `<id> <id> 1`
//!    (its own ids, like `unshare -r` but without becoming root: files keep their owners and
//!    exec drops the namespace capabilities because the uid is not 0);
//! 2. makes `/` `MS_REC | MS_PRIVATE`, so nothing it mounts propagates to the host;
//! 3. bind-mounts each read-only path onto itself (`MS_BIND | MS_REC`) and sets
//!    `MOUNT_ATTR_RDONLY` on the whole bind tree with `mount_setattr(2)` + `AT_RECURSIVE`
//!    (Linux ≥ 5.12; it changes only that flag, so flags locked by a user namespace such as
//!    `nosuid`/`nodev` are preserved). On `ENOSYS` it falls back to
//!    `mount(MS_REMOUNT | MS_BIND | MS_RDONLY | <current flags from statvfs>)` (not recursive);
//! 4. re-binds writable, on top, any writable root that lies beneath a read-only path (e.g. a
//!    private temp dir inside a protected state dir that is itself inside the workspace);
//! 5. mounts a fresh `tmpfs` on `/dev/shm` (`MS_NOSUID | MS_NODEV`, mode 1777, at most 256 MiB), so POSIX shared
//!    memory and semaphores work without reaching the host's shared `/dev/shm` or another
//!    session's: it is private to this namespace and freed with it;
//! 6. mounts a new `devpts` instance on `/dev/pts` (`newinstance,ptmxmode=0666,mode=0620`),
//!    so `/dev/ptmx` (which opens the `devpts` at `/dev/pts` next to it) hands out ptys of
//!    this instance only: the host's and other sessions' terminals are not reachable by path.
//!
//! `.git` binds are *optional*: a path that vanished between `prepare` and the child
//! (`ENOENT`/`ENOTDIR`) is skipped, since there is nothing left to protect, instead of
//! failing the start. Every other step fails the start (fail closed).
//!
//! Writes there fail with `EROFS` ("Read-only file system"). The Landlock domain applied
//! afterwards forbids any further mount operation, so the binds cannot be undone.
//! Everything here runs in the child and is async-signal-safe: paths are pre-built `CString`s
//! and id maps are formatted into stack buffers.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::SandboxError;

/// Where the private `tmpfs` goes.
pub const DEV_SHM: &str = "/dev/shm";
/// Where the private `devpts` instance goes.
pub const DEV_PTS: &str = "/dev/pts";
/// The pty multiplexer next to [`DEV_PTS`]; it opens ptys of the `devpts` mounted there.
pub const DEV_PTMX: &str = "/dev/ptmx";

/// Pre-built mount operations for the child.
#[derive(Debug)]
pub struct MountPlan {
    /// Read-only binds, each with whether it is optional (`.git`: skipped if it vanished).
    read_only: Vec<(CString, bool)>,
    writable: Vec<CString>,
    shm: bool,
    pts: bool,
}

impl MountPlan {
    /// `read_only` binds (those in `optional` may vanish before the child runs), `writable`
    /// re-binds on top, then a private `/dev/shm` and/or `/dev/pts` when asked for.
    pub(crate) fn new(
        read_only: &[PathBuf],
        optional: &[PathBuf],
        writable: &[PathBuf],
        (shm, pts): (bool, bool),
    ) -> Result<Self, SandboxError> {
        let c = |p: &PathBuf| {
            CString::new(p.as_os_str().as_bytes()).map_err(|_| SandboxError::NulInPath(p.clone()))
        };
        Ok(MountPlan {
            read_only: read_only
                .iter()
                .map(|p| Ok((c(p)?, optional.contains(p))))
                .collect::<Result<_, SandboxError>>()?,
            writable: writable.iter().map(c).collect::<Result<_, _>>()?,
            shm,
            pts,
        })
    }

    /// Runs in the child, before Landlock.
    pub(crate) fn apply_in_child(&self) -> io::Result<()> {
        enter_namespace()?;
        make_root_private()?;
        for (p, optional) in &self.read_only {
            match bind_self(p) {
                Err(e)
                    if *optional
                        && matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) =>
                {
                    continue;
                }
                r => r?,
            }
            set_read_only(p, true)?;
        }
        for p in &self.writable {
            bind_self(p)?;
            set_read_only(p, false)?;
        }
        if self.shm {
            mount_private_shm()?;
        }
        if self.pts {
            mount_private_pts()?;
        }
        Ok(())
    }
}

/// A fresh `tmpfs` on `/dev/shm` (in the child's private mount namespace). Bounded
/// (256 MiB; a tmpfs of half the RAM is the kernel default), so a command cannot fill
/// the host's memory through shared memory.
pub(crate) fn mount_private_shm() -> io::Result<()> {
    mount_fresh(
        c"tmpfs",
        c"/dev/shm",
        libc::MS_NOSUID | libc::MS_NODEV,
        c"mode=1777,size=256m",
    )
}

/// A new `devpts` instance on `/dev/pts` (in the child's private mount namespace).
pub(crate) fn mount_private_pts() -> io::Result<()> {
    mount_fresh(
        c"devpts",
        c"/dev/pts",
        libc::MS_NOSUID | libc::MS_NOEXEC,
        c"newinstance,ptmxmode=0666,mode=0620",
    )
}

/// Mounts a new instance of file system `fstype` on `target` with `flags` and `data`.
/// Async-signal-safe (runs in the child between `clone` and `exec`).
fn mount_fresh(
    fstype: &std::ffi::CStr,
    target: &std::ffi::CStr,
    flags: libc::c_ulong,
    data: &std::ffi::CStr,
) -> io::Result<()> {
    // SAFETY: NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    check(rc.into())
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Enters a private mount namespace (with a user namespace if unprivileged).
pub(crate) fn enter_namespace() -> io::Result<()> {
    // SAFETY: plain syscalls; buffers are on the stack.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EPERM) {
            return Err(err);
        }
        let (uid, gid) = (libc::getuid(), libc::getgid());
        check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS).into())?;
        // A process that changed uid before us (e.g. `Command::uid`) is non-dumpable, which
        // makes its /proc/self files root-owned and the id maps unwritable. `execve` resets
        // the flag from the new image anyway, so this only affects the pre-exec window.
        if libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 {
            check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0).into())?;
        }
        write_proc(c"/proc/self/setgroups", b"deny")?;
        let mut buf = [0u8; 48];
        let n = format_id_map(&mut buf, uid);
        write_proc(c"/proc/self/uid_map", &buf[..n])?;
        let n = format_id_map(&mut buf, gid);
        write_proc(c"/proc/self/gid_map", &buf[..n])?;
    }
    Ok(())
}

/// `mount --make-rprivate /`.
pub(crate) fn make_root_private() -> io::Result<()> {
    // SAFETY: static strings, null data.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    check(rc.into())
}

fn bind_self(p: &CString) -> io::Result<()> {
    // SAFETY: valid NUL-terminated paths.
    let rc = unsafe {
        libc::mount(
            p.as_ptr(),
            p.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    check(rc.into())
}

/// `struct mount_attr` from `<linux/mount.h>` (MOUNT_ATTR_SIZE_VER0 = 32 bytes).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_RDONLY: u64 = 0x1;

fn set_read_only(p: &CString, read_only: bool) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: valid path and attr pointer with its exact size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            p.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(err);
    }
    remount_fallback(p, read_only)
}

/// Pre-5.12 kernels: classic bind remount, keeping the flags the mount already has (a user
/// namespace refuses to clear locked ones).
fn remount_fallback(p: &CString, read_only: bool) -> io::Result<()> {
    // SAFETY: statvfs into a zeroed stack struct; mount with valid pointers.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        check(libc::statvfs(p.as_ptr(), &mut st).into())?;
        let mut flags = libc::MS_REMOUNT | libc::MS_BIND;
        for (st_flag, ms_flag) in [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ] {
            if st.f_flag & st_flag != 0 {
                flags |= ms_flag;
            }
        }
        if read_only {
            flags |= libc::MS_RDONLY;
        }
        let rc = libc::mount(
            std::ptr::null(),
            p.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        );
        check(rc.into())
    }
}

/// Opens, writes and closes a `/proc` file; async-signal-safe.
fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: valid path; `data` outlives the write; fd closed on every path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

/// Formats `"<id> <id> 1\n"` into `buf` without allocating; returns the length.
fn format_id_map(buf: &mut [u8; 48], id: u32) -> usize {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut v = id;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = 0;
    for _ in 0..2 {
        for i in (0..n).rev() {
            buf[len] = digits[i];
            len += 1;
        }
        buf[len] = b' ';
        len += 1;
    }
    buf[len] = b'1';
    buf[len + 1] = b'\n';
    len + 2
}

#[cfg(test)]
mod tests {
    #[test]
    fn id_map_format() {
        let mut buf = [0u8; 48];
        let n = super::format_id_map(&mut buf, 0);
        assert_eq!(&buf[..n], b"0 0 1\n");
        let n = super::format_id_map(&mut buf, 4_294_967_295);
        assert_eq!(&buf[..n], b"4294967295 4294967295 1\n");
        let n = super::format_id_map(&mut buf, 1000);
        assert_eq!(&buf[..n], b"1000 1000 1\n");
    }
}
