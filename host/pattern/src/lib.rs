//! The one command-pattern language of toolhost, shared by manifest `exec`
//! grants (host, `toolhost-runtime`) and policy rules (the policy plugin, built
//! for `wasm32-wasip2`): the same text means the same commands in both places.
//! Pure: no I/O, no dependencies. The language: docs/policy.md#patterns.
//!
//! A pattern is whitespace-separated words matched against a simple command's
//! words (program first):
//!
//! - a word matches one argument word exactly; `*` inside a word globs within
//!   that word (`test:*` matches `test:unit`, `--output*` matches `--output=x`);
//! - a lone `*` as the **last** word means "any further arguments, including
//!   none": `cargo test *` matches `cargo test` and `cargo test --release`;
//! - a lone `*` elsewhere matches exactly one word (`git * --help`);
//! - `**` anywhere matches any number of words (`git ** --output* **`);
//! - without a trailing `*` the pattern matches exactly those words: `git
//!   status` matches `git status` but not `git status --porcelain`;
//! - the first word names the program; it cannot be `*` or `**`
//!   ([`PatternError::WildcardProgram`]).
//!
//! Matching is three-valued: a command word that holds an expansion the caller
//! cannot resolve statically (`$X`, `$(…)`, an unquoted glob) may or may not
//! match, so the matcher says [`Match::Maybe`] and the caller treats it as
//! "not allowed, and possibly denied". Matching takes time linear in the
//! command: O(pattern words × command words) word steps, whatever the number of
//! `*`/`**` (no backtracking), plus O(pattern word × command word) bytes per glob
//! comparison ([`glob_match`]).

#![no_std]
extern crate alloc;

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

/// One word of a simple command as the shell would see it after quote
/// removal, or a word whose value is only known at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    /// The word with quotes and backslashes removed; unresolved parts keep
    /// their source text (e.g. `$HOME`), for messages only.
    pub text: String,
    /// `true` when `text` is exactly what the program receives as one word.
    pub resolved: bool,
}

impl Arg {
    /// A word known statically.
    pub fn literal(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            resolved: true,
        }
    }

    /// A word (or any number of words) known only at run time.
    pub fn unresolved(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            resolved: false,
        }
    }
}

/// The result of matching a pattern against command words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Match {
    /// Cannot match.
    No,
    /// Might match, depending on an expansion only known at run time.
    Maybe,
    /// Matches.
    Yes,
}

/// One word of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PatWord {
    /// A word that must match one argument; `*` inside is a glob within the word.
    Glob(String),
    /// `*` as the last word, or `**` anywhere: any number of words, including none.
    Rest,
}

/// A parsed command pattern such as `cargo test *` or `npm run test:*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    source: String,
    words: Vec<PatWord>,
}

/// Why a pattern text was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternError {
    /// The pattern has no words.
    Empty,
    /// The first word is a wildcard that would match every program.
    WildcardProgram,
    /// A word holds shell syntax (`; & | < > ( ) $` backtick, quotes, backslash
    /// or a control character). Patterns match the words of one simple command
    /// after quote removal, so such a word could never mean what it says.
    ShellSyntax {
        /// The word.
        word: String,
        /// The character.
        ch: char,
    },
}

/// Characters that are shell syntax, never part of a pattern word: command
/// separators, pipes, redirections, grouping, substitutions, quotes, escapes.
pub const SHELL_SYNTAX: &[char] = &[';', '&', '|', '<', '>', '(', ')', '$', '`', '\'', '"', '\\'];

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::Empty => f.write_str("empty pattern"),
            PatternError::WildcardProgram => f.write_str(
                "the first word of a pattern must name a program (`*` or `**` would match every command)",
            ),
            PatternError::ShellSyntax { word, ch } => write!(
                f,
                "`{word}` holds {ch:?}, which is shell syntax: a pattern matches the words of \
                 one simple command after quotes are removed (write `echo a b`, not `echo 'a b'`; \
                 `;`, `&&` and `|` join separate commands, each judged on its own)"
            ),
        }
    }
}

impl Pattern {
    /// Parses a pattern: whitespace-separated words, see the crate docs.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let raw: Vec<&str> = text.split_whitespace().collect();
        if raw.is_empty() {
            return Err(PatternError::Empty);
        }
        if raw[0] == "*" || raw[0] == "**" {
            return Err(PatternError::WildcardProgram);
        }
        for word in &raw {
            if let Some(ch) = word
                .chars()
                .find(|c| SHELL_SYNTAX.contains(c) || c.is_control())
            {
                return Err(PatternError::ShellSyntax {
                    word: word.to_string(),
                    ch,
                });
            }
        }
        let last = raw.len() - 1;
        let words = raw
            .iter()
            .enumerate()
            .map(|(i, w)| match *w {
                "**" => PatWord::Rest,
                "*" if i == last => PatWord::Rest,
                w => PatWord::Glob(w.to_string()),
            })
            .collect();
        Ok(Self {
            source: raw.join(" "),
            words,
        })
    }

    /// The pattern as written (whitespace normalised).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Matches plain words (all known statically), e.g. a command split on
    /// whitespace: `Yes` or `No`, never `Maybe`.
    pub fn matches_words(&self, words: &[&str]) -> bool {
        let args: Vec<Arg> = words.iter().map(|w| Arg::literal(*w)).collect();
        self.matches(&args) == Match::Yes
    }

    /// The first word of the pattern (the program it names).
    pub fn program(&self) -> &str {
        match &self.words[0] {
            PatWord::Glob(g) => g,
            PatWord::Rest => "**",
        }
    }

    /// Matches `args` (the program word first) against this pattern. The
    /// program word is compared like any other word; the caller decides which
    /// spelling of the program (name, basename or path) it passes.
    pub fn matches(&self, args: &[Arg]) -> Match {
        match_from(&self.words, args)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// The three-valued match of `pat` against `args`, by dynamic programming over
/// (pattern position, argument position) instead of backtracking: one row of
/// `pat.len() + 1` values per argument, so the time is O(`pat.len()` ×
/// `args.len()`) word steps even for patterns with many `**`, and memory
/// O(`pat.len()`).
///
/// `best[i][j]` = match of `pat[i..]` against `args[j..]`:
/// - `i == pat.len()`: `Yes` if `j == args.len()`, `Maybe` if every argument left
///   is unresolved (it might expand to nothing), else `No`;
/// - `Rest`: the best over every split, i.e. `max(best[i+1][j], best[i][j+1])`
///   (only `best[i+1][j]` at the end of the arguments);
/// - `Glob`: `No` without an argument left, `Maybe` for an unresolved one (it could
///   be any word, several words or none), else `best[i+1][j+1]` when the glob
///   matches the word and `No` otherwise.
fn match_from(pat: &[PatWord], args: &[Arg]) -> Match {
    let m = pat.len();
    let n = args.len();
    // `next` is row j + 1, `cur` row j; both indexed by pattern position.
    let mut next: Vec<Match> = alloc::vec![Match::No; m + 1];
    let mut cur: Vec<Match> = alloc::vec![Match::No; m + 1];
    let mut all_unresolved = true;
    for j in (0..=n).rev() {
        if j < n {
            all_unresolved &= !args[j].resolved;
        }
        cur[m] = if j == n {
            Match::Yes
        } else if all_unresolved {
            Match::Maybe
        } else {
            Match::No
        };
        for i in (0..m).rev() {
            cur[i] = match &pat[i] {
                PatWord::Rest if j == n => cur[i + 1],
                PatWord::Rest => cur[i + 1].max(next[i]),
                PatWord::Glob(_) if j == n => Match::No,
                PatWord::Glob(_) if !args[j].resolved => Match::Maybe,
                PatWord::Glob(g) if glob_match(g.as_bytes(), args[j].text.as_bytes()) => {
                    next[i + 1]
                }
                PatWord::Glob(_) => Match::No,
            };
        }
        core::mem::swap(&mut cur, &mut next);
    }
    next[0]
}

/// Matches `text` against `pat`, where `*` matches any run of bytes
/// (including none) and every other byte matches itself. Greedy with one
/// backtrack point (the last `*`), so at most O(`pat.len()` × `text.len()`)
/// steps: linear in the text for a given pattern.
pub fn glob_match(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && pat[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pat.len() && pat[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn words(s: &str) -> Vec<Arg> {
        s.split_whitespace()
            .map(|w| match w.strip_prefix('?') {
                Some(u) => Arg::unresolved(u),
                None => Arg::literal(w),
            })
            .collect()
    }

    /// Each `(pattern, command, want)`: the pattern parses and matches the
    /// command's [`words`] as `want` says.
    fn assert_table(cases: &[(&str, &str, Match)]) {
        for (pat, cmd, want) in cases {
            let p = Pattern::parse(pat).unwrap();
            assert_eq!(p.matches(&words(cmd)), *want, "pattern `{pat}` vs `{cmd}`");
        }
    }

    #[test]
    fn pattern_table() {
        use Match::*;
        let cases: &[(&str, &str, Match)] = &[
            ("git status", "git status", Yes),
            ("git status", "git status --porcelain", No),
            ("git status", "git", No),
            ("git status *", "git status", Yes),
            ("git status *", "git status -s --porcelain", Yes),
            ("cargo test *", "cargo test", Yes),
            ("cargo test *", "cargo testx", No),
            ("cargo test *", "cargo build", No),
            ("npm run test:*", "npm run test:unit", Yes),
            ("npm run test:*", "npm run test:", Yes),
            ("npm run test:*", "npm run build", No),
            ("npm run test:*", "npm run test:unit extra", No),
            ("git * --help", "git log --help", Yes),
            ("git * --help", "git --help", No),
            (
                "git ** --output* **",
                "git diff --stat --output=x HEAD",
                Yes,
            ),
            ("git ** --output* **", "git diff --stat", No),
            ("rm -rf *", "rm -rf /", Yes),
            ("rm -rf *", "rm -rf", Yes),
            ("rm -rf *", "rm -fr /", No),
            ("rm -rf *", "rm -rf ?$X", Yes),
            ("rm -rf *", "rm ?$X /", Maybe),
            ("echo *", "echo ?$(date)", Yes),
            ("echo hi", "echo ?$X", Maybe),
            ("git status", "git status ?$X", Maybe),
            ("git status", "git status ?$X --porcelain", No),
        ];
        assert_table(cases);
    }

    #[test]
    fn bad_patterns() {
        for (text, ch) in [
            ("echo 'a b'", '\''),
            ("git status;", ';'),
            ("a && b", '&'),
            ("echo $X", '$'),
            ("echo a\\ b", '\\'),
            ("cat <f", '<'),
        ] {
            assert!(
                matches!(Pattern::parse(text), Err(PatternError::ShellSyntax { ch: c, .. }) if c == ch),
                "{text}"
            );
        }
        assert_eq!(Pattern::parse("  "), Err(PatternError::Empty));
        assert_eq!(Pattern::parse("* rm"), Err(PatternError::WildcardProgram));
        assert_eq!(
            Pattern::parse("git   status").unwrap().as_str(),
            "git status"
        );
    }

    /// Many `**` against a long command that does not match: the backtracking
    /// matcher took time exponential in the number of `**`; the table is linear.
    #[test]
    fn many_double_stars_match_in_linear_time() {
        let p = Pattern::parse("git ** a ** a ** a ** a ** a ** a ** zzz").unwrap();
        let mut cmd: Vec<&str> = alloc::vec!["git"];
        cmd.extend(core::iter::repeat_n("a", 20_000));
        let start = std::time::Instant::now();
        assert!(!p.matches_words(&cmd));
        cmd.push("zzz");
        assert!(p.matches_words(&cmd));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    /// The table agrees with the definition on every split of small cases,
    /// unresolved words included.
    #[test]
    fn double_stars_and_unresolved_words() {
        use Match::*;
        let cases: &[(&str, &str, Match)] = &[
            ("a ** b ** c", "a b c", Yes),
            ("a ** b ** c", "a x b y c", Yes),
            ("a ** b ** c", "a x c b", No),
            ("a ** b", "a ?$X", Maybe),
            ("a ** b", "a ?$X b", Yes),
            ("a **", "a", Yes),
            ("a ** *", "a x y", Yes),
            ("a * ** b", "a b", No),
            ("a * ** b", "a x b", Yes),
        ];
        assert_table(cases);
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"a*c", b"abbbc"));
        assert!(glob_match(b"*", b""));
        assert!(!glob_match(b"a*c", b"abcd"));
        assert!(glob_match(b"*.rs", b"lib.rs"));
        assert!(glob_match(b"a**b", b"ab"));
    }
}
