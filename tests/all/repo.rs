//! The repository's own files, for the tests that check the tree itself
//! (`architecture`, `docs`): where the root is and which files lie below a folder.

use std::path::{Path, PathBuf};

/// The repository root (two levels above `host/toolhost`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// Folders that hold no file of the repository's own: build output, installed
/// clients, version control.
const NOT_OURS: &[&str] = &["target", "node_modules", ".venv", ".git"];

/// Appends to `out` every file below `dir` (recursively, `NOT_OURS` folders
/// skipped) whose name ends with one of `endings` (`"rs"`, `"md"`: the extension,
/// without the dot). Panics if `dir` cannot be read: a check over a folder that
/// is gone must fail, not pass over nothing.
pub fn files_with(dir: &Path, endings: &[&str], out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading the folder {}: {e}", dir.display()));
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            if !NOT_OURS.contains(&name.as_ref()) {
                files_with(&path, endings, out);
            }
        } else if path
            .extension()
            .is_some_and(|e| endings.iter().any(|want| e == *want))
        {
            out.push(path);
        }
    }
}

/// Appends to `out` every `.rs` file below `dir` ([`files_with`]).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_with(dir, &["rs"], out);
}

/// `path` relative to the repository root, for messages.
pub fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}
