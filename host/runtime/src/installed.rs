//! The plugins a plugins dir's `plugins.lock` names (toolhost-installed's
//! [`PluginsDir::installed`]): each blob re-hashed against the lock, its
//! manifest read from the lock's `[plugin.manifest]` with the component's
//! sha256 pinned, relative preopens resolving against the plugins dir (as
//! for a manifest copied there by `plugin add FILE`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use toolhost_installed::PluginsDir;

use crate::manifest::Manifest;

/// One plugin of the lock: the blob's path (what a skip names) and its
/// manifest and bytes, or why it cannot be read (these are skipped, never
/// fatal: the reason is what the skip reports).
pub(crate) type Locked = (PathBuf, Result<(Manifest, Vec<u8>), String>);

/// The lock's plugins in lock order (none without a dir or a lock), refusing
/// an id in `ids`. An unreadable lock is one failure naming the lock.
pub(crate) fn locked_plugins(dir: Option<&Path>, ids: &HashSet<String>) -> Vec<Locked> {
    let Some(dir) = dir else { return Vec::new() };
    let dir = PluginsDir::new(dir);
    if !dir.lock_path().exists() {
        return Vec::new();
    }
    let set = match dir.installed() {
        Ok(set) => set,
        Err(e) => return vec![(dir.lock_path(), Err(e.to_string()))],
    };
    let mut out: Vec<Locked> = set
        .failed
        .into_iter()
        .map(|(id, e)| {
            let path = set
                .lock
                .get(&id)
                .map(|entry| dir.blob_path(&entry.component_sha256))
                .unwrap_or_else(|| dir.lock_path());
            (path, Err(format!("installed plugin `{id}`: {e}")))
        })
        .collect();
    for p in set.plugins {
        let read = if ids.contains(&p.entry.id) {
            Err(format!(
                "installed plugin `{}` ({}): id `{}` is already taken (ids must be unique; \
                 `bash` and `policy` are built in)",
                p.entry.id, p.entry.source, p.entry.id
            ))
        } else {
            Manifest::parse(&p.manifest, &dir.lock_path(), dir.root(), &|k| {
                std::env::var(k).ok()
            })
            .map_err(|e| e.to_string())
            .and_then(|m| {
                std::fs::read(&p.wasm)
                    .map(|bytes| (m, bytes))
                    .map_err(|e| format!("cannot read plugin {}: {e}", p.wasm.display()))
            })
        };
        out.push((p.wasm, read));
    }
    out
}
