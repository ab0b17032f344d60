//! Applies [`Rules`] to an [`Analysis`]: deny anywhere wins, allow needs
//! every part allowed, anything uncertain is at most ask.

use crate::pattern::{Arg, Match, Pattern};
use crate::rules::{DefaultAction, List as RuleList, Rules};
use crate::shell::{Analysis, Layer, LayerKind, Part, basename};

/// The plugin's answer, before it is turned into the WIT `decision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it; the text names the rule, the part and how to allow it.
    Deny(String),
    /// Ask a human; the text is the prompt.
    Ask(String),
}

impl Decision {
    /// `"allow"`, `"ask"` or `"deny"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny(_) => "deny",
            Decision::Ask(_) => "ask",
        }
    }
}

/// Which rule list a pattern comes from (path-run programs match differently).
#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    Allow,
    Restrict,
}

/// Matches a pattern against a layer. A program run by path (`/bin/rm`,
/// `./ls`) matches deny and ask rules by its basename as well as by its
/// path, but allow rules only by a pattern that spells out its path.
fn layer_match(p: &Pattern, layer: &Layer, list: List) -> Match {
    let words = &layer.words;
    let Some(name) = words.first() else {
        return Match::No;
    };
    if !name.resolved || !name.text.contains('/') {
        return p.matches(words);
    }
    let by_path = if p.program().contains('/') {
        p.matches(words)
    } else {
        Match::No
    };
    if list == List::Allow {
        return by_path;
    }
    let mut renamed: Vec<Arg> = words.clone();
    renamed[0] = Arg::literal(basename(&name.text));
    by_path.max(p.matches(&renamed))
}

enum Verdict {
    Allow,
    Ask(Vec<String>),
    Deny(String),
}

const HOW_TO_ALLOW_DENIED: &str =
    "To run it, remove or narrow that rule in the policy file (`--policy`).";

fn judge_part(rules: &Rules, part: &Part) -> Verdict {
    let text = part.text();
    let mut reasons: Vec<String> = Vec::new();
    // Only the rules that can match a layer are tried (`Rules::candidates`, in
    // list order): the others give `Match::No`, so the verdict and the rule it
    // names are those of a scan of the whole list.
    for layer in &part.layers {
        for p in rules
            .candidates(RuleList::Deny, &layer.words)
            .iter()
            .map(|i| &rules.deny[i])
        {
            match layer_match(p, layer, List::Restrict) {
                Match::Yes => {
                    let shown = if layer.text() == text {
                        format!("`{text}`")
                    } else {
                        format!("`{text}` runs `{}`, which", layer.text())
                    };
                    return Verdict::Deny(format!(
                        "{shown} matches deny rule `{p}`. {HOW_TO_ALLOW_DENIED}"
                    ));
                }
                Match::Maybe => reasons.push(format!(
                    "`{}` may match deny rule `{p}` (it has words only known at run time)",
                    layer.text()
                )),
                Match::No => {}
            }
        }
    }
    for layer in &part.layers {
        for p in rules
            .candidates(RuleList::Ask, &layer.words)
            .iter()
            .map(|i| &rules.ask[i])
        {
            match layer_match(p, layer, List::Restrict) {
                Match::Yes => reasons.push(format!("`{}` matches ask rule `{p}`", layer.text())),
                Match::Maybe => reasons.push(format!(
                    "`{}` may match ask rule `{p}` (it has words only known at run time)",
                    layer.text()
                )),
                Match::No => {}
            }
        }
    }
    // Allowed when an allow rule matches a layer reached through wrappers
    // that need no rule of their own (or the layers end in a script whose
    // commands are judged as parts of their own).
    let mut allowed = true;
    let mut unmatched: Option<String> = None;
    for layer in &part.layers {
        if rules
            .candidates(RuleList::Allow, &layer.words)
            .iter()
            .any(|i| layer_match(&rules.allow[i], layer, List::Allow) == Match::Yes)
        {
            break;
        }
        match &layer.kind {
            LayerKind::Wrapper | LayerKind::Script => continue,
            LayerKind::Guarded(why) | LayerKind::ByPath(why) => {
                allowed = false;
                unmatched = Some(format!("{why} and no allow rule names it"));
                break;
            }
            LayerKind::Program => {
                allowed = false;
                unmatched = Some(match &layer.path_note {
                    Some(note) => format!(
                        "{note} and no allow rule names that path (a program-name rule never covers it)"
                    ),
                    None => format!("`{}` matches no allow rule", layer.text()),
                });
                break;
            }
        }
    }
    reasons.extend(part.issues.iter().cloned());
    if let Some(restriction) = restriction(rules) {
        for why in &part.opaque {
            reasons.push(format!("{why}; it may do what {restriction}"));
        }
    }
    if allowed {
        // An allow rule covers running the program, not its side effects.
        reasons.extend(part.effects.iter().cloned());
        return if reasons.is_empty() {
            Verdict::Allow
        } else {
            Verdict::Ask(reasons)
        };
    }
    let unmatched = unmatched.unwrap_or_default();
    // `sudo` is never allowed by default alone. A program run by path is,
    // under `default = "allow"` (`./run.sh`): the default means what it says.
    let guarded = part
        .layers
        .iter()
        .any(|l| matches!(l.kind, LayerKind::Guarded(_)));
    let has_asks = !reasons.is_empty();
    reasons.insert(0, unmatched.clone());
    match rules.default {
        DefaultAction::Deny if !rules_asked(&reasons) => Verdict::Deny(format!(
            "{unmatched}, and the policy default is deny. To run it, add an allow rule for it (e.g. `{}`) to the policy file (`--policy`).",
            suggestion(part)
        )),
        DefaultAction::Allow if !has_asks && !guarded => Verdict::Allow,
        _ => {
            reasons.extend(part.effects.iter().cloned());
            Verdict::Ask(reasons)
        }
    }
}

/// The first restriction in `rules` (a deny rule, else an ask rule), named
/// for a part whose code the policy cannot read; `None` when the rules
/// restrict nothing.
fn restriction(rules: &Rules) -> Option<String> {
    if let Some(p) = rules.deny.first() {
        Some(format!("deny rules like `{p}` refuse"))
    } else {
        rules
            .ask
            .first()
            .map(|p| format!("ask rules like `{p}` ask about"))
    }
}

/// `true` when an ask rule matched (an explicit ask beats a default deny).
fn rules_asked(reasons: &[String]) -> bool {
    reasons.iter().any(|r| r.contains("matches ask rule"))
}

/// A rule that would allow the innermost program of `part`.
fn suggestion(part: &Part) -> String {
    let Some(layer) = part.layers.last() else {
        return String::new();
    };
    match layer.words.first() {
        Some(name) if name.resolved => format!("{} *", name.text),
        _ => layer.text(),
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// Decides a command line from its analysis.
pub fn judge(rules: &Rules, command: &str, analysis: &Analysis) -> Decision {
    let mut asks: Vec<String> = Vec::new();
    for part in &analysis.parts {
        match judge_part(rules, part) {
            Verdict::Deny(why) => return Decision::Deny(why),
            Verdict::Ask(reasons) => asks.extend(reasons),
            Verdict::Allow => {}
        }
    }
    let uncertain = !analysis.issues.is_empty();
    if uncertain && rules.default == DefaultAction::Deny {
        return Decision::Deny(format!(
            "{}, and the policy default is deny. To run it, simplify the command or set `default` in the policy file (`--policy`).",
            analysis.issues.join("; ")
        ));
    }
    asks.extend(analysis.issues.iter().cloned());
    if rules.default != DefaultAction::Allow {
        asks.extend(analysis.effects.iter().cloned());
    }
    if analysis.parts.is_empty() && asks.is_empty() && analysis.effects.is_empty() {
        asks.push("the command runs no program (it is empty or only assignments)".to_string());
    }
    if asks.is_empty() {
        return Decision::Allow;
    }
    let mut seen = Vec::new();
    asks.retain(|a| {
        let new = !seen.contains(a);
        seen.push(a.clone());
        new
    });
    let mut prompt = format!("Run `{}`?", shorten(command.trim(), 300));
    for a in &asks {
        prompt.push_str("\n- ");
        prompt.push_str(a);
    }
    prompt.push_str("\nAnswer allow_once, allow_always, reject_once or reject_always.");
    Decision::Ask(prompt)
}
