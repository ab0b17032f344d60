//! The host's own terminal input, for the TTY approver of `toolhost call`
//! (docs/permissions.md#approvers): input typed before a prompt was shown is
//! discarded ([`discard_typed_input`]), a wait for the answer ends as soon
//! as the question is withdrawn ([`input_wait`]), and terminal job control
//! never stops the host: it asks only from the terminal's foreground
//! ([`in_terminal_foreground`]) and ignores the stop signals a background
//! job's terminal access raises ([`ignore_terminal_stops`]).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once [`ignore_terminal_stops`] made the host ignore SIGTTOU and SIGTTIN:
/// the children it starts get them back at their default (`spawn.rs`).
static STOPS_IGNORED: AtomicBool = AtomicBool::new(false);

/// Whether the calling process is in the foreground process group of the
/// terminal `fd` (`tcgetpgrp(fd) == getpgrp()`). Only the foreground may read
/// the terminal: a background job of a shell that reads it, or flushes it, is
/// stopped by the kernel (SIGTTIN, SIGTTOU) until someone runs `fg`.
///
/// Errors: the OS error of `tcgetpgrp` (`ENOTTY` when `fd` is not the
/// calling process's controlling terminal).
pub fn in_terminal_foreground(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: tcgetpgrp only reads the descriptor number; `fd` is borrowed, so
    // it stays open for the call.
    let foreground = unsafe { libc::tcgetpgrp(fd.as_raw_fd()) };
    if foreground < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(foreground == nix::unistd::getpgrp().as_raw())
}

/// Makes terminal job control unable to stop the host: SIGTTOU is ignored, so
/// a write to its terminal (under `stty tostop`) or a `tcflush` from a
/// background job goes ahead instead of stopping the whole host, and SIGTTIN is
/// ignored, so a read from the background fails (`EIO`) instead of stopping it.
/// Commands the host starts afterwards get both back at their default
/// disposition, so they stay under the shell's job control as before.
pub fn ignore_terminal_stops() {
    for signal in [libc::SIGTTOU, libc::SIGTTIN] {
        // SAFETY: SIG_IGN installs no handler, so no code of ours runs in
        // signal context.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
    STOPS_IGNORED.store(true, Ordering::Relaxed);
}

/// Whether [`ignore_terminal_stops`] ran (read between `clone` and `exec`: an
/// atomic load only).
pub(crate) fn terminal_stops_ignored() -> bool {
    STOPS_IGNORED.load(Ordering::Relaxed)
}

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
        loop {
            if let Some(ready) = self.wait_for(input, None)? {
                return Ok(ready);
            }
        }
    }

    /// As [`InputWait::wait`], giving up after `timeout` (`None`: no limit):
    /// `Ok(None)` when it passed with neither input nor a withdrawal, so the
    /// caller can look again at what it waits under (e.g. whether it is still
    /// in the terminal's foreground) and wait on.
    ///
    /// Errors: the OS error of `poll`, other than `EINTR`.
    pub fn wait_for(
        &self,
        input: BorrowedFd<'_>,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<Option<bool>> {
        let timeout_ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
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
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
            if n == 0 {
                return Ok(None);
            }
            if n > 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(Some(fds[1].revents == 0 && fds[0].revents != 0))
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
        let err = in_terminal_foreground(input.as_fd()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
        let (wait, _withdraw) = input_wait().unwrap();
        let (quiet, _typed) = std::io::pipe().unwrap();
        let short = Some(std::time::Duration::from_millis(1));
        assert_eq!(wait.wait_for(quiet.as_fd(), short).unwrap(), None);
    }
}
