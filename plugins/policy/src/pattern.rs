//! Command patterns and the word matcher.
//!
//! See the crate docs for the pattern language. Matching is three-valued: a
//! command word that holds an expansion the plugin cannot resolve statically
//! (`$X`, `$(…)`, an unquoted glob) may or may not match, so the matcher says
//! [`Match::Maybe`] and the caller treats it as "not allowed, and possibly
//! denied".

use std::fmt;

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
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::Empty => f.write_str("empty pattern"),
            PatternError::WildcardProgram => f.write_str(
                "the first word of a pattern must name a program (`*` or `**` would match every command)",
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

fn match_from(pat: &[PatWord], args: &[Arg]) -> Match {
    let Some((first, rest)) = pat.split_first() else {
        // Pattern exhausted: extra resolved words make it fail; extra
        // unresolved words might expand to nothing.
        return if args.is_empty() {
            Match::Yes
        } else if args.iter().all(|a| !a.resolved) {
            Match::Maybe
        } else {
            Match::No
        };
    };
    match first {
        PatWord::Rest => {
            // Any number of words: the best over every split.
            let mut best = Match::No;
            for k in 0..=args.len() {
                best = best.max(match_from(rest, &args[k..]));
                if best == Match::Yes {
                    break;
                }
            }
            best
        }
        PatWord::Glob(g) => {
            let Some((arg, more)) = args.split_first() else {
                return Match::No;
            };
            if !arg.resolved {
                // Could be any word, several words or none at all.
                return Match::Maybe;
            }
            if glob_match(g.as_bytes(), arg.text.as_bytes()) {
                match_from(rest, more)
            } else {
                Match::No
            }
        }
    }
}

/// Matches `text` against `pat`, where `*` matches any run of bytes
/// (including none) and every other byte matches itself.
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
    use super::*;

    fn words(s: &str) -> Vec<Arg> {
        s.split_whitespace()
            .map(|w| match w.strip_prefix('?') {
                Some(u) => Arg::unresolved(u),
                None => Arg::literal(w),
            })
            .collect()
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
        for (pat, cmd, want) in cases {
            let p = Pattern::parse(pat).unwrap();
            assert_eq!(p.matches(&words(cmd)), *want, "pattern `{pat}` vs `{cmd}`");
        }
    }

    #[test]
    fn bad_patterns() {
        assert_eq!(Pattern::parse("  "), Err(PatternError::Empty));
        assert_eq!(Pattern::parse("* rm"), Err(PatternError::WildcardProgram));
        assert_eq!(
            Pattern::parse("git   status").unwrap().as_str(),
            "git status"
        );
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
