//! Orphans the host adopts are reaped, always. Under the subreaper mechanism
//! (`tree.rs`, no writable cgroup) every orphaned descendant of a command is
//! reparented to the host (`PR_SET_CHILD_SUBREAPER`), and nothing else waits
//! for it: once it exits it would stay a zombie for as long as the host runs
//! (`sh -c 'sleep 0.1 & exit 0'` leaves one per call). While an engine tracks
//! trees this way, a task reaps them on every SIGCHLD (the kernel sends one
//! to the subreaper for each adopted child that exits) and at every tree scan.
//!
//! A zombie child of the host is reaped here when it is adopted: not one that
//! [`crate::spawn::spawn`] made and its owner still waits for
//! ([`crate::spawn::own_children`], locked so no such child exists
//! unregistered), and not in the host's own session (children the host or the
//! program embedding it made some other way, such as `tokio::process`, stay
//! in it, while every command leads a session of its own, so its descendants
//! can never be in the host's).

use super::proc_scan::read_stat;

/// Reaps every exited orphan the host adopted (see the module docs) and
/// returns how many. Blocking: reads `/proc/self/task/*/children` and each
/// child's `stat`.
pub(crate) fn reap_adopted() -> usize {
    let own = crate::spawn::own_children();
    // SAFETY: getsid(0) only reads the calling process's session id.
    let host_session = unsafe { libc::getsid(0) };
    let mut reaped = 0;
    for pid in host_children() {
        if own.contains(&pid) {
            continue;
        }
        let Some(stat) = read_stat(pid as i32) else {
            continue;
        };
        if stat.state != 'Z' || stat.session == host_session {
            continue;
        }
        let mut status = 0;
        // SAFETY: waitpid without blocking on a zombie child of ours that no
        // owner waits for (it is not in `own`, which is locked).
        if unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) } == pid as i32 {
            reaped += 1;
        }
    }
    reaped
}

/// The host's children: `/proc/self/task/<tid>/children` of every thread (a
/// child belongs to the thread that made it, an adopted one to the thread the
/// kernel picked), else, where the kernel lacks that file, a `/proc` scan.
fn host_children() -> Vec<u32> {
    let mut found = false;
    let mut children = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten() {
        let Ok(task) = task else { continue };
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            found = true;
            children.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    if !found {
        let table = super::proc_scan::proc_table(std::time::Instant::now());
        children = table.children(std::process::id()).collect();
    }
    children
}

/// Runs [`reap_adopted`] on every SIGCHLD the host gets, on the current tokio
/// runtime, until the returned handle is dropped (the engine that tracks trees
/// with the subreaper). `None`, with the reason at `warn`, outside a runtime or
/// when the signal cannot be watched; then only tree scans reap.
pub(crate) fn start() -> Option<ReaperTask> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    let _enter = handle.enter();
    let mut sigchld = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot watch SIGCHLD, adopted orphans are reaped at scans only: {e}");
            return None;
        }
    };
    let task = handle.spawn(async move {
        // Once at start: what exited before the signal was watched.
        loop {
            let _ = tokio::task::spawn_blocking(reap_adopted).await;
            if sigchld.recv().await.is_none() {
                break;
            }
        }
    });
    Some(ReaperTask(task))
}

/// The task [`start`] spawned; aborted on drop.
pub(crate) struct ReaperTask(tokio::task::JoinHandle<()>);

impl Drop for ReaperTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
