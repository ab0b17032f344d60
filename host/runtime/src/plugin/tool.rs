//! [`ToolPlugin`]: a loaded tool plugin of any supported contract: the world it
//! targets ([`World`], picked by the `tool@X.Y.Z` interface it exports,
//! [`super::check_world`]), what it described and listed at load, and where its
//! calls' instances come from (`instances.rs`). It answers in the newest contract's
//! types whatever the version (`world.rs` holds the per-version glue). A 0.2.0 plugin
//! may also offer resources and prompts (the `server-plugin` world), listed once at
//! load like its tools and served each in a fresh instance.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument as _;

use wasmtime::Store;

use super::instances::ToolInstances;
use super::offers::{
    self, MAX_PROMPTS_PER_PLUGIN, MAX_RESOURCES_PER_PLUGIN, MAX_TEMPLATES_PER_PLUGIN, RefusedOffer,
};
use super::world::{ToolInstance, ToolPre, Work};
use super::{
    CallError, CallState, DESCRIBE_WALL_LIMIT, LoadError, MAX_CONTENT_BLOCKS, MAX_OUTPUT_BYTES,
    MAX_TOOLS_PER_PLUGIN, PluginKind, Prepared, RefusedTool, World, check_tools, prepare, run_call,
    run_in,
};
use crate::call::{CallInfo, Services};
use crate::content::{block_bytes, contents_bytes};
use crate::contract::v0_2_0::client::{CallClient, ClientState, UriScope};
use crate::contract::v0_2_0::{self as v2, ContentBlock};
use crate::engine::{CompileSource, Runtime};
use crate::limits::LimitExceeded;
use crate::manifest::{ExecGrant, Manifest};
use toolhost_manifest::ContractVersion;

/// A tool as a plugin describes it (contract 0.2.0's `tool-spec`; a 0.1.0
/// spec has no title and no output schema).
pub type ToolSpec = v2::ToolSpec;
/// A tool call's output as a plugin returns it: MCP content blocks,
/// structured JSON, `is-error` (a 0.1.0 result's text is one text block).
pub type ToolOutput = v2::ToolOutput;
/// A tool call's error as a plugin returns it.
pub type ToolError = v2::ToolError;
/// A resource a plugin lists (MCP `Resource`).
pub type Resource = v2::Resource;
/// A resource template a plugin lists (MCP `ResourceTemplate`).
pub type ResourceTemplate = v2::ResourceTemplate;
/// One resource's contents as a read returns them (MCP
/// `TextResourceContents` / `BlobResourceContents`).
pub type ResourceContents = v2::ResourceContents;
/// Why a plugin could not read a resource (`not-found`, `failed`).
pub type ResourceError = v2::ResourceError;
/// A prompt a plugin lists (MCP `Prompt`).
pub type Prompt = v2::Prompt;
/// A rendered prompt (MCP `GetPromptResult`).
pub type PromptResult = v2::PromptResult;
/// Why a plugin could not render a prompt (`unknown-prompt`,
/// `invalid-arguments`, `failed`).
pub type PromptError = v2::PromptError;

/// Most completion values passed on from one `complete` call (100, MCP
/// `completion/complete`'s maximum); the rest are counted, not sent.
pub const MAX_COMPLETIONS: usize = 100;

/// A loaded tool plugin (`tool-plugin` of any supported contract, or
/// 0.2.0's `server-plugin`).
pub struct ToolPlugin {
    id: Arc<str>,
    manifest: Arc<Manifest>,
    /// The world it targets: `tool-plugin` of the contract version it was built for.
    world: World,
    tools: Vec<ToolSpec>,
    refused: Vec<RefusedTool>,
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    refused_offers: Vec<RefusedOffer>,
    /// What its `client.resource-updated` may name.
    scope: Arc<UriScope>,
    services: Option<Arc<Services>>,
    /// Where each call's instance comes from: the ready one made after the
    /// previous call, or one admitted to the pool and made on the call path.
    instances: ToolInstances,
    /// Keeps the engine's epoch ticker running while the plugin is loaded
    /// (without it CPU limits would never fire).
    _runtime: Runtime,
    /// Where its compiled code came from.
    pub source: CompileSource,
}

/// What a plugin suggests for a completion (MCP `CompleteResult.completion`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completions {
    /// The values, most relevant first, at most [`MAX_COMPLETIONS`].
    pub values: Vec<String>,
    /// How many the plugin returned (MCP `total`); more than `values.len()`
    /// means there are more (MCP `hasMore`).
    pub total: usize,
}

impl ToolPlugin {
    /// Loads a tool plugin from component bytes under `manifest` (`prepare`:
    /// pin, world check, compile or cache, link) and asks it to `describe` its
    /// tools ([`ToolPlugin::describe`]: no session services, under its limits
    /// and [`DESCRIBE_WALL_LIMIT`]). A 0.2.0 component exporting `resources`
    /// or `prompts` is asked for `list-resources`, `list-templates` and
    /// `list-prompts` the same way (each in its own instance). Everything
    /// listed is checked off the async workers ([`check_tools`],
    /// [`offers::check_resources`], [`offers::check_templates`],
    /// [`offers::check_prompts`]); refused items are logged and kept in
    /// [`ToolPlugin::refused_tools`] / [`ToolPlugin::refused_offers`], the
    /// others offered.
    ///
    /// `services`: the session engine and permission pipeline its
    /// `sessions` imports reach during tool calls; `None` (as for `plugin
    /// inspect`) makes `start` answer `denied` and the other session calls
    /// trap. Listing never gets them: loading a plugin grants nothing. With
    /// `services` and a manifest that grants `exec`, every store of the plugin
    /// names the host's shell in its environment ([`super::SHELL_ENV`]).
    ///
    /// Errors: [`LoadError::Sha256Mismatch`], [`LoadError::Invalid`] (not a
    /// component), [`LoadError::WrongWorld`] (missing export, unknown import),
    /// [`LoadError::Describe`] (`describe` trapped or hit a limit),
    /// [`LoadError::List`] (a list call did), [`LoadError::TooManyTools`]
    /// (more than [`MAX_TOOLS_PER_PLUGIN`]), [`LoadError::TooManyOffers`].
    pub async fn load(
        runtime: &Runtime,
        manifest: Manifest,
        bytes: &[u8],
        services: Option<Arc<Services>>,
    ) -> Result<ToolPlugin, LoadError> {
        let Prepared { pre, source, world } = prepare(runtime, &manifest, bytes, PluginKind::Tool)?;
        let id: Arc<str> = manifest.id.as_str().into();
        let wrong = |e: wasmtime::Error| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: world.name(),
            message: format!("{e:#}"),
        };
        let pre = ToolPre::new(pre, world).map_err(wrong)?;
        let manifest = Arc::new(manifest);
        let instances = ToolInstances::new(
            runtime,
            pre,
            CallInfo::plugin_only(id.clone(), manifest.clone()),
            manifest.limits.wall.min(DESCRIBE_WALL_LIMIT),
            // A plugin whose calls can start processes learns the host's shell.
            services
                .as_ref()
                .filter(|_| !matches!(manifest.exec, ExecGrant::None))
                .map(|s| Arc::from(s.sessions.shell().path.as_path())),
        );
        let mut plugin = ToolPlugin {
            id: id.clone(),
            manifest,
            world,
            tools: Vec::new(),
            refused: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            prompts: Vec::new(),
            refused_offers: Vec::new(),
            scope: Arc::new(UriScope::default()),
            services,
            instances,
            _runtime: runtime.clone(),
            source,
        };
        let specs = plugin.describe().await.map_err(|e| LoadError::Describe {
            plugin: id.to_string(),
            message: e.to_string(),
        })?;
        if specs.len() > MAX_TOOLS_PER_PLUGIN {
            return Err(LoadError::TooManyTools {
                plugin: id.to_string(),
                count: specs.len(),
                limit: MAX_TOOLS_PER_PLUGIN,
            });
        }
        let listed = plugin.list_offers().await?;
        // Parsing up to 256 schemas of 64 KiB is real work: not on a worker.
        let plugin_id = id.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let (resources, templates, prompts) = listed;
            let (tools, refused) = check_tools(&plugin_id, specs);
            let (resources, mut refused_offers) = offers::check_resources(&plugin_id, resources);
            let (templates, r) = offers::check_templates(&plugin_id, templates);
            refused_offers.extend(r);
            let (prompts, r) = offers::check_prompts(&plugin_id, prompts);
            refused_offers.extend(r);
            (
                tools,
                refused,
                resources,
                templates,
                prompts,
                refused_offers,
            )
        })
        .await
        .map_err(|e| LoadError::Describe {
            plugin: id.to_string(),
            message: format!("checking its tools failed: {e}"),
        })?;
        let (tools, refused, resources, templates, prompts, refused_offers) = checked;
        for r in &refused {
            tracing::warn!(
                plugin = %id,
                tool = %crate::display::escape_line(&r.name),
                "tool refused: {}",
                r.reason
            );
        }
        for r in &refused_offers {
            tracing::warn!(
                plugin = %id,
                name = %crate::display::escape_line(&r.name),
                "{} refused: {}",
                r.kind.as_str(),
                r.reason
            );
        }
        let scope = UriScope {
            uris: resources.iter().map(|r| r.uri.clone()).collect(),
            templates: templates.iter().map(|(_, parsed)| parsed.clone()).collect(),
            max_uri_bytes: offers::MAX_URI_BYTES,
            served: std::sync::OnceLock::new(),
        };
        plugin.tools = tools;
        plugin.refused = refused;
        plugin.resources = resources;
        plugin.templates = templates.into_iter().map(|(t, _)| t).collect();
        plugin.prompts = prompts;
        plugin.refused_offers = refused_offers;
        plugin.scope = Arc::new(scope);
        Ok(plugin)
    }

    /// Tells the plugin's resource scope which of its offers the host
    /// serves, once every plugin's offers are merged ([`UriScope::served`],
    /// `catalog.rs`); later calls change nothing.
    pub(crate) fn set_served(&self, served: crate::contract::v0_2_0::client::ServedOffers) {
        let _ = self.scope.served.set(served);
    }

    /// The plugin id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The contract version it targets (from the `tool` interface it
    /// exports), e.g. `0.1.0`.
    pub fn contract(&self) -> ContractVersion {
        self.world.contract()
    }

    /// The world it targets (`tool-plugin` of [`ToolPlugin::contract`]).
    pub fn world(&self) -> World {
        self.world
    }

    /// The tools it described at load time that passed [`check_tools`].
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// The tools it described at load time that [`check_tools`] refused, each
    /// with its reason.
    pub fn refused_tools(&self) -> &[RefusedTool] {
        &self.refused
    }

    /// The resources it listed at load time that passed
    /// [`offers::check_resources`] (none before contract 0.2.0).
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The resource templates it listed at load time that passed
    /// [`offers::check_templates`] (each a level-1 RFC 6570 template).
    pub fn resource_templates(&self) -> &[ResourceTemplate] {
        &self.templates
    }

    /// The prompts it listed at load time that passed
    /// [`offers::check_prompts`].
    pub fn prompts(&self) -> &[Prompt] {
        &self.prompts
    }

    /// The resources, templates and prompts it listed that the checks
    /// refused, each with its reason.
    pub fn refused_offers(&self) -> &[RefusedOffer] {
        &self.refused_offers
    }

    /// Whether `uri` is one of its resources or one of its templates matches
    /// it.
    pub fn owns_uri(&self, uri: &str) -> bool {
        self.scope.contains(uri)
    }

    /// [`ToolPlugin::owns_uri`], its template matching taking steps from
    /// `budget` (`UriTemplate::matches_within`); `None` when the budget ran
    /// out before the answer.
    pub fn owns_uri_within(&self, uri: &str, budget: &mut u64) -> Option<bool> {
        self.scope.contains_within(uri, budget)
    }

    /// Its manifest (grants and limits; a deny-all one if it has no file).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Asks the plugin to `describe` its tools again, in a fresh instance
    /// under its limits, exactly as a tool call runs (fresh [`Store`] from the
    /// cached `InstancePre`, `describe`, store dropped), except that it gets
    /// no session services (`sessions.start` answers `denied`, the other
    /// session calls trap, no approver is asked), no client (`client.elicit`
    /// and `sample` answer `unsupported`) and at most [`DESCRIBE_WALL_LIMIT`]
    /// of wall time. The list is returned as the plugin gave it, unchecked
    /// (a 0.1.0 plugin's specs converted). [`ToolPlugin::tools`] keeps what
    /// load time saw; this is the per-call path that benchmark P1 measures
    /// (see `BENCHMARKS.md`).
    ///
    /// Errors: as [`ToolPlugin::call`].
    pub async fn describe(&self) -> Result<Vec<ToolSpec>, CallError> {
        let info = CallInfo::plugin_only(self.id.clone(), self.manifest.clone());
        let wall = self.describe_wall();
        run_call(
            self.instances.pre(),
            info,
            self.instances.host_shell(),
            wall,
            None,
            ClientState::default(),
            |bindings, store| Box::pin(bindings.describe(store)),
        )
        .await
    }

    fn describe_wall(&self) -> Duration {
        self.manifest.limits.wall.min(DESCRIBE_WALL_LIMIT)
    }

    /// `list-resources`, `list-templates` and `list-prompts`, each in a fresh
    /// instance under the describe-time rules, with the count limits checked.
    /// Empty for a 0.1.0 plugin and for a missing export.
    async fn list_offers(
        &self,
    ) -> Result<(Vec<Resource>, Vec<ResourceTemplate>, Vec<Prompt>), LoadError> {
        let pre = self.instances.pre();
        let mut resources = Vec::new();
        let mut templates = Vec::new();
        let mut prompts = Vec::new();
        if pre.has_resources() {
            resources = self
                .list(
                    "resources",
                    MAX_RESOURCES_PER_PLUGIN,
                    "MAX_RESOURCES_PER_PLUGIN",
                    |b, s| Box::pin(async move { resources_of(b)?.call_list_resources(s).await }),
                )
                .await?;
            templates = self
                .list(
                    "resource templates",
                    MAX_TEMPLATES_PER_PLUGIN,
                    "MAX_TEMPLATES_PER_PLUGIN",
                    |b, s| Box::pin(async move { resources_of(b)?.call_list_templates(s).await }),
                )
                .await?;
        }
        if pre.has_prompts() {
            prompts = self
                .list(
                    "prompts",
                    MAX_PROMPTS_PER_PLUGIN,
                    "MAX_PROMPTS_PER_PLUGIN",
                    |b, s| Box::pin(async move { prompts_of(b)?.call_list_prompts(s).await }),
                )
                .await?;
        }
        Ok((resources, templates, prompts))
    }

    /// One list call at load (no services, no client, describe's wall limit),
    /// refusing the plugin past `limit` items.
    async fn list<T: Send + 'static>(
        &self,
        what: &'static str,
        limit: usize,
        limit_name: &'static str,
        f: impl for<'a> FnOnce(&'a ToolInstance, &'a mut Store<CallState>) -> Work<'a, Vec<T>> + Send,
    ) -> Result<Vec<T>, LoadError> {
        let info = CallInfo::plugin_only(self.id.clone(), self.manifest.clone());
        let items = run_call(
            self.instances.pre(),
            info,
            self.instances.host_shell(),
            self.describe_wall(),
            None,
            ClientState::default(),
            f,
        )
        .await
        .map_err(|e| LoadError::List {
            plugin: self.id.to_string(),
            what,
            message: e.to_string(),
        })?;
        if items.len() > limit {
            return Err(LoadError::TooManyOffers {
                plugin: self.id.to_string(),
                what,
                count: items.len(),
                limit,
                limit_name,
            });
        }
        Ok(items)
    }

    /// Runs tool `spec` (one of [`ToolPlugin::tools`], as the host's tool
    /// entry holds it: no lookup by name) with `arguments` (a JSON object's
    /// text, moved into the call) in a fresh instance under the plugin's
    /// limits.
    /// `client` is the MCP client behind the call (`None`: none, as for
    /// `toolhost call`), reached through a 0.2.0 plugin's `client` import
    /// under the manifest's grants and the limits of
    /// [`crate::contract::v0_2_0::client`]. `principal` is who the call runs
    /// for ([`crate::CallRequest::principal`]): the owner of the sessions it
    /// starts.
    ///
    /// The result is checked: at most [`MAX_CONTENT_BLOCKS`] blocks and
    /// [`MAX_OUTPUT_BYTES`] in all. A successful result of a tool that
    /// declares an `output-schema` but carries no structured JSON object
    /// becomes an error result (`is_error`, a first text block saying so,
    /// the plugin's content after it).
    ///
    /// Errors: [`CallError::Limit`] (memory, table, CPU, wall, stack),
    /// [`CallError::Trap`], [`CallError::OutputTooLarge`],
    /// [`CallError::TooManyBlocks`], [`CallError::Host`]. In each case the
    /// instance is discarded; the plugin stays loaded.
    ///
    /// The call is the span `plugin.call <id>` (docs/operations.md#traces-and-logs),
    /// its failure as `error.type`: [`call_error_type`].
    pub async fn call(
        &self,
        spec: &ToolSpec,
        tool_call_id: &str,
        arguments: String,
        client: Option<Arc<dyn CallClient>>,
        principal: Option<toolhost_process::Principal>,
    ) -> Result<Result<ToolOutput, ToolError>, CallError> {
        let span = tracing::info_span!(
            "plugin.call",
            otel.name = %format_args!("plugin.call {}", self.id),
            toolhost.plugin.id = %self.id,
            gen_ai.tool.name = spec.name.as_str(),
            toolhost.tool_call.id = tool_call_id,
            "error.type" = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let result = self
            .call_in_instance(spec, tool_call_id, arguments, client, principal)
            .instrument(span.clone())
            .await;
        if let Some(kind) = call_error_type(&result)
            && !span.is_disabled()
        {
            span.record("error.type", kind)
                .record("otel.status_code", "error");
        }
        result
    }

    /// [`ToolPlugin::call`]'s work.
    async fn call_in_instance(
        &self,
        spec: &ToolSpec,
        tool_call_id: &str,
        arguments: String,
        client: Option<Arc<dyn CallClient>>,
        principal: Option<toolhost_process::Principal>,
    ) -> Result<Result<ToolOutput, ToolError>, CallError> {
        let tool = spec.name.as_str();
        let info = CallInfo {
            plugin: self.id.clone(),
            manifest: self.manifest.clone(),
            tool: tool.to_string(),
            tool_call_id: tool_call_id.to_string(),
            principal,
        };
        let wall = self.manifest.limits.wall;
        let client = if self.instances.pre().has_client() {
            self.client_state(client)
        } else {
            ClientState::default()
        };
        let call = v2::ToolCall {
            tool_call_id: tool_call_id.to_string(),
            name: tool.to_string(),
            arguments,
        };
        // The wall time runs from here: waiting for a ready instance being
        // made counts, and what is left of it bounds the rest of the call.
        let started = std::time::Instant::now();
        let wall_limit = |e: CallError| match e {
            CallError::Limit {
                plugin,
                limit: LimitExceeded::Wall { .. },
            } => CallError::Limit {
                plugin,
                limit: LimitExceeded::Wall { limit: wall },
            },
            other => other,
        };
        let mut instance = self
            .instances
            .take(info, self.services.clone(), client, wall)
            .await?;
        let bindings = instance.bindings.take();
        let made_here = bindings.is_none();
        let wall_left = wall.saturating_sub(started.elapsed());
        let result = run_in(
            self.instances.pre(),
            bindings,
            &mut instance.store,
            wall_left,
            move |b, s| Box::pin(b.call(s, call)),
        )
        .await;
        // The store (and its pool slot) is dropped and the next call's instance
        // made after the result is back, off the call path.
        self.instances
            .give_back(instance, made_here && result.is_ok());
        self.check_tool_output(spec, result.map_err(wall_limit)?)
    }

    /// Waits until the instance for this plugin's next tool call is made (or
    /// its making is skipped: no free pool slot, or making one failed), and
    /// until the store of the last call is dropped. Resolves at once when
    /// neither is under way. [`ToolPlugin::call`] does not need this (it waits
    /// for a refill under way itself); tests and benchmark P1 use it to space
    /// calls as real tool calls are spaced.
    pub async fn wait_ready(&self) {
        self.instances.wait_ready().await;
    }

    /// Whether an instance for the next tool call is ready (made ahead of it).
    pub fn has_ready_instance(&self) -> bool {
        self.instances.has_ready()
    }

    /// The limits on a tool result, then its output schema (see
    /// [`ToolPlugin::call`]).
    fn check_tool_output(
        &self,
        spec: &ToolSpec,
        result: Result<ToolOutput, ToolError>,
    ) -> Result<Result<ToolOutput, ToolError>, CallError> {
        let bytes = match &result {
            Ok(out) => {
                self.check_count("content blocks", out.content.len())?;
                out.content.iter().map(block_bytes).sum::<usize>()
                    + out.structured.as_ref().map_or(0, String::len)
            }
            Err(
                ToolError::Failed(t) | ToolError::InvalidArguments(t) | ToolError::UnknownTool(t),
            ) => t.len(),
        };
        self.check_bytes(bytes)?;
        let mut result = result;
        let tool = spec.name.as_str();
        let declares_schema = spec.output_schema.is_some();
        if let Ok(out) = &mut result
            && declares_schema
            && !out.is_error
        {
            let structured_object = out.structured.as_deref().is_some_and(|s| {
                matches!(
                    serde_json::from_str::<serde_json::Value>(s),
                    Ok(serde_json::Value::Object(_))
                )
            });
            if !structured_object {
                out.is_error = true;
                out.content.insert(
                    0,
                    ContentBlock::Text(format!(
                        "tool `{tool}` of plugin `{}` declares an output schema, but its result \
                         has no structured content (a JSON object), which MCP requires",
                        self.id
                    )),
                );
            }
        }
        Ok(result)
    }

    fn check_count(&self, what: &'static str, count: usize) -> Result<(), CallError> {
        if count > MAX_CONTENT_BLOCKS {
            return Err(CallError::TooManyBlocks {
                plugin: self.id.to_string(),
                what,
                count,
                limit: MAX_CONTENT_BLOCKS,
                limit_name: "MAX_CONTENT_BLOCKS",
            });
        }
        Ok(())
    }

    fn check_bytes(&self, bytes: usize) -> Result<(), CallError> {
        if bytes > MAX_OUTPUT_BYTES {
            return Err(CallError::OutputTooLarge {
                plugin: self.id.to_string(),
                bytes,
                limit: MAX_OUTPUT_BYTES,
            });
        }
        Ok(())
    }

    /// Reads resource `uri` (one it lists or one of its templates matches:
    /// the host routes only those here) in a fresh instance under its limits,
    /// with `client` behind its `client` import and no session services
    /// (`sessions.start` answers `denied`). MCP `resources/read`.
    ///
    /// The contents are checked: at most [`MAX_CONTENT_BLOCKS`] and
    /// [`MAX_OUTPUT_BYTES`] in all.
    ///
    /// Errors: as [`ToolPlugin::call`]; [`CallError::Host`] when the plugin
    /// exports no `resources`.
    pub async fn read_resource(
        &self,
        uri: &str,
        client: Option<Arc<dyn CallClient>>,
    ) -> Result<Result<Vec<ResourceContents>, ResourceError>, CallError> {
        let uri = uri.to_string();
        let result = self
            .run_v2(client, move |b, s| {
                Box::pin(async move { resources_of(b)?.call_read(s, &uri).await })
            })
            .await?;
        let bytes = match &result {
            Ok(contents) => {
                self.check_count("resource contents", contents.len())?;
                contents.iter().map(contents_bytes).sum()
            }
            Err(ResourceError::NotFound(t) | ResourceError::Failed(t)) => t.len(),
        };
        self.check_bytes(bytes)?;
        Ok(result)
    }

    /// Renders prompt `name` with `arguments` (name, value pairs) in a fresh
    /// instance under its limits, with `client` behind its `client` import
    /// and no session services. MCP `prompts/get`.
    ///
    /// The result is checked: at most [`MAX_CONTENT_BLOCKS`] messages and
    /// [`MAX_OUTPUT_BYTES`] in all.
    ///
    /// Errors: as [`ToolPlugin::read_resource`] (no `prompts` export).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Vec<(String, String)>,
        client: Option<Arc<dyn CallClient>>,
    ) -> Result<Result<PromptResult, PromptError>, CallError> {
        let name = name.to_string();
        let result = self
            .run_v2(client, move |b, s| {
                Box::pin(async move { prompts_of(b)?.call_get(s, &name, &arguments).await })
            })
            .await?;
        let bytes = match &result {
            Ok(rendered) => {
                self.check_count("prompt messages", rendered.messages.len())?;
                rendered
                    .messages
                    .iter()
                    .map(|m| block_bytes(&m.content))
                    .sum::<usize>()
                    + rendered.description.as_ref().map_or(0, String::len)
            }
            Err(
                PromptError::UnknownPrompt(t)
                | PromptError::InvalidArguments(t)
                | PromptError::Failed(t),
            ) => t.len(),
        };
        self.check_bytes(bytes)?;
        Ok(result)
    }

    /// Asks for completions of argument `argument` of prompt `name`
    /// (`prompts.complete`), given the prefix `value` and the other
    /// arguments' values (`context`), in a fresh instance under its limits,
    /// with no client and no session services. MCP `completion/complete` for
    /// a `ref/prompt`.
    ///
    /// Errors: as [`ToolPlugin::read_resource`]; [`CallError::OutputTooLarge`]
    /// for values over [`MAX_OUTPUT_BYTES`] together.
    pub async fn complete_prompt(
        &self,
        name: &str,
        argument: &str,
        value: &str,
        context: Vec<(String, String)>,
    ) -> Result<Completions, CallError> {
        let (name, argument, value) = (name.to_string(), argument.to_string(), value.to_string());
        let values = self
            .run_v2(None, move |b, s| {
                Box::pin(async move {
                    prompts_of(b)?
                        .call_complete(s, &name, &argument, &value, &context)
                        .await
                })
            })
            .await?;
        self.completions(values)
    }

    /// Asks for completions of variable `argument` of resource template
    /// `uri_template` (`resources.complete`), like
    /// [`ToolPlugin::complete_prompt`]. MCP `completion/complete` for a
    /// `ref/resource`.
    ///
    /// Errors: as [`ToolPlugin::complete_prompt`].
    pub async fn complete_resource(
        &self,
        uri_template: &str,
        argument: &str,
        value: &str,
        context: Vec<(String, String)>,
    ) -> Result<Completions, CallError> {
        let (template, argument, value) = (
            uri_template.to_string(),
            argument.to_string(),
            value.to_string(),
        );
        let values = self
            .run_v2(None, move |b, s| {
                Box::pin(async move {
                    resources_of(b)?
                        .call_complete(s, &template, &argument, &value, &context)
                        .await
                })
            })
            .await?;
        self.completions(values)
    }

    fn completions(&self, mut values: Vec<String>) -> Result<Completions, CallError> {
        self.check_bytes(values.iter().map(String::len).sum())?;
        let total = values.len();
        values.truncate(MAX_COMPLETIONS);
        Ok(Completions { values, total })
    }

    /// The client state of a call of this plugin served for `client`.
    fn client_state(&self, client: Option<Arc<dyn CallClient>>) -> ClientState {
        ClientState::new(client, Some(self.scope.clone()))
    }

    /// One call of a 0.2.0 export other than `tool` (no services, the
    /// manifest's wall time, admitted like a tool call).
    async fn run_v2<R: Send + 'static>(
        &self,
        client: Option<Arc<dyn CallClient>>,
        f: impl for<'a> FnOnce(&'a ToolInstance, &'a mut Store<CallState>) -> Work<'a, R> + Send,
    ) -> Result<R, CallError> {
        if !self.instances.pre().has_offers() {
            return Err(CallError::Host {
                plugin: self.id.to_string(),
                message: format!(
                    "it targets contract {}, which has no resources or prompts",
                    self.world.contract()
                ),
            });
        }
        let info = CallInfo::plugin_only(self.id.clone(), self.manifest.clone());
        let wall = self.manifest.limits.wall;
        let client = self.client_state(client);
        // Per-plugin quota of calls in flight, with instances kept for the
        // built-in plugins (`instances.rs::Pool::admit`).
        let _permit = self.instances.admit().await?;
        run_call(
            self.instances.pre(),
            info,
            self.instances.host_shell(),
            wall,
            None,
            client,
            f,
        )
        .await
    }
}

/// The instance's `resources` export; an error (not a trap of the guest's
/// making) when it has none, which routing rules out.
fn resources_of(
    bindings: &ToolInstance,
) -> wasmtime::Result<&v2::server_plugin::exports::toolhost::plugin0_2_0::resources::Guest> {
    bindings
        .server()?
        .resources()
        .ok_or_else(|| wasmtime::Error::msg("the plugin exports no resources"))
}

/// The instance's `prompts` export, like [`resources_of`].
fn prompts_of(
    bindings: &ToolInstance,
) -> wasmtime::Result<&v2::server_plugin::exports::toolhost::plugin0_2_0::prompts::Guest> {
    bindings
        .server()?
        .prompts()
        .ok_or_else(|| wasmtime::Error::msg("the plugin exports no prompts"))
}

/// The `error.type` of a tool call's outcome (docs/operations.md#traces-and-logs):
/// `tool_error` for an `is_error` result, `usage` for a [`ToolError`] (the
/// plugin refused the call), and for a [`CallError`] `limit`, `trap`,
/// `output_too_large`, `too_many_blocks` or `host`; `None` for a success.
pub(crate) fn call_error_type(
    result: &Result<Result<ToolOutput, ToolError>, CallError>,
) -> Option<&'static str> {
    match result {
        Ok(Ok(out)) if out.is_error => Some("tool_error"),
        Ok(Ok(_)) => None,
        Ok(Err(_)) => Some("usage"),
        Err(CallError::Limit { .. }) => Some("limit"),
        Err(CallError::Trap { .. }) => Some("trap"),
        Err(CallError::OutputTooLarge { .. }) => Some("output_too_large"),
        Err(CallError::TooManyBlocks { .. }) => Some("too_many_blocks"),
        Err(CallError::Host { .. }) => Some("host"),
    }
}
