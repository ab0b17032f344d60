//! Process plumbing: request validation (shell, cwd, env), the dedicated spawner
//! thread, the async-signal-safe child setup, `/proc` scanning and group signalling.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag};
use nix::sys::signal::{self, Signal};
use nix::sys::stat::Mode;
use nix::unistd::{self, Pid};
use tokio::sync::oneshot;

use super::exits::{ExitReceiver, ExitRing};
use super::proc_scan::{ProcTable, proc_table, read_stat};
use super::tree::{self, Tree};
use crate::SessionError;
use crate::sandbox::Confinement;

/// Environment variables copied from the host when set (plus every `LC_*`). The host's
/// `TMPDIR` is replaced by the session's private temp dir for started sessions.
pub const ENV_ALLOWLIST: &[&str] = &["PATH", "HOME", "LANG", "TZ", "USER", "LOGNAME", "TMPDIR"];

/// Set for every command so that nothing waits on an interactive program it cannot
/// see (stdin is closed or a pipe; there is no terminal): `(name, value, why)`.
/// They come before the operator's and the request's pairs, which can override
/// them. The same set agent shells use (Codex CLI, Claude Code).
pub const NON_INTERACTIVE_ENV: &[(&str, &str, &str)] = &[
    (
        "GIT_EDITOR",
        "false",
        "`git commit` without -m, `--amend`, `rebase -i`, `merge` without --no-edit fail at once with git's own message instead of opening an editor (overrides core.editor)",
    ),
    (
        "GIT_SEQUENCE_EDITOR",
        "false",
        "`rebase -i` fails at once too (overrides sequence.editor, which GIT_EDITOR does not)",
    ),
    (
        "EDITOR",
        "false",
        "other programs that open $EDITOR fail at once",
    ),
    (
        "VISUAL",
        "false",
        "the same, for programs that prefer $VISUAL",
    ),
    (
        "GIT_PAGER",
        "cat",
        "git log, diff and show print everything instead of waiting in a pager (overrides core.pager)",
    ),
    (
        "PAGER",
        "cat",
        "man, systemctl and others print instead of paging",
    ),
    (
        "GIT_TERMINAL_PROMPT",
        "0",
        "git fails instead of prompting for a username or password",
    ),
    (
        "GCM_INTERACTIVE",
        "never",
        "Git Credential Manager never opens a prompt",
    ),
    (
        "DEBIAN_FRONTEND",
        "noninteractive",
        "apt and dpkg take defaults instead of asking",
    ),
    ("PIP_NO_INPUT", "1", "pip fails instead of prompting"),
    (
        "PYTHONUNBUFFERED",
        "1",
        "Python writes stdout at once, so its output and its errors keep terminal order",
    ),
];

/// Pipe capacity asked for each output pipe (best effort), in bytes.
const PIPE_SIZE: i32 = 256 * 1024;

/// Checks an environment variable name: not empty, no `=`, no NUL.
pub(crate) fn validate_env_pair(name: &str, value: &str) -> Result<(), SessionError> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(SessionError::InvalidRequest(format!(
            "invalid environment variable name {name:?}: it must be non-empty and contain no `=` or NUL"
        )));
    }
    if value.contains('\0') {
        return Err(SessionError::InvalidRequest(format!(
            "the value of environment variable `{name}` contains a NUL byte"
        )));
    }
    Ok(())
}

/// The environment a child gets: the allowlisted host variables, `TERM=dumb`,
/// [`NON_INTERACTIVE_ENV`], `TMPDIR=tmpdir` (the session's private temp dir, instead of
/// the host's), then `extra` (operator pairs) and `request` pairs, later pairs
/// overriding earlier ones.
pub(crate) fn build_env(
    tmpdir: &Path,
    extra: &[(String, String)],
    request: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for (key, value) in std::env::vars_os() {
        let allowed = key
            .to_str()
            .is_some_and(|k| k != "TMPDIR" && (ENV_ALLOWLIST.contains(&k) || k.starts_with("LC_")));
        if allowed {
            env.push((key, value));
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), super::program::DEFAULT_PATH.into()));
    }
    env.push(("TERM".into(), "dumb".into()));
    for (name, value, _) in NON_INTERACTIVE_ENV {
        env.push((name.into(), value.into()));
    }
    env.push(("TMPDIR".into(), tmpdir.into()));
    for (k, v) in extra.iter().chain(request) {
        env.push((k.into(), v.into()));
    }
    // One entry per name, the last one given (C's getenv would see the first).
    let mut seen = std::collections::HashSet::new();
    let mut unique: Vec<(OsString, OsString)> = env
        .into_iter()
        .rev()
        .filter(|(k, _)| seen.insert(k.clone()))
        .collect();
    unique.reverse();
    // No empty or relative entry: the shell would search the working directory
    // (`sessions/program.rs`).
    for (k, v) in &mut unique {
        if k == "PATH" {
            *v = super::program::clean_path(v);
        }
    }
    unique
}

/// Opens the working directory: `cwd` relative to `workspace` (canonical) or absolute.
/// The opened directory's real path (all symlinks resolved, read back from
/// `/proc/self/fd`) must lie inside `workspace`. The child `fchdir`s to this very fd,
/// so a symlink swapped in after the check cannot redirect it.
pub(crate) fn open_cwd(
    workspace: &Path,
    cwd: Option<&str>,
) -> Result<(OwnedFd, PathBuf), SessionError> {
    let given = cwd.unwrap_or("");
    if given.contains('\0') {
        return Err(SessionError::InvalidRequest(
            "cwd contains a NUL byte".to_owned(),
        ));
    }
    let path = if given.is_empty() {
        workspace.to_path_buf()
    } else {
        workspace.join(given)
    };
    let outside = || {
        SessionError::InvalidRequest(format!(
            "cwd `{given}` is outside the workspace `{}`; use a path inside it (relative paths are relative to the workspace root)",
            workspace.display()
        ))
    };
    let fd = match nix::fcntl::open(
        &path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(_) if !crate::sandbox::lexically_normal(&path).starts_with(workspace) => {
            return Err(outside());
        }
        Err(Errno::ENOENT) => {
            return Err(SessionError::InvalidRequest(format!(
                "cwd `{given}` does not exist in the workspace `{}`",
                workspace.display()
            )));
        }
        Err(Errno::ENOTDIR) => {
            return Err(SessionError::InvalidRequest(format!(
                "cwd `{given}` is not a directory"
            )));
        }
        Err(e) => {
            return Err(SessionError::InvalidRequest(format!(
                "cwd `{given}` cannot be opened: {}",
                e.desc()
            )));
        }
    };
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|e| {
        let operation = crate::IoOperation::ResolveCwd;
        SessionError::Io(crate::HostIoError::os(operation, Some(given.as_ref()), &e))
    })?;
    if !real.starts_with(workspace) {
        return Err(outside());
    }
    Ok((fd, real))
}

/// What a child's stdin is connected to.
pub(crate) enum StdinSetup {
    Null,
    Piped,
}

/// Commands up to this many bytes are passed as `SHELL -c COMMAND`; a longer one
/// goes through a sealed memfd at [`SCRIPT_FD`], run as `SHELL -c '. /proc/self/fd/63'`
/// (64 KiB: Linux refuses any single argument over 128 KiB, `MAX_ARG_STRLEN`).
pub(crate) const INLINE_COMMAND_MAX: usize = 64 * 1024;

/// The descriptor a long command's script is at in the child (see
/// [`INLINE_COMMAND_MAX`]); high, so it stays clear of the 3-9 scripts use.
pub(crate) const SCRIPT_FD: i32 = 63;

/// Everything the spawner thread needs to start one session's shell: built by
/// [`Launch::new`] on the spawner thread, consumed by [`Spawner::prepare_and_start`].
pub(crate) struct Launch {
    program: crate::spawn::Program,
    stdin: StdinSetup,
    cwd: OwnedFd,
    confinement: Confinement,
    /// The soft `RLIMIT_NOFILE` the command gets (0: the host's own).
    nofile: u64,
    /// One pipe for stdout and stderr.
    merge_stderr: bool,
    /// A long command's text ([`INLINE_COMMAND_MAX`]), for [`SCRIPT_FD`].
    script: Option<OwnedFd>,
    /// The session's process tree: the child joins its cgroups first thing.
    tree: Option<Arc<Tree>>,
    /// See [`ChildStreams::hold_mount_ns`] (and the sandbox makes a namespace).
    hold_mount_ns: bool,
}

/// How a child's descriptors are set up besides its stdin and cwd.
pub(crate) struct ChildStreams {
    /// The soft `RLIMIT_NOFILE` it starts with (0: the host's own).
    pub(crate) nofile: u64,
    /// One pipe for stdout and stderr.
    pub(crate) merge_stderr: bool,
    /// The session's process tree ([`Tree`]), when it is tracked.
    pub(crate) tree: Option<Arc<Tree>>,
    /// Keep a reference to the child's private mount namespace (if its sandbox
    /// makes one) until the session has reported its exit ([`Started::mount_ns`]):
    /// for foreground runs, whose exit a tool call is waiting for.
    pub(crate) hold_mount_ns: bool,
}

impl Launch {
    /// `shell -c command` with exactly `env`, in `cwd`, under `confinement`, with
    /// a soft open-file limit of `nofile` (0: the host's own; see
    /// [`SessionsConfig::child_nofile`](crate::SessionsConfig::child_nofile)).
    ///
    /// Errors: a NUL byte in the shell, command or environment.
    pub(crate) fn new(
        shell: &Path,
        command: &str,
        env: Vec<(OsString, OsString)>,
        cwd: OwnedFd,
        stdin: StdinSetup,
        confinement: Confinement,
        streams: ChildStreams,
    ) -> io::Result<Launch> {
        let ChildStreams {
            nofile,
            merge_stderr,
            tree,
            hold_mount_ns,
        } = streams;
        let hold_mount_ns = hold_mount_ns && confinement.unshares_mounts();
        let (inline, script) = if command.len() <= INLINE_COMMAND_MAX {
            (command.to_owned(), None)
        } else {
            (
                format!(". /proc/self/fd/{SCRIPT_FD}"),
                Some(command_memfd(command)?),
            )
        };
        let argv = [
            shell.as_os_str(),
            std::ffi::OsStr::new("-c"),
            std::ffi::OsStr::new(&inline),
        ];
        Ok(Launch {
            program: crate::spawn::Program::new(shell.as_os_str(), &argv, &env)?,
            script,
            stdin,
            cwd,
            confinement,
            nofile,
            merge_stderr,
            tree,
            hold_mount_ns,
        })
    }
}

/// A sealed, read-only memfd holding `command` (see [`INLINE_COMMAND_MAX`]).
fn command_memfd(command: &str) -> io::Result<OwnedFd> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::io::Write;
    let errno = |e: Errno| io::Error::from_raw_os_error(e as i32);
    let fd = memfd_create(
        c"toolhost-command",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .map_err(errno)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(command.as_bytes())?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    nix::fcntl::fcntl(
        &file,
        FcntlArg::F_ADD_SEALS(nix::fcntl::SealFlag::from_bits_truncate(seals)),
    )
    .map_err(errno)?;
    Ok(OwnedFd::from(file))
}

/// A started shell: its pid, a waiter, and the host ends of its pipes (plain fds:
/// the caller registers them with its tokio runtime).
pub(crate) struct Started {
    pub(crate) pid: u32,
    pub(crate) pidfd: OwnedFd,
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: OwnedFd,
    /// `None` when stderr shares the stdout pipe ([`OutputStreams::Merged`](crate::OutputStreams::Merged)).
    pub(crate) stderr: Option<OwnedFd>,
    /// The child's private mount namespace (`/proc/<pid>/ns/mnt`), when the launch
    /// asked to hold it ([`ChildStreams::hold_mount_ns`]). While it is open, the
    /// namespace outlives the child: its mounts are torn down when this is closed
    /// (after the session reported the exit), not in the dying child, where the
    /// kernel does it before the exit becomes visible (≈ 40-80 µs on the benchmark
    /// machine; P2, P3).
    pub(crate) mount_ns: Option<OwnedFd>,
    /// Ends the child's whole group unless disarmed once a session owns the child:
    /// a start whose requester went away never leaves a process behind.
    pub(crate) guard: GroupGuard,
}

/// Owns a just-started child until a session takes it over: dropped while armed, it
/// SIGKILLs the child's process group (the child leads it: `child_setup` calls
/// `setsid`) and every other member of its session found in `/proc`, then reaps the
/// child. The child is not reaped before that, so its pid cannot be reused meanwhile.
pub(crate) struct GroupGuard {
    pid: u32,
    armed: bool,
    /// Its tree: killed whole (descendants that left the group included).
    tree: Option<Arc<Tree>>,
}

impl GroupGuard {
    /// A guard for child `pid` (unreaped, leading its own session and group) and
    /// its tree.
    pub(crate) fn new(pid: u32, tree: Option<Arc<Tree>>) -> GroupGuard {
        GroupGuard {
            pid,
            armed: true,
            tree,
        }
    }

    /// A session owns the child now: nothing happens on drop.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::debug!(
            pid = self.pid,
            "ending the group of a child no session took over"
        );
        let mut seen = HashSet::new();
        let table = proc_table(Instant::now());
        if let Some(tree) = &self.tree {
            tree.kill(Some(&table));
        }
        signal_processes(self.pid, true, Signal::SIGKILL, &mut seen, Some(&table));
        // The leader itself, in case the group signal could not reach it.
        let _ = signal::kill(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        reap_in_background(self.pid);
    }
}

/// Runs in the child between `clone` and `exec`: async-signal-safe, no allocation.
/// The child first joins the session's cgroups it was not born in (`cgroups`: open
/// `cgroup.procs` or `tasks` fds, `-1` for none; see `tree.rs`), so the command
/// never runs outside them and a failed join fails the spawn. The kernel sandbox goes on last, so `fchdir` and
/// `setsid` happen unconfined and nothing after it can loosen it (a no-op under
/// full-access; if a layer it reports cannot be applied, the spawn fails: fail
/// closed).
fn child_setup(
    cgroups: [std::os::fd::RawFd; 2],
    cwd: &OwnedFd,
    parent: Pid,
    inherited_nofile: u64,
    confinement: &Confinement,
) -> io::Result<()> {
    let errno = |e: Errno| io::Error::from_raw_os_error(e as i32);
    for fd in cgroups {
        if fd >= 0 {
            tree::join_cgroup(fd)?;
        }
    }
    unistd::fchdir(cwd.as_fd()).map_err(errno)?;
    unistd::setsid().map_err(errno)?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(errno)?;
    // The host may have died between clone and prctl: then nothing would kill us.
    if unistd::getppid() != parent {
        return Err(io::Error::from_raw_os_error(Errno::ESRCH as i32));
    }
    // The host raised its own soft open-file limit; the command gets the one the
    // host was started with (passed in by the caller, read before clone).
    if inherited_nofile != 0 {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain getrlimit/setrlimit on a local value.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur = inherited_nofile.min(limit.rlim_max);
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
    confinement.apply_in_child()
}

/// Starts one launch on the calling (spawner) thread.
fn start(launch: Launch) -> io::Result<Started> {
    let pipe = || -> io::Result<(OwnedFd, OwnedFd)> {
        unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| io::Error::from_raw_os_error(e as i32))
    };
    let (stdout_r, stdout_w) = pipe()?;
    // Merged: fds 1 and 2 are the same pipe, so the bytes arrive in exactly the
    // order the command wrote them, as on a terminal.
    let stderr = if launch.merge_stderr {
        None
    } else {
        Some(pipe()?)
    };
    let (stdin_host, stdin_child) = match launch.stdin {
        StdinSetup::Null => (None, OwnedFd::from(std::fs::File::open("/dev/null")?)),
        StdinSetup::Piped => {
            let (r, w) = pipe()?;
            (Some(w), r)
        }
    };
    let stdio = crate::spawn::Stdio {
        fds: [
            stdin_child.as_raw_fd(),
            stdout_w.as_raw_fd(),
            stderr
                .as_ref()
                .map_or(stdout_w.as_raw_fd(), |(_, w)| w.as_raw_fd()),
        ],
        extra: launch.script.as_ref().map(|fd| (fd.as_raw_fd(), SCRIPT_FD)),
    };
    let parent = Pid::this();
    let spawn = || {
        let born_in = launch.tree.as_ref().and_then(|t| t.born_in());
        let cgroups = launch.tree.as_ref().map_or([-1, -1], |t| t.join_fds());
        let setup = || {
            child_setup(
                cgroups,
                &launch.cwd,
                parent,
                launch.nofile,
                &launch.confinement,
            )
        };
        let setup_fds: Vec<std::os::fd::RawFd> = cgroups
            .into_iter()
            .filter(|&fd| fd >= 0)
            .chain([launch.cwd.as_raw_fd()])
            .chain(launch.confinement.child_fds())
            .collect();
        crate::spawn::spawn(&launch.program, &stdio, &setup, &setup_fds, born_in)
    };
    let spawned = match spawn() {
        // No `clone3` here after all (found by this start): the child joins its v2
        // cgroup by itself, as every later start's does (`tree.rs`).
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {
            tracing::info!("{e}");
            match &launch.tree {
                Some(tree) => tree.join_v2_by_procs().and_then(|()| spawn()),
                None => Err(e),
            }
        }
        other => other,
    };
    // The child is in its cgroups (or is gone): their descriptors are not needed
    // for the rest of the session.
    if let Some(tree) = &launch.tree {
        tree.close_join_fds();
    }
    let spawned = spawned?;
    if let Some(tree) = &launch.tree {
        tree.set_leader(spawned.pid);
    }
    // The child has called `exec` (vfork), so its namespaces are final. A child
    // already gone leaves nothing to hold; that costs only the speed-up.
    let mount_ns = launch
        .hold_mount_ns
        .then(|| std::fs::File::open(format!("/proc/{}/ns/mnt", spawned.pid)).ok())
        .flatten()
        .map(OwnedFd::from);
    raise_pipe_size(&stdout_r);
    let stderr_r = stderr.map(|(r, _)| r);
    if let Some(r) = &stderr_r {
        raise_pipe_size(r);
    }
    // What the session holds for its life goes above the low range, which later
    // children copy (`spawn.rs`, "The descriptor table").
    let high = crate::spawn::move_above_low_fds;
    Ok(Started {
        pid: spawned.pid,
        pidfd: high(spawned.pidfd),
        stdin: stdin_host.map(high),
        stdout: high(stdout_r),
        stderr: stderr_r.map(high),
        mount_ns: mount_ns.map(high),
        guard: GroupGuard::new(spawned.pid, launch.tree.clone()),
    })
}

/// The direct child a session waits for: one we spawned (waited for through its
/// pidfd) or one the embedder spawned with tokio and handed over (`adopt`).
pub(crate) enum ChildProcess {
    /// Spawned by [`Spawner`].
    Spawned {
        /// Its pid.
        pid: u32,
        /// Tells when the child has exited (it stays a zombie until reaped here).
        waiter: ExitWaiter,
        /// Kept after reaping, so `wait` can be called again.
        status: Option<std::process::ExitStatus>,
        /// Its mount namespace, held until [`ChildProcess::release_mount_ns`]
        /// ([`Started::mount_ns`]).
        mount_ns: Option<OwnedFd>,
    },
    /// Handed over by the embedder.
    Adopted(tokio::process::Child),
}

/// How a spawned child's exit is noticed.
pub(crate) enum ExitWaiter {
    /// Its pidfd, readable once it has exited (one descriptor per child).
    Pidfd(tokio::io::unix::AsyncFd<OwnedFd>),
    /// A request in the engine's [`ExitRing`] (no descriptor per child), which
    /// this keeps alive, so the request resolves even if the engine is dropped
    /// first. `None` once it has resolved.
    Ring {
        /// Kept alive for the request.
        _ring: Arc<ExitRing>,
        rx: Option<ExitReceiver>,
    },
}

impl ChildProcess {
    /// Wraps a child from [`Started`]: watched through `ring` when given and it
    /// takes the child (its pidfd is then closed), else through its pidfd. Must
    /// be called inside a tokio runtime.
    pub(crate) fn spawned(
        pid: u32,
        pidfd: OwnedFd,
        mount_ns: Option<OwnedFd>,
        ring: Option<&Arc<ExitRing>>,
    ) -> io::Result<ChildProcess> {
        let watched = ring.map(|ring| ring.watch(pid).map(|rx| (ring.clone(), rx)));
        let waiter = match watched {
            Some(Ok((ring, rx))) => ExitWaiter::Ring {
                _ring: ring,
                rx: Some(rx),
            },
            failed => {
                if let Some(Err(e)) = failed {
                    tracing::debug!(pid, "watching through the pidfd: {e}");
                }
                // SAFETY: an OwnedFd stays open and the same fd until the AsyncFd
                // drops it.
                let pidfd = unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        pidfd,
                        tokio::io::Interest::READABLE,
                    )
                }
                .map_err(io::Error::from)?;
                ExitWaiter::Pidfd(pidfd)
            }
        };
        Ok(ChildProcess::Spawned {
            pid,
            waiter,
            status: None,
            mount_ns,
        })
    }

    /// Waits for the child to exit and reaps it. Cancel-safe.
    pub(crate) async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        match self {
            ChildProcess::Adopted(child) => child.wait().await,
            ChildProcess::Spawned {
                pid,
                waiter,
                status,
                ..
            } => loop {
                if let Some(status) = status {
                    return Ok(*status);
                }
                match waiter {
                    ExitWaiter::Pidfd(pidfd) => {
                        let mut ready = pidfd.readable().await?;
                        match reap(libc::P_PIDFD, ready.get_inner().as_raw_fd() as libc::id_t)? {
                            Some(s) => {
                                *status = Some(s);
                                crate::spawn::reaped(*pid);
                            }
                            None => ready.clear_ready(),
                        }
                    }
                    ExitWaiter::Ring { rx, .. } => {
                        if let Some(pending) = rx {
                            let exited = pending.await;
                            *rx = None;
                            if let Ok(Err(e)) = &exited
                                && e.raw_os_error() != Some(libc::ECHILD)
                            {
                                return Err(io::Error::new(e.kind(), e.to_string()));
                            }
                        }
                        // Exited (or the watcher is gone): reap it, waiting if needed.
                        *status = Some(reap_blocking(*pid).await?);
                        crate::spawn::reaped(*pid);
                    }
                }
            },
        }
    }
}

impl ChildProcess {
    /// Closes the child's mount namespace if it was held ([`Started::mount_ns`]),
    /// which tears it down now if the child is gone. The session calls it once
    /// it has reported the exit.
    pub(crate) fn release_mount_ns(&mut self) {
        if let ChildProcess::Spawned { mount_ns, .. } = self {
            drop(mount_ns.take());
        }
    }

    /// Reaps the child if it has exited, without waiting; `None` while it runs.
    /// The session calls it when the child's pipes close (usually its exit), so
    /// the exit is taken at once instead of a turn of the reactor later, when
    /// the pidfd's readiness or the ring's completion arrives (benchmark P3:
    /// ≈ 0.1 ms on a loaded machine).
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        match self {
            ChildProcess::Adopted(child) => child.try_wait(),
            ChildProcess::Spawned {
                pid,
                waiter,
                status,
                ..
            } => {
                if status.is_none() {
                    *status = match waiter {
                        ExitWaiter::Pidfd(pidfd) => {
                            reap(libc::P_PIDFD, pidfd.get_ref().as_raw_fd() as libc::id_t)?
                        }
                        // The ring's request, if still pending, ends with ECHILD.
                        ExitWaiter::Ring { .. } => reap(libc::P_PID, *pid as libc::id_t)?,
                    };
                    if status.is_some() {
                        crate::spawn::reaped(*pid);
                    }
                }
                Ok(*status)
            }
        }
    }
}

impl Drop for ChildProcess {
    /// A session task dropped before its child exited (runtime shutdown): kill the
    /// child, as tokio's `kill_on_drop` did, and reap it once it is gone.
    fn drop(&mut self) {
        if let ChildProcess::Spawned {
            pid, status: None, ..
        } = self
        {
            // SAFETY: our own child, not reaped yet (only this type reaps it), so
            // its pid is still its own.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
            reap_in_background(*pid);
        }
    }
}

/// Reaps child `pid`, which has exited or is about to (its watcher said so). If it
/// is not waitable yet, waits on the blocking pool without reaping (`WNOWAIT`) and
/// reaps here, so a caller cancelled meanwhile leaves the child unreaped, its pid
/// still its own (the drop path kills and reaps it).
async fn reap_blocking(pid: u32) -> io::Result<std::process::ExitStatus> {
    loop {
        if let Some(status) = reap(libc::P_PID, pid as libc::id_t)? {
            return Ok(status);
        }
        tokio::task::spawn_blocking(move || {
            waitid(
                libc::P_PID,
                pid as libc::id_t,
                libc::WEXITED | libc::WNOWAIT,
            )
            .map(drop)
        })
        .await
        .map_err(|e| io::Error::other(format!("waiting for {pid}: {e}")))??;
    }
}

/// Reaps child `pid` (already signalled to die) on a short-lived thread, so no
/// zombie is left and no caller blocks on it. Only for error and shutdown paths.
pub(crate) fn reap_in_background(pid: u32) {
    let reap = move || {
        let mut status = 0;
        // SAFETY: blocking waitpid on our own child.
        while unsafe { libc::waitpid(pid as i32, &mut status, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        crate::spawn::reaped(pid);
    };
    if std::thread::Builder::new()
        .name("toolhost-reaper".into())
        .spawn(reap)
        .is_err()
    {
        tracing::warn!(pid, "cannot start a thread to reap a killed child");
    }
}

/// `waitid(idtype, id, WEXITED | WNOHANG)` (`P_PIDFD` with a pidfd, `P_PID` with a
/// pid): the exit status if the child has exited, reaping it.
fn reap(idtype: libc::idtype_t, id: libc::id_t) -> io::Result<Option<std::process::ExitStatus>> {
    let info = waitid(idtype, id, libc::WEXITED | libc::WNOHANG)?;
    // SAFETY: waitid filled in the SIGCHLD fields (or left them zero).
    if unsafe { info.si_pid() } == 0 {
        return Ok(None);
    }
    Ok(Some(status_of(&info)))
}

/// `waitid(idtype, id, options)` on our own child, retried on `EINTR`; with
/// `WNOHANG`, a child that has not exited leaves `si_pid` zero.
fn waitid(idtype: libc::idtype_t, id: libc::id_t, options: i32) -> io::Result<libc::siginfo_t> {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child.
        if unsafe { libc::waitid(idtype, id, &mut info, options) } == 0 {
            return Ok(info);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// The status in a `waitid` result, as std's `ExitStatus` (a `wait` status word).
pub(crate) fn status_of(info: &libc::siginfo_t) -> std::process::ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: waitid filled in the SIGCHLD fields.
    let code = unsafe { info.si_status() };
    let raw = match info.si_code {
        libc::CLD_EXITED => (code & 0xff) << 8,
        libc::CLD_DUMPED => (code & 0x7f) | 0x80,
        _ => code & 0x7f,
    };
    std::process::ExitStatus::from_raw(raw)
}

/// Raises the capacity of a pipe (best effort; failures are ignored).
pub(crate) fn raise_pipe_size(fd: impl AsFd) {
    let _ = nix::fcntl::fcntl(fd, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
}

/// Work for the spawner thread: prepares and starts one child, and sends the
/// outcome back itself.
type SpawnJob = Box<dyn FnOnce() + Send>;

/// One long-lived thread that starts every child. `PR_SET_PDEATHSIG` fires when the
/// *thread* that created a child exits, so children must not be created from threads
/// that come and go (tokio's blocking pool). Children are created with
/// `clone(CLONE_VM | CLONE_VFORK)` ([`crate::spawn`]), so this thread is suspended
/// for each until it has called `exec`. The thread ends when the [`Spawner`] is
/// dropped, which (by design) SIGKILLs the shells it started.
pub(crate) struct Spawner {
    jobs: mpsc::Sender<SpawnJob>,
}

impl Spawner {
    pub(crate) fn start() -> io::Result<Spawner> {
        let (jobs, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("toolhost-spawner".to_owned())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            })?;
        Ok(Spawner { jobs })
    }

    /// Runs `prepare` on the spawner thread, then starts the [`Launch`] it
    /// returns there, and answers both: what `prepare` returned beside the
    /// launch, and the started child. Doing the preparation (the session's
    /// files and cgroups, blocking work) on the same thread as the start saves
    /// a hand-off to the blocking pool and back on every start (benchmark P2).
    /// If the caller went away meanwhile, the started child's guard, dropped
    /// with the answer, ends its whole group and reaps it.
    ///
    /// Errors: the outer one when the spawner thread has stopped; the inner
    /// one is `prepare`'s; the start's is beside what `prepare` returned.
    #[allow(clippy::type_complexity)] // The three outcomes of one start.
    pub(crate) async fn prepare_and_start<P, E>(
        &self,
        prepare: impl FnOnce() -> Result<(P, Launch), E> + Send + 'static,
    ) -> io::Result<Result<(P, io::Result<Started>), E>>
    where
        P: Send + 'static,
        E: Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job: SpawnJob = Box::new(move || {
            let result = prepare().map(|(prepared, launch)| (prepared, start(launch)));
            drop(reply.send(result));
        });
        let stopped = || io::Error::other("the spawner thread has stopped");
        self.jobs.send(job).map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())
    }
}

/// How old a `/proc` snapshot may be (and still have begun after the session
/// started) for picking whom a kill's SIGTERM goes to; concurrent kills share it.
/// The survivor checks that follow always use newer ones.
pub(crate) const SIGNAL_SCAN_MAX_AGE: Duration = Duration::from_secs(1);

/// Live (non-zombie) processes whose session id or process group id is `sid`,
/// found by scanning `/proc/*/stat` now. The host's own process is never included.
pub fn group_members(sid: u32) -> Vec<u32> {
    proc_table(Instant::now()).members(sid).to_vec()
}

/// True when `pid` leads its own session or process group (so group signalling is
/// safe and meaningful for it).
pub(crate) fn leads_group(pid: u32) -> bool {
    read_stat(pid as i32).is_some_and(|s| s.session == pid as i32 || s.pgrp == pid as i32)
}

/// True when signalling group `pid` could reach the host itself or init.
fn is_forbidden_group(pid: u32) -> bool {
    let pid = pid as i32;
    pid <= 1
        || pid == std::process::id() as i32
        || pid == unistd::getpgrp().as_raw()
        || unistd::getsid(None).is_ok_and(|s| s.as_raw() == pid)
}

/// Sends `sig` to every process of the group led by `pid` (when `group`), or to `pid`
/// alone. Adds the pids signalled to `seen`. Never signals the host's own group.
///
/// The leader's group is signalled with `killpg`; processes of the session that
/// moved to other groups (`set -m`, `timeout`, ...) are found in `table`, a `/proc`
/// snapshot the caller took (see [`proc_table`]; required when `group`).
pub(crate) fn signal_processes(
    pid: u32,
    group: bool,
    sig: Signal,
    seen: &mut HashSet<u32>,
    table: Option<&ProcTable>,
) {
    if is_forbidden_group(pid) {
        tracing::warn!(
            pid,
            "refusing to signal the host's own process group or init"
        );
        return;
    }
    if !group {
        if signal::kill(Pid::from_raw(pid as i32), sig).is_ok() {
            seen.insert(pid);
        }
        return;
    }
    let before = seen.len();
    for &member in table.map_or(&[][..], |t| t.members(pid)) {
        if signal::kill(Pid::from_raw(member as i32), sig).is_ok() {
            seen.insert(member);
        }
    }
    if signal::killpg(Pid::from_raw(pid as i32), sig).is_ok() && seen.len() == before {
        seen.insert(pid);
    }
}

/// Polling interval while waiting for a signalled group to go away (only during a
/// kill's grace period).
pub(crate) const SURVIVOR_POLL: Duration = Duration::from_millis(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_appears_once_with_the_last_value_given() {
        let env = build_env(
            Path::new("/tmp/t"),
            &[("PAGER".into(), "less".into())],
            &[("GIT_EDITOR".into(), "vi".into()), ("X".into(), "1".into())],
        );
        let get = |name: &str| -> Vec<&OsString> {
            env.iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v)
                .collect()
        };
        assert_eq!(get("GIT_EDITOR"), [&OsString::from("vi")]);
        assert_eq!(get("PAGER"), [&OsString::from("less")]);
        assert_eq!(get("GIT_TERMINAL_PROMPT"), [&OsString::from("0")]);
        assert_eq!(get("TMPDIR"), [&OsString::from("/tmp/t")]);
        assert_eq!(get("TERM"), [&OsString::from("dumb")]);
        assert_eq!(get("X"), [&OsString::from("1")]);
    }
}
