//! What a 0.2.0 plugin offers besides tools, checked at load: its resources
//! and resource templates (`resources.list-resources`, `list-templates`) and
//! its prompts (`prompts.list-prompts`), against `wit/v0.2.0` and the limits
//! below, like [`super::check_tools`] for tools. Each item that breaks a rule
//! is refused on its own with a reason ([`RefusedOffer`]); a plugin listing
//! more than a count limit is not loaded (`LoadError::TooManyOffers`).

use std::collections::HashSet;

use crate::contract::v0_2_0::{Annotations, Prompt, Resource, ResourceTemplate};
use crate::uri_template::UriTemplate;

use super::{MAX_DESCRIPTION_BYTES, MAX_TOOL_NAME_LEN, REFUSED_NAME_KEEP, describe_char};

/// Most resources one plugin may list (1,024).
pub const MAX_RESOURCES_PER_PLUGIN: usize = 1024;
/// Most resource templates one plugin may list (256).
pub const MAX_TEMPLATES_PER_PLUGIN: usize = 256;
/// Most prompts one plugin may list (256).
pub const MAX_PROMPTS_PER_PLUGIN: usize = 256;
/// Most arguments one prompt may take (64).
pub const MAX_PROMPT_ARGUMENTS: usize = 64;
/// Longest resource URI (and URI a client may ask to read), in bytes (4 KiB).
pub const MAX_URI_BYTES: usize = 4 << 10;
/// Longest name, title, MIME type or annotation timestamp of a resource,
/// template or prompt argument, in bytes (1 KiB).
pub const MAX_LABEL_BYTES: usize = 1 << 10;

/// Which kind of offer a [`RefusedOffer`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferKind {
    /// A resource (`resources.list-resources`), named by its URI.
    Resource,
    /// A resource template (`resources.list-templates`), named by its URI template.
    Template,
    /// A prompt (`prompts.list-prompts`), named by its name.
    Prompt,
}

impl OfferKind {
    /// `resource`, `resource template` or `prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            OfferKind::Resource => "resource",
            OfferKind::Template => "resource template",
            OfferKind::Prompt => "prompt",
        }
    }
}

/// A resource, template or prompt a plugin listed that the host does not
/// offer, and why. The plugin's other offers stay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedOffer {
    /// The plugin id.
    pub plugin: String,
    /// What it is.
    pub kind: OfferKind,
    /// Its URI, URI template or name as the plugin gave it, cut to its first
    /// 80 bytes. Raw plugin text: escape it before showing it
    /// ([`crate::display`]).
    pub name: String,
    /// Why it was refused, naming the rule or limit.
    pub reason: String,
}

impl RefusedOffer {
    /// A refusal of `name` (cut to its first 80 bytes) for `reason`.
    pub fn new(plugin: &str, kind: OfferKind, name: &str, reason: String) -> RefusedOffer {
        let cut = name.floor_char_boundary(REFUSED_NAME_KEEP.min(name.len()));
        let mut kept = name[..cut].to_string();
        if cut < name.len() {
            kept.push('…');
        }
        RefusedOffer {
            plugin: plugin.to_string(),
            kind,
            name: kept,
            reason,
        }
    }
}

/// Why `uri` cannot name a resource: empty, longer than [`MAX_URI_BYTES`],
/// without an RFC 3986 scheme (`scheme:`), or holding whitespace or control
/// characters. `None` when it can.
pub fn uri_error(uri: &str) -> Option<String> {
    if uri.is_empty() {
        return Some("the URI is empty".into());
    }
    if uri.len() > MAX_URI_BYTES {
        return Some(format!(
            "the URI is {} bytes, more than the limit of {MAX_URI_BYTES} (MAX_URI_BYTES)",
            uri.len()
        ));
    }
    let scheme = uri.split_once(':').map(|(s, _)| s).unwrap_or_default();
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return Some(
            "the URI has no scheme (RFC 3986: `scheme:...`, e.g. `file:` or `test:`)".into(),
        );
    }
    if let Some(c) = uri.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!("the URI contains {}", describe_char(c)));
    }
    None
}

/// Why `name` is not a prompt name under `prompts.wit` (1-64 characters of
/// `[A-Za-z0-9_-]`), or `None` when it is one.
pub fn prompt_name_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some(
            "the name is empty (prompt names are 1-64 characters of [A-Za-z0-9_-])".into(),
        );
    }
    if name.len() > MAX_TOOL_NAME_LEN {
        return Some(format!(
            "the name is {} bytes long, more than the limit of {MAX_TOOL_NAME_LEN} (prompt \
             names are 1-64 characters of [A-Za-z0-9_-])",
            name.len()
        ));
    }
    name.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        .map(|c| {
            format!(
                "the name contains {}, outside [A-Za-z0-9_-] (prompt names are 1-64 characters \
                 of [A-Za-z0-9_-])",
                describe_char(c)
            )
        })
}

/// Why a label (a name, title, MIME type) is refused: empty when `required`,
/// or longer than [`MAX_LABEL_BYTES`].
fn label_error(what: &str, value: &str, required: bool) -> Option<String> {
    if required && value.is_empty() {
        return Some(format!("its {what} is empty"));
    }
    // One line of plain text: no C0/C1 controls (escape sequences, newlines)
    // and no bidirectional formatting characters (text that reads otherwise
    // than it is), which clients may show as they are.
    if let Some(c) = value
        .chars()
        .find(|&c| c.is_control() || is_bidi_control(c))
    {
        return Some(format!(
            "its {what} contains the control character U+{:04X}",
            c as u32
        ));
    }
    (value.len() > MAX_LABEL_BYTES).then(|| {
        format!(
            "its {what} is {} bytes, more than the limit of {MAX_LABEL_BYTES} (MAX_LABEL_BYTES)",
            value.len()
        )
    })
}

/// Unicode's bidirectional formatting characters (UAX #9: embeddings,
/// overrides, isolates, marks).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The first problem of the optional labels and description shared by
/// resources, templates and prompts.
fn common_error(
    title: &Option<String>,
    description: &Option<String>,
    mime_type: &Option<String>,
    annotations: &Option<Annotations>,
) -> Option<String> {
    if let Some(e) = title
        .as_deref()
        .and_then(|t| label_error("title", t, false))
    {
        return Some(e);
    }
    if let Some(e) = mime_type
        .as_deref()
        .and_then(|t| label_error("MIME type", t, false))
    {
        return Some(e);
    }
    if let Some(d) = description
        && d.len() > MAX_DESCRIPTION_BYTES
    {
        return Some(format!(
            "its description is {} bytes, more than the limit of {MAX_DESCRIPTION_BYTES} \
             (MAX_DESCRIPTION_BYTES)",
            d.len()
        ));
    }
    if let Some(a) = annotations {
        if a.priority.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return Some("its annotations' priority is outside 0.0 to 1.0".into());
        }
        if let Some(e) = a
            .last_modified
            .as_deref()
            .and_then(|t| label_error("annotations' last-modified", t, false))
        {
            return Some(e);
        }
    }
    None
}

/// Checks what `list-resources` returned: URIs ([`uri_error`]) unique within
/// the plugin (the first wins), names 1 byte to [`MAX_LABEL_BYTES`], titles,
/// MIME types, descriptions and annotations within their limits. Returns the
/// resources the host offers (in order) and the refused ones.
pub fn check_resources(plugin: &str, listed: Vec<Resource>) -> (Vec<Resource>, Vec<RefusedOffer>) {
    let mut seen = HashSet::with_capacity(listed.len());
    let mut kept = Vec::with_capacity(listed.len());
    let mut refused = Vec::new();
    for r in listed {
        let reason = uri_error(&r.uri)
            .or_else(|| {
                (!seen.insert(r.uri.clone())).then(|| {
                    "the plugin lists another resource with the same URI first".to_string()
                })
            })
            .or_else(|| label_error("name", &r.name, true))
            .or_else(|| common_error(&r.title, &r.description, &r.mime_type, &r.annotations));
        match reason {
            None => kept.push(r),
            Some(reason) => refused.push(RefusedOffer::new(
                plugin,
                OfferKind::Resource,
                &r.uri,
                reason,
            )),
        }
    }
    (kept, refused)
}

/// Checks what `list-templates` returned: each URI template a level-1 RFC
/// 6570 template ([`UriTemplate::parse`]) whose literal start is a URI scheme,
/// unique within the plugin, with labels as for resources. Returns the
/// templates the host offers with their parsed form, and the refused ones.
pub fn check_templates(
    plugin: &str,
    listed: Vec<ResourceTemplate>,
) -> (Vec<(ResourceTemplate, UriTemplate)>, Vec<RefusedOffer>) {
    let mut seen = HashSet::with_capacity(listed.len());
    let mut kept = Vec::with_capacity(listed.len());
    let mut refused = Vec::new();
    for t in listed {
        let parsed = UriTemplate::parse(&t.uri_template);
        let reason = match &parsed {
            Err(e) => Some(e.clone()),
            Ok(_) => {
                // The text before the first expression must start with a scheme.
                let literal = t.uri_template.split('{').next().unwrap_or_default();
                let scheme_ok = literal.contains(':') && uri_error(literal).is_none();
                if !scheme_ok {
                    Some("the URI template does not start with a URI scheme (`scheme:`)".into())
                } else if !seen.insert(t.uri_template.clone()) {
                    Some("the plugin lists the same URI template twice".into())
                } else {
                    label_error("name", &t.name, true).or_else(|| {
                        common_error(&t.title, &t.description, &t.mime_type, &t.annotations)
                    })
                }
            }
        };
        match (reason, parsed) {
            (None, Ok(parsed)) => kept.push((t, parsed)),
            (reason, _) => refused.push(RefusedOffer::new(
                plugin,
                OfferKind::Template,
                &t.uri_template,
                reason.unwrap_or_default(),
            )),
        }
    }
    (kept, refused)
}

/// Checks what `list-prompts` returned: names ([`prompt_name_error`]) unique
/// within the plugin, at most [`MAX_PROMPT_ARGUMENTS`] arguments with unique
/// names of 1 byte to [`MAX_LABEL_BYTES`], titles and descriptions within
/// their limits. Returns the prompts the host offers and the refused ones.
pub fn check_prompts(plugin: &str, listed: Vec<Prompt>) -> (Vec<Prompt>, Vec<RefusedOffer>) {
    let mut seen = HashSet::with_capacity(listed.len());
    let mut kept = Vec::with_capacity(listed.len());
    let mut refused = Vec::new();
    for p in listed {
        let reason = prompt_name_error(&p.name)
            .or_else(|| {
                (!seen.insert(p.name.clone()))
                    .then(|| "the plugin lists another prompt of the same name first".to_string())
            })
            .or_else(|| common_error(&p.title, &p.description, &None, &None))
            .or_else(|| argument_error(&p));
        match reason {
            None => kept.push(p),
            Some(reason) => refused.push(RefusedOffer::new(
                plugin,
                OfferKind::Prompt,
                &p.name,
                reason,
            )),
        }
    }
    (kept, refused)
}

fn argument_error(p: &Prompt) -> Option<String> {
    if p.arguments.len() > MAX_PROMPT_ARGUMENTS {
        return Some(format!(
            "it takes {} arguments, more than the limit of {MAX_PROMPT_ARGUMENTS} \
             (MAX_PROMPT_ARGUMENTS)",
            p.arguments.len()
        ));
    }
    let mut names = HashSet::with_capacity(p.arguments.len());
    for a in &p.arguments {
        if let Some(e) = label_error("argument name", &a.name, true) {
            return Some(e);
        }
        if !names.insert(a.name.as_str()) {
            return Some(format!("it names argument `{}` twice", a.name));
        }
        if let Some(e) = common_error(&a.title, &a.description, &None, &None) {
            return Some(format!("argument `{}`: {e}", a.name));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::v0_2_0::server_plugin::exports::toolhost::plugin0_2_0::prompts::PromptArgument;

    fn resource(uri: &str, name: &str) -> Resource {
        Resource {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            annotations: None,
        }
    }

    fn template(t: &str) -> ResourceTemplate {
        ResourceTemplate {
            uri_template: t.into(),
            name: "t".into(),
            title: None,
            description: None,
            mime_type: None,
            annotations: None,
        }
    }

    fn prompt(name: &str, args: &[&str]) -> Prompt {
        Prompt {
            name: name.into(),
            title: None,
            description: None,
            arguments: args
                .iter()
                .map(|a| PromptArgument {
                    name: a.to_string(),
                    title: None,
                    description: None,
                    required: false,
                })
                .collect(),
        }
    }

    fn reasons(refused: &[RefusedOffer]) -> Vec<(&str, &str)> {
        refused
            .iter()
            .map(|r| (r.name.as_str(), r.reason.as_str()))
            .collect()
    }

    fn assert_reasons(refused: &[RefusedOffer], expect: &[(&str, &str)]) {
        let got = reasons(refused);
        assert_eq!(got.len(), expect.len(), "{got:?}");
        for ((name, reason), (want, says)) in got.iter().zip(expect) {
            assert_eq!(name, want);
            assert!(reason.contains(says), "{name}: {reason}");
        }
    }

    #[test]
    fn resources_are_checked_one_by_one() {
        let mut bad_priority = resource("test://p", "p");
        bad_priority.annotations = Some(Annotations {
            audience: vec![],
            priority: Some(1.5),
            last_modified: None,
        });
        let (kept, refused) = check_resources(
            "p",
            vec![
                resource("test://a", "a"),
                resource("test://a", "again"),
                resource("no-scheme", "x"),
                resource("", "x"),
                resource("test://sp ace", "x"),
                resource("test://noname", ""),
                resource(&format!("test://{}", "u".repeat(MAX_URI_BYTES)), "x"),
                bad_priority,
                resource("test://b", "b"),
            ],
        );
        let uris: Vec<&str> = kept.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["test://a", "test://b"]);
        assert_reasons(
            &refused,
            &[
                ("test://a", "same URI"),
                ("no-scheme", "no scheme"),
                ("", "empty"),
                ("test://sp ace", "a space"),
                ("test://noname", "name is empty"),
                (&format!("test://{}…", "u".repeat(73)), "MAX_URI_BYTES"),
                ("test://p", "priority"),
            ],
        );
        assert!(refused.iter().all(|r| r.kind == OfferKind::Resource));
    }

    #[test]
    fn templates_must_be_level_one_and_start_with_a_scheme() {
        let (kept, refused) = check_templates(
            "p",
            vec![
                template("test://template/{id}/data"),
                template("test://template/{id}/data"),
                template("test://{+path}"),
                template("{scheme}://x"),
                template("test://{id"),
            ],
        );
        assert_eq!(kept.len(), 1);
        assert!(kept[0].1.matches("test://template/7/data"));
        assert_reasons(
            &refused,
            &[
                ("test://template/{id}/data", "twice"),
                ("test://{+path}", "level 2"),
                ("{scheme}://x", "scheme"),
                ("test://{id", "never closed"),
            ],
        );
    }

    #[test]
    fn prompts_follow_the_wit() {
        let (kept, refused) = check_prompts(
            "p",
            vec![
                prompt("greet", &["name"]),
                prompt("greet", &[]),
                prompt("bad name", &[]),
                prompt("twice", &["a", "a"]),
                prompt("empty-arg", &[""]),
                prompt(
                    "many",
                    &vec!["x"; MAX_PROMPT_ARGUMENTS + 1]
                        .iter()
                        .enumerate()
                        .map(|(i, _)| Box::leak(format!("a{i}").into_boxed_str()) as &str)
                        .collect::<Vec<_>>(),
                ),
                prompt("a__b", &[]),
            ],
        );
        let names: Vec<&str> = kept.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["greet", "a__b"]);
        assert_reasons(
            &refused,
            &[
                ("greet", "same name"),
                ("bad name", "a space"),
                ("twice", "twice"),
                ("empty-arg", "argument name is empty"),
                ("many", "MAX_PROMPT_ARGUMENTS"),
            ],
        );
    }

    #[test]
    fn labels_refuse_control_and_bidi_characters() {
        for bad in [
            "a\u{1b}[31m",
            "two\nlines",
            "x\u{202E}y",
            "z\u{2066}",
            "\u{85}",
        ] {
            assert!(super::label_error("name", bad, true).is_some(), "{bad:?}");
        }
        for good in ["test_prompt", "Résumé", "image/png", "名前"] {
            assert_eq!(super::label_error("name", good, true), None, "{good:?}");
        }
    }
}
