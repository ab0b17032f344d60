//! RFC 6570 URI templates, level 1 only (`{var}`, simple string expansion),
//! matched in reverse: does a URI belong to a template? The host routes
//! `resources/read` for a URI no plugin lists to the plugin whose resource
//! template matches it (MCP `ResourceTemplate`,
//! <https://modelcontextprotocol.io/specification/2025-11-25/server/resources#resource-templates>),
//! checks that a plugin announces changes only of its own URIs, and keeps
//! one plugin's templates from overlapping another's (`catalog.rs`).
//!
//! A leaf module: no I/O, no dependencies. A template is compiled once, when
//! parsed, into a bit-parallel automaton (one bit per position in the
//! template, 64 positions a machine word: "shift-and"), so matching a URI
//! takes one pass over it, `len(uri) × ⌈positions / 64⌉` word steps at most
//! (no backtracking), after a check of the template's literal start and end
//! that settles most non-matches in `O(len(prefix) + len(suffix))`. Work a
//! plugin causes is bounded by the caller: [`UriTemplate::matches_within`]
//! and [`UriTemplate::overlaps_within`] take a step budget and stop, saying
//! so, when it runs out.
//!
//! Level 1 expansion percent-encodes everything but unreserved characters, so
//! a `{var}` matches a non-empty run of characters outside RFC 3986's
//! reserved set (`:/?#[]@!$&'()*+,;=`): `test://template/{id}/data` matches
//! `test://template/42/data` and `test://template/a%2Fb/data`, not
//! `test://template/a/b/data`. Templates using higher levels (`{+path}`,
//! `{?q}`, `{a,b}`, `{v*}`, `{v:3}`) are refused when parsed: the host could
//! not route them faithfully.

use std::collections::HashMap;

/// The characters of RFC 3986's reserved set (gen-delims and sub-delims): a
/// level-1 variable's value never holds one unencoded.
const RESERVED: &str = ":/?#[]@!$&'()*+,;=";

/// Longest template accepted, in bytes (1 KiB).
pub const MAX_TEMPLATE_BYTES: usize = 1024;

/// Most expressions (`{var}`) in one template (16).
pub const MAX_EXPRESSIONS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// One literal character, matched exactly.
    Literal(char),
    /// A `{var}` expression: one or more non-reserved characters.
    Variable,
}

/// A parsed level-1 URI template, compiled for matching (see the module
/// docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    tokens: Vec<Token>,
    variables: Vec<String>,
    /// The literal characters before the first expression (all of them when
    /// there is none).
    prefix: String,
    /// The literal characters after the last expression (empty when there is
    /// none).
    suffix: String,
    /// Bit `j + 1` set where token `j` is a variable (the automaton's state
    /// `j + 1` may take more of it).
    variable_bits: Vec<u64>,
    /// For each literal character, bit `j + 1` set where token `j` is it.
    literal_bits: HashMap<char, Vec<u64>>,
}

impl UriTemplate {
    /// Parses `template`: literal characters and `{name}` expressions whose
    /// name is RFC 6570 `varname` (`[A-Za-z0-9_]` and `%XX`, `.` between).
    ///
    /// Errors: why it is not a level-1 template (an operator or modifier of a
    /// higher level, a list, an unclosed or empty brace, a bad name), or
    /// longer than [`MAX_TEMPLATE_BYTES`] / with more than
    /// [`MAX_EXPRESSIONS`] expressions; the text names the rule. A message for
    /// people (the refused offer's reason, in the load log and `plugin inspect`):
    /// nothing branches on it.
    pub fn parse(template: &str) -> Result<UriTemplate, String> {
        if template.is_empty() {
            return Err("the URI template is empty".into());
        }
        if template.len() > MAX_TEMPLATE_BYTES {
            return Err(format!(
                "the URI template is {} bytes, more than the limit of {MAX_TEMPLATE_BYTES}",
                template.len()
            ));
        }
        let mut tokens = Vec::with_capacity(template.len());
        let mut variables = Vec::new();
        let mut chars = template.chars();
        while let Some(c) = chars.next() {
            match c {
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => return Err("a `{` is never closed".into()),
                        }
                    }
                    check_varname(&name)?;
                    variables.push(name);
                    if variables.len() > MAX_EXPRESSIONS {
                        return Err(format!(
                            "the URI template has more than {MAX_EXPRESSIONS} expressions"
                        ));
                    }
                    tokens.push(Token::Variable);
                }
                '}' => return Err("a `}` closes no `{`".into()),
                c => tokens.push(Token::Literal(c)),
            }
        }
        Ok(UriTemplate::compile(tokens, variables))
    }

    /// The automaton's tables for `tokens` (see [`UriTemplate`]'s fields).
    fn compile(tokens: Vec<Token>, variables: Vec<String>) -> UriTemplate {
        let words = (tokens.len() + 1).div_ceil(64);
        let mut variable_bits = vec![0u64; words];
        let mut literal_bits: HashMap<char, Vec<u64>> = HashMap::new();
        for (j, token) in tokens.iter().enumerate() {
            let (word, bit) = ((j + 1) / 64, (j + 1) % 64);
            match token {
                Token::Variable => variable_bits[word] |= 1 << bit,
                Token::Literal(c) => {
                    literal_bits.entry(*c).or_insert_with(|| vec![0; words])[word] |= 1 << bit
                }
            }
        }
        let literal = |t: &Token| match t {
            Token::Literal(c) => Some(*c),
            Token::Variable => None,
        };
        let prefix: String = tokens.iter().map_while(literal).collect();
        let suffix: String = if variables.is_empty() {
            String::new()
        } else {
            let mut tail: Vec<char> = tokens.iter().rev().map_while(literal).collect();
            tail.reverse();
            tail.into_iter().collect()
        };
        UriTemplate {
            tokens,
            variables,
            prefix,
            suffix,
            variable_bits,
            literal_bits,
        }
    }

    /// Word steps one match of a URI of `uri_len` bytes may take at most:
    /// `uri_len × ⌈(tokens + 1) / 64⌉`.
    #[cfg(test)]
    fn match_cost(&self, uri_len: usize) -> u64 {
        uri_len as u64 * self.variable_bits.len() as u64
    }

    /// The variable names, in template order.
    pub fn variables(&self) -> &[String] {
        &self.variables
    }

    /// Whether some values of the variables expand the template to `uri`,
    /// whatever it costs (for URIs the host has bounded: a client's, at
    /// most [`crate::plugin::MAX_URI_BYTES`]).
    pub fn matches(&self, uri: &str) -> bool {
        let mut unbounded = u64::MAX;
        self.matches_within(uri, &mut unbounded).unwrap_or(false)
    }

    /// [`UriTemplate::matches`], taking word steps from `budget` (one per
    /// character per 64 template positions, one per character of the
    /// literal start and end checked); `None` when the budget ran out before
    /// the answer.
    pub fn matches_within(&self, uri: &str, budget: &mut u64) -> Option<bool> {
        let literal_checked = (self.prefix.len() + self.suffix.len()) as u64;
        *budget = budget.checked_sub(literal_checked.max(1))?;
        if !uri.starts_with(&self.prefix) || !uri.ends_with(&self.suffix) {
            return Some(false);
        }
        if self.variables.is_empty() {
            return Some(uri.len() == self.prefix.len());
        }
        let words = self.variable_bits.len();
        let n = self.tokens.len();
        let mut state = vec![0u64; words];
        state[0] = 1;
        let mut next = vec![0u64; words];
        for c in uri.chars() {
            *budget = budget.checked_sub(words as u64)?;
            let literal = self.literal_bits.get(&c);
            let class = in_variable(c);
            let mut carry = 0u64;
            let mut any = 0u64;
            for w in 0..words {
                let shifted = (state[w] << 1) | carry;
                carry = state[w] >> 63;
                let mut accept = literal.map_or(0, |l| l[w]);
                let mut stay = 0;
                if class {
                    accept |= self.variable_bits[w];
                    stay = state[w] & self.variable_bits[w];
                }
                next[w] = (shifted & accept) | stay;
                any |= next[w];
            }
            if any == 0 {
                return Some(false);
            }
            std::mem::swap(&mut state, &mut next);
        }
        Some(state[n / 64] >> (n % 64) & 1 == 1)
    }

    /// Whether some URI matches both this template and `other`, taking one
    /// step from `budget` per pair of template positions visited (at most
    /// `(tokens + 1) × (other's tokens + 1)`, after a check of the two literal
    /// starts and ends); `None` when the budget ran out before the answer.
    pub fn overlaps_within(&self, other: &UriTemplate, budget: &mut u64) -> Option<bool> {
        *budget = budget.checked_sub(1)?;
        let agree = |a: &str, b: &str, from_end: bool| {
            if from_end {
                a.chars().rev().zip(b.chars().rev()).all(|(x, y)| x == y)
            } else {
                a.chars().zip(b.chars()).all(|(x, y)| x == y)
            }
        };
        if !agree(&self.prefix, &other.prefix, false) || !agree(&self.suffix, &other.suffix, true) {
            return Some(false);
        }
        // Reachability in the product of the two automata: state (i, j) is
        // "i tokens of this template and j of `other` matched".
        let (n, m) = (self.tokens.len(), other.tokens.len());
        let width = m + 1;
        let mut seen = vec![false; (n + 1) * width];
        let mut stack = vec![(0usize, 0usize)];
        seen[0] = true;
        while let Some((i, j)) = stack.pop() {
            *budget = budget.checked_sub(1)?;
            if (i, j) == (n, m) {
                return Some(true);
            }
            for (a, class_a) in moves(&self.tokens, i) {
                for (b, class_b) in moves(&other.tokens, j) {
                    let compatible = match (class_a, class_b) {
                        (None, None) => true,
                        (Some(x), None) | (None, Some(x)) => in_variable(x),
                        (Some(x), Some(y)) => x == y,
                    };
                    if compatible && !seen[a * width + b] {
                        seen[a * width + b] = true;
                        stack.push((a, b));
                    }
                }
            }
        }
        Some(false)
    }
}

/// The moves of a template's automaton out of state `i` on one character:
/// the next state and the character it takes (`None`: any character a
/// variable may hold).
fn moves(tokens: &[Token], i: usize) -> impl Iterator<Item = (usize, Option<char>)> + '_ {
    let forward = tokens.get(i).map(|t| match t {
        Token::Literal(c) => (i + 1, Some(*c)),
        Token::Variable => (i + 1, None),
    });
    let more = (i > 0 && tokens[i - 1] == Token::Variable).then_some((i, None));
    forward.into_iter().chain(more)
}

/// Whether `c` may appear in a level-1 variable's expanded value.
fn in_variable(c: char) -> bool {
    !RESERVED.contains(c) && c != '{' && c != '}' && !c.is_whitespace() && !c.is_control()
}

/// Checks an expression's text as a level-1 `varname`.
fn check_varname(name: &str) -> Result<(), String> {
    let Some(first) = name.chars().next() else {
        return Err("an expression `{}` names no variable".into());
    };
    if "+#./;?&=,!@|".contains(first) {
        return Err(format!(
            "the expression `{{{name}}}` uses the operator `{first}` of RFC 6570 level 2 or \
             higher; only level 1 (`{{var}}`) is supported"
        ));
    }
    if name.contains(',') {
        return Err(format!(
            "the expression `{{{name}}}` lists several variables (RFC 6570 level 3); only level \
             1 (`{{var}}`) is supported"
        ));
    }
    if name.contains(':') || name.ends_with('*') {
        return Err(format!(
            "the expression `{{{name}}}` has a modifier (RFC 6570 level 4); only level 1 \
             (`{{var}}`) is supported"
        ));
    }
    let bytes = name.as_bytes();
    let mut i = 0;
    let mut after_dot = true;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |k: usize| bytes.get(k).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return Err(format!("the variable name `{name}` has a bad `%` escape"));
            }
            i += 3;
            after_dot = false;
            continue;
        }
        if b == b'.' && !after_dot && i + 1 < bytes.len() {
            after_dot = true;
        } else if b.is_ascii_alphanumeric() || b == b'_' {
            after_dot = false;
        } else {
            return Err(format!(
                "the variable name `{name}` is not an RFC 6570 varname ([A-Za-z0-9_], %XX, `.` \
                 between)"
            ));
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_one_templates_match_as_expanded() {
        let cases: &[(&str, &str, bool)] = &[
            ("test://template/{id}/data", "test://template/42/data", true),
            (
                "test://template/{id}/data",
                "test://template/a%2Fb/data",
                true,
            ),
            (
                "test://template/{id}/data",
                "test://template/a/b/data",
                false,
            ),
            ("test://template/{id}/data", "test://template//data", false),
            (
                "test://template/{id}/data",
                "test://template/42/data/",
                false,
            ),
            ("test://template/{id}/data", "test://template/42/dat", false),
            ("file:///{name}.txt", "file:///notes.txt", true),
            ("file:///{name}.txt", "file:///a.b.txt", true),
            ("file:///{name}.txt", "file:///.txt", false),
            ("file:///{name}.txt", "file:///notes.md", false),
            ("x://{a}{b}", "x://ab", true),
            ("x://{a}{b}", "x://a", false),
            ("x://{a}-{b}", "x://1-2-3", true),
            ("x://{a}", "x://caf\u{e9}", true),
            ("x://{a}", "x://a b", false),
            ("x://{a}", "x://a?b", false),
            ("x://static", "x://static", true),
            ("x://static", "x://static2", false),
            ("x://{a}", "", false),
        ];
        for (template, uri, want) in cases {
            let t = UriTemplate::parse(template).unwrap();
            assert_eq!(t.matches(uri), *want, "{template} vs {uri}");
        }
    }

    #[test]
    fn higher_levels_and_bad_braces_are_refused() {
        for (template, says) in [
            ("x://{+path}", "level 2"),
            ("x://{#frag}", "level 2"),
            ("x://{?q}", "level 2"),
            ("x://{a,b}", "level 3"),
            ("x://{a*}", "level 4"),
            ("x://{a:3}", "level 4"),
            ("x://{a", "never closed"),
            ("x://a}", "closes no"),
            ("x://{}", "names no variable"),
            ("x://{a-b}", "varname"),
            ("x://{a%2}", "escape"),
            ("", "empty"),
        ] {
            let e = UriTemplate::parse(template).unwrap_err();
            assert!(e.contains(says), "{template}: {e}");
        }
        let many = "{a}".repeat(MAX_EXPRESSIONS + 1);
        assert!(
            UriTemplate::parse(&many)
                .unwrap_err()
                .contains("expressions")
        );
        let t = UriTemplate::parse("x://{a.b}/{c%41}").unwrap();
        assert_eq!(t.variables(), ["a.b", "c%41"]);
    }

    #[test]
    fn matching_is_linear_on_a_hostile_template() {
        // Every variable could end at every position: a backtracking matcher
        // would take exponential time here.
        let template = "x://{a}a{b}a{c}a{d}a{e}a{f}a{g}a{h}b";
        let t = UriTemplate::parse(template).unwrap();
        let uri = format!("x://{}", "a".repeat(100_000));
        assert!(!t.matches(&uri));
        let uri = format!("x://{}b", "a".repeat(100_000));
        assert!(t.matches(&uri));
    }

    #[test]
    fn a_long_template_matches_across_machine_words() {
        // 200 literal positions: the automaton spans four words.
        let template = format!("x://{}{{a}}{}", "p".repeat(100), "q".repeat(100));
        let t = UriTemplate::parse(&template).unwrap();
        let uri = |mid: &str| format!("x://{}{mid}{}", "p".repeat(100), "q".repeat(100));
        assert!(t.matches(&uri("v")));
        assert!(t.matches(&uri("pq")));
        assert!(!t.matches(&uri("")));
        assert!(!t.matches(&uri("a/b")));
    }

    #[test]
    fn matching_stops_when_its_budget_runs_out() {
        let t = UriTemplate::parse("x://{a}a{b}a{c}b").unwrap();
        let uri = format!("x://{}b", "a".repeat(1000));
        let mut budget = t.match_cost(uri.len()) + 5;
        assert_eq!(t.matches_within(&uri, &mut budget), Some(true));
        let mut budget = 100;
        assert_eq!(t.matches_within(&uri, &mut budget), None);
        // A literal start that differs costs no walk at all.
        let mut budget = 10;
        assert_eq!(t.matches_within("y://ab", &mut budget), Some(false));
    }

    #[test]
    fn overlap_is_decided_on_the_two_automata() {
        let cases: &[(&str, &str, bool)] = &[
            ("test://template/{id}/data", "test://{a}/{b}/data", true),
            ("test://template/{id}/data", "test://{a}/{b}/{c}", true),
            (
                "test://template/{id}/data",
                "test://template/{id}/meta",
                false,
            ),
            ("test://template/{id}/data", "other://{a}", false),
            ("x://{a}", "x://{a}/{b}", false),
            ("x://{a}.txt", "x://notes{b}", true),
            ("x://{a}b", "x://{a}c", false),
            ("x://{a}", "x://?", false),
            ("x://{a}", "x://a%2F", true),
        ];
        for (a, b, want) in cases {
            let (ta, tb) = (
                UriTemplate::parse(a).unwrap(),
                UriTemplate::parse(b).unwrap(),
            );
            let mut budget = u64::MAX;
            assert_eq!(
                ta.overlaps_within(&tb, &mut budget),
                Some(*want),
                "{a} vs {b}"
            );
            assert_eq!(
                tb.overlaps_within(&ta, &mut budget),
                Some(*want),
                "{b} vs {a}"
            );
        }
        let (ta, tb) = (
            UriTemplate::parse(&format!("x://{}{{a}}", "a".repeat(500))).unwrap(),
            UriTemplate::parse(&format!("x://{{b}}{}", "a".repeat(500))).unwrap(),
        );
        let mut budget = 1000;
        assert_eq!(ta.overlaps_within(&tb, &mut budget), None);
    }
}
