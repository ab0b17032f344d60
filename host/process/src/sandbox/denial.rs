//! Attributing a failed command to the sandbox rule that most likely refused it.
//!
//! Modelled on Codex CLI's `is_likely_sandbox_denied`: the kernel does not tell the parent
//! *why* a child got `EACCES`/`EPERM`/`EROFS`, so the host looks at the failed command's output
//! for the messages those errnos produce (`strerror` texts as printed by coreutils, shells,
//! Python, curl, git...) and, when a sandbox is active, names the rule and the escalation to
//! ask for. The command's own error text is left untouched; the hint is extra.

use std::path::Path;

use super::{EffectiveSandbox, SandboxMode};

/// Output fragments (lower-case) that mean a network operation failed.
const NETWORK_MARKERS: &[&str] = &[
    "network is unreachable",
    "could not resolve host",
    "temporary failure in name resolution",
    "name or service not known",
    "failed to establish a new connection",
    "couldn't connect to server",
    "could not connect to server",
    "failed to create socket",
    "socket: operation not permitted",
    "address family not supported",
];
/// Words that, next to "operation not permitted", point at a socket call.
const NETWORK_CONTEXT: &[&str] = &[
    "socket", "connect", "network", "http", "urlopen", "resolve", "dns",
];
/// `strerror` texts of the errnos the filesystem layers produce.
const FS_MARKERS: &[&str] = &[
    "permission denied",       // EACCES (Landlock)
    "operation not permitted", // EPERM
    "read-only file system",   // EROFS (read-only binds)
];

/// For a command that *failed* (`exit_code` non-zero or `None`, i.e. killed) under an active
/// sandbox, returns a one-line hint naming the rule that most likely refused it and what to ask
/// the operator for; `None` if the command succeeded, ran under full-access, or its output
/// shows no sign of a denial.
///
/// Hints (first match wins):
/// - network blocked and a network failure in the output: `network is blocked ...; needs
///   --allow-network`;
/// - a protected host path in the output: `<path> is host state ...`;
/// - `.git` read-only and `.git` in the output: `<workspace>/.git is read-only ...`;
/// - otherwise, for a permission/read-only error: under read-only, `the read-only sandbox
///   blocks all writes except /dev/null; ask ... workspace-write`; under workspace-write,
///   `writes outside <workspace> and <tmp> are blocked by the workspace-write sandbox; ask the
///   operator for --sandbox full-access`.
pub fn denial_hint(
    effective: &EffectiveSandbox,
    exit_code: Option<i32>,
    output: &str,
) -> Option<String> {
    if !effective.is_confined() || exit_code == Some(0) {
        return None;
    }
    let out = output.to_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| out.contains(n));

    if effective.network_blocked
        && (has(NETWORK_MARKERS)
            || (out.contains("operation not permitted") && has(NETWORK_CONTEXT)))
    {
        return Some(
            "sandbox denial (likely): network is blocked by the sandbox (sockets other than \
             AF_UNIX are refused); needs --allow-network"
                .to_owned(),
        );
    }
    if !has(FS_MARKERS) {
        return None;
    }
    if let Some(p) = effective
        .protected
        .iter()
        .find(|p| output.contains(&*p.to_string_lossy()))
    {
        return Some(format!(
            "sandbox denial (likely): {} is host state, kept read-only for commands in every \
             confined mode",
            p.display()
        ));
    }
    let roots: Vec<&Path> = effective
        .writable
        .iter()
        .map(|p| p.as_path())
        .filter(|p| *p != Path::new(super::landlock::DEV_NULL))
        .collect();
    if effective.git_read_only
        && (out.contains("/.git") || out.contains(".git/") || out.contains("'.git'"))
    {
        let ws = roots
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        return Some(format!(
            "sandbox denial (likely): {ws}/.git is read-only under the workspace-write sandbox; \
             ask the operator to grant .git writes"
        ));
    }
    match effective.mode {
        SandboxMode::ReadOnly => Some(
            "sandbox denial (likely): the read-only sandbox blocks all writes except /dev/null; \
             ask the operator for --sandbox workspace-write"
                .to_owned(),
        ),
        SandboxMode::WorkspaceWrite => {
            let list = roots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ");
            Some(format!(
                "sandbox denial (likely): writes outside {list} are blocked by the \
                 workspace-write sandbox; ask the operator for --sandbox full-access"
            ))
        }
        SandboxMode::FullAccess => None,
    }
}
