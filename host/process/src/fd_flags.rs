//! File-status flags of a descriptor the host did not open (its stdin and
//! stdout under `toolhost serve`, which its MCP stdio transport reads on the
//! reactor), and the open flag crates without libc need ([`O_NOFOLLOW`]).

use std::os::fd::AsFd;

use nix::fcntl::{FcntlArg, OFlag, fcntl};

/// `O_NOFOLLOW` (open(2)) for `std::os::unix::fs::OpenOptionsExt::custom_flags`:
/// an open whose last component is a symbolic link fails with `ELOOP` instead
/// of opening (or creating) whatever the link names. Here so that crates
/// without libc (toolhost-host-session's event log) open their files this way.
pub const O_NOFOLLOW: i32 = libc::O_NOFOLLOW;

/// Sets or clears `O_NONBLOCK` on `fd`'s open file description and returns
/// whether it was set before, so the caller can put it back. The flag belongs
/// to the description, not the descriptor: every process sharing it (a
/// parent that passed the pipe as stdin, a `dup`) sees the change, which is
/// why a caller restores it when done.
///
/// Errors: the `fcntl` error (`EBADF` for a closed descriptor).
pub fn set_nonblocking(fd: impl AsFd, nonblocking: bool) -> std::io::Result<bool> {
    let fd = fd.as_fd();
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    let was = flags.contains(OFlag::O_NONBLOCK);
    if was != nonblocking {
        let mut new = flags;
        new.set(OFlag::O_NONBLOCK, nonblocking);
        fcntl(fd, FcntlArg::F_SETFL(new))?;
    }
    Ok(was)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_reports_and_restores_the_flag() {
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert!(!set_nonblocking(&r, true).unwrap());
        assert!(set_nonblocking(&r, true).unwrap());
        assert!(set_nonblocking(&r, false).unwrap());
        assert!(!set_nonblocking(&r, false).unwrap());
    }
}
