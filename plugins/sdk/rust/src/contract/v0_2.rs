//! Contract v0.2.0 (`wit/v0.2.0`, world `toolhost:plugin/server-plugin@0.2.0`),
//! behind the cargo feature `v0_2`.
//!
//! What v0.2.0 adds to v0.1.0: results are lists of MCP content blocks
//! ([`ContentBlock`]: text, image, audio, embedded resource, resource link);
//! a plugin can talk to the MCP client behind the current call ([`log`],
//! [`progress`], [`elicit`], [`sample`], [`client::resource_updated`]); and it
//! may offer resources ([`ResourcesGuest`]) and prompts ([`PromptsGuest`]) as
//! well as tools ([`Guest`]). `sessions` is unchanged, so [`run_and_wait`],
//! [`StartRequest`] and the other session items are the crate root's, shared
//! with v0.1.0.
//!
//! ```ignore
//! use toolhost_plugin_sdk::v0_2::{self, ContentBlock, Guest, ToolCall, ToolError, ToolOutput, ToolSpec};
//!
//! struct Plugin;
//!
//! impl Guest for Plugin {
//!     fn describe() -> Vec<ToolSpec> {
//!         vec![ToolSpec::new("hello", "Says hello, with a picture.", r#"{"type":"object"}"#)]
//!     }
//!     fn call(_call: ToolCall) -> Result<ToolOutput, ToolError> {
//!         v0_2::log(v0_2::LogLevel::Info, "saying hello");
//!         Ok(ToolOutput::new(vec![
//!             ContentBlock::text("hello"),
//!             ContentBlock::image(PNG, "image/png"), // raw bytes: &[u8] or Vec<u8>
//!         ]))
//!     }
//! }
//!
//! // This plugin offers tools only: empty resources and prompts.
//! v0_2::no_resources!(Plugin);
//! v0_2::no_prompts!(Plugin);
//! v0_2::export!(Plugin);
//! ```
//!
//! In `Cargo.toml`: `toolhost-plugin-sdk = { path = "...", features = ["v0_2"] }`;
//! in the manifest: `contract = "0.2.0"`, plus `elicitation = true` and
//! `sampling = true` if the plugin calls [`elicit`] or [`sample`] (without
//! them those return [`ClientError::NotGranted`]).
//!
//! Only the world `server-plugin` is generated: a tool-only plugin exports
//! empty `resources` and `prompts` ([`no_resources!`](crate::v0_2::no_resources),
//! [`no_prompts!`](crate::v0_2::no_prompts)), which the host lists as no
//! resources and no prompts. (A second `generate!` of `tool-plugin` in this
//! crate would define wit-bindgen's `#[macro_export]` macros
//! `__export_tool_plugin_impl` and `__export_toolhost_plugin_tool_0_2_0_cabi`
//! twice, the first also clashing with v0.1.0's.)

use std::time::Duration;

/// The generated bindings of `wit/v0.2.0` (world `server-plugin`). `sessions`
/// and every WASI interface are the crate root's [`crate::bindings`] (the
/// same WIT), so their types are shared with v0.1.0.
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit/v0.2.0",
        world: "toolhost:plugin/server-plugin@0.2.0",
        generate_all,
        with: {
            "toolhost:plugin/sessions@0.1.0": crate::bindings::toolhost::plugin::sessions,
            "wasi:cli/environment@0.2.12": crate::bindings::wasi::cli::environment,
            "wasi:cli/exit@0.2.12": crate::bindings::wasi::cli::exit,
            "wasi:cli/stdin@0.2.12": crate::bindings::wasi::cli::stdin,
            "wasi:cli/stdout@0.2.12": crate::bindings::wasi::cli::stdout,
            "wasi:cli/stderr@0.2.12": crate::bindings::wasi::cli::stderr,
            "wasi:io/error@0.2.12": crate::bindings::wasi::io::error,
            "wasi:io/poll@0.2.12": crate::bindings::wasi::io::poll,
            "wasi:io/streams@0.2.12": crate::bindings::wasi::io::streams,
            "wasi:clocks/monotonic-clock@0.2.12": crate::bindings::wasi::clocks::monotonic_clock,
            "wasi:clocks/wall-clock@0.2.12": crate::bindings::wasi::clocks::wall_clock,
            "wasi:random/random@0.2.12": crate::bindings::wasi::random::random,
            "wasi:random/insecure@0.2.12": crate::bindings::wasi::random::insecure,
            "wasi:random/insecure-seed@0.2.12": crate::bindings::wasi::random::insecure_seed,
            "wasi:filesystem/types@0.2.12": crate::bindings::wasi::filesystem::types,
            "wasi:filesystem/preopens@0.2.12": crate::bindings::wasi::filesystem::preopens,
        },
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "toolhost_plugin_sdk::v0_2::bindings",
    });
}

pub use crate::{
    EndReason, EventKind, ExitStatus, Outcome, SessionError, SessionEvent, SessionStatus, Snapshot,
    StartRequest, StdinMode, Subscription, describe_error, run_and_wait, sessions, wait, wasi,
};
pub use bindings::exports::toolhost::plugin0_2_0::prompts::{
    self, Guest as PromptsGuest, Prompt, PromptArgument, PromptError, PromptMessage, PromptResult,
};
pub use bindings::exports::toolhost::plugin0_2_0::resources::{
    self, Guest as ResourcesGuest, Resource, ResourceError, ResourceTemplate,
};
pub use bindings::exports::toolhost::plugin0_2_0::tool::{
    self, Guest, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec,
};
pub use bindings::toolhost::plugin0_2_0::client::{
    self, ClientError, ElicitAction, ElicitRequest, ElicitResponse, LogLevel, SamplingMessage,
    SamplingRequest, SamplingResponse,
};
pub use bindings::toolhost::plugin0_2_0::content::{
    self, Annotations, ContentBlock, Media, ResourceBody, ResourceContents, ResourceLink, Role,
};

// ---------------------------------------------------------------------------
// Macros

/// Exports a type implementing [`Guest`], [`ResourcesGuest`] and
/// [`PromptsGuest`] as the plugin's `tool`, `resources` and `prompts`
/// interfaces. Use it once, at the crate root of a `cdylib` crate. A plugin
/// without resources or prompts implements those with
/// [`no_resources!`](crate::v0_2::no_resources) and
/// [`no_prompts!`](crate::v0_2::no_prompts).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_v0_2 {
    ($ty:ident) => {
        $crate::v0_2::bindings::export_bindings!($ty with_types_in $crate::v0_2::bindings);
    };
}
#[doc(inline)]
pub use crate::__export_v0_2 as export;

/// Implements [`ResourcesGuest`] for a type as "no resources": empty lists,
/// every `read` is [`ResourceError::NotFound`], no completions.
#[doc(hidden)]
#[macro_export]
macro_rules! __no_resources_v0_2 {
    ($ty:ty) => {
        impl $crate::v0_2::ResourcesGuest for $ty {
            fn list_resources() -> ::std::vec::Vec<$crate::v0_2::Resource> {
                ::std::vec::Vec::new()
            }
            fn list_templates() -> ::std::vec::Vec<$crate::v0_2::ResourceTemplate> {
                ::std::vec::Vec::new()
            }
            fn read(
                uri: ::std::string::String,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::v0_2::ResourceContents>,
                $crate::v0_2::ResourceError,
            > {
                ::std::result::Result::Err($crate::v0_2::ResourceError::NotFound(uri))
            }
            fn complete(
                _uri_template: ::std::string::String,
                _argument: ::std::string::String,
                _value: ::std::string::String,
                _context: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::vec::Vec<::std::string::String> {
                ::std::vec::Vec::new()
            }
        }
    };
}
#[doc(inline)]
pub use crate::__no_resources_v0_2 as no_resources;

/// Implements [`PromptsGuest`] for a type as "no prompts": an empty list,
/// every `get` is [`PromptError::UnknownPrompt`], no completions.
#[doc(hidden)]
#[macro_export]
macro_rules! __no_prompts_v0_2 {
    ($ty:ty) => {
        impl $crate::v0_2::PromptsGuest for $ty {
            fn list_prompts() -> ::std::vec::Vec<$crate::v0_2::Prompt> {
                ::std::vec::Vec::new()
            }
            fn get(
                name: ::std::string::String,
                _arguments: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::result::Result<$crate::v0_2::PromptResult, $crate::v0_2::PromptError> {
                ::std::result::Result::Err($crate::v0_2::PromptError::UnknownPrompt(name))
            }
            fn complete(
                _name: ::std::string::String,
                _argument: ::std::string::String,
                _value: ::std::string::String,
                _context: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::vec::Vec<::std::string::String> {
                ::std::vec::Vec::new()
            }
        }
    };
}
#[doc(inline)]
pub use crate::__no_prompts_v0_2 as no_prompts;

// ---------------------------------------------------------------------------
// Talking to the client

/// Sends `message` to the client as a log message at `level` (MCP
/// `notifications/message`, `data` a JSON string), if the client's log level
/// lets it through. Also written to the host's log.
pub fn log(level: LogLevel, message: &str) {
    client::log(level, None, &json_string(message));
}

/// Reports progress of the current call: `progress` out of `total` (MCP
/// `notifications/progress`), e.g. `progress(50.0, 100.0)` or
/// `progress(3.0, None)`. A no-op when the client asked for no progress, or
/// when `progress` does not grow.
pub fn progress(progress: f64, total: impl Into<Option<f64>>) {
    client::report_progress(progress, total.into(), None);
}

/// Asks the user for input (MCP `elicitation/create`, form mode) and waits
/// for the answer. `schema_json` is the form, a JSON Schema object of
/// primitive properties as text. Needs `elicitation = true` in the manifest.
pub fn elicit(message: &str, schema_json: &str) -> Result<ElicitResponse, ClientError> {
    client::elicit(&ElicitRequest {
        message: message.into(),
        requested_schema: schema_json.into(),
    })
}

/// Asks the client's LLM to complete `prompt` (one user text message; MCP
/// `sampling/createMessage`) in at most `max_tokens` tokens, and waits for
/// it. Needs `sampling = true` in the manifest. For more control build a
/// [`SamplingRequest`] and call [`client::sample`].
pub fn sample(prompt: &str, max_tokens: u32) -> Result<SamplingResponse, ClientError> {
    client::sample(&SamplingRequest::user_text(prompt, max_tokens))
}

/// Blocks for `duration` on a `wasi:clocks/monotonic-clock` pollable (no busy
/// loop; the time counts toward the `wall` limit, not `cpu`).
pub fn sleep(duration: Duration) {
    let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let timer = wasi::clocks::monotonic_clock::subscribe_duration(nanos);
    wasi::io::poll::poll(&[&timer]);
}

/// `text` as a JSON string literal (quotes and escapes added).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl ClientError {
    /// A one-line description, e.g. `not granted: add elicitation = true ...`.
    pub fn describe(&self) -> String {
        match self {
            ClientError::NotGranted(why) => format!("not granted: {why}"),
            ClientError::Unsupported(why) => format!("unsupported: {why}"),
            ClientError::Failed(why) => format!("failed: {why}"),
        }
    }
}

impl ElicitAction {
    /// The MCP name of the action: `accept`, `decline` or `cancel`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ElicitAction::Accept => "accept",
            ElicitAction::Decline => "decline",
            ElicitAction::Cancel => "cancel",
        }
    }
}

impl SamplingRequest {
    /// One user message with `prompt` as its text, at most `max_tokens`, and
    /// no system prompt, temperature, stop sequences or model preferences.
    pub fn user_text(prompt: &str, max_tokens: u32) -> SamplingRequest {
        SamplingRequest {
            messages: vec![SamplingMessage {
                role: Role::User,
                content: ContentBlock::text(prompt),
            }],
            max_tokens,
            system_prompt: None,
            temperature: None,
            stop_sequences: Vec::new(),
            model_preferences: None,
        }
    }
}

impl SamplingResponse {
    /// The completion's text, when it is a text block.
    pub fn text(&self) -> Option<&str> {
        match &self.content {
            ContentBlock::Text(text) => Some(text),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------
// Content

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(text.into())
    }

    /// An image: its raw bytes (not base64) and MIME type, e.g. `image/png`.
    pub fn image(data: impl Into<Vec<u8>>, mime_type: &str) -> ContentBlock {
        ContentBlock::Image(Media::new(data, mime_type))
    }

    /// An audio clip: its raw bytes and MIME type, e.g. `audio/wav`.
    pub fn audio(data: impl Into<Vec<u8>>, mime_type: &str) -> ContentBlock {
        ContentBlock::Audio(Media::new(data, mime_type))
    }

    /// A text resource embedded with its contents (MCP `EmbeddedResource`).
    pub fn embedded_text(uri: &str, mime_type: &str, text: impl Into<String>) -> ContentBlock {
        ContentBlock::Resource(ResourceContents::text(uri, mime_type, text))
    }

    /// A binary resource embedded with its contents (sent as a base64 `blob`).
    pub fn embedded_blob(uri: &str, mime_type: &str, data: impl Into<Vec<u8>>) -> ContentBlock {
        ContentBlock::Resource(ResourceContents::blob(uri, mime_type, data))
    }

    /// A link to resource `uri` named `name`, without its contents (MCP
    /// `ResourceLink`); for more fields build a [`ResourceLink`].
    pub fn resource_link(uri: &str, name: &str) -> ContentBlock {
        ContentBlock::ResourceLink(ResourceLink::new(uri, name))
    }
}

impl From<ResourceLink> for ContentBlock {
    fn from(link: ResourceLink) -> ContentBlock {
        ContentBlock::ResourceLink(link)
    }
}

impl Media {
    /// Raw bytes and their MIME type, no annotations.
    pub fn new(data: impl Into<Vec<u8>>, mime_type: &str) -> Media {
        Media {
            data: data.into(),
            mime_type: mime_type.into(),
            annotations: None,
        }
    }
}

impl ResourceContents {
    /// Text contents of resource `uri`.
    pub fn text(uri: &str, mime_type: &str, text: impl Into<String>) -> ResourceContents {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            body: ResourceBody::Text(text.into()),
        }
    }

    /// Binary contents of resource `uri` (raw bytes; sent base64-encoded).
    pub fn blob(uri: &str, mime_type: &str, data: impl Into<Vec<u8>>) -> ResourceContents {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            body: ResourceBody::Blob(data.into()),
        }
    }
}

impl ResourceLink {
    /// A link to `uri` named `name`, with no other fields.
    pub fn new(uri: &str, name: &str) -> ResourceLink {
        ResourceLink {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            annotations: None,
        }
    }

    /// The same link with a description.
    pub fn description(mut self, description: &str) -> ResourceLink {
        self.description = Some(description.into());
        self
    }

    /// The same link with a MIME type.
    pub fn mime_type(mut self, mime_type: &str) -> ResourceLink {
        self.mime_type = Some(mime_type.into());
        self
    }
}

// ---------------------------------------------------------------------------
// Tools: the helpers every version shares (the crate root's
// `shared_tool_helpers!`: `ToolHints::PURE`, `ToolOutput::error`, ...), then
// v0.2.0's own.

shared_tool_helpers!();

impl ToolOutput {
    /// A successful result with these content blocks, in order.
    pub fn new(content: Vec<ContentBlock>) -> ToolOutput {
        ToolOutput {
            content,
            structured: None,
            is_error: false,
        }
    }

    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput::new(vec![ContentBlock::text(text)])
    }
}

impl ToolSpec {
    /// A tool named `name` with `description` and `input_schema` (a JSON
    /// Schema object as text, passed to clients unchanged), no title, no
    /// output schema, hinted [`ToolHints::PURE`].
    pub fn new(name: &str, description: &str, input_schema: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema: input_schema.into(),
            output_schema: None,
            hints: ToolHints::PURE,
        }
    }

    /// The same spec with a human-readable title.
    pub fn title(mut self, title: &str) -> ToolSpec {
        self.title = Some(title.into());
        self
    }

    /// The same spec with an output schema (a JSON Schema object as text):
    /// every successful result must then carry `structured`.
    pub fn output_schema(mut self, schema: &str) -> ToolSpec {
        self.output_schema = Some(schema.into());
        self
    }
}

// ---------------------------------------------------------------------------
// Resources

impl Resource {
    /// Resource `uri` named `name`, with `description` and `mime_type`.
    pub fn new(uri: &str, name: &str, description: &str, mime_type: &str) -> Resource {
        Resource {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: Some(description.into()),
            mime_type: Some(mime_type.into()),
            size: None,
            annotations: None,
        }
    }

    /// The same resource with a human-readable title.
    pub fn title(mut self, title: &str) -> Resource {
        self.title = Some(title.into());
        self
    }
}

impl ResourceTemplate {
    /// The resources an RFC 6570 `uri_template` names (e.g.
    /// `test://template/{id}/data`), as `name`, with `description` and the
    /// `mime_type` they share.
    pub fn new(
        uri_template: &str,
        name: &str,
        description: &str,
        mime_type: &str,
    ) -> ResourceTemplate {
        ResourceTemplate {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: Some(description.into()),
            mime_type: Some(mime_type.into()),
            annotations: None,
        }
    }

    /// The same template with a human-readable title.
    pub fn title(mut self, title: &str) -> ResourceTemplate {
        self.title = Some(title.into());
        self
    }
}

// ---------------------------------------------------------------------------
// Prompts

impl Prompt {
    /// Prompt `name` with `description` and no arguments.
    pub fn new(name: &str, description: &str) -> Prompt {
        Prompt {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            arguments: Vec::new(),
        }
    }

    /// The same prompt with a human-readable title.
    pub fn title(mut self, title: &str) -> Prompt {
        self.title = Some(title.into());
        self
    }

    /// The same prompt with one more argument.
    pub fn argument(mut self, name: &str, description: &str, required: bool) -> Prompt {
        self.arguments.push(PromptArgument {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            required,
        });
        self
    }
}

impl PromptMessage {
    /// A message from the user.
    pub fn user(content: ContentBlock) -> PromptMessage {
        PromptMessage {
            role: Role::User,
            content,
        }
    }

    /// A message from the assistant.
    pub fn assistant(content: ContentBlock) -> PromptMessage {
        PromptMessage {
            role: Role::Assistant,
            content,
        }
    }
}

impl PromptResult {
    /// A rendered prompt of these messages, without a description.
    pub fn new(messages: Vec<PromptMessage>) -> PromptResult {
        PromptResult {
            description: None,
            messages,
        }
    }
}

/// The value of argument `name` in a prompt's or template's `(name, value)`
/// list, if given.
pub fn arg<'a>(arguments: &'a [(String, String)], name: &str) -> Option<&'a str> {
    arguments
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The values of `candidates` that start with `prefix`, for a `complete`
/// answer.
pub fn complete_from(candidates: &[&str], prefix: &str) -> Vec<String> {
    candidates
        .iter()
        .filter(|c| c.starts_with(prefix))
        .map(|c| (*c).to_owned())
        .collect()
}
