//! Waiting for children's exits without a descriptor per child (benchmark P5).
//!
//! A session's shell is normally waited for through its pidfd: one descriptor per
//! running session, on top of its output pipe. Background sessions are waited for
//! here instead, through one io_uring (`IORING_OP_WAITID`, Linux 6.7): each child
//! has one pending `waitid(P_PID, pid, WEXITED | WNOWAIT)` request in the ring,
//! whose completion says the child has exited. It leaves the child a zombie, as a
//! pidfd's readiness does: the session reaps it itself (`waitid(P_PID)`), so the
//! pid and process group id stay reserved until then and no signal the session
//! sends can reach a process that reused them. The ring and the eventfd it signals are the
//! only descriptors, whatever the number of children, so 10,000 background
//! sessions fit the open-file limits of ordinary machines (benchmark P5).
//! Foreground runs keep their pidfd: a tool call waits for
//! their exit, and the pidfd wakes the session with one hand-off less.
//!
//! Where the kernel has no `IORING_OP_WAITID` (older than 6.7, io_uring disabled by
//! `kernel.io_uring_disabled` or refused by a seccomp profile, as in many
//! containers), [`ExitRing::new`] fails and every session keeps its pidfd.
//!
//! The kernel writes each request's `siginfo_t` when it completes, cancelled or
//! not, so the buffer of a request still pending when the ring is dropped is never
//! freed (a few hundred bytes, only then).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use io_uring::{IoUring, opcode};
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

/// Completion queue entries (16,384): room for every child of a host with
/// `max_sessions` in the thousands to exit at once. More completions than this
/// wait in the kernel's overflow list and are taken on the next turn.
const COMPLETION_ENTRIES: u32 = 16_384;

/// Submission queue entries (256): requests are submitted one at a time.
const SUBMISSION_ENTRIES: u32 = 256;

/// Resolves once a watched child has exited (it is not reaped), to its status as
/// the kernel reported it, or to the wait's error (e.g. `ECHILD` when it was reaped
/// already).
pub(crate) type ExitReceiver = oneshot::Receiver<io::Result<std::process::ExitStatus>>;

/// A pending request: the buffer the kernel fills and who is told.
struct Pending {
    info: Info,
    reply: oneshot::Sender<io::Result<std::process::ExitStatus>>,
}

/// A `siginfo_t` at a fixed address (the kernel writes it; nothing else does
/// while the request is pending).
struct Info(Box<libc::siginfo_t>);

// SAFETY: plain data; its pointer fields are never dereferenced here.
unsafe impl Send for Info {}

/// Requests by their `user_data` (the slot index), with free slots reused.
#[derive(Default)]
struct Slots {
    pending: Vec<Option<Pending>>,
    free: Vec<usize>,
}

/// One io_uring waiting for the exits of children of this process.
pub(crate) struct ExitRing {
    ring: Mutex<IoUring>,
    slots: Mutex<Slots>,
}

impl ExitRing {
    /// A ring and the task that takes its completions, on `handle`'s runtime.
    ///
    /// Errors: io_uring is unavailable or lacks `IORING_OP_WAITID` (the caller
    /// waits through pidfds instead).
    pub(crate) fn new(handle: &tokio::runtime::Handle) -> io::Result<Arc<ExitRing>> {
        let ring = IoUring::builder()
            .setup_cqsize(COMPLETION_ENTRIES)
            .build(SUBMISSION_ENTRIES)?;
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if !probe.is_supported(opcode::WaitId::CODE) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring has no IORING_OP_WAITID (Linux 6.7)",
            ));
        }
        // SAFETY: eventfd makes a new descriptor we own.
        let event = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if event < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just created, owned by nothing else.
        let event = unsafe { OwnedFd::from_raw_fd(event) };
        ring.submitter().register_eventfd(event.as_raw_fd())?;
        let event = {
            let _entered = handle.enter();
            // SAFETY: an OwnedFd stays open and the same fd until the AsyncFd
            // drops it.
            unsafe { AsyncFd::register_with_interest(event, tokio::io::Interest::READABLE) }
                .map_err(io::Error::from)?
        };
        let exits = Arc::new(ExitRing {
            ring: Mutex::new(ring),
            slots: Mutex::default(),
        });
        handle.spawn(drive(Arc::downgrade(&exits), event));
        Ok(exits)
    }

    /// Watches child `pid` of this process: the receiver resolves once it has
    /// exited, and the child is left to be reaped by the caller
    /// ([`ExitReceiver`]).
    ///
    /// Errors: the request could not be submitted.
    pub(crate) fn watch(&self, pid: u32) -> io::Result<ExitReceiver> {
        let (reply, rx) = oneshot::channel();
        let pending = Pending {
            // SAFETY: an all-zero siginfo_t is a valid value.
            info: Info(Box::new(unsafe { std::mem::zeroed() })),
            reply,
        };
        let info: *const libc::siginfo_t = &*pending.info.0;
        let key = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let key = match slots.free.pop() {
                Some(key) => key,
                None => {
                    slots.pending.push(None);
                    slots.pending.len() - 1
                }
            };
            slots.pending[key] = Some(pending);
            key
        };
        let options = libc::WEXITED | libc::WNOWAIT;
        let entry = opcode::WaitId::new(libc::P_PID, pid as libc::id_t, options)
            .infop(info)
            .build()
            .user_data(key as u64);
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: `info` points into a box kept in `slots` until the request's
        // completion is taken (or forever, see the module docs).
        let pushed = unsafe { ring.submission().push(&entry).is_ok() }
            || (ring.submit().is_ok() && unsafe { ring.submission().push(&entry).is_ok() });
        if !pushed {
            drop(ring);
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.pending[key] = None;
            slots.free.push(key);
            return Err(io::Error::other("the io_uring submission queue is full"));
        }
        let submitted = ring.submit();
        drop(ring);
        // A request that did not go in now goes in with the next submission, so
        // its buffer stays where it is; this waiter gives up on it (the caller
        // waits another way, and the late completion, an ECHILD then, is dropped).
        submitted.map(|_| rx)
    }

    /// Takes every completion there is and tells each waiter.
    fn complete(&self) {
        let mut done = Vec::new();
        {
            let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
            // Flushes completions the kernel kept in its overflow list.
            let _ = ring.submit();
            for cqe in ring.completion() {
                done.push((cqe.user_data() as usize, cqe.result()));
            }
        }
        let mut finished = Vec::with_capacity(done.len());
        {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            for (key, result) in done {
                if let Some(pending) = slots.pending.get_mut(key).and_then(Option::take) {
                    slots.free.push(key);
                    finished.push((pending, result));
                }
            }
        }
        for (pending, result) in finished {
            let status = if result < 0 {
                Err(io::Error::from_raw_os_error(-result))
            } else {
                Ok(super::process::status_of(&pending.info.0))
            };
            let _ = pending.reply.send(status);
        }
    }
}

impl Drop for ExitRing {
    fn drop(&mut self) {
        // Requests still pending may be written to by the kernel when the ring's
        // teardown cancels them: their buffers are never freed (module docs).
        let slots = self.slots.get_mut().unwrap_or_else(|e| e.into_inner());
        for pending in slots.pending.drain(..).flatten() {
            std::mem::forget(pending.info.0);
        }
    }
}

/// The task that takes completions: woken through the eventfd the ring signals
/// for each one. Ends with the ring.
async fn drive(exits: std::sync::Weak<ExitRing>, event: AsyncFd<OwnedFd>) {
    loop {
        let Ok(mut ready) = event.readable().await else {
            return;
        };
        let mut count = [0u8; 8];
        // SAFETY: reading 8 bytes from our own non-blocking eventfd.
        let n = unsafe { libc::read(event.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        if n < 0 {
            ready.clear_ready();
        }
        let Some(exits) = exits.upgrade() else {
            return;
        };
        exits.complete();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn(command: &str) -> u32 {
        std::process::Command::new("/bin/sh")
            .args(["-c", command])
            .spawn()
            .map(|c| c.id())
            .unwrap()
    }

    /// Exit codes and signals arrive for each child, in any order, and a child
    /// reaped elsewhere is reported as an error, not a status.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_watched_child_gets_its_status() {
        use std::os::unix::process::ExitStatusExt;
        let Ok(exits) = ExitRing::new(&tokio::runtime::Handle::current()) else {
            eprintln!("io_uring waitid unavailable here: nothing to test");
            return;
        };
        let slow = spawn("sleep 0.3; exit 4");
        let fast = spawn("exit 7");
        let killed = spawn("exec sleep 30");
        let rx_slow = exits.watch(slow).unwrap();
        let rx_fast = exits.watch(fast).unwrap();
        let rx_killed = exits.watch(killed).unwrap();
        unsafe { libc::kill(killed as i32, libc::SIGKILL) };
        let wait = std::time::Duration::from_secs(20);
        let status = |rx: ExitReceiver| async move {
            tokio::time::timeout(wait, rx).await.unwrap().unwrap()
        };
        let reap = |pid: u32| {
            let mut st = 0;
            let reaped = unsafe { libc::waitpid(pid as i32, &mut st, libc::WNOHANG) };
            assert_eq!(reaped, pid as i32, "left a zombie for its parent to reap");
            st
        };
        assert_eq!(status(rx_fast).await.unwrap().code(), Some(7));
        assert_eq!(libc::WEXITSTATUS(reap(fast)), 7);
        assert_eq!(
            status(rx_killed).await.unwrap().signal(),
            Some(libc::SIGKILL)
        );
        assert_eq!(libc::WTERMSIG(reap(killed)), libc::SIGKILL);
        assert_eq!(status(rx_slow).await.unwrap().code(), Some(4));
        reap(slow);
        // Slots are reused: many more children than ever pending at once.
        for i in 0..64 {
            let pid = spawn(&format!("exit {}", i % 5));
            let rx = exits.watch(pid).unwrap();
            assert_eq!(status(rx).await.unwrap().code(), Some(i % 5));
            reap(pid);
        }
        assert!(exits.slots.lock().unwrap().pending.len() <= 3);
        // Reaped by someone else first: an error for the watcher.
        let pid = spawn("exit 0");
        let mut st = 0;
        unsafe { libc::waitpid(pid as i32, &mut st, 0) };
        let err = status(exits.watch(pid).unwrap()).await.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ECHILD));
    }
}
