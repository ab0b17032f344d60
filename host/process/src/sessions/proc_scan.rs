//! Snapshots of `/proc`: which live processes belong to which session and
//! process group, and who is whose child. Used by the kill path in
//! `process.rs` and by descendant tracking in `tree.rs`. One scan reads every
//! process's `stat`; concurrent callers share the newest scan that is recent enough.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Fields of `/proc/<pid>/stat` we use.
pub(crate) struct ProcStat {
    pub(crate) state: char,
    pub(crate) ppid: u32,
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
    /// Clock ticks after boot when it started (with the pid, names one process).
    pub(crate) start_time: u64,
}

pub(crate) fn read_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp session ...`; comm may hold spaces and parens.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    // `starttime` is field 22; `session` was field 6.
    let start_time = fields.nth(15)?.parse().ok()?;
    Some(ProcStat {
        state,
        ppid,
        pgrp,
        session,
        start_time,
    })
}

/// A snapshot of `/proc`: the live (non-zombie) processes by session id and by
/// process group id. One scan reads every process's `stat`, so with many processes
/// (benchmark P5 runs 20,000) concurrent kills share scans through [`proc_table`].
pub(crate) struct ProcTable {
    /// When the scan began: every process alive from then until it was read is in it.
    pub(crate) started: Instant,
    members: HashMap<i32, Vec<u32>>,
    /// Every process read (zombies too): its parent, start time and whether it is
    /// a zombie.
    procs: HashMap<u32, (u32, u64, bool)>,
    /// Children by parent pid (zombies too).
    children: HashMap<u32, Vec<u32>>,
}

impl ProcTable {
    fn scan() -> ProcTable {
        let started = Instant::now();
        let me = std::process::id();
        let mut members: HashMap<i32, Vec<u32>> = HashMap::new();
        let mut procs = HashMap::new();
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        let pids = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != me);
        for pid in pids {
            let Some(stat) = read_stat(pid as i32) else {
                continue;
            };
            let zombie = stat.state == 'Z';
            procs.insert(pid, (stat.ppid, stat.start_time, zombie));
            children.entry(stat.ppid).or_default().push(pid);
            if zombie {
                continue;
            }
            members.entry(stat.session).or_default().push(pid);
            if stat.pgrp != stat.session {
                members.entry(stat.pgrp).or_default().push(pid);
            }
        }
        ProcTable {
            started,
            members,
            procs,
            children,
        }
    }

    /// Live processes whose session id or process group id is `sid`.
    pub(crate) fn members(&self, sid: u32) -> &[u32] {
        self.members.get(&(sid as i32)).map_or(&[], Vec::as_slice)
    }

    /// True when `pid` was running (not a zombie) at the scan.
    pub(crate) fn is_live(&self, pid: u32) -> bool {
        self.procs.get(&pid).is_some_and(|p| !p.2)
    }

    /// The start time of `pid` at the scan.
    pub(crate) fn start_time(&self, pid: u32) -> Option<u64> {
        self.procs.get(&pid).map(|p| p.1)
    }

    /// The parent of `pid` at the scan.
    pub(crate) fn parent(&self, pid: u32) -> Option<u32> {
        self.procs.get(&pid).map(|p| p.0)
    }

    /// The children of `pid` at the scan (zombies too).
    pub(crate) fn children(&self, pid: u32) -> impl Iterator<Item = u32> + '_ {
        self.children.get(&pid).into_iter().flatten().copied()
    }
}

static LATEST_SCAN: std::sync::Mutex<Option<Arc<ProcTable>>> = std::sync::Mutex::new(None);

/// A `/proc` snapshot whose scan began at or after `not_before`: the newest one when
/// it qualifies, else a fresh scan (callers arriving meanwhile wait for it and share
/// it).
pub(crate) fn proc_table(not_before: Instant) -> Arc<ProcTable> {
    let mut latest = LATEST_SCAN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(table) = latest.as_ref()
        && table.started >= not_before
    {
        return table.clone();
    }
    let table = Arc::new(ProcTable::scan());
    *latest = Some(table.clone());
    table
}

/// [`proc_table`] for async callers: the newest snapshot when it qualifies and no
/// scan is running, else a scan on the blocking pool, so a scan (≈ 100 ms with
/// 10,000 processes) never stalls the runtime's workers.
pub(crate) async fn proc_table_async(not_before: Instant) -> Arc<ProcTable> {
    if let Ok(latest) = LATEST_SCAN.try_lock()
        && let Some(table) = latest.as_ref()
        && table.started >= not_before
    {
        return table.clone();
    }
    match tokio::task::spawn_blocking(move || proc_table(not_before)).await {
        Ok(table) => table,
        Err(_) => proc_table(not_before),
    }
}
