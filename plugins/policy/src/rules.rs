//! The rules file: `allow`, `ask` and `deny` pattern lists and a `default`.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use toml::Spanned;

use crate::pattern::{Arg, Pattern};
use crate::shell::basename;

/// The built-in policy, used when the rules text is empty (no `--policy`).
pub const DEFAULT_POLICY: &str = include_str!("../default-policy.toml");

/// What happens to a command part that no rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultAction {
    /// Run it.
    Allow,
    /// Ask a human (the default).
    Ask,
    /// Refuse it.
    Deny,
}

impl DefaultAction {
    /// The spelling used in the rules file.
    pub fn as_str(self) -> &'static str {
        match self {
            DefaultAction::Allow => "allow",
            DefaultAction::Ask => "ask",
            DefaultAction::Deny => "deny",
        }
    }
}

/// A validated rules file.
///
/// [`Rules::parse`] also indexes each list by program word
/// ([`Rules::candidates`]), so the judge matches a command part only against
/// the rules that can match it. The lists are meant to be read, not changed,
/// after parsing: a list whose length changed is scanned whole (its index is
/// ignored), but a pattern replaced in place is not re-indexed.
#[derive(Clone, Debug)]
pub struct Rules {
    /// Patterns that may run without asking.
    pub allow: Vec<Pattern>,
    /// Patterns that always need a human's answer.
    pub ask: Vec<Pattern>,
    /// Patterns that are always refused.
    pub deny: Vec<Pattern>,
    /// The action for parts no rule matches.
    pub default: DefaultAction,
    /// `allow`, `ask`, `deny` by program word.
    index: [ListIndex; 3],
}

/// One of the three rule lists of [`Rules`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    /// [`Rules::allow`].
    Allow,
    /// [`Rules::ask`].
    Ask,
    /// [`Rules::deny`].
    Deny,
}

/// The positions of one list's patterns by their program word.
///
/// Why skipping the others changes no decision: a pattern's first word is
/// never `*` or `**` ([`Pattern::parse`]), so it is a word glob that must
/// match the command's first word ([`Pattern::matches`] compares the program
/// word like any other). A glob without `*` matches exactly its own text. So
/// a pattern whose program has no `*` can only give `Yes` or `Maybe` for
/// words whose first word is that text, or is unresolved; against any other
/// resolved first word it gives `No`. The judge tries the program's path and
/// its basename (`judge::layer_match`), so a layer's candidates are the
/// patterns named by either, the patterns whose program holds a `*`, and
/// every pattern when the first word is unresolved; in list order, so the
/// first match (the rule a message names) is the same as in a full scan.
#[derive(Clone, Debug, Default)]
struct ListIndex {
    /// Patterns whose program word has no `*`, by that word, positions ascending.
    by_program: HashMap<String, Vec<usize>>,
    /// Patterns whose program word holds a `*`, positions ascending.
    globbed: Vec<usize>,
    /// Length of the list indexed (a list changed since is scanned whole).
    len: usize,
}

impl ListIndex {
    fn new(list: &[Pattern]) -> ListIndex {
        let mut index = ListIndex {
            len: list.len(),
            ..ListIndex::default()
        };
        for (i, p) in list.iter().enumerate() {
            let program = p.program();
            if program.contains('*') {
                index.globbed.push(i);
            } else {
                index
                    .by_program
                    .entry(program.to_string())
                    .or_default()
                    .push(i);
            }
        }
        index
    }
}

/// The positions, ascending, of the patterns of one list that may match a
/// layer ([`Rules::candidates`]).
#[derive(Clone, Debug)]
pub enum Candidates<'a> {
    /// Every position below this.
    All(usize),
    /// Exactly these.
    Some(&'a [usize]),
    /// Exactly these (merged from several sources).
    Merged(Vec<usize>),
}

impl Candidates<'_> {
    /// The positions, ascending.
    pub fn iter(&self) -> CandidateIter<'_> {
        match self {
            Candidates::All(n) => CandidateIter::Range(0..*n),
            Candidates::Some(s) => CandidateIter::Slice(s.iter()),
            Candidates::Merged(v) => CandidateIter::Slice(v.iter()),
        }
    }
}

/// The iterator of [`Candidates::iter`].
#[derive(Clone, Debug)]
pub enum CandidateIter<'a> {
    /// Every position of a range.
    Range(std::ops::Range<usize>),
    /// The positions of a slice.
    Slice(std::slice::Iter<'a, usize>),
}

impl Iterator for CandidateIter<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        match self {
            CandidateIter::Range(r) => r.next(),
            CandidateIter::Slice(s) => s.next().copied(),
        }
    }
}

/// A rules file the plugin could not accept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesError {
    /// 1-based line of the problem (0 when unknown).
    pub line: u32,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "policy file: {}", self.message)
        } else {
            write!(f, "policy file line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for RulesError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRules {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    default: Option<Spanned<String>>,
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> u32 {
    let at = at.min(text.len());
    let n = text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    u32::try_from(n + 1).unwrap_or(u32::MAX)
}

/// `true` when every line is blank or a `#` comment (TOML has no other way
/// to say nothing).
fn sets_nothing(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#')
    })
}

impl Rules {
    /// Parses and validates a rules text. A text that sets nothing (empty,
    /// whitespace or only `#` comments) means the built-in
    /// [`DEFAULT_POLICY`]: an empty policy file and one whose every line is
    /// commented out mean the same.
    pub fn parse(text: &str) -> Result<Self, RulesError> {
        if sets_nothing(text) {
            return Self::parse_toml(DEFAULT_POLICY);
        }
        Self::parse_toml(text)
    }

    fn parse_toml(text: &str) -> Result<Self, RulesError> {
        let raw: RawRules = toml::from_str(text).map_err(|e| RulesError {
            line: e.span().map_or(0, |s| line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        let list = |key: &str, items: Vec<Spanned<String>>| -> Result<Vec<Pattern>, RulesError> {
            items
                .into_iter()
                .map(|item| {
                    Pattern::parse(item.get_ref()).map_err(|e| RulesError {
                        line: line_of(text, item.span().start),
                        message: format!("`{key}` pattern {:?}: {e}", item.get_ref()),
                    })
                })
                .collect()
        };
        let default = match &raw.default {
            None => DefaultAction::Ask,
            Some(d) => match d.get_ref().as_str() {
                "allow" => DefaultAction::Allow,
                "ask" => DefaultAction::Ask,
                "deny" => DefaultAction::Deny,
                other => {
                    return Err(RulesError {
                        line: line_of(text, d.span().start),
                        message: format!(
                            "`default` must be \"allow\", \"ask\" or \"deny\", not {other:?}"
                        ),
                    });
                }
            },
        };
        let allow = list("allow", raw.allow)?;
        let ask = list("ask", raw.ask)?;
        let deny = list("deny", raw.deny)?;
        let index = [
            ListIndex::new(&allow),
            ListIndex::new(&ask),
            ListIndex::new(&deny),
        ];
        Ok(Self {
            allow,
            ask,
            deny,
            default,
            index,
        })
    }

    /// The patterns of `list`.
    pub fn list(&self, list: List) -> &[Pattern] {
        match list {
            List::Allow => &self.allow,
            List::Ask => &self.ask,
            List::Deny => &self.deny,
        }
    }

    /// The positions in `list`, ascending, of the patterns that can match a
    /// layer whose words are `words` (program first), by its program and, for
    /// a program run by path, its basename: every other pattern of the list
    /// gives [`crate::pattern::Match::No`] for it (see `ListIndex`). No words
    /// or an unresolved program word: every position.
    pub fn candidates(&self, list: List, words: &[Arg]) -> Candidates<'_> {
        let patterns = self.list(list);
        let index = &self.index[list as usize];
        let Some(name) = words.first() else {
            return Candidates::All(patterns.len());
        };
        if index.len != patterns.len() || !name.resolved {
            return Candidates::All(patterns.len());
        }
        let named = |key: &str| index.by_program.get(key).map_or(&[][..], Vec::as_slice);
        let by_name = named(&name.text);
        let base = basename(&name.text);
        let by_base = if base.len() == name.text.len() {
            &[][..]
        } else {
            named(base)
        };
        match (
            by_name.is_empty(),
            by_base.is_empty(),
            index.globbed.is_empty(),
        ) {
            (_, true, true) => Candidates::Some(by_name),
            (true, false, true) => Candidates::Some(by_base),
            (true, true, false) => Candidates::Some(&index.globbed),
            _ => {
                let mut all: Vec<usize> = by_name
                    .iter()
                    .chain(by_base)
                    .chain(&index.globbed)
                    .copied()
                    .collect();
                all.sort_unstable();
                all.dedup();
                Candidates::Merged(all)
            }
        }
    }
}
