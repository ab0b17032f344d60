//! The host-session event log `toolhost serve` keeps in its state dir:
//! `<state>/hosts/<host session id>/events.jsonl`, one JSON event a line,
//! each with its `seq` (1, 2, ...) and `kind` (`lifecycle`,
//! `tool_call_started`, `process_exited`, ...).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use serde_json::Value;

/// The events of the only host session under `state`, parsed, in file order;
/// a last line still being written (no newline yet) is left out.
///
/// Errors: no `hosts` dir, not exactly one host session, an unreadable file,
/// or a complete line that is not JSON.
pub fn events(state: &Path) -> Result<Vec<Value>> {
    let hosts: Vec<PathBuf> = std::fs::read_dir(state.join("hosts"))
        .with_context(|| format!("listing {}/hosts", state.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    ensure!(hosts.len() == 1, "expected one host session: {hosts:?}");
    let path = hosts[0].join("events.jsonl");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    complete
        .lines()
        .map(|l| serde_json::from_str(l).with_context(|| format!("event line {l}")))
        .collect()
}
