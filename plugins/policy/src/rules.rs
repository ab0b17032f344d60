//! The rules file: `allow`, `ask` and `deny` pattern lists and a `default`.

use std::fmt;

use serde::Deserialize;
use toml::Spanned;

use crate::pattern::Pattern;

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
        Ok(Self {
            allow: list("allow", raw.allow)?,
            ask: list("ask", raw.ask)?,
            deny: list("deny", raw.deny)?,
            default,
        })
    }
}
