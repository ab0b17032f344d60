//! P5: scale: N concurrent background sessions (`sleep 1000`) started, checked and
//! killed, watching the host's threads and RSS throughout and checking that every
//! process was reaped and none escaped. Baseline: std spawning the same N commands
//! as a session does (`/bin/sh -c 'sleep 1000'`, the engine's default shell, which
//! then execs `sleep`; `posix_spawn`), each with one pipe for stdout and stderr as a
//! session has, held and then killed and reaped (tokio's `Command` would hold three
//! descriptors per child, its pidfd and two pipes: 30,000 for 10,000 children, over
//! this machine's open-file limit).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use toolhost_process::SandboxPolicy;
use toolhost_process::{Caller, KilledBy, SessionStatus, Sessions, SessionsConfig, StartRequest};

use crate::fixture::{Fixture, raise_fd_limit_for, rss, threads};
use crate::report::Row;
use crate::stats::{bytes, duration};

/// Samples this process's thread count every 2 ms into `max` until dropped.
struct ThreadWatch {
    max: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl ThreadWatch {
    fn start() -> ThreadWatch {
        let max = Arc::new(AtomicU64::new(threads()));
        let m = max.clone();
        let task = tokio::spawn(async move {
            loop {
                m.fetch_max(threads(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        ThreadWatch { max, task }
    }

    fn max(&self) -> u64 {
        self.max
            .fetch_max(threads(), Ordering::Relaxed)
            .max(threads())
    }
}

impl Drop for ThreadWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Live (non-zombie) processes whose session id is in `sids`, and zombies whose
/// parent is this process; one scan of `/proc`.
fn leftovers(sids: &HashSet<i32>) -> (usize, usize) {
    let me = std::process::id() as i32;
    let (mut live, mut zombies) = (0, 0);
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = text.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
        let (state, ppid, sid) = (
            f.first().copied().unwrap_or(""),
            f.get(1).and_then(|s| s.parse::<i32>().ok()).unwrap_or(0),
            f.get(3).and_then(|s| s.parse::<i32>().ok()).unwrap_or(0),
        );
        if state == "Z" {
            if ppid == me {
                zombies += 1;
            }
        } else if sids.contains(&sid) {
            live += 1;
        }
    }
    (live, zombies)
}

/// Descriptors one running background session holds, to size the run before
/// measuring: its output pipe (stdout and stderr merged). Its exit is waited for
/// through the engine's io_uring, its output log is opened at its first output
/// and its `cgroup.procs` descriptors are closed once the child has joined
/// (`toolhost_process` `exits.rs`, `output.rs`, `tree.rs`); without io_uring
/// waitid (Linux < 6.7) it also holds its pidfd. The run counts the real number in
/// `/proc/self/fd`.
pub const FDS_PER_SESSION: u64 = 1;

/// The host's open descriptors (entries of `/proc/self/fd`).
fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Runs P5 with `wanted` sessions, or as many as the open-file limit allows, under
/// the default sandbox (`workspace-write`: a private mount namespace, Landlock and
/// seccomp for every command).
pub async fn run(wanted: usize) -> Result<Vec<Row>> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as u64;
    let thread_goal = 2 * cores + 8;
    let fd_limit = raise_fd_limit_for(wanted);
    let room = (fd_limit.saturating_sub(256) / FDS_PER_SESSION) as usize;
    let n = wanted.min(room);
    let fixture = Fixture::new()?;
    let sessions = {
        let mut config = SessionsConfig::new(&fixture.workspace, &fixture.state);
        config.max_sessions = n + 16;
        // Every killed session is waited on afterwards: keep all their tombstones
        // (the default 256 would evict most before they are looked up).
        config.max_finished_sessions = n + 16;
        config.sandbox = SandboxPolicy::default();
        Sessions::new(config)?
    };
    // Warm up: the first sessions allocate the engine's lasting structures.
    for _ in 0..8 {
        let id = sessions
            .start(&Caller::Host, StartRequest::new("true"))
            .await?;
        sessions.wait(&Caller::Host, &id).await?;
    }
    let watch = ThreadWatch::start();
    let rss_before = rss();
    let threads_before = threads();
    let fds_before = open_fds();

    let t = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let id = sessions
            .start(&Caller::Host, StartRequest::new("sleep 1000"))
            .await
            .with_context(|| {
                format!(
                    "starting session {} of {n} (open-file limit {fd_limit})",
                    i + 1
                )
            })?;
        ids.push(id);
    }
    let start_time = t.elapsed();
    let fds_per_session = open_fds().saturating_sub(fds_before) as f64 / n as f64;
    let rss_started = rss();
    let per_session = rss_started.saturating_sub(rss_before) as f64 / n as f64;

    let t = Instant::now();
    let mut sids = HashSet::new();
    for id in &ids {
        let snap = sessions
            .check(&Caller::Host, id)
            .with_context(|| format!("checking {id} after starting {n}"))?;
        ensure!(
            snap.status == SessionStatus::Running,
            "{id} is {:?}",
            snap.status
        );
        sids.insert(snap.pid.context("no pid")? as i32);
    }
    let check_time = t.elapsed();

    let t = Instant::now();
    let mut kills = tokio::task::JoinSet::new();
    for id in ids.clone() {
        let sessions = sessions.clone();
        kills.spawn(async move {
            let t = Instant::now();
            sessions
                .kill(&Caller::Host, &id, None, KilledBy::Embedder)
                .await
                .map(|_| t.elapsed())
        });
    }
    let mut kill_times = Vec::with_capacity(n);
    while let Some(r) = kills.join_next().await {
        kill_times.push(r??);
    }
    let kill_each = crate::stats::Summary::of(kill_times);
    for id in &ids {
        let exit = sessions.wait(&Caller::Host, id).await?;
        ensure!(exit.code.is_none(), "{id} was not killed: {exit:?}");
    }
    let kill_time = t.elapsed();
    let max_threads = watch.max();
    drop(watch);
    // tokio reaps in the background; give it a bounded moment before counting zombies.
    let mut left = leftovers(&sids);
    let deadline = Instant::now() + Duration::from_secs(5);
    while left != (0, 0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = leftovers(&sids);
    }
    let (orphans, zombies) = left;

    // Baseline: the same children held by bare tokio, in a fresh process (in this
    // one it would reuse the memory the sessions just freed).
    let raw = raw_in_child(n)?;
    let (raw_per_child, raw_threads, raw_start) = (raw.per_child_bytes, raw.max_threads, raw.start);

    let ratio = per_session / raw_per_child.max(1.0);
    // Start rate relative to raw spawning: (raw time per child) / (ours per session).
    let rate_ratio = raw_start.as_secs_f64() / start_time.as_secs_f64().max(1e-9);
    let met = max_threads <= thread_goal
        && per_session <= 20.0 * 1024.0
        && orphans == 0
        && zombies == 0
        && fds_per_session <= 2.0
        && rate_ratio >= 0.5;
    Ok(vec![Row {
        id: "P5".into(),
        what: format!(
            "scale: {n} concurrent background sessions `sleep 1000` ({}) started, \
             checked, killed (SIGTERM sequence, concurrently); vs std (posix_spawn) \
             holding {n} children `/bin/sh -c 'sleep 1000'` with one output pipe each",
            sessions.sandbox()
        ),
        measured: format!("{}/session, {max_threads} threads", bytes(per_session)),
        baseline: format!("{}/child, {raw_threads} threads", bytes(raw_per_child)),
        ratio: Some(ratio),
        ratio_note: "RSS per session / per raw child".into(),
        goal: format!(
            "{wanted} sessions, ≤ 2 fds/session, start rate ≥ 0.5× raw, threads ≤ \
             {thread_goal}, ≤ 20 KiB/session, all reaped"
        ),
        met: met && n == wanted,
        details: vec![
            format!(
                "start {n}: {} ({}/session); check all: {}; kill all: {}",
                duration(start_time),
                duration(start_time / n as u32),
                duration(check_time),
                duration(kill_time)
            ),
            format!(
                "one kill (SIGTERM, wait for the group to go): {}",
                kill_each.describe()
            ),
            format!(
                "descriptors: {fds_per_session:.2}/session ({fds_before} before); start rate \
                 {rate_ratio:.2}× raw"
            ),
            format!(
                "host RSS {} before, {} with {n} running; threads {threads_before} before, max {max_threads}",
                bytes(rss_before as f64),
                bytes(rss_started as f64)
            ),
            format!(
                "after kill: {orphans} live processes left in the sessions, {zombies} unreaped zombies"
            ),
            format!(
                "raw (own process): start {n}: {}; {}/child; max {raw_threads} threads",
                duration(raw_start),
                bytes(raw_per_child)
            ),
            if n < wanted {
                format!(
                    "open-file limit {fd_limit} (hard limit; raising it needs CAP_SYS_RESOURCE, \
                     which this process lacks): {n} sessions of the {wanted} asked for fit at \
                     {FDS_PER_SESSION} descriptors each"
                )
            } else {
                format!("open-file limit {fd_limit}")
            },
        ],
    }])
}

/// What the baseline process measured.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct RawScale {
    /// RSS growth per child, in bytes.
    pub per_child_bytes: f64,
    /// Most threads seen.
    pub max_threads: u64,
    /// Time to spawn all children.
    pub start: Duration,
}

/// Runs [`raw`] in a child process of this benchmark binary (`--figure P5-raw`).
fn raw_in_child(n: usize) -> Result<RawScale> {
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(exe)
        .args(["--figure", "P5-raw", "--sessions", &n.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    ensure!(
        out.status.success(),
        "the P5 baseline process failed: {}",
        out.status
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The P5 baseline: std holding `n` `/bin/sh -c 'sleep 1000'` children
/// (`posix_spawn`, each in its own process group, stdout and stderr on one pipe
/// whose read end is held), then killing and reaping them.
pub async fn raw(n: usize) -> Result<RawScale> {
    use std::os::unix::process::CommandExt;
    raise_fd_limit_for(n);
    let before = rss();
    let watch = ThreadWatch::start();
    let t = Instant::now();
    let mut children = Vec::with_capacity(n);
    let mut pipes = Vec::with_capacity(n);
    for _ in 0..n {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 1000"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::from(write.try_clone()?))
            .stderr(std::process::Stdio::from(write))
            .process_group(0)
            .spawn()?;
        children.push(child);
        pipes.push(read);
    }
    let start = t.elapsed();
    let per_child_bytes = rss().saturating_sub(before) as f64 / n as f64;
    for c in &children {
        let _ = kill(Pid::from_raw(-(c.id() as i32)), Signal::SIGTERM);
    }
    tokio::task::spawn_blocking(move || {
        for mut c in children {
            let _ = c.wait();
        }
    })
    .await?;
    drop(pipes);
    Ok(RawScale {
        per_child_bytes,
        max_threads: watch.max(),
        start,
    })
}
