//! The layout ARCHITECTURE.md describes, checked: crate dependencies point one
//! way (toolhost → runtime → process), the process crate has no wasmtime, no
//! crate's top-level modules import each other in a circle, and code cites
//! only documents inside the repository.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `[dependencies]` names of a crate's Cargo.toml.
fn dependencies(krate: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap();
    let mut deps = BTreeSet::new();
    let mut section = "";
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = if line == "[dependencies]" { "deps" } else { "" };
        } else if section == "deps"
            && let Some((name, _)) = line.split_once('=')
            && !line.starts_with('#')
        {
            deps.insert(name.trim().to_string());
        }
    }
    deps
}

#[test]
fn crate_dependencies_point_one_way() {
    let process = dependencies("host/process");
    for banned in [
        "wasmtime",
        "wasmtime-wasi",
        "toolhost-runtime",
        "toolhost",
        "rmcp",
    ] {
        assert!(
            !process.contains(banned),
            "toolhost-process depends on {banned}"
        );
    }
    let runtime = dependencies("host/runtime");
    assert!(runtime.contains("toolhost-process"));
    for banned in ["toolhost", "rmcp", "clap"] {
        assert!(
            !runtime.contains(banned),
            "toolhost-runtime depends on {banned}"
        );
    }
    assert!(dependencies("host/pattern").is_empty());
}

#[test]
fn only_the_process_crate_calls_libc_or_unsafe_code() {
    for krate in ["host/runtime/src", "host/toolhost/src", "host/pattern/src"] {
        let mut files = Vec::new();
        rust_files(&root().join(krate), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for needle in ["libc::", "nix::", "unsafe {"] {
                // The compiled-code cache's deserialize is wasmtime's own unsafe API.
                let allowed = needle == "unsafe {" && text.contains("Component::deserialize_file");
                assert!(
                    allowed || !uses(&text, needle),
                    "{} uses `{needle}`",
                    file.display()
                );
            }
        }
    }
}

/// Whether `code` (comments skipped) names `path` as a whole path segment
/// (`nix::` but not `unix::`).
fn uses(code: &str, path: &str) -> bool {
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .any(|line| {
            line.match_indices(path).any(|(i, _)| {
                !line[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            })
        })
}

/// The top-level module a file of `src` belongs to (`lib`/`main` for the root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Finds a cycle in `graph`, if any, as the list of modules around it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let start = path.iter().position(|n| n == next).unwrap();
                    let mut c = path[start..].to_vec();
                    c.push(next.clone());
                    return Some(c);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, graph, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node)
            && let Some(c) = visit(node, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    for krate in ["host/process", "host/runtime", "host/toolhost"] {
        let src = root().join(krate).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in &files {
            let from = module_of(&src, file);
            let text = std::fs::read_to_string(file).unwrap();
            // Unit tests may reach anywhere, and docs may point anywhere; only
            // the code's own imports count.
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap()
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let to: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let known = src.join(format!("{to}.rs")).exists() || src.join(&to).is_dir();
                if known && to != from {
                    graph.entry(from.clone()).or_default().insert(to);
                }
            }
        }
        assert_eq!(
            cycle(&graph),
            None,
            "{krate}: modules import each other in a circle"
        );
    }
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let graph: BTreeMap<String, BTreeSet<String>> =
        [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"])]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
            .collect();
    assert_eq!(
        cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn code_cites_only_documents_in_the_repository() {
    let mut files = Vec::new();
    for dir in ["host", "plugins", "tests/all", "wit"] {
        rust_files(&root().join(dir), &mut files);
    }
    files.retain(|f| !f.components().any(|c| c.as_os_str() == "target"));
    for doc in [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "plugins/bash/README.md",
    ] {
        files.push(root().join(doc));
    }
    // Spelled apart so this file does not match itself.
    let (section, file_name) = (format!("{} §", "DESIGN"), format!("{}.md", "DESIGN"));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains(&section) && !text.contains(&file_name),
            "{} cites DESIGN, which is not in the repository",
            file.display()
        );
    }
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    for heading in [
        "## Crates",
        "## The path of one tool call",
        "## Where each invariant is enforced",
        "## Threading model",
    ] {
        assert!(map.contains(heading), "ARCHITECTURE.md lacks `{heading}`");
    }
}
