//! The conformance plugin: a toolhost plugin for contract v0.2.0 offering
//! exactly what the server scenarios of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`) call, with the texts and MIME types
//! they expect. Built by `plugins/examples/conformance/build.sh`.
//!
//! It is also the full example of a v0.2.0 plugin in Rust:
//!
//! - [`tools`]: content blocks of every kind (text, image, audio, embedded
//!   resource), an `isError` result, log messages and progress reports with
//!   pauses between them, elicitation and sampling through the client, and a
//!   tool whose input schema uses JSON Schema 2020-12 keywords;
//! - [`resources`]: a text resource, a binary one, one to subscribe to, and a
//!   URI template;
//! - [`prompts`]: plain, with arguments (and completions for them), with an
//!   embedded resource, and with an image.
//!
//! The manifest (`conformance.toml`) grants `elicitation` and `sampling`, and
//! no `exec`: the plugin runs no commands.

mod media;
mod prompts;
mod resources;
mod tools;

use toolhost_plugin_sdk::v0_2::{
    self, Guest, Prompt, PromptError, PromptResult, PromptsGuest, Resource, ResourceContents,
    ResourceError, ResourceTemplate, ResourcesGuest, ToolCall, ToolError, ToolOutput, ToolSpec,
};

/// The plugin. The host makes a fresh instance for every call, so it holds
/// no state.
struct Conformance;

impl Guest for Conformance {
    fn describe() -> Vec<ToolSpec> {
        tools::specs()
    }

    fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
        tools::call(call)
    }
}

impl ResourcesGuest for Conformance {
    fn list_resources() -> Vec<Resource> {
        resources::list()
    }

    fn list_templates() -> Vec<ResourceTemplate> {
        resources::templates()
    }

    fn read(uri: String) -> Result<Vec<ResourceContents>, ResourceError> {
        resources::read(&uri)
    }

    fn complete(
        uri_template: String,
        argument: String,
        value: String,
        _context: Vec<(String, String)>,
    ) -> Vec<String> {
        resources::complete(&uri_template, &argument, &value)
    }
}

impl PromptsGuest for Conformance {
    fn list_prompts() -> Vec<Prompt> {
        prompts::list()
    }

    fn get(name: String, arguments: Vec<(String, String)>) -> Result<PromptResult, PromptError> {
        prompts::get(&name, &arguments)
    }

    fn complete(
        name: String,
        argument: String,
        value: String,
        _context: Vec<(String, String)>,
    ) -> Vec<String> {
        prompts::complete(&name, &argument, &value)
    }
}

v0_2::export!(Conformance);
