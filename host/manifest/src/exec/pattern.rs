//! Exec patterns: the manifest's `exec` (and `exec_stdin`) entries, in the one
//! pattern language of toolhost ([`toolhost_pattern`], the same as policy rules). A
//! trailing `*` is any further arguments, a `*` elsewhere one word, `*` inside a word
//! a glob within it, `**` any number of words. [`exec_pattern_matches`] is a pure
//! function with a table test; only the pattern `**` on its own accepts a command
//! with shell metacharacters.

use toolhost_pattern::{Pattern, PatternError};

use crate::error::ValueError;

/// Characters that make a command more than one simple command with literal
/// words: separators, pipes, substitutions, redirections, grouping, quotes
/// and escapes, globs and brace/tilde expansion, comments. A command holding
/// any of them (or any control character other than tab) matches only `**`.
const SHELL_SPECIAL: &[char] = &[
    ';', '&', '|', '$', '`', '(', ')', '<', '>', '\\', '\'', '"', '*', '?', '[', ']', '{', '}',
    '~', '#', '!',
];

/// Does exec `pattern` match `command`? Pure; no I/O; linear in the command's
/// length for patterns without `**`.
///
/// - The pattern `**` alone matches every command, even an empty one or one
///   with shell metacharacters.
/// - Otherwise the command must be a single simple command of literal words:
///   any of `; & | $ \` ( ) < >`, quotes, backslash, `* ? [ ] { } ~ # !`, a
///   newline or other control character makes it fail. Its words (split on
///   spaces and tabs) are matched by the shared pattern language
///   ([`toolhost_pattern::Pattern`]): a trailing `*` is any further arguments,
///   `*` elsewhere one word, `*` inside a word a glob, `**` any words.
/// - A malformed pattern matches nothing; [`validate_exec_pattern`] reports why
///   at load.
pub fn exec_pattern_matches(pattern: &str, command: &str) -> bool {
    if words(pattern) == ["**"] {
        return true;
    }
    let Ok(parsed) = parse_exec_pattern(pattern) else {
        return false;
    };
    if command
        .chars()
        .any(|c| SHELL_SPECIAL.contains(&c) || (c.is_control() && c != '\t'))
    {
        return false;
    }
    parsed.matches_words(&words(command))
}

/// Checks an exec pattern's syntax: the shared language's rules (non-empty, the
/// first word names a program), plus no shell metacharacters other than `*`
/// and no control characters. `**` alone is the grant of every command.
pub fn validate_exec_pattern(pattern: &str) -> Result<(), ValueError> {
    if words(pattern) == ["**"] {
        return Ok(());
    }
    parse_exec_pattern(pattern).map(|_| ())
}

fn parse_exec_pattern(pattern: &str) -> Result<Pattern, ValueError> {
    if pattern.chars().any(|c| c.is_control() && c != '\t') {
        return Err(ValueError::PatternControl(pattern.to_string()));
    }
    for word in words(pattern) {
        if word.chars().any(|c| c != '*' && SHELL_SPECIAL.contains(&c)) {
            return Err(ValueError::PatternMetachar {
                pattern: pattern.to_string(),
                word: word.to_string(),
            });
        }
    }
    Pattern::parse(pattern).map_err(|error| match error {
        PatternError::Empty => ValueError::PatternEmpty,
        error => ValueError::Pattern {
            pattern: pattern.to_string(),
            error,
        },
    })
}

/// The words of `s`: split on spaces and tabs, empty ones dropped.
pub(crate) fn words(s: &str) -> Vec<&str> {
    s.split([' ', '\t']).filter(|w| !w.is_empty()).collect()
}

/// Does exec pattern `outer` match every command exec pattern `inner`
/// matches? Decided on the two patterns' words, never by guessing commands:
/// a `*`/`**` of `outer` that takes any words covers any words of `inner`
/// (its wildcards too); a word of `outer` covers a single word of `inner` when
/// it globs it with `inner`'s `*`s taken as text (`test:*` covers `test:*x`,
/// `*` elsewhere covers any one word); nothing else covers a `**` or trailing
/// `*` of `inner`. Sound (never `true` wrongly); it may say `false` for a
/// cover that only a union of patterns makes. O(words × words), no
/// backtracking. Malformed patterns cover nothing.
pub fn exec_pattern_covers(outer: &str, inner: &str) -> bool {
    if validate_exec_pattern(outer).is_err() || validate_exec_pattern(inner).is_err() {
        return false;
    }
    // (text, takes any number of words): `**`, or `*` as the last word.
    let split = |p: &str| -> Vec<(String, bool)> {
        let w = words(p);
        let last = w.len().saturating_sub(1);
        w.iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), *w == "**" || (*w == "*" && i == last)))
            .collect()
    };
    let (outer, inner) = (split(outer), split(inner));
    let (m, n) = (outer.len(), inner.len());
    // covers[i][j]: outer[i..] covers inner[j..].
    let mut covers = vec![vec![false; n + 1]; m + 1];
    covers[m][n] = true;
    for i in (0..m).rev() {
        for j in (0..=n).rev() {
            covers[i][j] = match &outer[i] {
                (_, true) => covers[i + 1][j] || (j < n && covers[i][j + 1]),
                (glob, false) => {
                    j < n
                        && !inner[j].1
                        && toolhost_pattern::glob_match(glob.as_bytes(), inner[j].0.as_bytes())
                        && covers[i + 1][j + 1]
                }
            };
        }
    }
    covers[0][0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (pattern, command, matches)
    const CASES: &[(&str, &str, bool)] = &[
        // literal words
        ("git status", "git status", true),
        ("git status", "git  status", true),
        ("git status", "\tgit status ", true),
        ("git status", "git status --short", false),
        ("git status", "git", false),
        ("git status", "git statu", false),
        ("git status", "git Status", false),
        ("git status", "", false),
        // a trailing `*` is any further arguments (the policy's meaning too)
        ("cargo test *", "cargo test foo", true),
        ("cargo test *", "cargo test", true),
        ("cargo test *", "cargo test foo bar", true),
        ("cargo test *", "cargo testx", false),
        // `*` elsewhere is exactly one word
        ("git * --help", "git log --help", true),
        ("git * --help", "git --help", false),
        ("git * --help", "git log x --help", false),
        // `*` inside a word globs within it
        ("npm run test:*", "npm run test:unit", true),
        ("npm run test:*", "npm run build", false),
        // the program is never a wildcard
        ("* --version", "rustc --version", false),
        // trailing `**` is zero or more words
        ("git log **", "git log", true),
        ("git log **", "git log --oneline -n 5", true),
        ("git log **", "git show", false),
        ("git * **", "git", false),
        ("git * **", "git x y z", true),
        // `**` alone is everything, metacharacters included
        ("**", "git status; rm -rf /", true),
        ("**", "", true),
        ("**", "a && b | c > d $(e) `f`", true),
        ("  ** ", "anything at all", true),
        // bypass shapes: a plain pattern matches a single simple command only
        ("git status", "git status; rm -rf /", false),
        ("git status **", "git status; rm -rf /", false),
        ("git status **", "git status && rm -rf /", false),
        ("git status **", "git status || rm -rf /", false),
        ("git status **", "git status & rm -rf /", false),
        ("git status **", "git status | sh", false),
        ("git status **", "git status $(rm -rf /)", false),
        ("git status **", "git status `rm -rf /`", false),
        ("git status **", "git status ${IFS}x", false),
        ("git status **", "git status > /etc/passwd", false),
        ("git status **", "git status < /dev/zero", false),
        ("git status **", "git status <(rm -rf /)", false),
        ("git status **", "git status\nrm -rf /", false),
        ("git status **", "git status\rrm -rf /", false),
        ("git status **", "git status\u{b}rm", false),
        ("git status **", "(git status)", false),
        ("git status **", "git status 'a;b'", false),
        ("git status **", "git status \"$HOME\"", false),
        ("git status **", "git status \\; rm", false),
        ("git status **", "git status #comment", false),
        ("cat *", "cat *", false),
        ("cat *", "cat ~/.ssh/id_rsa", false),
        ("rm *", "rm {a,b}", false),
        ("ls *", "ls [ab]", false),
        ("ls *", "ls ?", false),
        ("git status *", "PATH=/tmp/x git status", false),
        ("git status", "PATH=/tmp/x git status", false),
        // malformed patterns match nothing
        ("", "", false),
        ("   ", "x", false),
        ("* x", "a x", false),
        ("git sta*", "git status", true),
        ("git status; rm", "git status; rm", false),
    ];

    #[test]
    fn exec_pattern_table() {
        for (pattern, command, expected) in CASES {
            assert_eq!(
                exec_pattern_matches(pattern, command),
                *expected,
                "pattern {pattern:?} vs command {command:?}"
            );
        }
    }

    #[test]
    fn pattern_validation() {
        assert!(validate_exec_pattern("git status").is_ok());
        assert!(validate_exec_pattern("git * **").is_ok());
        assert!(validate_exec_pattern("**").is_ok());
        assert!(validate_exec_pattern("").is_err());
        assert!(validate_exec_pattern("** x").is_err());
        assert!(validate_exec_pattern("* x").is_err());
        assert!(validate_exec_pattern("git sta*").is_ok());
        assert!(validate_exec_pattern("a;b").is_err());
        assert!(validate_exec_pattern("a\nb").is_err());
    }

    /// `exec_pattern_covers` never says yes wrongly: every command (from a
    /// small universe of words) the inner pattern matches, the outer matches.
    #[test]
    fn exec_pattern_covers_is_sound() {
        let pats = [
            "a",
            "a *",
            "a **",
            "a b",
            "a * b",
            "a ** b",
            "a x*",
            "a *x",
            "a *x*",
            "a b *",
            "a * *",
            "a ** *",
            "a b**",
            "a *b* c",
            "a ** b **",
        ];
        let vocab = ["b", "x", "bx", "xb", "c", "*", "**"];
        let mut commands = vec!["a".to_string()];
        for len in 1..=3 {
            let mut next = Vec::new();
            for c in commands.iter().filter(|c| words(c).len() == len) {
                for w in vocab {
                    next.push(format!("{c} {w}"));
                }
            }
            commands.extend(next);
        }
        let matches = |p: &str, c: &str| Pattern::parse(p).unwrap().matches_words(&words(c));
        for outer in pats {
            for inner in pats {
                if exec_pattern_covers(outer, inner) {
                    for c in &commands {
                        assert!(
                            !matches(inner, c) || matches(outer, c),
                            "{outer:?} said to cover {inner:?}, but {c:?}"
                        );
                    }
                }
            }
            assert!(exec_pattern_covers(outer, outer), "{outer:?}");
        }
    }
}
