//! `toolhost:plugin@0.2.0` (`wit/v0.2.0`): the `server-plugin` world, which
//! imports `sessions@0.1.0` (unchanged since 0.1.0, implemented once in
//! [`super::v0_1_0`]) and `client`, and exports `tool` and optionally
//! `resources` and `prompts`. A component may target the narrower
//! `tool-plugin` world (exports only `tool`): the host looks each export up on
//! its own ([`ServerPluginPre`]) instead of through the world's `…Pre`, which
//! would demand all three.
//!
//! This is the newest contract module, so it holds the types the rest of the
//! runtime works with (older versions adapt onto them, `v0_1_0::adapt`): tool
//! specs, outputs and errors, MCP content blocks, resources and prompts are
//! the types generated here, re-exported below; [`super::v0_1_0`] adapts its
//! own onto them (`v0_1_0::adapt`). `bindgen!` needs literal paths and world
//! names, so they repeat the version; every other use derives from
//! it as a value,
//! [`ContractVersion::V0_2_0`](toolhost_manifest::ContractVersion::V0_2_0).

pub mod client;

use wasmtime::component::InstancePre;

/// The `server-plugin` world. `with` maps WASI to wasmtime-wasi's bindings
/// and `sessions@0.1.0` (with its `subscription` resource) to the module
/// generated for contract 0.1.0, so that interface has one set of types and
/// one host implementation for both versions.
#[allow(missing_docs)]
pub mod server_plugin {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.2.0",
        world: "toolhost:plugin/server-plugin@0.2.0",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
            "toolhost:plugin/sessions@0.1.0": crate::contract::v0_1_0::tool_plugin::toolhost::plugin::sessions,
        },
        additional_derives: [PartialEq],
    });
}

use server_plugin::exports::toolhost::plugin0_2_0::{prompts, resources, tool};
use server_plugin::toolhost::plugin0_2_0::content;

pub use content::{
    Annotations, ContentBlock, Media, ResourceBody, ResourceContents, ResourceLink, Role,
};
pub use prompts::{Prompt, PromptError, PromptMessage, PromptResult};
pub use resources::{Resource, ResourceError, ResourceTemplate};
pub use tool::{ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec};

/// Most bytes one answer of a plugin may hold (16 MiB, `tool.wit`'s
/// `tool-output.content`): the text, media bytes (before base64), resource
/// bodies and URIs of its content blocks and its structured JSON, together
/// ([`block_bytes`]). A v0.1.0 tool result counts its text and structured
/// JSON. More is `CallError::OutputTooLarge` (`plugin/mod.rs`).
pub const MAX_OUTPUT_BYTES: usize = 16 << 20;

/// Most content blocks one answer may hold (1,000, `tool.wit`): a tool
/// result's `content`, a prompt's messages, a resource read's contents. More
/// is `CallError::TooManyBlocks` (`plugin/mod.rs`).
pub const MAX_CONTENT_BLOCKS: usize = 1000;

/// The bytes `block` holds as [`MAX_OUTPUT_BYTES`] counts them: text, media
/// data, MIME types, URIs, names, titles and descriptions.
pub fn block_bytes(block: &ContentBlock) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    match block {
        ContentBlock::Text(t) => t.len(),
        ContentBlock::Image(m) | ContentBlock::Audio(m) => m.data.len() + m.mime_type.len(),
        ContentBlock::Resource(r) => contents_bytes(r),
        ContentBlock::ResourceLink(l) => {
            l.uri.len() + l.name.len() + opt(&l.title) + opt(&l.description) + opt(&l.mime_type)
        }
    }
}

/// The bytes one resource's contents hold: URI, MIME type and body.
pub fn contents_bytes(contents: &ResourceContents) -> usize {
    contents.uri.len()
        + contents.mime_type.as_ref().map_or(0, String::len)
        + match &contents.body {
            ResourceBody::Text(t) => t.len(),
            ResourceBody::Blob(b) => b.len(),
        }
}

/// The export names of this version's interfaces, as a component lists them.
pub mod names {
    /// `toolhost:plugin/resources@0.2.0`.
    pub const RESOURCES: &str = "toolhost:plugin/resources@0.2.0";
    /// `toolhost:plugin/prompts@0.2.0`.
    pub const PROMPTS: &str = "toolhost:plugin/prompts@0.2.0";
    /// `toolhost:plugin/client@0.2.0` (an import).
    pub const CLIENT: &str = "toolhost:plugin/client@0.2.0";
    /// `toolhost:plugin/content@0.2.0` (an import of types only).
    pub const CONTENT: &str = "toolhost:plugin/content@0.2.0";
}

/// A 0.2.0 component ready to instantiate: its `InstancePre` and the export
/// indices of `tool` and, when it exports them, `resources` and `prompts`,
/// looked up once at load.
pub struct ServerPluginPre<T: 'static> {
    pre: InstancePre<T>,
    tool: tool::GuestIndices,
    resources: Option<resources::GuestIndices>,
    prompts: Option<prompts::GuestIndices>,
}

impl<T: 'static> Clone for ServerPluginPre<T> {
    fn clone(&self) -> Self {
        ServerPluginPre {
            pre: self.pre.clone(),
            tool: self.tool.clone(),
            resources: self.resources.clone(),
            prompts: self.prompts.clone(),
        }
    }
}

/// One instance's exports.
pub struct ServerPlugin {
    tool: tool::Guest,
    resources: Option<resources::Guest>,
    prompts: Option<prompts::Guest>,
}

impl ServerPlugin {
    /// The `tool` export.
    pub fn tool(&self) -> &tool::Guest {
        &self.tool
    }

    /// The `resources` export, if the component has one.
    pub fn resources(&self) -> Option<&resources::Guest> {
        self.resources.as_ref()
    }

    /// The `prompts` export, if the component has one.
    pub fn prompts(&self) -> Option<&prompts::Guest> {
        self.prompts.as_ref()
    }
}

impl<T: Send + 'static> ServerPluginPre<T> {
    /// Looks up the exports of `pre`'s component: `tool` is required,
    /// `resources` and `prompts` are taken when the component exports them
    /// under their 0.2.0 names.
    ///
    /// Errors: `tool` is missing, or an export lacks a function of its
    /// interface.
    pub fn new(pre: InstancePre<T>) -> wasmtime::Result<Self> {
        let exports = |name: &str| pre.component().get_export_index(None, name).is_some();
        let tool = tool::GuestIndices::new(&pre)?;
        let resources = if exports(names::RESOURCES) {
            Some(resources::GuestIndices::new(&pre)?)
        } else {
            None
        };
        let prompts = if exports(names::PROMPTS) {
            Some(prompts::GuestIndices::new(&pre)?)
        } else {
            None
        };
        Ok(ServerPluginPre {
            pre,
            tool,
            resources,
            prompts,
        })
    }

    /// Whether the component exports `resources`.
    pub fn has_resources(&self) -> bool {
        self.resources.is_some()
    }

    /// Whether the component exports `prompts`.
    pub fn has_prompts(&self) -> bool {
        self.prompts.is_some()
    }

    /// The engine the component was compiled for.
    pub fn engine(&self) -> &wasmtime::Engine {
        self.pre.engine()
    }

    /// Instantiates the component in `store` and loads its exports.
    ///
    /// Errors: instantiation failed (a trap in the start function, a limit).
    pub async fn instantiate_async(
        &self,
        mut store: impl wasmtime::AsContextMut<Data = T>,
    ) -> wasmtime::Result<ServerPlugin> {
        let instance = self.pre.instantiate_async(&mut store).await?;
        let tool = self.tool.load(&mut store, &instance)?;
        let resources = match &self.resources {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        let prompts = match &self.prompts {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        Ok(ServerPlugin {
            tool,
            resources,
            prompts,
        })
    }
}

/// Adds `toolhost:plugin/client@0.2.0` and the types-only
/// `toolhost:plugin/content@0.2.0` to `linker`, reaching each store's
/// [`client::ClientCtx`] through `get`. (`sessions@0.1.0` is linked by
/// [`super::v0_1_0::add_sessions_to_linker`], the same for both versions.)
///
/// Errors: a name clash in the linker.
pub fn add_client_to_linker<T: Send + 'static>(
    linker: &mut wasmtime::component::Linker<T>,
    get: fn(&mut T) -> client::ClientCtx<'_>,
) -> wasmtime::Result<()> {
    server_plugin::toolhost::plugin0_2_0::content::add_to_linker::<T, client::ClientData>(
        linker, get,
    )?;
    server_plugin::toolhost::plugin0_2_0::client::add_to_linker::<T, client::ClientData>(
        linker, get,
    )
}
