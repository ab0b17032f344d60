//! The host's open-file limit.

/// The soft `RLIMIT_NOFILE` before and after [`raise_fd_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit the process was started with: what commands should get back
    /// ([`SessionsConfig::child_nofile`](crate::SessionsConfig::child_nofile)).
    pub inherited: u64,
    /// The soft limit now (the hard limit, when raising it worked).
    pub current: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (as Go and most servers do at
/// start-up). Every running session holds a few descriptors (its pipes and pidfd), so
/// the default soft limit of 1024 would cap a host at a few hundred sessions. Pass
/// [`FdLimit::inherited`] to [`SessionsConfig::child_nofile`](crate::SessionsConfig::child_nofile)
/// so commands get the limit the host was started with.
///
/// Errors: the `getrlimit`/`setrlimit` error.
pub fn raise_fd_limit() -> std::io::Result<FdLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid out-pointer for getrlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let inherited = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid rlimit read just above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(FdLimit {
        inherited,
        current: limit.rlim_cur,
    })
}
