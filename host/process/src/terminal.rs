//! The host's own terminal input, for the TTY approver of `toolhost call`
//! (docs/permissions.md#approvers): input typed before a prompt was shown is
//! discarded ([`discard_typed_input`]), and a wait for the answer ends as soon
//! as the question is withdrawn ([`input_wait`]).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// Discards what was typed on the terminal `fd` and not read yet
/// (`tcflush(fd, TCIFLUSH)`), so a key pressed before a prompt was drawn never
/// answers it.
///
/// Errors: the OS error (`ENOTTY` when `fd` is not a terminal).
pub fn discard_typed_input(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: tcflush only reads the descriptor number; `fd` is borrowed, so it
    // stays open for the call.
    if unsafe { libc::tcflush(fd.as_raw_fd(), libc::TCIFLUSH) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The waiting half of [`input_wait`]: [`InputWait::wait`] returns when input
/// can be read or when the [`Withdraw`] half is dropped.
#[derive(Debug)]
pub struct InputWait {
    withdrawn: OwnedFd,
}

/// The withdrawing half of [`input_wait`]: dropping it ends every wait of its
/// [`InputWait`] (the question is no longer asked).
#[derive(Debug)]
pub struct Withdraw {
    _write: OwnedFd,
}

/// A wait for terminal input that the returned [`Withdraw`] can end: a pipe
/// whose write end it holds (closed on drop, which the wait sees as a hang-up).
///
/// Errors: the OS error of `pipe2`.
pub fn input_wait() -> io::Result<(InputWait, Withdraw)> {
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    Ok((InputWait { withdrawn: read }, Withdraw { _write: write }))
}

impl InputWait {
    /// Blocks until `input` is readable (`Ok(true)`; end of file and errors
    /// count, the read that follows reports them) or the question was withdrawn
    /// (`Ok(false)`), whichever comes first. A withdrawal seen together with
    /// input wins: the input is for no question any more.
    ///
    /// Errors: the OS error of `poll`, other than `EINTR`.
    pub fn wait(&self, input: BorrowedFd<'_>) -> io::Result<bool> {
        let mut fds = [
            libc::pollfd {
                fd: input.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.withdrawn.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            // SAFETY: `fds` is a valid array of two pollfd for the call's
            // duration; both descriptors are open (borrowed and owned).
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            if n >= 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(fds[1].revents == 0 && fds[0].revents != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_withdrawal_ends_the_wait_and_input_is_seen() {
        let (wait, withdraw) = input_wait().unwrap();
        let (input, mut typed) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut typed, b"1\n").unwrap();
        assert!(wait.wait(input.as_fd()).unwrap());
        drop(withdraw);
        assert!(!wait.wait(input.as_fd()).unwrap());
        let err = discard_typed_input(input.as_fd()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
    }
}
