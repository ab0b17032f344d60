//! What a crashed host left running (docs/event-log.md#crash-and-restart): when
//! `toolhost serve --host-session ID` resumes a log whose previous host process died
//! (`kill -9`, OOM, power), every process session that log left open is ended here.
//! `PR_SET_PDEATHSIG` reaches only the shells; their children (`cmd &`, daemons,
//! `setsid` escapees) are orphaned and keep running.
//!
//! A process of such a session is recognised by either of:
//!
//! - its session id or process group id is the session leader's pid (every command
//!   runs as `setsid SHELL -c COMMAND`), and it started no earlier than that leader
//!   (a leader that is still there must have the recorded start time: a recycled pid
//!   is never taken for it); Linux does not reuse a pid while a group of that id
//!   exists, so the group found is the one the old host started (a log without the
//!   start time, written before it was recorded, uses only the next rule);
//! - its environment holds `TMPDIR=<the session's private temp dir>`, which the host
//!   set for the command and which its descendants inherit, including those that
//!   left the group with `setsid`.
//!
//! Only processes of the host's own uid are looked at (others cannot be signalled).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A process session that a previous host process left open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survivor {
    /// Pid of the session's shell: also its session and process group id.
    pub pid: u32,
    /// The shell's start time in clock ticks since boot (`/proc/<pid>/stat` field
    /// 22, see [`process_start_time`]), when recorded.
    pub start_time: Option<u64>,
    /// The session's private temp dir (its commands' `TMPDIR`).
    pub tmp_dir: PathBuf,
}

/// What [`kill_survivors`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SurvivorReport {
    /// Pids sent SIGKILL.
    pub killed: Vec<u32>,
    /// Pids still there when the deadline passed (e.g. in uninterruptible sleep).
    pub remaining: Vec<u32>,
}

/// The start time of process `pid` in clock ticks since boot (`/proc/<pid>/stat`
/// field 22), or `None` when there is no such process.
pub fn process_start_time(pid: u32) -> Option<u64> {
    read_stat(pid).map(|s| s.start_time)
}

/// `/proc/<pid>/stat` of `pid` (the one parser, `proc_scan.rs`).
fn read_stat(pid: u32) -> Option<super::proc_scan::ProcStat> {
    super::proc_scan::read_stat(pid as i32)
}

/// The index of the first of `needles` (`NAME=value` entries) that
/// `/proc/<pid>/environ` holds, if any.
fn environ_has(pid: u32, needles: &[Vec<u8>]) -> Option<usize> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ
        .split(|&b| b == 0)
        .find_map(|entry| needles.iter().position(|n| n.as_slice() == entry))
}

/// The live processes of `survivors`' sessions (see the module doc), never the
/// calling process, its group or session, or init.
fn find(survivors: &[Survivor]) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let me = std::process::id();
    let my_pgrp = nix::unistd::getpgrp().as_raw() as u32;
    let my_sid = nix::unistd::getsid(None).map_or(0, |s| s.as_raw() as u32);
    let uid = nix::unistd::getuid().as_raw();
    let leaders: Vec<(u32, Option<u64>, bool)> = survivors
        .iter()
        .filter(|s| s.pid > 1 && s.pid != me && s.pid != my_pgrp && s.pid != my_sid)
        .map(|s| {
            // The leader itself, if still there, must be the one recorded; without a
            // recorded start time (an older log) only the environment rule applies.
            let genuine = match (read_stat(s.pid), s.start_time) {
                (Some(stat), Some(t)) => stat.start_time == t,
                (None, Some(_)) => true,
                (_, None) => false,
            };
            (s.pid, s.start_time, genuine)
        })
        .collect();
    let needles: Vec<Vec<u8>> = survivors
        .iter()
        .map(|s| {
            let mut n = b"TMPDIR=".to_vec();
            n.extend_from_slice(s.tmp_dir.as_os_str().as_encoded_bytes());
            n
        })
        .collect();
    let mut found = Vec::new();
    let pids = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    for pid in pids {
        if pid <= 1 || pid == me {
            continue;
        }
        let Some(stat) = read_stat(pid) else {
            continue;
        };
        if stat.state == 'Z' || stat.pgrp as u32 == my_pgrp || stat.session as u32 == my_sid {
            continue;
        }
        let in_group = leaders.iter().any(|&(leader, start, genuine)| {
            genuine
                && (stat.session as u32 == leader || stat.pgrp as u32 == leader)
                && start.is_none_or(|t| stat.start_time >= t)
        });
        if in_group || environ_has(pid, &needles).is_some() {
            found.push(pid);
        }
    }
    found
}

/// Ends (SIGKILL) every live process of `survivors`' sessions, scanning `/proc` again
/// until none is left (orphans may still be forking) or `wait` has passed. Blocking:
/// call it on a blocking thread or before serving.
pub fn kill_survivors(survivors: &[Survivor], wait: Duration) -> SurvivorReport {
    let mut report = SurvivorReport::default();
    if survivors.is_empty() {
        return report;
    }
    let deadline = Instant::now() + wait;
    let mut killed: HashSet<u32> = HashSet::new();
    loop {
        let found = find(survivors);
        if found.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            report.remaining = found;
            break;
        }
        for pid in found {
            if kill(Pid::from_raw(pid as i32), Signal::SIGKILL).is_ok() && killed.insert(pid) {
                report.killed.push(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    report
}
