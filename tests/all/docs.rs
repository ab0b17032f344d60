//! The documents hold together, checked: README.md is a front page (at most
//! `README_MAX_BYTES`, the run and the test command first, the test command the
//! one `.ci/run` runs); every relative link of the docs reaches a file, and every
//! `#anchor` a heading of it; and code comments cite code, not tracker numbers or
//! the section titles of documents (which rot when a document is rewritten). The
//! one citation of ARCHITECTURE.md a comment may make is its invariant table's
//! row, by name (the file name, `invariant`, the row's first cell in quotes), and
//! the row must be there; a comment's `docs/<page>.md#<anchor>` must resolve like
//! a link.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::repo::{files_with, rel, root};

/// README.md's size limit, in bytes.
const README_MAX_BYTES: usize = 12_000;

/// README's first command: build and run one real command.
const RUN_COMMAND: &str = r#"rustup target add wasm32-wasip2 && cargo run -q -- call bash '{"command":"uname -s && ls"}'"#;

/// README's second command, the one `.ci/run` runs too: every test.
const TEST_COMMAND: &str = "tests/setup.sh && cargo test --workspace";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

// ---- Markdown ---------------------------------------------------------------------

/// Whether `line` opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The lines of `md` outside fenced code blocks, each with its 1-based number.
fn prose_lines(md: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in md.lines().enumerate() {
        if is_fence(line) {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The commands of `md`'s fenced code blocks, in order: each non-empty line that
/// is not a `#` comment, trimmed.
fn fenced_commands(md: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in md.lines() {
        if is_fence(line) {
            fenced = !fenced;
        } else if fenced {
            let t = line.trim();
            if !t.is_empty() && !t.starts_with('#') {
                out.push(t.to_string());
            }
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lowercase, every character but letters,
/// digits, spaces, `-` and `_` dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of `md`'s headings (`#` to `######` outside code blocks); a repeated
/// heading's anchor gets `-1`, `-2`, … as on GitHub.
fn anchors(md: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(md) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        let Some(text) = line[hashes..].strip_prefix(' ') else {
            continue;
        };
        if !(1..=6).contains(&hashes) {
            continue;
        }
        let base = slug(text);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// `line` without its inline code spans (text between backticks).
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join("")
}

/// The link targets of `md` outside code, each with its line number: inline links
/// `[text](target "title")` and reference definitions `[label]: target`.
fn links(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(md) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((n, target.trim_matches(['<', '>']).to_string()));
            rest = &after[end..];
        }
        let t = line.trim_start();
        if t.starts_with('[')
            && let Some(close) = t.find("]:")
            && !t[..close].contains('(')
        {
            let target = t[close + 2..].split_whitespace().next().unwrap_or("");
            out.push((n, target.to_string()));
        }
    }
    out
}

/// Why `target`, linked from `from`, does not resolve: no such file, or no such
/// heading in it. `None` when it resolves or is not relative (a URL).
fn unresolved(from: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else if let Some(from_root) = path.strip_prefix('/') {
        root().join(from_root)
    } else {
        from.parent().unwrap().join(path)
    };
    if !file.exists() {
        return Some(format!("`{target}`: no file {}", file.display()));
    }
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if file.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let have = anchors(&read(&file));
    (!have.contains(anchor)).then(|| {
        format!(
            "`{target}`: {} has no heading with anchor `{anchor}` (its anchors: {have:?})",
            rel(&file)
        )
    })
}

/// The documents whose links must resolve: README.md, ARCHITECTURE.md,
/// BENCHMARKS.md, docs/*.md and every plugins/**/README.md.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut docs: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    files_with(&root.join("docs"), &["md"], &mut docs);
    let mut plugin_docs = Vec::new();
    files_with(&root.join("plugins"), &["md"], &mut plugin_docs);
    docs.extend(
        plugin_docs
            .into_iter()
            .filter(|p| p.file_name().is_some_and(|n| n == "README.md")),
    );
    docs
}

#[test]
fn readme_is_at_most_12_kb() {
    let size = read(&root().join("README.md")).len();
    assert!(
        size <= README_MAX_BYTES,
        "README.md is {size} bytes, over {README_MAX_BYTES}: it is the front page; move \
         manual text to a docs/ page and link it"
    );
}

#[test]
fn readme_gives_the_run_and_the_test_command_first_and_ci_runs_that_test_command() {
    let commands = fenced_commands(&read(&root().join("README.md")));
    assert_eq!(
        commands.first().map(String::as_str),
        Some(RUN_COMMAND),
        "README.md's first fenced command must be the run command"
    );
    assert_eq!(
        commands.get(1).map(String::as_str),
        Some(TEST_COMMAND),
        "README.md's second fenced command must be the test command"
    );
    let ci = read(&root().join(".ci/run"));
    let runs: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        runs.contains(&TEST_COMMAND),
        ".ci/run does not run README's test command `{TEST_COMMAND}` as a line of its own"
    );
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    for doc in documents() {
        for (line, target) in links(&read(&doc)) {
            if let Some(why) = unresolved(&doc, &target) {
                broken.push(format!("{}:{line}: {why}", rel(&doc)));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The repository paths `md` names in code spans (`host/…`, `plugins/…`, `tests/…`,
/// `wit/…`, `docs/…`, `.ci/…`), each with its line number: a path with a
/// placeholder (`<id>`, `{a,b}`, `*`, `vX.Y.Z`) or one that set-up installs
/// (`node_modules`) is left out, and a `::item` after a file is cut off.
fn named_paths(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(md) {
        for span in line.split('`').skip(1).step_by(2) {
            for word in span.split([' ', '(', ')', ',', ';']) {
                let path = word.split("::").next().unwrap_or("");
                let path = path.trim_end_matches(['.', ':']);
                if ["host/", "plugins/", "tests/", "wit/", "docs/", ".ci/"]
                    .iter()
                    .any(|p| path.starts_with(p))
                    && !path.contains(['<', '{', '*'])
                    && !path.contains("X.Y.Z")
                    && !path.contains("node_modules")
                {
                    out.push((n, path.to_string()));
                }
            }
        }
    }
    out
}

#[test]
fn the_map_and_the_front_page_name_only_paths_that_exist() {
    let mut missing = Vec::new();
    for doc in ["ARCHITECTURE.md", "README.md"] {
        for (line, path) in named_paths(&read(&root().join(doc))) {
            if !root().join(&path).exists() {
                missing.push(format!("{doc}:{line}: `{path}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths named in code spans that are not in the repository:\n{}",
        missing.join("\n")
    );
}

// ---- code comments ----------------------------------------------------------------

/// Where `line`'s comment starts, if it has one: at a `marker` (`//`, `#`) that
/// begins the line or follows white space outside a string (an even number of `"`
/// before it).
fn comment_start(line: &str, marker: &str) -> Option<usize> {
    if line.trim_start().starts_with(marker) {
        return Some(line.len() - line.trim_start().len());
    }
    line.match_indices(marker).map(|(i, _)| i).find(|&i| {
        line[..i].ends_with([' ', '\t']) && line[..i].matches('"').count().is_multiple_of(2)
    })
}

/// The comments of a source file, each run of consecutive commented lines joined
/// into one text (markers stripped, white space folded), with the number of its
/// first line. `.rs` and `.wit` comment with `//`, the others with `#`.
fn comments(path: &Path, text: &str) -> Vec<(usize, String)> {
    let marker = match path.extension().and_then(|e| e.to_str()) {
        Some("rs" | "wit") => "//",
        _ => "#",
    };
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let Some(start) = comment_start(line, marker) else {
            open = false;
            continue;
        };
        let body = line[start..].trim_start_matches(['/', '!', '#']).trim();
        if open {
            let last = out.last_mut().unwrap();
            last.1.push(' ');
            last.1.push_str(body);
        } else {
            out.push((i + 1, body.to_string()));
        }
        open = true;
    }
    for (_, c) in &mut out {
        *c = c.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    out
}

/// The tracker references in `comment`: the word issue (or issues) and a number,
/// maybe after a `#`; a number in parentheses after a `#`; the word for a tracker
/// entry (the samples in `the_docs_checkers_find_what_they_look_for` spell them).
fn tickets(comment: &str) -> Vec<String> {
    let lower = comment.to_lowercase();
    let mut found = Vec::new();
    for (i, _) in lower.match_indices("issue") {
        let rest = lower[i + 5..].trim_start_matches('s');
        let rest = rest.strip_prefix(' ').unwrap_or(rest);
        let rest = rest.strip_prefix('#').unwrap_or(rest);
        if rest.starts_with(|c: char| c.is_ascii_digit()) && !word_before(&lower, i) {
            found.push(comment[i..].chars().take(20).collect());
        }
    }
    for (i, _) in lower.match_indices("(#") {
        if lower[i + 2..].starts_with(|c: char| c.is_ascii_digit()) {
            found.push(comment[i..].chars().take(8).collect());
        }
    }
    for (i, _) in lower.match_indices("ticket") {
        if !word_before(&lower, i) {
            found.push(comment[i..].chars().take(20).collect());
        }
    }
    found
}

/// Whether the character before byte `i` of `text` continues a word.
fn word_before(text: &str, i: usize) -> bool {
    text[..i]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// A document a comment names, and what follows the name.
#[derive(Debug, PartialEq)]
enum Citation {
    /// A section title of a document, in quotes or after `§`: these rot.
    Section { doc: String, title: String },
    /// A row of ARCHITECTURE.md's invariant table, by the name in its first cell.
    Invariant { row: String },
    /// A `docs/<page>.md` path, maybe with `#anchor`: must resolve.
    DocsLink { target: String },
}

/// The documents `comment` cites: README, ARCHITECTURE and BENCHMARKS (with or
/// without `.md`, any folder) and `docs/<page>.md`, each with what follows it.
fn citations(comment: &str) -> Vec<Citation> {
    let mut found = Vec::new();
    for name in ["ARCHITECTURE", "README", "BENCHMARKS", "docs/"] {
        for (i, _) in comment.match_indices(name) {
            if word_before(comment, i) || comment[..i].ends_with('-') {
                continue;
            }
            let mut end = i + name.len();
            if name == "docs/" {
                let page = comment[end..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_')))
                    .map_or(comment.len(), |n| end + n);
                if !comment[page..].starts_with(".md") {
                    continue;
                }
                end = page + 3;
                if comment[end..].starts_with('#') {
                    end += 1 + comment[end + 1..]
                        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_')))
                        .unwrap_or(comment.len() - end - 1);
                }
                found.push(Citation::DocsLink {
                    target: comment[i..end].to_string(),
                });
            } else if comment[end..].starts_with(".md") {
                end += 3;
            }
            let doc = comment[i..end].to_string();
            let rest = comment[end..].trim_start_matches([',', ':']).trim_start();
            if let Some(row) = rest.strip_prefix("invariant \"")
                && name == "ARCHITECTURE"
            {
                let row = row.split('"').next().unwrap_or("");
                found.push(Citation::Invariant {
                    row: row.to_string(),
                });
            } else if let Some(title) = rest
                .strip_prefix('"')
                .or_else(|| rest.strip_prefix('\u{201c}'))
                .or_else(|| rest.strip_prefix('\u{a7}'))
            {
                let title = title.split(['"', '\u{201d}', ')']).next().unwrap_or("");
                found.push(Citation::Section {
                    doc,
                    title: title.trim().to_string(),
                });
            }
        }
    }
    found
}

/// The row names of ARCHITECTURE.md's invariant table: the first cell of each row
/// of the table under the heading that names invariants.
fn invariant_rows() -> BTreeSet<String> {
    let map = read(&root().join("ARCHITECTURE.md"));
    let mut rows = BTreeSet::new();
    let mut in_section = false;
    for (_, line) in prose_lines(&map) {
        if line.starts_with("## ") {
            in_section = line.to_lowercase().contains("invariant");
        } else if in_section && line.starts_with('|') {
            let cell = line[1..].split('|').next().unwrap_or("").trim();
            if !cell.is_empty() && !cell.starts_with('-') && cell != "invariant" {
                rows.insert(cell.to_string());
            }
        }
    }
    rows
}

/// The source files whose comments are checked: every `.rs`, `.wit`, `.sh` and
/// `.toml` file of the repository.
fn source_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    files_with(&root(), &["rs", "wit", "sh", "toml"], &mut files);
    files
}

/// Every comment of every source file with what `check` finds in it, as
/// `file:line: finding`.
fn findings(check: impl Fn(&str) -> Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for file in source_files() {
        let text = read(&file);
        for (line, comment) in comments(&file, &text) {
            for what in check(&comment) {
                out.push(format!("{}:{line}: {what}", rel(&file)));
            }
        }
    }
    out
}

#[test]
fn code_comments_cite_no_ticket_numbers() {
    let found = findings(|c| tickets(c).into_iter().map(|t| format!("`{t}`")).collect());
    assert!(
        found.is_empty(),
        "comments cite the tracker; name the type or function that holds the rule \
         instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn code_comments_cite_no_section_titles() {
    let found: Vec<String> = findings(|c| {
        citations(c)
            .into_iter()
            .filter_map(|cite| match cite {
                Citation::Section { doc, title } => Some(format!("{doc}, \"{title}\"")),
                _ => None,
            })
            .collect()
    });
    assert!(
        found.is_empty(),
        "comments cite a document's section title; name the type or function that holds \
         the rule, `ARCHITECTURE.md, invariant \"<row>\"`, or a docs/ page link:\n{}",
        found.join("\n")
    );
}

#[test]
fn code_cites_only_invariant_rows_and_docs_pages_that_exist() {
    let rows = invariant_rows();
    assert!(
        rows.len() > 10,
        "ARCHITECTURE.md's invariant table not found"
    );
    let found = findings(|c| {
        citations(c)
            .into_iter()
            .filter_map(|cite| match cite {
                Citation::Invariant { row } if !rows.contains(&row) => Some(format!(
                    "invariant \"{row}\" is no row of ARCHITECTURE.md's invariant table"
                )),
                Citation::DocsLink { target } => unresolved(&root().join("README.md"), &target),
                _ => None,
            })
            .collect()
    });
    assert!(
        found.is_empty(),
        "citations that do not resolve:\n{}",
        found.join("\n")
    );
}

/// The checkers find what they look for, so a passing check means something.
#[test]
fn the_docs_checkers_find_what_they_look_for() {
    assert_eq!(
        slug("The path of one `tools/call`"),
        "the-path-of-one-toolscall"
    );
    assert_eq!(
        slug("Metadata, setuid and keyrings"),
        "metadata-setuid-and-keyrings"
    );
    assert_eq!(slug("A_b -c"), "a_b--c");
    let md = "# A\n## A\n```\n# not a heading\n[x](nope.md)\n```\n## `A`\n\
              See [b](b.md#c \"t\") and `[d](e.md)`.\n[ref]: f.md\n";
    assert_eq!(anchors(md), ["a", "a-1", "a-2"].map(String::from).into());
    assert_eq!(
        links(md),
        [(8, "b.md#c".to_string()), (9, "f.md".to_string())]
    );
    assert_eq!(
        fenced_commands("x\n```sh\n# one\nfirst\n\n  second\n```\n"),
        ["first", "second"]
    );
    let rs = "let s = \"// not a comment\";\n/// Doc (README,\n/// \"A title\").\nfn y() {}\n\
              x(); // tail\n";
    assert_eq!(
        comments(Path::new("a.rs"), rs),
        [
            (2, "Doc (README, \"A title\").".to_string()),
            (5, "tail".to_string())
        ]
    );
    assert_eq!(
        comments(Path::new("a.sh"), "echo \"# no\" # yes\n"),
        [(1, "yes".to_string())]
    );
    let spelled = |s: &str| s.replace('_', "");
    assert_eq!(
        tickets(&spelled("see i_ssue 16, I_ssues #3 and (#_12)")).len(),
        3
    );
    assert_eq!(tickets(&spelled("the t_icket")).len(), 1);
    assert!(tickets("an issue with it; tissue 3").is_empty());
    assert_eq!(
        citations("(ARCHITECTURE.md, \"Sandbox\"; README \u{201c}Disk\u{201d})"),
        [
            Citation::Section {
                doc: "ARCHITECTURE.md".into(),
                title: "Sandbox".into()
            },
            Citation::Section {
                doc: "README".into(),
                title: "Disk".into()
            }
        ]
    );
    assert_eq!(
        citations(
            "ARCHITECTURE.md, invariant \"Row one\"; docs/sandbox.md#modes, BENCHMARKS.md P5"
        ),
        [
            Citation::Invariant {
                row: "Row one".into()
            },
            Citation::DocsLink {
                target: "docs/sandbox.md#modes".into()
            }
        ]
    );
    assert_eq!(
        citations("docs/sandbox.md, \"Denied reads\""),
        [
            Citation::DocsLink {
                target: "docs/sandbox.md".into()
            },
            Citation::Section {
                doc: "docs/sandbox.md".into(),
                title: "Denied reads".into()
            }
        ]
    );
    assert!(citations("README's test command; the docs/ folder").is_empty());
    assert_eq!(
        named_paths(
            "See `host/a.rs::f`, `tests/x/` and `cargo -p x`.\n`wit/vX.Y.Z/` `host/<id>`\n"
        ),
        [(1, "host/a.rs".to_string()), (1, "tests/x/".to_string())]
    );
    let readme = root().join("README.md");
    assert!(unresolved(&readme, "docs/sandbox.md#modes").is_none());
    assert!(unresolved(&readme, "docs/sandbox.md#no-such").is_some());
    assert!(unresolved(&readme, "docs/none.md").is_some());
    assert!(unresolved(&readme, "https://example.com/x.md#y").is_none());
}
