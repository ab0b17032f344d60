//! RFC 6570 URI templates, level 1 only (`{var}`, simple string expansion),
//! matched in reverse: does a URI belong to a template? The host routes
//! `resources/read` for a URI no plugin lists to the plugin whose resource
//! template matches it (MCP `ResourceTemplate`,
//! <https://modelcontextprotocol.io/specification/2025-11-25/server/resources#resource-templates>).
//!
//! A leaf module: no I/O, no dependencies. Matching simulates the template as
//! a small automaton over the URI's characters, so it takes time linear in the
//! URI for a given template, whatever the template (no backtracking).
//!
//! Level 1 expansion percent-encodes everything but unreserved characters, so
//! a `{var}` matches a non-empty run of characters outside RFC 3986's
//! reserved set (`:/?#[]@!$&'()*+,;=`): `test://template/{id}/data` matches
//! `test://template/42/data` and `test://template/a%2Fb/data`, not
//! `test://template/a/b/data`. Templates using higher levels (`{+path}`,
//! `{?q}`, `{a,b}`, `{v*}`, `{v:3}`) are refused when parsed: the host could
//! not route them faithfully.

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

/// A parsed level-1 URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    tokens: Vec<Token>,
    variables: Vec<String>,
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
        Ok(UriTemplate { tokens, variables })
    }

    /// The variable names, in template order.
    pub fn variables(&self) -> &[String] {
        &self.variables
    }

    /// Whether some values of the variables expand the template to `uri`.
    pub fn matches(&self, uri: &str) -> bool {
        let n = self.tokens.len();
        // `at[i]`: the next token to match is `i` (`n`: done).
        // `inside[i]`: inside variable `i`, at least one character taken.
        let mut at = vec![false; n + 1];
        let mut inside = vec![false; n];
        at[0] = true;
        let mut next_at = vec![false; n + 1];
        let mut next_inside = vec![false; n];
        for c in uri.chars() {
            next_at.iter_mut().for_each(|b| *b = false);
            next_inside.iter_mut().for_each(|b| *b = false);
            let mut any = false;
            for i in 0..n {
                let ready = at[i] || (inside[i] && self.tokens[i] == Token::Variable);
                if !ready {
                    continue;
                }
                match self.tokens[i] {
                    Token::Literal(l) if at[i] && l == c => {
                        next_at[i + 1] = true;
                        any = true;
                    }
                    Token::Variable if in_variable(c) => {
                        next_inside[i] = true;
                        any = true;
                    }
                    _ => {}
                }
            }
            if !any {
                return false;
            }
            // A variable that has taken a character may end here.
            for i in 0..n {
                if next_inside[i] {
                    next_at[i + 1] = true;
                }
            }
            std::mem::swap(&mut at, &mut next_at);
            std::mem::swap(&mut inside, &mut next_inside);
        }
        at[n]
    }
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
}
