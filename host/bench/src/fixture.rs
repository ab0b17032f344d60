//! Throwaway workspaces and state dirs, hosts built the way the binary builds them,
//! and what `/proc` says about this process.

use std::path::PathBuf;

use anyhow::{Context, Result};
use toolhost_process::{Sessions, SessionsConfig};
use toolhost_runtime::{Host, HostConfig};

/// Policy rules that allow every command (for figures about something else).
pub const ALLOW_ALL: &str = "default = \"allow\"\n";

/// A temp dir holding `workspace/` and `state/`; removed on drop.
pub struct Fixture {
    dir: tempfile::TempDir,
    /// The workspace root.
    pub workspace: PathBuf,
    /// The host state dir (logs, compiled cache).
    pub state: PathBuf,
}

impl Fixture {
    /// Creates the directories (under `$TMPDIR`).
    pub fn new() -> Result<Fixture> {
        let dir = tempfile::Builder::new()
            .prefix("toolhost-bench-")
            .tempdir()
            .context("creating a temp dir")?;
        let workspace = dir.path().join("workspace");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&workspace)?;
        std::fs::create_dir_all(&state)?;
        Ok(Fixture {
            dir,
            workspace,
            state,
        })
    }

    /// The temp dir itself.
    pub fn root(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A host with the built-in plugins, the default sandbox and `policy` rules
    /// (`None`: the built-in default policy).
    pub async fn host(&self, policy: Option<&str>) -> Result<Host> {
        let mut config = HostConfig::new(&self.workspace, &self.state);
        config.policy_rules = policy.unwrap_or_default().to_string();
        Host::new(config).await.context("starting the host")
    }

    /// A bare session engine with the default sandbox and room for `max_sessions`.
    pub fn sessions(&self, max_sessions: usize) -> Result<Sessions> {
        let mut config = SessionsConfig::new(&self.workspace, &self.state);
        config.max_sessions = max_sessions;
        Sessions::new(config).context("starting the session engine")
    }
}

/// A field of `/proc/self/status` in its unit (kB fields in bytes).
pub fn status_field(name: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let mut parts = rest.split_whitespace();
            let n: u64 = parts.next()?.parse().ok()?;
            Some(if parts.next() == Some("kB") {
                n * 1024
            } else {
                n
            })
        })
        .unwrap_or(0)
}

/// Resident set size now, in bytes.
pub fn rss() -> u64 {
    status_field("VmRSS")
}

/// Peak resident set size since start or the last [`reset_peak_rss`], in bytes.
pub fn peak_rss() -> u64 {
    status_field("VmHWM")
}

/// Threads of this process now.
pub fn threads() -> u64 {
    status_field("Threads")
}

/// Resets the peak RSS (`VmHWM`) to the current RSS (`/proc/self/clear_refs`, value 5).
pub fn reset_peak_rss() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("resetting VmHWM")
}

/// Raises the open-file limit for a run of `sessions` sessions: the soft limit to the
/// hard one, and, when the process may (root), the hard one to 8 per session + 1024.
/// Returns the soft limit now in force.
pub fn raise_fd_limit_for(sessions: usize) -> u64 {
    let want = (sessions as u64) * 8 + 1024;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if limit.rlim_max < want {
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: want,
        };
        // SAFETY: valid rlimit; fails harmlessly without CAP_SYS_RESOURCE.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
    toolhost_process::raise_fd_limit().map_or(limit.rlim_cur, |l| l.current)
}
