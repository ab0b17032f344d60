//! The resources, resource templates and prompts the loaded plugins offer,
//! merged across plugins, and the requests on them (MCP `resources/read`,
//! `prompts/get`, `completion/complete`) routed to the plugin that owns each
//! (`Catalog::build` merges them; `Host::read_resource` routes).
//!
//! Merging, in plugin load order (the built-in bash first; it offers none),
//! gives each plugin its own namespace: the first plugin keeps a URI, the
//! URIs its templates match, and a prompt name; a later plugin's offer that
//! would take reads of them is refused with a warning ([`RefusedOffer`],
//! `Host::refused_offers`) and never served: a resource URI, template text
//! or prompt name another plugin already offers, a resource URI an earlier
//! plugin's template matches, and a template that matches an earlier
//! plugin's resource URI or overlaps one of its templates (some URI matches
//! both: `UriTemplate::overlaps_within`). Names are never prefixed as tools'
//! are. These checks cost at most [`MAX_NAMESPACE_CHECK_STEPS`] steps of
//! template matching for all plugins together; an offer that could not be
//! checked within them is refused too. Each plugin is then told which of its
//! offers are served (`ToolPlugin::set_served`), so its resource-updated
//! notices and the contents its reads return are checked against exactly
//! those ([`RequestError::ForeignContents`]).
//!
//! Routing a URI: the plugin that lists exactly that URI; else the most
//! specific template that matches it ([`crate::uri_template`]; after the
//! merge only one plugin's templates can): the one with the most literal
//! characters, so a plugin's catch-all such as `test://{a}/{b}/{c}` cannot
//! take reads meant for its `test://template/{id}/data`; among equals the
//! first in load order; else [`RequestError::ResourceNotFound`].

use std::collections::HashMap;
use std::sync::Arc;

use crate::contract::v0_2_0::client::CallClient;
use crate::contract::v0_2_0::client::{MAX_URI_MATCH_STEPS_PER_CALL, ServedOffers};
use crate::display::echo_name;
use crate::plugin::{
    CallError, Completions, OfferKind, Prompt, PromptError, PromptResult, RefusedOffer, Resource,
    ResourceContents, ResourceError, ResourceTemplate, ToolPlugin, uri_error,
};
use crate::uri_template::UriTemplate;

/// Most steps of template matching (`crate::uri_template`) the namespace
/// checks of all plugins' offers may take at load (33,554,432: well under a
/// second); an offer still unchecked when they are spent is refused.
pub const MAX_NAMESPACE_CHECK_STEPS: u64 = 1 << 25;

/// A resource the host offers, and the plugin that lists it.
#[derive(Clone)]
pub struct ResourceEntry {
    /// The plugin offering it.
    pub plugin: Arc<ToolPlugin>,
    /// The resource as the plugin listed it (MCP `Resource`).
    pub resource: Resource,
}

/// A resource template the host offers, and the plugin that lists it.
#[derive(Clone)]
pub struct TemplateEntry {
    /// The plugin offering it.
    pub plugin: Arc<ToolPlugin>,
    /// The template as the plugin listed it (MCP `ResourceTemplate`).
    pub template: ResourceTemplate,
    parsed: UriTemplate,
    /// Bytes of the template outside its `{...}` expressions.
    literal_len: usize,
}

/// Bytes of `template` outside its `{...}` expressions.
fn literal_len(template: &str) -> usize {
    let mut inside = false;
    template
        .bytes()
        .filter(|&b| {
            match b {
                b'{' => inside = true,
                b'}' => {
                    inside = false;
                    return false;
                }
                _ => {}
            }
            !inside
        })
        .count()
}

impl TemplateEntry {
    /// Whether the template matches `uri` (RFC 6570 level 1).
    pub fn matches(&self, uri: &str) -> bool {
        self.parsed.matches(uri)
    }

    /// The template's variable names, in order.
    pub fn variables(&self) -> &[String] {
        self.parsed.variables()
    }
}

/// A prompt the host offers, and the plugin that lists it.
#[derive(Clone)]
pub struct PromptEntry {
    /// The plugin offering it.
    pub plugin: Arc<ToolPlugin>,
    /// The prompt as the plugin listed it (MCP `Prompt`).
    pub prompt: Prompt,
}

/// What a completion is for (MCP `CompleteRequest.ref`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRef {
    /// `ref/prompt`: an argument of the prompt of this name.
    Prompt(String),
    /// `ref/resource`: a variable of the resource template with this exact
    /// text (e.g. `test://template/{id}/data`).
    Resource(String),
}

/// Why a request on resources or prompts produced no answer. Maps to MCP
/// errors: [`RequestError::ResourceNotFound`] is `-32002`,
/// [`RequestError::UnknownPrompt`], [`RequestError::UnknownReference`] and
/// [`RequestError::InvalidArguments`] are `-32602` (Invalid params), the
/// rest `-32603` (Internal error).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RequestError {
    /// No plugin lists the URI or has a template matching it, or the plugin
    /// said `not-found`.
    #[error("resource not found: {}{}", echo_name(uri), detail(message))]
    ResourceNotFound {
        /// The URI asked for.
        uri: String,
        /// The plugin's text, if it answered `not-found`.
        message: Option<String>,
    },
    /// No plugin offers a prompt of this name (or the plugin said
    /// `unknown-prompt`).
    #[error("unknown prompt `{}`", echo_name(name))]
    UnknownPrompt {
        /// The name asked for.
        name: String,
    },
    /// A completion names a prompt or template no plugin offers.
    #[error("unknown completion reference: {}", reference_text(.0))]
    UnknownReference(CompletionRef),
    /// The arguments were refused: a required prompt argument missing, a
    /// completion for an argument the prompt or template does not have, or
    /// the plugin said `invalid-arguments`.
    #[error("invalid arguments for {what}: {message}")]
    InvalidArguments {
        /// `prompt `name`` or `resource template `t``.
        what: String,
        /// Why.
        message: String,
    },
    /// The plugin answered `failed` with this text.
    #[error("plugin `{plugin}` failed: {message}")]
    Failed {
        /// The plugin id.
        plugin: String,
        /// The plugin's text (raw: escape it before a terminal shows it).
        message: String,
    },
    /// The plugin returned contents for a URI the host does not serve from
    /// it (one another plugin owns, or none): the read fails whole.
    #[error(
        "plugin `{plugin}` returned contents for `{}`, a URI it does not offer",
        echo_name(uri)
    )]
    ForeignContents {
        /// The plugin id.
        plugin: String,
        /// The URI it returned (raw plugin text).
        uri: String,
    },
    /// The plugin trapped, hit a limit, returned too much, or could not run.
    #[error(transparent)]
    Plugin(#[from] CallError),
}

/// A completion reference as an error names it: `prompt `NAME`` or
/// `resource `URI`` (the client's text, [`echo_name`]).
fn reference_text(reference: &CompletionRef) -> String {
    match reference {
        CompletionRef::Prompt(name) => format!("prompt `{}`", echo_name(name)),
        CompletionRef::Resource(uri) => format!("resource `{}`", echo_name(uri)),
    }
}

/// The reason for an offer the namespace checks could not settle within
/// [`MAX_NAMESPACE_CHECK_STEPS`].
fn unchecked() -> String {
    format!(
        "it could not be checked against the earlier plugins' offers within the host's \
         {MAX_NAMESPACE_CHECK_STEPS} steps of template matching at load \
         (MAX_NAMESPACE_CHECK_STEPS)"
    )
}

fn detail(message: &Option<String>) -> String {
    message
        .as_ref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default()
}

/// The merged offers of all loaded plugins.
#[derive(Default)]
pub(crate) struct Catalog {
    resources: Vec<ResourceEntry>,
    templates: Vec<TemplateEntry>,
    prompts: Vec<PromptEntry>,
    by_uri: HashMap<String, usize>,
    by_prompt: HashMap<String, usize>,
    refused: Vec<RefusedOffer>,
}

impl Catalog {
    /// Merges the offers of `plugins` in order (see the module docs),
    /// logging and keeping each refusal, and tells each plugin which of its
    /// offers are served.
    pub(crate) fn build(plugins: &[Arc<ToolPlugin>]) -> Catalog {
        let mut c = Catalog::default();
        let mut template_texts: HashMap<String, String> = HashMap::new();
        let mut budget = MAX_NAMESPACE_CHECK_STEPS;
        for plugin in plugins {
            // What earlier plugins offer: the entries before these.
            let (earlier_resources, earlier_templates) = (c.resources.len(), c.templates.len());
            let mut served = ServedOffers::default();
            c.refused.extend(plugin.refused_offers().iter().cloned());
            for r in plugin.resources() {
                if let Some(&i) = c.by_uri.get(&r.uri) {
                    let owner = c.resources[i].plugin.id().to_string();
                    c.refuse(plugin, OfferKind::Resource, &r.uri, &owner);
                    continue;
                }
                let covered = c.templates[..earlier_templates].iter().find_map(|t| {
                    match t.parsed.matches_within(&r.uri, &mut budget) {
                        Some(false) => None,
                        Some(true) => Some(format!(
                            "plugin `{}`'s resource template `{}` already covers this URI",
                            t.plugin.id(),
                            echo_name(&t.template.uri_template)
                        )),
                        None => Some(unchecked()),
                    }
                });
                if let Some(reason) = covered {
                    c.refuse_because(plugin, OfferKind::Resource, &r.uri, reason);
                    continue;
                }
                served.uris.insert(r.uri.clone());
                c.by_uri.insert(r.uri.clone(), c.resources.len());
                c.resources.push(ResourceEntry {
                    plugin: plugin.clone(),
                    resource: r.clone(),
                });
            }
            for (index, t) in plugin.resource_templates().iter().enumerate() {
                if let Some(owner) = template_texts.get(&t.uri_template) {
                    let owner = owner.clone();
                    c.refuse(plugin, OfferKind::Template, &t.uri_template, &owner);
                    continue;
                }
                // Checked at load, so it parses.
                let Ok(parsed) = UriTemplate::parse(&t.uri_template) else {
                    continue;
                };
                if let Some(reason) =
                    c.earlier_cover(&parsed, earlier_resources, earlier_templates, &mut budget)
                {
                    c.refuse_because(plugin, OfferKind::Template, &t.uri_template, reason);
                    continue;
                }
                template_texts.insert(t.uri_template.clone(), plugin.id().to_string());
                served.templates.push(index);
                c.templates.push(TemplateEntry {
                    plugin: plugin.clone(),
                    template: t.clone(),
                    parsed,
                    literal_len: literal_len(&t.uri_template),
                });
            }
            for p in plugin.prompts() {
                if let Some(&i) = c.by_prompt.get(&p.name) {
                    let owner = c.prompts[i].plugin.id().to_string();
                    c.refuse(plugin, OfferKind::Prompt, &p.name, &owner);
                    continue;
                }
                c.by_prompt.insert(p.name.clone(), c.prompts.len());
                c.prompts.push(PromptEntry {
                    plugin: plugin.clone(),
                    prompt: p.clone(),
                });
            }
            plugin.set_served(served);
        }
        c
    }

    /// Why template `parsed` would take reads of URIs that the first
    /// `resources` resources or the first `templates` templates (earlier
    /// plugins') cover, if it would.
    fn earlier_cover(
        &self,
        parsed: &UriTemplate,
        resources: usize,
        templates: usize,
        budget: &mut u64,
    ) -> Option<String> {
        for r in &self.resources[..resources] {
            match parsed.matches_within(&r.resource.uri, budget) {
                Some(false) => {}
                Some(true) => {
                    return Some(format!(
                        "it matches `{}`, a resource of plugin `{}`",
                        echo_name(&r.resource.uri),
                        r.plugin.id()
                    ));
                }
                None => return Some(unchecked()),
            }
        }
        for t in &self.templates[..templates] {
            match parsed.overlaps_within(&t.parsed, budget) {
                Some(false) => {}
                Some(true) => {
                    return Some(format!(
                        "it overlaps plugin `{}`'s resource template `{}` (some URI matches both)",
                        t.plugin.id(),
                        echo_name(&t.template.uri_template)
                    ));
                }
                None => return Some(unchecked()),
            }
        }
        None
    }

    fn refuse(&mut self, plugin: &ToolPlugin, kind: OfferKind, name: &str, owner: &str) {
        let reason = format!(
            "plugin `{owner}` already offers a {} of that name",
            kind.as_str()
        );
        self.refuse_because(plugin, kind, name, reason);
    }

    fn refuse_because(&mut self, plugin: &ToolPlugin, kind: OfferKind, name: &str, reason: String) {
        tracing::warn!(
            plugin = plugin.id(),
            name = %crate::display::escape_line(name),
            "{} refused: {reason}",
            kind.as_str()
        );
        self.refused
            .push(RefusedOffer::new(plugin.id(), kind, name, reason));
    }

    pub(crate) fn resources(&self) -> &[ResourceEntry] {
        &self.resources
    }

    pub(crate) fn templates(&self) -> &[TemplateEntry] {
        &self.templates
    }

    pub(crate) fn prompts(&self) -> &[PromptEntry] {
        &self.prompts
    }

    pub(crate) fn refused(&self) -> &[RefusedOffer] {
        &self.refused
    }

    /// The plugin a read of `uri` goes to (see the module docs).
    pub(crate) fn route(&self, uri: &str) -> Option<&Arc<ToolPlugin>> {
        if let Some(&i) = self.by_uri.get(uri) {
            return Some(&self.resources[i].plugin);
        }
        // `max_by_key` keeps the last maximum: reverse so load order wins ties.
        self.templates
            .iter()
            .rev()
            .filter(|t| t.matches(uri))
            .max_by_key(|t| t.literal_len)
            .map(|t| &t.plugin)
    }

    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        client: Option<Arc<dyn CallClient>>,
    ) -> Result<Vec<ResourceContents>, RequestError> {
        let not_found = |message| RequestError::ResourceNotFound {
            uri: uri.to_string(),
            message,
        };
        if uri_error(uri).is_some() {
            return Err(not_found(None));
        }
        let Some(plugin) = self.route(uri) else {
            return Err(not_found(None));
        };
        match plugin.read_resource(uri, client).await? {
            Ok(contents) => {
                // Every URI it returns must be one the host serves from it,
                // checked within one call's matching budget.
                let mut budget = MAX_URI_MATCH_STEPS_PER_CALL;
                let foreign = contents.iter().find(|c| {
                    c.uri != uri && plugin.owns_uri_within(&c.uri, &mut budget) != Some(true)
                });
                if let Some(c) = foreign {
                    return Err(RequestError::ForeignContents {
                        plugin: plugin.id().to_string(),
                        uri: c.uri.clone(),
                    });
                }
                Ok(contents)
            }
            Err(ResourceError::NotFound(m)) => Err(not_found(Some(m))),
            Err(ResourceError::Failed(message)) => Err(RequestError::Failed {
                plugin: plugin.id().to_string(),
                message,
            }),
        }
    }

    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: Vec<(String, String)>,
        client: Option<Arc<dyn CallClient>>,
    ) -> Result<PromptResult, RequestError> {
        let Some(&i) = self.by_prompt.get(name) else {
            return Err(RequestError::UnknownPrompt {
                name: name.to_string(),
            });
        };
        let entry = &self.prompts[i];
        let invalid = |message: String| RequestError::InvalidArguments {
            what: format!("prompt `{name}`"),
            message,
        };
        let missing: Vec<&str> = entry
            .prompt
            .arguments
            .iter()
            .filter(|a| a.required && !arguments.iter().any(|(k, _)| *k == a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(invalid(format!(
                "missing required argument{} {}",
                if missing.len() == 1 { "" } else { "s" },
                missing
                    .iter()
                    .map(|m| format!("`{m}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        match entry.plugin.get_prompt(name, arguments, client).await? {
            Ok(result) => Ok(result),
            Err(PromptError::UnknownPrompt(_)) => Err(RequestError::UnknownPrompt {
                name: name.to_string(),
            }),
            Err(PromptError::InvalidArguments(message)) => Err(invalid(message)),
            Err(PromptError::Failed(message)) => Err(RequestError::Failed {
                plugin: entry.plugin.id().to_string(),
                message,
            }),
        }
    }

    pub(crate) async fn complete(
        &self,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: Vec<(String, String)>,
    ) -> Result<Completions, RequestError> {
        let unknown_argument = |what: String| RequestError::InvalidArguments {
            message: format!("it has no argument `{}`", echo_name(argument)),
            what,
        };
        match reference {
            CompletionRef::Prompt(name) => {
                let Some(&i) = self.by_prompt.get(name) else {
                    return Err(RequestError::UnknownReference(reference.clone()));
                };
                let entry = &self.prompts[i];
                if !entry.prompt.arguments.iter().any(|a| a.name == argument) {
                    return Err(unknown_argument(format!("prompt `{name}`")));
                }
                Ok(entry
                    .plugin
                    .complete_prompt(name, argument, value, context)
                    .await?)
            }
            CompletionRef::Resource(template) => {
                let Some(entry) = self
                    .templates
                    .iter()
                    .find(|t| t.template.uri_template == *template)
                else {
                    return Err(RequestError::UnknownReference(reference.clone()));
                };
                if !entry.variables().iter().any(|v| v == argument) {
                    return Err(unknown_argument(format!("resource template `{template}`")));
                }
                Ok(entry
                    .plugin
                    .complete_resource(template, argument, value, context)
                    .await?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::literal_len;

    #[test]
    fn literal_len_counts_bytes_outside_expressions() {
        for (template, expected) in [
            ("test://template/{id}/data", 21),
            ("test://{a}/{b}/{c}", 9),
            ("file:///{a}", 8),
            ("plain://uri", 11),
        ] {
            assert_eq!(literal_len(template), expected, "{template}");
        }
    }
}
