//! `plugin list`, `plugin remove ID` and `plugin gc`: the installed set of a
//! plugins dir, `plugins.lock` (toolhost-installed) and the loose
//! `ID.wasm` files copied by `plugin add FILE`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toolhost::{out, outln};
use toolhost_installed::PluginsDir;
use toolhost_runtime::{EngineOptions, Runtime, escape_line};

use super::oci::{Failure, signer};

/// One row of `plugin list`.
struct Row {
    id: String,
    source: String,
    digest: String,
    signer: String,
    added: String,
    json: serde_json::Value,
}

/// The loose `*.wasm` files of `dir`, sorted (none without the dir).
fn loose_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    files.sort();
    files
}

/// `plugin list`: the lock's plugins in load order, then the loose files.
pub(super) fn list(dir: &Path, json: bool) -> Result<(), Failure> {
    let lock = PluginsDir::new(dir).read()?;
    let mut rows = Vec::new();
    for e in &lock.plugins {
        let digest = e
            .resolved
            .as_deref()
            .and_then(|r| r.rsplit_once('@'))
            .map_or_else(
                || format!("sha256:{}", e.component_sha256),
                |(_, d)| d.to_string(),
            );
        rows.push(Row {
            id: e.id.clone(),
            source: e.source.clone(),
            digest: digest.clone(),
            signer: signer(&e.signature),
            added: e.added.to_string(),
            json: serde_json::json!({
                "id": e.id,
                "source": e.source,
                "resolved": e.resolved,
                "digest": digest,
                "component_sha256": e.component_sha256,
                "size": e.size,
                "contract": e.contract,
                "signature": {
                    "kind": e.signature.kind,
                    "identity": e.signature.identity,
                    "issuer": e.signature.issuer,
                    "key_sha256": e.signature.key_sha256,
                },
                "added": e.added.to_string(),
                "updated": e.updated.map(|u| u.to_string()),
                "manifest_from": e.manifest_from,
            }),
        });
    }
    for wasm in loose_files(dir) {
        let id = wasm
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let hex = toolhost_installed::hash_file(&wasm)?;
        let source = format!("file:{}", wasm.display());
        rows.push(Row {
            id: id.clone(),
            source: source.clone(),
            digest: format!("sha256:{hex}"),
            signer: "-".into(),
            added: "-".into(),
            json: serde_json::json!({
                "id": id,
                "source": source,
                "resolved": null,
                "digest": format!("sha256:{hex}"),
                "component_sha256": hex,
                "signature": {"kind": "local-file"},
            }),
        });
    }
    if json {
        let all: Vec<serde_json::Value> = rows.into_iter().map(|r| r.json).collect();
        outln!("{}", serde_json::Value::Array(all));
        return Ok(());
    }
    if rows.is_empty() {
        outln!("no plugins installed in {}", dir.display());
        return Ok(());
    }
    out!("{}", table(&rows));
    Ok(())
}

/// The rows under a header, columns padded to their widest cell, the
/// digest cut to its first 12 hex digits.
fn table(rows: &[Row]) -> String {
    let cells: Vec<[String; 5]> =
        std::iter::once(["ID", "SOURCE", "DIGEST", "SIGNER", "ADDED"].map(String::from))
            .chain(rows.iter().map(|r| {
                [
                    escape_line(&r.id).into_owned(),
                    escape_line(&r.source).into_owned(),
                    r.digest.chars().take("sha256:".len() + 12).collect(),
                    escape_line(&r.signer).into_owned(),
                    r.added.clone(),
                ]
            }))
            .collect();
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for c in &cells {
        let mut line = String::new();
        for (i, cell) in c.iter().enumerate() {
            if i + 1 == c.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `plugin remove ID`: its lock entry (the blob stays for `gc`), or its
/// loose `ID.wasm` and `ID.toml`.
pub(super) fn remove(id: &str, dir: &Path) -> Result<(), Failure> {
    let plugins = PluginsDir::new(dir);
    let loose = dir.join(format!("{id}.wasm"));
    if plugins.read()?.get(id).is_some() {
        let mut writer = plugins.writer(|_| {})?;
        let lock = writer.current().clone();
        let Some(entry) = lock.get(id).cloned() else {
            return Err(Failure::refused(format!(
                "no plugin `{id}` is installed in {}",
                dir.display()
            )));
        };
        let rest = lock.plugins.into_iter().filter(|e| e.id != id).collect();
        writer.commit(rest)?;
        outln!(
            "removed plugin `{id}` ({}); its blob stays until `toolhost plugin gc`",
            entry.source
        );
        return Ok(());
    }
    if loose.is_file() {
        for f in [loose.with_extension("toml"), loose.clone()] {
            match std::fs::remove_file(&f) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Failure::refused(format!(
                        "cannot remove {}: {e}",
                        f.display()
                    )));
                }
            }
        }
        outln!("removed plugin `{id}` ({})", loose.display());
        return Ok(());
    }
    Err(Failure::refused(format!(
        "no plugin `{id}` is installed in {}",
        dir.display()
    )))
}

/// `plugin gc`: blobs no lock entry names, and compiled code (`*.cwasm` in
/// `<state-dir>/compiled`) of no installed component (the lock's, the loose
/// files', the built-in bash and policy plugins').
pub(super) fn gc(dir: &Path, state_dir: &Path) -> Result<(), Failure> {
    let plugins = PluginsDir::new(dir);
    let (blobs, blob_bytes) = if plugins.lock_path().exists() || dir.join("blobs").exists() {
        // Under the writer lock, every blob the lock does not name is garbage:
        // writers add blobs only while holding it.
        plugins.writer(|_| {})?.gc_blobs(Duration::ZERO)?
    } else {
        (0, 0)
    };
    let compiled = state_dir.join("compiled");
    let (mut files, mut bytes, mut kept) = (0usize, 0u64, 0usize);
    if compiled.is_dir() {
        let runtime = Runtime::with_options(
            Some(compiled.clone()),
            EngineOptions {
                pooling: false,
                ..EngineOptions::default()
            },
        )
        .map_err(|e| Failure::refused(format!("cannot build the engine: {e:#}")))?;
        let mut keep = std::collections::BTreeSet::new();
        let mut components: Vec<PathBuf> = plugins
            .read()?
            .plugins
            .iter()
            .map(|e| plugins.blob_path(&e.component_sha256))
            .collect();
        components.extend(loose_files(dir));
        for file in components {
            if let Ok(bytes) = std::fs::read(&file) {
                keep.extend(runtime.cache_path(&bytes));
            }
        }
        for builtin in [toolhost_runtime::BASH, toolhost_runtime::POLICY] {
            keep.extend(runtime.cache_path(builtin));
        }
        for e in std::fs::read_dir(&compiled).into_iter().flatten().flatten() {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "cwasm") {
                continue;
            }
            if keep.contains(&path) {
                kept += 1;
                continue;
            }
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            if std::fs::remove_file(&path).is_ok() {
                files += 1;
                bytes += len;
            }
        }
    }
    outln!(
        "removed {blobs} unused blobs ({}) and {files} compiled files ({}); kept {kept} \
         compiled files",
        super::human_size(blob_bytes as usize),
        super::human_size(bytes as usize)
    );
    Ok(())
}
