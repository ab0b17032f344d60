//! The layout ARCHITECTURE.md describes, checked: crate dependencies point one
//! way (toolhost → runtime → process), the process crate has no wasmtime, no
//! crate's top-level modules import each other in a circle, code cites only
//! documents inside the repository, no crate's lib.rs (and no file of a host
//! crate) re-exports a module whole, the runtime and the process crate export a
//! `pub use` list rather than modules, the process and runtime crates' `pub fn`s
//! return typed errors (but for an allow-list of person-facing messages) and no
//! source file is over 1,200 lines outside its unit tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::repo::{root, rust_files};

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
    assert!(runtime.contains("toolhost-manifest"));
    // A manifest is read and judged without the engine or anything above it.
    let manifest = dependencies("host/manifest");
    for banned in [
        "wasmtime",
        "wasmtime-wasi",
        "toolhost-runtime",
        "toolhost",
        "rmcp",
    ] {
        assert!(
            !manifest.contains(banned),
            "toolhost-manifest depends on {banned}"
        );
    }
    assert!(
        !process.contains("toolhost-manifest"),
        "toolhost-process depends on toolhost-manifest (the manifest uses process types, not \
         the other way round)"
    );
    // The host-session event log is read, written and replayed without the engine
    // or anything above it; it uses process types (session ids, killing what a
    // crashed host left running), and the process crate does not use it.
    let host_session = dependencies("host/host-session");
    for banned in [
        "wasmtime",
        "wasmtime-wasi",
        "toolhost-runtime",
        "toolhost",
        "rmcp",
    ] {
        assert!(
            !host_session.contains(banned),
            "toolhost-host-session depends on {banned}"
        );
    }
    assert!(runtime.contains("toolhost-host-session"));
    assert!(
        !process.contains("toolhost-host-session"),
        "toolhost-process depends on toolhost-host-session (the log records process \
         events, not the other way round)"
    );
    assert!(dependencies("host/pattern").is_empty());
    // Output as text is pure (it builds for the guests too): no dependency at all.
    assert!(dependencies("host/text").is_empty());
    // The registry client knows no toolhost crate and no wasm engine.
    let registry = dependencies("host/registry");
    assert!(
        !registry
            .iter()
            .any(|d| d.starts_with("toolhost") || d.starts_with("wasmtime")),
        "toolhost-registry depends on {registry:?}"
    );
}

#[test]
fn only_the_process_crate_calls_libc_or_unsafe_code() {
    for krate in [
        "host/runtime/src",
        "host/toolhost/src",
        "host/pattern/src",
        "host/manifest/src",
        "host/host-session/src",
        "host/registry/src",
        "host/installed/src",
    ] {
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

/// The identifier `code` starts with.
fn ident_at(code: &str) -> String {
    code.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The first path segment of each item of a `use` list, from just inside its `{` to
/// its matching `}` (`A, b::{C, D}, e}` gives `A`, `b`, `e`).
fn first_segments(list: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0;
    let mut start = true;
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && (c.is_ascii_alphanumeric() || c == '_') => {
                names.push(ident_at(&list[i..]));
                start = false;
            }
            _ => {}
        }
    }
    names
}

/// Whether `name` is a top-level module of the crate at `src`.
fn is_module(src: &Path, name: &str) -> bool {
    !name.is_empty() && (src.join(format!("{name}.rs")).exists() || src.join(name).is_dir())
}

/// The names the crate root (`lib.rs`) re-exports from its own modules, each with
/// the top-level module it comes from, so `crate::Name` counts as an import of that
/// module.
fn reexported_from(src: &Path) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(src.join("lib.rs")) else {
        return map;
    };
    let code = code_outside_tests(&text);
    for stmt in code.split(';') {
        let Some(path) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = ident_at(path);
        if !is_module(src, &module) {
            continue;
        }
        let names: Vec<&str> = match (path.find('{'), path.rfind('}')) {
            (Some(open), Some(close)) => path[open + 1..close].split(',').collect(),
            _ => vec![path],
        };
        for name in names {
            let last = name.rsplit("::").next().unwrap_or(name);
            let last = last.rsplit(" as ").next().unwrap_or(last).trim();
            if !last.is_empty() {
                map.insert(last.to_string(), module.clone());
            }
        }
    }
    map
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    // Whether imports through the crate root (`crate::Name` re-exported by lib.rs,
    // each item of `crate::{…}`) count too. The runtime does not pass that yet
    // (builtin → limits → engine → builtin); turn it on as it is untangled.
    for (krate, through_root) in [
        ("host/process", true),
        ("host/runtime", false),
        ("host/manifest", true),
        ("host/host-session", true),
        ("host/toolhost", true),
        ("host/registry", true),
    ] {
        let src = root().join(krate).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let reexports = reexported_from(&src);
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
                // `crate::a::…`, `crate::Name` (a re-export) or `crate::{A, b::C}`.
                let named: Vec<String> = match rest.strip_prefix('{') {
                    Some(list) if through_root => first_segments(list),
                    Some(_) => Vec::new(),
                    None => vec![ident_at(rest)],
                };
                for name in named {
                    let to = if is_module(&src, &name) {
                        Some(name)
                    } else if through_root {
                        reexports.get(&name).cloned()
                    } else {
                        None
                    };
                    if let Some(to) = to.filter(|to| *to != from) {
                        graph.entry(from.clone()).or_default().insert(to);
                    }
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

/// Imports through the crate root count: `crate::Name` re-exported from `a`, and
/// each item of `crate::{…}`.
#[test]
fn imports_through_the_crate_root_count() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod b;\npub use a::{Alpha, inner::Beta as B2};\npub use b::Gamma;\n",
    )
    .unwrap();
    std::fs::write(src.join("a.rs"), "").unwrap();
    std::fs::write(src.join("b.rs"), "").unwrap();
    let map = reexported_from(src);
    assert_eq!(map["Alpha"], "a");
    assert_eq!(map["B2"], "a");
    assert_eq!(map["Gamma"], "b");
    assert_eq!(
        first_segments("Alpha, b::{C, D}, e}; use x::Y;"),
        ["Alpha", "b", "e"]
    );
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

// ---- the shape of each crate's public surface and files --------------------------
//
// The helpers below take a crate (or its `src`) and an allow-list, so each crate's
// rules are one call; every allow-list entry says why.

/// The workspace members (the root Cargo.toml's `members`), as paths from the root.
fn workspace_members() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let start = text.find("members = [").expect("a members list");
    let list = &text[start + "members = [".len()..];
    let list = &list[..list.find(']').unwrap()];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The lines of `code` before its unit tests: up to a `#[cfg(test)]` line followed by
/// a `mod` (a file's unit tests are at its end).
fn lines_outside_tests(code: &str) -> Vec<&str> {
    let lines: Vec<&str> = code.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|l| l.trim_start().starts_with("mod "))
        })
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// `code` before its unit tests ([`lines_outside_tests`]), without `//` comments.
fn code_outside_tests(code: &str) -> String {
    lines_outside_tests(code)
        .into_iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `pub use` statements of `lib` that re-export a whole module (`::*`), as
/// written.
fn glob_reexports(lib: &Path) -> Vec<String> {
    let code = code_outside_tests(&std::fs::read_to_string(lib).unwrap());
    let mut found = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("pub use ") {
        let stmt = &rest[i..];
        let end = stmt.find(';').map_or(stmt.len(), |e| e + 1);
        let stmt = &stmt[..end];
        if stmt.contains('*') {
            found.push(stmt.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        rest = &rest[i + end..];
    }
    found
}

/// The `pub fn`s (not `pub(crate)`, not in unit tests) of the files under `src` whose
/// return type is a `Result` with `String` as its error, as `file: fn name`.
fn pub_fns_with_string_errors(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let code = code_outside_tests(&std::fs::read_to_string(&file).unwrap());
        let rel = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        let mut rest = code.as_str();
        while let Some(i) = rest.find("pub ") {
            let at = &rest[i..];
            rest = &rest[i + 4..];
            // A whole word: not the tail of `pub(crate) `.
            let words = at.trim_start_matches("pub ");
            let Some(sig) = ["fn ", "async fn ", "const fn ", "unsafe fn "]
                .iter()
                .find_map(|k| words.strip_prefix(k))
            else {
                continue;
            };
            let name: String = sig
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let end = sig.find(['{', ';']).unwrap_or(sig.len());
            let sig = sig[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            let sig = sig.split(" where").next().unwrap();
            let Some((_, ret)) = sig.rsplit_once("->") else {
                continue;
            };
            let ret: String = ret.split_whitespace().collect();
            let ret = ret
                .trim_start_matches("std::result::")
                .trim_start_matches("core::result::");
            if ret.starts_with("Result<") && ret.ends_with(",String>") {
                found.push(format!("{rel}: {name}"));
            }
        }
    }
    found
}

/// The `.rs` files under `src` with more than `max` lines outside their unit tests
/// ([`lines_outside_tests`]), as `file: lines`.
fn files_over(src: &Path, max: usize) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    files
        .iter()
        .filter_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            let lines = lines_outside_tests(&text).len();
            let rel = file
                .strip_prefix(root())
                .unwrap_or(file)
                .display()
                .to_string();
            (lines > max).then(|| format!("{rel}: {lines} lines"))
        })
        .collect()
}

/// Crates whose lib.rs may still re-export a module whole, and why.
const GLOB_REEXPORTS_ALLOWED: &[(&str, &str)] = &[(
    "plugins/sdk/rust",
    "re-exports its feature-gated `contract` module whole, so that the copy `toolhost \
     plugin new` vendors (whose Cargo.toml has no `v0_2` feature) builds; a named \
     `pub use` of `v0_2` replaces it with the SDK's own cleanup",
)];

#[test]
fn no_crate_reexports_a_module_whole() {
    for member in workspace_members() {
        let lib = root().join(&member).join("src/lib.rs");
        if !lib.exists() || GLOB_REEXPORTS_ALLOWED.iter().any(|(m, _)| *m == member) {
            continue;
        }
        assert_eq!(
            glob_reexports(&lib),
            Vec::<String>::new(),
            "{member}: name what lib.rs re-exports (a `pub use` list), no `::*`"
        );
    }
}

/// The host crates (`host/*`): every source file, not only lib.rs, names what it
/// re-exports.
#[test]
fn no_host_crate_reexports_a_module_whole_anywhere() {
    let mut files = Vec::new();
    for member in workspace_members()
        .iter()
        .filter(|m| m.starts_with("host/"))
    {
        rust_files(&root().join(member).join("src"), &mut files);
    }
    files.sort();
    assert!(files.len() > 50, "the host crates' sources not found");
    let found: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let rel = file.strip_prefix(root()).unwrap().display().to_string();
            glob_reexports(file)
                .into_iter()
                .map(move |stmt| format!("{rel}: {stmt}"))
        })
        .collect();
    assert_eq!(
        found,
        Vec::<String>::new(),
        "name what is re-exported (a `pub use` list), no `::*`"
    );
}

/// The `pub mod` lines of `lib` (outside its unit tests), as written.
fn pub_mods(lib: &Path) -> Vec<String> {
    code_outside_tests(&std::fs::read_to_string(lib).unwrap())
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pub mod "))
        .map(str::to_string)
        .collect()
}

/// The runtime's and the process crate's modules are private: their lib.rs's
/// `pub use` list is the API (as wasmtime-wasi's), so what the crate exports is read
/// in one place and nothing outside reaches into a module.
#[test]
fn the_runtime_and_the_process_crate_export_a_list_not_modules() {
    for krate in ["host/runtime", "host/process"] {
        assert_eq!(
            pub_mods(&root().join(krate).join("src/lib.rs")),
            Vec::<String>::new(),
            "{krate}: make the module private and `pub use` what is used outside"
        );
    }
}

/// `pub fn`s of toolhost-process and toolhost-runtime that may return
/// `Result<_, String>`, as `file: fn`: only where the text is for a person (or a
/// model) to read and nothing branches on it, each documented so in its doc comment.
/// None in toolhost-process.
const STRING_ERRORS_ALLOWED: &[(&str, &str)] = &[
    (
        "host/runtime/src/uri_template.rs: parse",
        "why a resource template is refused: the text of the plugin's refused offer, in the \
         load log and `plugin inspect`; nothing branches on it",
    ),
    (
        "host/runtime/src/plugin/world.rs: component_names",
        "why the bytes are not a component: the text of `LoadError::Invalid`, for the \
         operator; nothing branches on it",
    ),
];

#[test]
fn the_process_and_runtime_crates_return_typed_errors() {
    let mut found = pub_fns_with_string_errors(&root().join("host/process/src"));
    found.extend(pub_fns_with_string_errors(&root().join("host/runtime/src")));
    let unexplained: Vec<_> = found
        .iter()
        .filter(|f| !STRING_ERRORS_ALLOWED.iter().any(|(a, _)| a == f))
        .collect();
    assert!(
        unexplained.is_empty(),
        "pub fns returning Result<_, String> (use a typed error, or allow-list one whose \
         text only a person reads, with the reason): {unexplained:#?}"
    );
    // An entry for a function that no longer returns `Result<_, String>` goes too.
    let stale: Vec<_> = STRING_ERRORS_ALLOWED
        .iter()
        .filter(|(a, _)| !found.iter().any(|f| f == a))
        .collect();
    assert!(
        stale.is_empty(),
        "allow-list entries that match nothing: {stale:#?}"
    );
}

/// Source files that may still be over 1,200 lines, and why.
const LONG_FILES_ALLOWED: &[(&str, &str)] = &[];

#[test]
fn no_source_file_is_over_1200_lines() {
    let mut found = Vec::new();
    for member in workspace_members() {
        found.extend(files_over(&root().join(&member).join("src"), 1200));
    }
    found.retain(|f| {
        !LONG_FILES_ALLOWED
            .iter()
            .any(|(file, _)| f.starts_with(&format!("{file}:")))
    });
    assert_eq!(found, Vec::<String>::new(), "split these by concern");
}

/// The checkers find what they look for (so a passing check means something).
#[test]
fn the_surface_checkers_find_what_they_look_for() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\npub use a::*;\npub use a::{B, C};\n// pub use x::*;\n\
         pub fn bad(x: u8) -> Result<(), String> { Ok(()) }\n\
         pub async fn also_bad(\n    x: u8,\n) -> Result<Vec<u8>, String>\nwhere\n{ todo!() }\n\
         pub(crate) fn internal() -> Result<(), String> { Ok(()) }\n\
         pub fn typed() -> Result<String, std::io::Error> { todo!() }\n\
         pub fn long() -> std::result::Result<u8, String> { todo!() }\n\
         #[cfg(test)]\nmod tests { pub fn t() -> Result<(), String> { Ok(()) } }\n",
    )
    .unwrap();
    let lib = src.join("lib.rs");
    assert_eq!(glob_reexports(&lib), ["pub use a::*;"]);
    std::fs::write(
        src.join("mods.rs"),
        "pub mod a;\nmod b;\npub(crate) mod c;\n// pub mod d;\n#[cfg(test)]\nmod tests {\n    pub mod e {}\n}\n",
    )
    .unwrap();
    assert_eq!(pub_mods(&src.join("mods.rs")), ["pub mod a;"]);
    std::fs::remove_file(src.join("mods.rs")).unwrap();
    let errors = pub_fns_with_string_errors(&src);
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].ends_with("lib.rs: bad"), "{errors:?}");
    assert!(errors[1].ends_with("lib.rs: also_bad"), "{errors:?}");
    assert!(errors[2].ends_with("lib.rs: long"), "{errors:?}");
    assert_eq!(files_over(&src, 12).len(), 1);
    assert!(
        files_over(&src, 13).is_empty(),
        "unit tests are not counted"
    );
}
