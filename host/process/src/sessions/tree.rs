//! A session's whole process tree: every descendant of its shell, including those
//! that leave its process group (`setsid`, double forks), is tracked, counted,
//! bounded and killed (ARCHITECTURE.md, invariant "A kill, a timeout and the host's
//! exit reach every descendant, `setsid` ones included").
//!
//! The mechanism is chosen once per process, at [`Tracker::detect`], best first:
//!
//! 1. **cgroup v2**: one cgroup per session under `toolhost-<host pid>`, created
//!    beneath the host's own cgroup (or the hierarchy's root) of the v2 mount found
//!    in `/proc/self/mountinfo`. Members are `cgroup.procs`, "alive" is
//!    `cgroup.events` `populated 1`, a kill is `cgroup.kill`. The process limit is
//!    the v2 `pids` controller when the host can enable it for its cgroups, else a
//!    cgroup v1 `pids` hierarchy when one is mounted (hybrid systems).
//! 2. **cgroup v1 pids**: no usable v2 hierarchy but a writable v1 `pids` one:
//!    membership from its `cgroup.procs`, kills signal every member until none is
//!    left, the limit is its `pids.max`.
//! 3. **subreaper**: no writable cgroup (non-root without delegation): the host
//!    becomes `PR_SET_CHILD_SUBREAPER`, so orphaned descendants are reparented to it
//!    instead of init, and members are found by a `/proc` scan: the shell's session
//!    and group, everything whose parent chain leads to a member, and every member
//!    seen by an earlier scan (pid and start time). No process limit.
//!
//! The command never runs outside its cgroups, and a failed join fails the spawn.
//! The child is created inside its v2 cgroup (`clone3(CLONE_INTO_CGROUP)` with the
//! directory's descriptor, [`crate::spawn`]) and joins its v1 `pids` cgroup in
//! `child_setup` before anything else by writing `0` to that cgroup's `tasks`
//! (async-signal-safe). Neither is a migration of a thread group: moving a whole
//! process (`cgroup.procs`) takes the kernel's global `cgroup_threadgroup_rwsem`
//! for writing, which after an idle spell waits for an RCU grace period (9-16 ms
//! on the benchmark machine, the first call after an agent's pause: BENCHMARKS.md
//! P16), while a single thread moving itself through `tasks` (our child has one
//! thread: `CLONE_VM` without `CLONE_THREAD` is a thread group of its own) and a
//! child born in its cgroup take it for reading only. Where `clone3` is missing,
//! the child writes `0` to the v2 `cgroup.procs` instead, as before (and pays the
//! wait). Detection probes the join with a throwaway child
//! ([`crate::spawn::in_child`]), the same way, so a cgroup the host may create but
//! not move processes into degrades to the next mechanism instead of failing
//! every start.
//!
//! Cleanup: a session's cgroups are removed when its tree is gone, the
//! `toolhost-<pid>` parents when the last engine of the process is dropped, and
//! parents of hosts that died without cleaning up (`toolhost-<pid>` whose pid no
//! longer runs) are killed and removed when a host starts.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use super::proc_scan::ProcTable;

/// Which mechanisms the engine may use to track process trees
/// ([`SessionsConfig::process_tracking`](crate::SessionsConfig::process_tracking)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcessTracking {
    /// cgroup v2 when the host can create and join one, else a cgroup v1 `pids`
    /// hierarchy, else the subreaper and `/proc` scans.
    #[default]
    Auto,
    /// Never create cgroups: the subreaper and `/proc` scans only (what a host
    /// without a writable cgroup gets; no process limit).
    Subreaper,
}

/// How a session's tree is tracked (see the module docs), as
/// [`Sessions::tracking_mechanism`](crate::Sessions::tracking_mechanism) reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackingMechanism {
    /// A cgroup v2 per session under `toolhost-<host pid>`: membership, kills
    /// (`cgroup.kill`) and, with the `pids` controller, the process limit.
    CgroupV2,
    /// No usable cgroup v2 hierarchy, a writable cgroup v1 `pids` one: membership,
    /// kills by signalling every member, the limit.
    CgroupV1Pids,
    /// No writable cgroup: the host is the subreaper and scans `/proc`; no limit.
    Subreaper,
}

/// One `toolhost-<pid>` directory of a cgroup hierarchy, removed on drop (after
/// ending what is left in it).
struct Parent {
    dir: PathBuf,
    v2: bool,
}

impl Drop for Parent {
    fn drop(&mut self) {
        remove_tree_dir(&self.dir, self.v2, Duration::from_secs(1));
    }
}

/// The cgroup parents of this process, shared by every engine in it (one
/// `toolhost-<pid>` per hierarchy); recreated when all engines went away.
#[derive(Default)]
struct Parents {
    v2: Option<Weak<Parent>>,
    v1: Option<Weak<Parent>>,
}

static PARENTS: Mutex<Parents> = Mutex::new(Parents { v2: None, v1: None });

/// Names session cgroups uniquely within this process (engines may reuse ids).
static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);

/// The host-wide half: which mechanism holds and where session cgroups go.
pub(crate) struct Tracker {
    mechanism: TrackingMechanism,
    v2: Option<Arc<Parent>>,
    /// A v1 `pids` parent (the limit on hybrid systems, or the whole mechanism).
    v1: Option<Arc<Parent>>,
    /// The limit written to each session's `pids.max` (0: none).
    limit: u32,
    /// Why the mechanism is weaker than cgroup v2 with a limit, if it is.
    note: Option<String>,
    /// Children are created inside their v2 cgroup when `clone3` allows
    /// ([`SessionsConfig::clone_into_cgroup`](crate::SessionsConfig::clone_into_cgroup)).
    clone3: bool,
    /// Under the subreaper: the task reaping adopted orphans on SIGCHLD
    /// (`reaper.rs`), for as long as this tracker lives.
    _reaper: Option<super::reaper::ReaperTask>,
}

impl Tracker {
    /// Picks the best mechanism `allowed` lets this host use (see the module docs)
    /// with a per-session limit of `limit` processes (0: none). Never fails: what
    /// cannot be set up degrades to the next mechanism, with the reason in
    /// [`Tracker::describe`] and the log. `clone3`: create children inside their v2
    /// cgroup when the kernel allows (else they join it themselves).
    pub(crate) fn detect(allowed: ProcessTracking, limit: u32, clone3: bool) -> Tracker {
        let mut notes = Vec::new();
        let (v2, v1) = if allowed == ProcessTracking::Auto {
            let mut parents = PARENTS.lock().unwrap_or_else(|e| e.into_inner());
            let v2 = shared_parent(&mut parents.v2, true, clone3, &mut notes);
            let v1 = shared_parent(&mut parents.v1, false, clone3, &mut notes);
            (v2, v1)
        } else {
            notes.push("cgroups not used by configuration".to_owned());
            (None, None)
        };
        let v2_pids = v2
            .as_ref()
            .is_some_and(|p| p.dir.join("cgroup.subtree_control").exists() && enable_pids(&p.dir));
        let mechanism = match (&v2, &v1) {
            (Some(_), _) => TrackingMechanism::CgroupV2,
            (None, Some(_)) => TrackingMechanism::CgroupV1Pids,
            (None, None) => TrackingMechanism::Subreaper,
        };
        // The v1 hierarchy is only needed for the limit when v2 cannot give one.
        let v1 = if mechanism == TrackingMechanism::CgroupV2 && (v2_pids || limit == 0) {
            None
        } else {
            v1
        };
        if mechanism == TrackingMechanism::Subreaper {
            // SAFETY: a plain prctl on the host process.
            if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
                notes.push(format!(
                    "PR_SET_CHILD_SUBREAPER failed: {}",
                    io::Error::last_os_error()
                ));
            }
        }
        let limited = limit > 0 && (v2_pids || v1.is_some());
        if limit > 0 && !limited {
            notes.push("no pids controller: the number of processes is not limited".to_owned());
        }
        let reaper = (mechanism == TrackingMechanism::Subreaper)
            .then(super::reaper::start)
            .flatten();
        let tracker = Tracker {
            mechanism,
            v2,
            v1,
            limit: if limited { limit } else { 0 },
            note: (!notes.is_empty()).then(|| notes.join("; ")),
            clone3,
            _reaper: reaper,
        };
        tracing::info!("process tracking: {}", tracker.describe());
        tracker
    }

    /// Every process in a session cgroup under this host's `toolhost-<pid>`
    /// parents (none under the subreaper).
    pub(crate) fn members(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        for parent in [&self.v2, &self.v1].into_iter().flatten() {
            let Ok(leaves) = fs::read_dir(&parent.dir) else {
                continue;
            };
            for leaf in leaves.flatten() {
                if leaf.file_type().is_ok_and(|t| t.is_dir()) {
                    pids.extend(read_pids(&leaf.path().join("cgroup.procs")));
                }
            }
        }
        pids
    }

    /// The mechanism [`Tracker::detect`] picked.
    pub(crate) fn mechanism(&self) -> TrackingMechanism {
        self.mechanism
    }

    /// One line for snapshots and logs, e.g. `cgroup v2, at most 512 processes`
    /// or `subreaper and /proc scan, no process limit (no writable cgroup ...)`.
    pub(crate) fn describe(&self) -> String {
        let what = match self.mechanism {
            TrackingMechanism::CgroupV2 => "cgroup v2",
            TrackingMechanism::CgroupV1Pids => "cgroup v1 pids",
            TrackingMechanism::Subreaper => "subreaper and /proc scan",
        };
        let limit = if self.limit > 0 {
            let how = match (&self.v1, self.mechanism) {
                (Some(_), TrackingMechanism::CgroupV2) => " (cgroup v1 pids.max)",
                _ => " (pids.max)",
            };
            format!("at most {} processes{how}", self.limit)
        } else {
            "no process limit".to_owned()
        };
        match &self.note {
            Some(note) if self.mechanism != TrackingMechanism::CgroupV2 || self.limit == 0 => {
                format!("{what}, {limit} ({note})")
            }
            _ => format!("{what}, {limit}"),
        }
    }

    /// A tree for a new session named `name` (its cgroups created, what the child
    /// enters them through open: [`Tree::born_in`], [`Tree::join_fds`]). Blocking
    /// (a few file operations).
    ///
    /// Errors: creating or configuring a cgroup failed (nothing is left behind).
    ///
    /// `tmpdir` is the session's private `TMPDIR`: under the subreaper, an orphan
    /// reparented to the host is taken for a member when its environment holds it
    /// (descendants inherit it, `setsid` ones too).
    pub(crate) fn create(&self, name: &str, tmpdir: &Path) -> io::Result<Tree> {
        let n = NEXT_GROUP.fetch_add(1, Ordering::Relaxed);
        let leaf = format!("{name}-{n}");
        let mut tree = Tree {
            mechanism: self.mechanism,
            v2: None,
            v1: None,
            limit: self.limit,
            leader: AtomicU32::new(0),
            seen: Mutex::new(HashMap::new()),
            marker: {
                use std::os::unix::ffi::OsStrExt;
                let mut m = b"TMPDIR=".to_vec();
                m.extend_from_slice(tmpdir.as_os_str().as_bytes());
                m
            },
        };
        if let Some(parent) = &self.v2 {
            let entry = if self.clone3 && crate::spawn::clone3_usable() {
                Entry::Dir
            } else {
                Entry::Procs
            };
            let group = Group::create(parent, &leaf, entry)?;
            if self.limit > 0 && self.v1.is_none() {
                fs::write(group.dir.join("pids.max"), self.limit.to_string())?;
            }
            tree.v2 = Some(group);
        }
        if let Some(parent) = &self.v1 {
            let group = Group::create(parent, &leaf, Entry::Tasks)?;
            if self.limit > 0 {
                fs::write(group.dir.join("pids.max"), self.limit.to_string())?;
            }
            tree.v1 = Some(group);
        }
        Ok(tree)
    }
}

/// The parent in `slot` while an engine still holds it, else a new one (sweeping
/// parents of dead hosts first).
fn shared_parent(
    slot: &mut Option<Weak<Parent>>,
    v2: bool,
    clone3: bool,
    notes: &mut Vec<String>,
) -> Option<Arc<Parent>> {
    if let Some(parent) = slot.as_ref().and_then(Weak::upgrade) {
        return Some(parent);
    }
    let what = if v2 { "cgroup v2" } else { "cgroup v1 pids" };
    let found = if v2 { find_v2() } else { find_v1_pids() };
    let Some((mount, own)) = found else {
        if v2 {
            notes.push("no cgroup v2 hierarchy mounted".to_owned());
        }
        return None;
    };
    let name = format!("toolhost-{}", std::process::id());
    let mut last_err = None;
    for base in [own.as_path(), mount.as_path()] {
        sweep_dead_hosts_in_background(base, v2);
        let dir = base.join(&name);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                last_err = Some(format!("cannot create {}: {e}", dir.display()));
                continue;
            }
        }
        let parent = Parent { dir, v2 };
        match probe_join(&parent, clone3) {
            Ok(()) => {
                let parent = Arc::new(parent);
                *slot = Some(Arc::downgrade(&parent));
                return Some(parent);
            }
            Err(e) => {
                last_err = Some(format!(
                    "cannot move a process into {}: {e}",
                    parent.dir.display()
                ));
            }
        }
    }
    if let Some(e) = last_err {
        tracing::debug!("{what} not usable: {e}");
        notes.push(format!("{what} not writable: {e}"));
    }
    None
}

/// Creates a probe cgroup under `parent`, puts a throwaway child into it the way
/// a start will (born in it, or joining through `tasks` or `cgroup.procs`: see
/// the module docs), and removes it again.
fn probe_join(parent: &Parent, clone3: bool) -> io::Result<()> {
    let probe = parent.dir.join("probe");
    match fs::create_dir(&probe) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let result = (|| {
        if parent.v2 && clone3 && crate::spawn::clone3_usable() {
            let dir = open_entry(&probe, Entry::Dir)?;
            let born = crate::spawn::Cgroup(dir.as_raw_fd());
            match crate::spawn::in_child_born_in(&|| Ok(()), Some(born)) {
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
                other => return other,
            }
        }
        let entry = if parent.v2 {
            Entry::Procs
        } else {
            Entry::Tasks
        };
        let join = open_entry(&probe, entry)?;
        let fd = join.as_raw_fd();
        crate::spawn::in_child(&|| join_cgroup(fd))
    })();
    // The child has exited and was reaped: the probe is empty.
    let _ = fs::remove_dir(&probe);
    result
}

/// `(mount point, the host's own cgroup dir)` of the cgroup v2 hierarchy.
fn find_v2() -> Option<(PathBuf, PathBuf)> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, mount) = mountinfo.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        let fstype = post.split(' ').next()?;
        (fstype == "cgroup2").then(|| mount_fields(pre))?
    })?;
    let cgroups = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some((mount.clone(), own_dir(&mount, &root, own)))
}

/// `(mount point, the host's own cgroup dir)` of a cgroup v1 `pids` hierarchy.
fn find_v1_pids() -> Option<(PathBuf, PathBuf)> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, mount) = mountinfo.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        let mut fields = post.split(' ');
        let fstype = fields.next()?;
        let superopts = fields.nth(1)?;
        (fstype == "cgroup" && superopts.split(',').any(|o| o == "pids"))
            .then(|| mount_fields(pre))?
    })?;
    let cgroups = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        controllers.split(',').any(|c| c == "pids").then_some(path)
    })?;
    Some((mount.clone(), own_dir(&mount, &root, own)))
}

/// `(root, mount point)` from the fields before ` - ` of a mountinfo line.
fn mount_fields(pre: &str) -> Option<(String, PathBuf)> {
    let mut fields = pre.split(' ');
    let root = fields.nth(3)?.to_owned();
    let mount = fields.next()?;
    if mount.contains('\\') {
        return None; // an escaped character: not a path we can use as is
    }
    Some((root, PathBuf::from(mount)))
}

/// The directory of cgroup `own` in a hierarchy mounted at `mount` from `root`.
fn own_dir(mount: &Path, root: &str, own: &str) -> PathBuf {
    let rel = own
        .strip_prefix(root)
        .unwrap_or(own)
        .trim_start_matches('/');
    if rel.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(rel)
    }
}

/// Enables the v2 `pids` controller for the cgroups under `dir`.
fn enable_pids(dir: &Path) -> bool {
    let available = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    available.split_whitespace().any(|c| c == "pids")
        && fs::write(dir.join("cgroup.subtree_control"), "+pids").is_ok()
}

/// Runs [`sweep_dead_hosts`] for `base` on a thread of its own, once per process
/// and base: what dead hosts left is not in this host's way (its own cgroups are
/// `toolhost-<own pid>`), and ending it can wait up to 500 ms per directory for
/// processes to go, which a start must not (BENCHMARKS.md, P6 and P9).
fn sweep_dead_hosts_in_background(base: &Path, v2: bool) {
    static SWEPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        if swept.iter().any(|b| b == base) {
            return;
        }
        swept.push(base.to_path_buf());
    }
    let base = base.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("toolhost-cgroup-sweep".into())
        .spawn(move || sweep_dead_hosts(&base, v2));
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the sweep of dead hosts' cgroups");
    }
}

/// Removes this process's `toolhost-<pid>` cgroups, ending any process still in
/// them (waiting at most 200 ms per directory for them to go). For a process
/// about to leave through `std::process::exit`, which runs no destructors: call
/// it after every session was ended (`Sessions::shutdown`). Sessions started
/// afterwards by an engine still alive cannot be tracked by cgroup.
pub fn remove_own_cgroups() {
    let parents = PARENTS.lock().unwrap_or_else(|e| e.into_inner());
    for parent in [&parents.v2, &parents.v1].into_iter().flatten() {
        if let Some(parent) = parent.upgrade() {
            remove_tree_dir(&parent.dir, parent.v2, Duration::from_millis(200));
        }
    }
}

/// Ends and removes `toolhost-<pid>` directories under `base` whose host no longer
/// runs (a host killed with SIGKILL or leaving through `std::process::exit`
/// without [`remove_own_cgroups`] cannot clean up).
fn sweep_dead_hosts(base: &Path, v2: bool) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("toolhost-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        tracing::info!(dir = %entry.path().display(), "ending what a dead host left behind");
        remove_tree_dir(&entry.path(), v2, Duration::from_millis(500));
    }
}

/// Ends every process in cgroup `dir` and its children, then removes them,
/// waiting at most `wait` for the processes to go.
fn remove_tree_dir(dir: &Path, v2: bool, wait: Duration) {
    let children: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    let deadline = Instant::now() + wait;
    for child in children.iter().chain(std::iter::once(&dir.to_path_buf())) {
        loop {
            kill_all_in(child, v2);
            match fs::remove_dir(child) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    tracing::warn!(dir = %child.display(), error = %e, "cannot remove a cgroup");
                    break;
                }
            }
        }
    }
}

/// SIGKILLs every process in cgroup `dir` (`cgroup.kill` when there is one).
fn kill_all_in(dir: &Path, v2: bool) {
    if v2 && fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for pid in read_pids(&dir.join("cgroup.procs")) {
        let _ = signal::kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

/// True when the environment `pid` started with holds exactly `entry`.
fn has_env_entry(pid: u32, entry: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|e| e == entry))
}

fn read_pids(path: &Path) -> Vec<u32> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// How a child enters a session's cgroup (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Born in it (cgroup v2, `clone3(CLONE_INTO_CGROUP)`): the directory.
    Dir,
    /// Writes `0` to its `cgroup.procs` (cgroup v2 without `clone3`).
    Procs,
    /// Writes `0` to its `tasks` (cgroup v1: moves the one thread the child has).
    Tasks,
}

/// Opens what a child enters cgroup `dir` through: the directory itself
/// (`O_PATH`) or the file it writes `0` to.
fn open_entry(dir: &Path, entry: Entry) -> io::Result<OwnedFd> {
    let file = match entry {
        Entry::Dir => {
            use std::os::unix::fs::OpenOptionsExt;
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(dir)?
        }
        Entry::Procs => fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))?,
        Entry::Tasks => fs::OpenOptions::new().write(true).open(dir.join("tasks"))?,
    };
    Ok(OwnedFd::from(file))
}

/// In the child (async-signal-safe, no allocation): moves the calling process (its
/// one thread) into the cgroup whose `cgroup.procs` or `tasks` is open at `fd`.
pub(crate) fn join_cgroup(fd: RawFd) -> io::Result<()> {
    // SAFETY: a write of a static byte to an fd the parent keeps open.
    if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One session cgroup: its directory and what the child enters it through, open
/// until the child has been started ([`Tree::close_join_fds`]).
struct Group {
    dir: PathBuf,
    /// How the child enters it and that descriptor; `None` once the child is in:
    /// a running session holds no descriptor for its cgroups (members are read by
    /// path), which keeps the host's descriptors per session low (benchmark P5).
    entry: Mutex<Option<(Entry, OwnedFd)>>,
    /// Keeps `toolhost-<pid>` until this group is gone.
    _parent: Arc<Parent>,
    v2: bool,
}

impl Group {
    fn create(parent: &Arc<Parent>, leaf: &str, entry: Entry) -> io::Result<Group> {
        let dir = parent.dir.join(leaf);
        fs::create_dir(&dir)?;
        match open_entry(&dir, entry) {
            Ok(fd) => Ok(Group {
                dir,
                entry: Mutex::new(Some((entry, fd))),
                _parent: parent.clone(),
                v2: parent.v2,
            }),
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The open descriptor of this group's entry if it is `entry` (`-1`: none).
    fn fd_if(&self, entry: Entry) -> RawFd {
        let open = self.entry.lock().unwrap_or_else(|e| e.into_inner());
        match &*open {
            Some((e, fd)) if *e == entry => fd.as_raw_fd(),
            _ => -1,
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if fs::remove_dir(&self.dir).is_err_and(|e| e.kind() != io::ErrorKind::NotFound) {
            // Still populated (a running session's engine went away): end it. The
            // parent removes the directory once the processes are gone.
            kill_all_in(&self.dir, self.v2);
        }
    }
}

/// A session's process tree (see the module docs).
pub(crate) struct Tree {
    mechanism: TrackingMechanism,
    v2: Option<Group>,
    v1: Option<Group>,
    limit: u32,
    /// The shell's pid, once started.
    leader: AtomicU32,
    /// Subreaper scans: members seen so far, by pid, with their start time (so a
    /// reused pid is not taken for a member).
    seen: Mutex<HashMap<u32, u64>>,
    /// Subreaper scans: `TMPDIR=<the session's private temp dir>`, which marks an
    /// orphan reparented to the host as a member.
    marker: Vec<u8>,
}

impl Tree {
    /// The v2 cgroup the child is to be created in (`clone3(CLONE_INTO_CGROUP)`),
    /// unless it joins by itself ([`Tree::join_fds`]). Valid until
    /// [`Tree::close_join_fds`].
    pub(crate) fn born_in(&self) -> Option<crate::spawn::Cgroup> {
        let fd = self.v2.as_ref()?.fd_if(Entry::Dir);
        (fd >= 0).then_some(crate::spawn::Cgroup(fd))
    }

    /// The descriptors the child writes `0` to (`cgroup.procs` or `tasks`; `-1`:
    /// none, born in it, or already closed by [`Tree::close_join_fds`]). Valid
    /// until that call.
    pub(crate) fn join_fds(&self) -> [RawFd; 2] {
        let fd = |g: &Option<Group>, entry| g.as_ref().map_or(-1, |g| g.fd_if(entry));
        [fd(&self.v2, Entry::Procs), fd(&self.v1, Entry::Tasks)]
    }

    /// `clone3` turned out to be missing ([`crate::spawn::clone3_usable`]): the
    /// child will join its v2 cgroup by writing its `cgroup.procs` instead of being
    /// born in it. Blocking (one open).
    ///
    /// Errors: opening `cgroup.procs` failed.
    pub(crate) fn join_v2_by_procs(&self) -> io::Result<()> {
        if let Some(g) = &self.v2 {
            let mut open = g.entry.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(&*open, Some((Entry::Dir, _))) {
                *open = Some((Entry::Procs, open_entry(&g.dir, Entry::Procs)?));
            }
        }
        Ok(())
    }

    /// Closes the entry descriptors once the child is in (or failed to start):
    /// nothing else uses them, so a running session keeps no descriptor for its
    /// tree.
    pub(crate) fn close_join_fds(&self) {
        for g in [&self.v2, &self.v1].into_iter().flatten() {
            g.entry.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }

    /// Records the shell's pid (it leads its own session and process group).
    pub(crate) fn set_leader(&self, pid: u32) {
        self.leader.store(pid, Ordering::Relaxed);
    }

    /// True when members are found by a `/proc` scan (the caller passes one to
    /// [`Tree::members`]); cgroup trees read their member list directly.
    pub(crate) fn needs_scan(&self) -> bool {
        self.mechanism == TrackingMechanism::Subreaper
    }

    /// The live members. `table` is required for a tree that [needs a
    /// scan](Tree::needs_scan) (without one only the shell's pid is known).
    pub(crate) fn members(&self, table: Option<&ProcTable>) -> Vec<u32> {
        if let Some(g) = self.v2.as_ref().or(self.v1.as_ref()) {
            return read_pids(&g.dir.join("cgroup.procs"));
        }
        let leader = self.leader.load(Ordering::Relaxed);
        let Some(table) = table else {
            let alive = leader != 0 && Path::new(&format!("/proc/{leader}")).exists();
            return if alive { vec![leader] } else { Vec::new() };
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut queue: Vec<u32> = table.members(leader).to_vec();
        if table.is_live(leader) {
            queue.push(leader);
        }
        // Orphans the host (the subreaper) adopted, marked by the session's TMPDIR.
        let me = std::process::id();
        let adopted = table
            .children(me)
            .filter(|&pid| pid != leader && table.is_live(pid) && !seen.contains_key(&pid))
            .filter(|&pid| has_env_entry(pid, &self.marker));
        queue.extend(adopted.collect::<Vec<_>>());
        queue.extend(
            seen.iter()
                .filter(|&(&pid, &start)| table.start_time(pid) == Some(start))
                .map(|(&p, _)| p),
        );
        let mut members = Vec::new();
        let mut found = std::collections::HashSet::new();
        while let Some(pid) = queue.pop() {
            if !found.insert(pid) {
                continue;
            }
            if table.is_live(pid) {
                members.push(pid);
            }
            queue.extend(table.children(pid));
        }
        // Orphans reparented to the host (the subreaper) that died: reap them
        // (every adopted one, this tree's or not: `reaper.rs`).
        if found
            .iter()
            .any(|&pid| pid != leader && !table.is_live(pid) && table.parent(pid) == Some(me))
        {
            super::reaper::reap_adopted();
        }
        seen.clear();
        for &pid in &members {
            if let Some(start) = table.start_time(pid) {
                seen.insert(pid, start);
            }
        }
        members
    }

    /// True while any member runs. Cheap for cgroup v2 (`cgroup.events`).
    pub(crate) fn alive(&self, table: Option<&ProcTable>) -> bool {
        if let Some(g) = &self.v2
            && let Ok(events) = fs::read_to_string(g.dir.join("cgroup.events"))
        {
            return events.lines().any(|l| l == "populated 1");
        }
        !self.members(table).is_empty()
    }

    /// Sends `sig` to every member; returns the pids signalled.
    pub(crate) fn signal(&self, sig: Signal, table: Option<&ProcTable>) -> Vec<u32> {
        let mut sent = Vec::new();
        for pid in self.members(table) {
            if pid as i32 <= 1 || pid == std::process::id() {
                continue;
            }
            if signal::kill(Pid::from_raw(pid as i32), sig).is_ok() {
                sent.push(pid);
            }
        }
        sent
    }

    /// SIGKILLs every member: `cgroup.kill` (atomic: no fork escapes it) when
    /// there is one, else every member found, a few rounds so that processes
    /// forked meanwhile are caught too. Returns the pids signalled (cgroup.kill:
    /// the members it found just before).
    pub(crate) fn kill(&self, table: Option<&ProcTable>) -> Vec<u32> {
        if let Some(g) = &self.v2 {
            let before = read_pids(&g.dir.join("cgroup.procs"));
            if fs::write(g.dir.join("cgroup.kill"), "1").is_ok() {
                return before;
            }
        }
        let mut all = Vec::new();
        for _ in 0..4 {
            let sent = self.signal(Signal::SIGKILL, table);
            let done = sent.is_empty() || table.is_some();
            all.extend(sent);
            if done {
                break;
            }
        }
        all
    }

    /// How often a fork in this tree was refused at its process limit (`pids.events`
    /// `max`), when it has one.
    pub(crate) fn limit_hits(&self) -> Option<(u32, u64)> {
        if self.limit == 0 {
            return None;
        }
        let g = self.v1.as_ref().or(self.v2.as_ref())?;
        let events = fs::read_to_string(g.dir.join("pids.events")).ok()?;
        let hits = events
            .lines()
            .find_map(|l| l.strip_prefix("max ")?.trim().parse().ok())?;
        Some((self.limit, hits))
    }

    /// Removes the session's cgroups once its tree is gone (they are removed on
    /// drop otherwise).
    pub(crate) fn release(&self) {
        for g in self.v2.iter().chain(&self.v1) {
            let _ = fs::remove_dir(&g.dir);
        }
    }
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dir = |g: &Option<Group>| g.as_ref().map(|g| g.dir.clone());
        f.debug_struct("Tree")
            .field("mechanism", &self.mechanism)
            .field("v2", &dir(&self.v2))
            .field("v1", &dir(&self.v1))
            .finish()
    }
}
