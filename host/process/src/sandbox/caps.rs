//! Capability drop: a confined command keeps no capabilities, even when the host runs as root.
//!
//! Landlock restricts root too, but root keeps powers that are not filesystem accesses
//! (loading kernel modules from memory, BPF, raw I/O, reboot, setting the clock, ...).
//! So, when the child holds `CAP_SETPCAP` (root, or a process inside the user namespace of
//! [`super::mounts`]), it empties its capability bounding set (`PR_CAPBSET_DROP` for every
//! capability), clears its ambient set and its inheritable set. At `execve` the new
//! permitted set of a uid-0 process is `(inheritable ∩ file inheritable) ∪ (file permitted ∩
//! bounding)`, i.e. empty. Effective capabilities are left until `exec`, so other `pre_exec`
//! closures (and the mount step) are unaffected. An unprivileged child without
//! `CAP_SETPCAP` has nothing to drop: `no_new_privs` already stops file capabilities and
//! setuid bits from granting any.

use std::io;

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Runs in the child (async-signal-safe: syscalls on stack data only).
pub(crate) fn drop_all_in_child() -> io::Result<()> {
    // SAFETY: prctl/capget/capset on stack structs of the documented v3 layout.
    unsafe {
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        const CAP_SETPCAP: u32 = 8; // <linux/capability.h>
        let setpcap = CAP_SETPCAP;
        if data[0].effective & (1 << setpcap) == 0 {
            return Ok(());
        }
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                // EINVAL: capability unknown to this kernel, so we are past the last one.
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                    break;
                }
                return Err(io::Error::last_os_error());
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        data[0].inheritable = 0;
        data[1].inheritable = 0;
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
