//! A read-only root with the writable roots bound back, read-only carve-outs inside them,
//! the host's state dir hidden, denied reads masked, and a private `/dev/shm` and
//! `/dev/pts`, via a private mount namespace.
//!
//! Landlock cannot subtract: write on the workspace implies write on `.git` and on any
//! protected host dir beneath it, and read on `/` implies read on the host's state dir
//! (other sessions' logs) and on every denied path. It has no right for metadata either
//! (mode bits, times, extended attributes). And commands need a writable `/dev/shm` and
//! ptys, which must not be the host's shared ones. So, whenever the kernel allows it, the
//! child:
//!
//! 1. enters a new mount namespace: `unshare(CLONE_NEWNS)` when it has `CAP_SYS_ADMIN`
//!    (root), otherwise `unshare(CLONE_NEWUSER | CLONE_NEWNS)` and writes
//!    `/proc/self/setgroups` = `deny`, `/proc/self/uid_map` and `gid_map` = `<id> <id> 1`
//!    (its own ids, like `unshare -r` but without becoming root: files keep their owners and
//!    exec drops the namespace capabilities because the uid is not 0);
//! 2. makes `/` `MS_REC | MS_PRIVATE`, so nothing it mounts propagates to the host, and
//!    opens the mask file (`O_PATH`) while the state dir it lies in is still visible;
//!    then makes `/` read-only and `nosuid` recursively (`mount_setattr`, `AT_RECURSIVE`),
//!    binds each writable root onto itself and clears `RDONLY` on that bind and on each
//!    submount beneath it that was writable in the host's `mountinfo` (never one that was
//!    read-only), and `chdir`s to its cwd again by path (the cwd it `fchdir`ed to lies on
//!    the original, now read-only mount; the same device and inode are checked);
//! 3. *pins* each ancestor of a hidden directory that lies beneath a writable root: binds
//!    it onto itself (`MS_BIND | MS_REC`, still writable). A mount point cannot be renamed
//!    or removed in the namespace it is mounted in (`EBUSY`), so no command can move the
//!    state dir away and have the host write into a directory of its own making;
//! 4. *hides* each hidden directory (the host's state dir): opens each of its *holes*
//!    (the session's private temp dir, and the workspace if it lies inside) with `O_PATH`,
//!    mounts an empty `tmpfs` on the directory (`MS_NOSUID | MS_NODEV | MS_NOEXEC`, 64 KiB),
//!    creates the holes' mount points inside it, makes it read-only, and binds each hole
//!    back from `/proc/self/fd/N` at its own path. Every spelling of the path reaches the
//!    cover (mounts are on the directory, not on a name), so only the holes are left of it;
//! 5. bind-mounts each read-only path onto itself (`MS_BIND | MS_REC`) and sets
//!    `MOUNT_ATTR_RDONLY` on the whole bind tree with `mount_setattr(2)` + `AT_RECURSIVE`
//!    (Linux ≥ 5.12; it changes only that flag, so flags locked by a user namespace such as
//!    `nosuid`/`nodev` are preserved). On `ENOSYS` it falls back to
//!    `mount(MS_REMOUNT | MS_BIND | MS_RDONLY | <current flags from statvfs>)` (not recursive);
//! 6. re-binds writable, on top, any writable root that lies beneath a read-only path (e.g. a
//!    private temp dir inside a protected state dir that is itself inside the workspace);
//! 7. masks each denied directory like step 4 (a `tmpfs` of mode `0000`, or `0111` with
//!    the workspace or temp dir beneath it bound back), and binds the mask file over each
//!    denied file, read-only (`read_deny.rs`);
//! 8. mounts a fresh `tmpfs` on `/dev/shm` (`MS_NOSUID | MS_NODEV`, mode 1777, at most 256 MiB), so POSIX shared
//!    memory and semaphores work without reaching the host's shared `/dev/shm` or another
//!    session's: it is private to this namespace and freed with it;
//! 9. mounts a new `devpts` instance on `/dev/pts` (`newinstance,ptmxmode=0666,mode=0620`),
//!    so `/dev/ptmx` (which opens the `devpts` at `/dev/pts` next to it) hands out ptys of
//!    this instance only: the host's and other sessions' terminals are not reachable by path.
//!
//! `.git` binds are *optional*: a path that vanished between `prepare` and the child
//! (`ENOENT`/`ENOTDIR`) is skipped, since there is nothing left to protect, instead of
//! failing the start. Every other step fails the start (fail closed).
//!
//! Writes there fail with `EROFS` ("Read-only file system"). The Landlock domain applied
//! afterwards forbids any further mount operation, so the binds cannot be undone.
//! Everything here runs in the child and is async-signal-safe: paths are pre-built `CString`s,
//! and id maps and `/proc/self/fd/N` paths are formatted into stack buffers.

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

/// Most holes one hidden directory may have (the private temp dir and the workspace).
pub(crate) const MAX_HOLES: usize = 2;

/// A directory to hide (see [`MountPlan::new`]), pre-built for the child.
#[derive(Debug)]
struct Hide {
    dir: CString,
    /// The cover's `tmpfs` options (its mode: `0755` for the state dir, `0000` for a
    /// denied directory, `0111` for a denied one with holes).
    data: CString,
    /// Each hole: its path, and the directories to create inside the tmpfs down to it
    /// (outermost first, the hole itself last).
    holes: Vec<(CString, Vec<CString>)>,
}

/// Pre-built mount operations for the child.
#[derive(Debug)]
pub struct MountPlan {
    /// `/` made read-only (and `nosuid`) recursively first, then these writable roots
    /// bound back writable, each with the submounts beneath it that were writable in the
    /// host (`None`: the kernel has no `mount_setattr`, nothing is made read-only).
    read_only_root: Option<Vec<(CString, Vec<CString>)>>,
    /// Directories bound onto themselves (writable), so no command can rename them.
    pins: Vec<CString>,
    hides: Vec<Hide>,
    /// Denied directories: covered like `hides`, after everything else.
    masks: Vec<Hide>,
    /// Denied files, each covered by a read-only bind of `mask_file`.
    file_masks: Vec<CString>,
    /// The empty mode-`0000` file bound over each of `file_masks`.
    mask_file: Option<CString>,
    /// Read-only binds, each with whether it is optional (`.git`: skipped if it vanished).
    read_only: Vec<(CString, bool)>,
    writable: Vec<CString>,
    shm: bool,
    pts: bool,
}

/// What [`MountPlan::new`] builds, by path (all canonical).
pub(crate) struct MountSpec<'a> {
    /// Make `/` read-only and bind these writable roots back writable, each with the
    /// submounts beneath it that were writable (`None`: leave `/` as it is).
    pub read_only_root: Option<&'a [(PathBuf, Vec<PathBuf>)]>,
    /// Denied directories with the directories beneath them to bind back (as `hidden`),
    /// each with the mode of its cover.
    pub masks: &'a [(PathBuf, Vec<PathBuf>, u32)],
    /// Denied files (anything but a directory), covered by `mask_file`.
    pub file_masks: &'a [PathBuf],
    /// An empty file of mode `0000` that no command can write.
    pub mask_file: Option<&'a PathBuf>,
    /// Directories bound onto themselves, writable: mount points cannot be renamed or
    /// removed, so an ancestor of a hidden directory inside a writable root stays put.
    pub pins: &'a [PathBuf],
    /// Directories covered by an empty read-only `tmpfs`, each with the directories
    /// beneath it (at most [`MAX_HOLES`]) bound back in at their own paths.
    pub hidden: &'a [(PathBuf, Vec<PathBuf>)],
    /// Read-only binds; those also in `optional` may vanish before the child runs.
    pub read_only: &'a [PathBuf],
    /// See `read_only`.
    pub optional: &'a [PathBuf],
    /// Writable re-binds on top of the read-only ones.
    pub writable: &'a [PathBuf],
    /// A private `/dev/shm`.
    pub shm: bool,
    /// A private `/dev/pts`.
    pub pts: bool,
}

impl MountPlan {
    /// In this order in the child: `pins`, `hidden` (with their holes), `read_only`
    /// binds, `writable` re-binds on top, then a private `/dev/shm` and/or `/dev/pts`
    /// when asked for.
    ///
    /// Errors: [`SandboxError::NulInPath`]; [`SandboxError::Io`] for a hidden dir with
    /// more than [`MAX_HOLES`] holes or a hole not beneath it.
    pub(crate) fn new(spec: MountSpec<'_>) -> Result<Self, SandboxError> {
        let c = |p: &PathBuf| {
            CString::new(p.as_os_str().as_bytes()).map_err(|_| SandboxError::NulInPath(p.clone()))
        };
        let build = |dir: &PathBuf, holes: &[PathBuf], mode: u32| -> Result<Hide, SandboxError> {
            let bad = |what| SandboxError::Io {
                what,
                path: dir.clone(),
                source: io::Error::from(io::ErrorKind::InvalidInput),
            };
            if holes.len() > MAX_HOLES {
                return Err(bad("hiding (too many directories to keep inside)"));
            }
            let mut built = Vec::new();
            for hole in holes {
                let rest = hole
                    .strip_prefix(dir)
                    .map_err(|_| bad("hiding (a kept directory is not beneath it)"))?;
                let mut chain = Vec::new();
                let mut at = dir.clone();
                for part in rest.components() {
                    at.push(part);
                    chain.push(c(&at)?);
                }
                built.push((c(hole)?, chain));
            }
            let data = format!("mode={mode:04o},size=64k,nr_inodes=1024");
            Ok(Hide {
                dir: c(dir)?,
                data: CString::new(data).unwrap_or_default(),
                holes: built,
            })
        };
        let hides = spec
            .hidden
            .iter()
            .map(|(dir, holes)| build(dir, holes, 0o755))
            .collect::<Result<Vec<_>, _>>()?;
        let masks = spec
            .masks
            .iter()
            .map(|(dir, holes, mode)| build(dir, holes, *mode))
            .collect::<Result<Vec<_>, _>>()?;
        let read_only_root = match spec.read_only_root {
            None => None,
            Some(roots) => Some(
                roots
                    .iter()
                    .map(|(root, subs)| {
                        Ok((c(root)?, subs.iter().map(c).collect::<Result<_, _>>()?))
                    })
                    .collect::<Result<Vec<_>, SandboxError>>()?,
            ),
        };
        Ok(MountPlan {
            read_only_root,
            pins: spec.pins.iter().map(c).collect::<Result<_, _>>()?,
            hides,
            masks,
            file_masks: spec.file_masks.iter().map(c).collect::<Result<_, _>>()?,
            mask_file: spec.mask_file.map(c).transpose()?,
            read_only: spec
                .read_only
                .iter()
                .map(|p| Ok((c(p)?, spec.optional.contains(p))))
                .collect::<Result<_, SandboxError>>()?,
            writable: spec.writable.iter().map(c).collect::<Result<_, _>>()?,
            shm: spec.shm,
            pts: spec.pts,
        })
    }

    /// Runs in the child, before Landlock.
    pub(crate) fn apply_in_child(&self) -> io::Result<()> {
        enter_namespace()?;
        make_root_private()?;
        // The mask file is in the state dir, which is covered below: held from here.
        let mask_fd = match &self.mask_file {
            // SAFETY: a valid NUL-terminated path.
            Some(p) => unsafe { libc::open(p.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) },
            None => -1,
        };
        if self.mask_file.is_some() && mask_fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let result = self.apply_with(mask_fd);
        if mask_fd >= 0 {
            // SAFETY: the fd this function opened.
            unsafe { libc::close(mask_fd) };
        }
        result
    }

    fn apply_with(&self, mask_fd: libc::c_int) -> io::Result<()> {
        if let Some(roots) = &self.read_only_root {
            set_attrs(c"/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, true)?;
            for (root, subs) in roots {
                bind_self(root)?;
                set_attrs(root, 0, MOUNT_ATTR_RDONLY, false)?;
                for sub in subs {
                    set_attrs(sub, 0, MOUNT_ATTR_RDONLY, false)?;
                }
            }
            // The child `fchdir`ed before this namespace existed: its cwd is on the
            // original (now read-only) mount, beneath the writable bind.
            reenter_cwd()?;
        }
        for p in &self.pins {
            bind_self(p)?;
        }
        for h in &self.hides {
            hide(h)?;
        }
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
        for m in &self.masks {
            hide(m)?;
        }
        if mask_fd >= 0 {
            let mut buf = [0u8; 32];
            let source = format_fd_path(&mut buf, mask_fd);
            for p in &self.file_masks {
                // SAFETY: NUL-terminated source (stack buffer) and target.
                let rc = unsafe {
                    libc::mount(
                        source.as_ptr(),
                        p.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    )
                };
                check(rc.into())?;
                set_read_only(p, true)?;
            }
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

/// Moves the cwd onto the mounts now visible at its path: `getcwd` into a stack buffer,
/// `chdir` to it, and the same directory (device and inode) before and after, else
/// `ESTALE` (a path that now leads elsewhere is never taken). A cwd whose path is too
/// long for the buffer stays where it is. Async-signal-safe.
fn reenter_cwd() -> io::Result<()> {
    let mut buf = [0u8; 4096];
    // SAFETY: stat structs on the stack; getcwd writes at most `buf.len()` bytes.
    unsafe {
        let mut before: libc::stat = std::mem::zeroed();
        check(libc::stat(c".".as_ptr(), &mut before).into())?;
        if libc::getcwd(buf.as_mut_ptr().cast(), buf.len()).is_null() {
            return Ok(());
        }
        check(libc::chdir(buf.as_ptr().cast()).into())?;
        let mut after: libc::stat = std::mem::zeroed();
        check(libc::stat(c".".as_ptr(), &mut after).into())?;
        if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino) {
            return Err(io::Error::from_raw_os_error(libc::ESTALE));
        }
    }
    Ok(())
}

/// Covers `h.dir` with an empty `tmpfs` (read-only once the holes' mount points are
/// made) and binds each hole back in at its own path. Each hole is opened before the
/// cover goes on (the fd names the real directory, in this namespace) and bound from
/// `/proc/self/fd/N`. Async-signal-safe: fds in a stack array, paths pre-built.
fn hide(h: &Hide) -> io::Result<()> {
    let mut fds: [libc::c_int; MAX_HOLES] = [-1; MAX_HOLES];
    let result = hide_with(h, &mut fds);
    for fd in fds {
        if fd >= 0 {
            // SAFETY: fds this function opened.
            unsafe { libc::close(fd) };
        }
    }
    result
}

fn hide_with(h: &Hide, fds: &mut [libc::c_int; MAX_HOLES]) -> io::Result<()> {
    for (i, (hole, _)) in h.holes.iter().enumerate() {
        // SAFETY: a valid NUL-terminated path.
        let fd = unsafe {
            libc::open(
                hole.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        fds[i] = fd;
    }
    // SAFETY: NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            h.dir.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            h.data.as_ptr().cast(),
        )
    };
    check(rc.into())?;
    for (_, chain) in &h.holes {
        for dir in chain {
            // SAFETY: a valid NUL-terminated path.
            if unsafe { libc::mkdir(dir.as_ptr(), 0o755) } != 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EEXIST) {
                    return Err(err);
                }
            }
        }
    }
    set_read_only(&h.dir, true)?;
    for (i, (hole, _)) in h.holes.iter().enumerate() {
        let mut buf = [0u8; 32];
        let source = format_fd_path(&mut buf, fds[i]);
        // SAFETY: NUL-terminated source (stack buffer) and target.
        let rc = unsafe {
            libc::mount(
                source.as_ptr(),
                hole.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
        };
        check(rc.into())?;
    }
    Ok(())
}

/// Formats `/proc/self/fd/<fd>` (NUL-terminated) into `buf` without allocating.
fn format_fd_path(buf: &mut [u8; 32], fd: libc::c_int) -> &std::ffi::CStr {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut v = fd.max(0) as u32;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = PREFIX.len();
    for i in (0..n).rev() {
        buf[len] = digits[i];
        len += 1;
    }
    buf[len] = 0;
    std::ffi::CStr::from_bytes_with_nul(&buf[..=len]).unwrap_or(c"/proc/self/fd/-1")
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
const MOUNT_ATTR_NOSUID: u64 = 0x2;

/// `mount_setattr(2)` on `p`: sets `set`, clears `clear`, on the whole tree beneath it
/// when `recursive`. Errors as the syscall (`ENOSYS` before Linux 5.12).
fn set_attrs(p: &std::ffi::CStr, set: u64, clear: u64, recursive: bool) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive {
        libc::AT_RECURSIVE as libc::c_uint
    } else {
        0
    };
    // SAFETY: valid path and attr pointer with its exact size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            p.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(rc)
}

/// Whether the kernel can make `/` read-only the way [`MountPlan`] does (for the probe:
/// run in a throwaway child inside a private namespace).
pub(crate) fn read_only_root_works() -> io::Result<()> {
    set_attrs(c"/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, true)
}

fn set_read_only(p: &CString, read_only: bool) -> io::Result<()> {
    let (set, clear) = if read_only {
        (MOUNT_ATTR_RDONLY, 0)
    } else {
        (0, MOUNT_ATTR_RDONLY)
    };
    match set_attrs(p, set, clear, true) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => remount_fallback(p, read_only),
        r => r,
    }
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

    #[test]
    fn fd_path_format() {
        let mut buf = [0u8; 32];
        assert_eq!(super::format_fd_path(&mut buf, 7), c"/proc/self/fd/7");
        assert_eq!(
            super::format_fd_path(&mut buf, 2_147_483_647),
            c"/proc/self/fd/2147483647"
        );
    }
}
