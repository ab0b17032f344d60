//! Plugins: the one load pipeline for every plugin kind, and each call in a
//! fresh, limited store.
//!
//! Loading (`prepare`): the manifest's sha256 pin, a check of the component's
//! exports and imports against its world, read from the bytes *before*
//! compiling (so the error names what is wrong, in milliseconds), compile (or
//! the on-disk cache), link, `InstancePre`.
//! Tool and policy plugins differ only in their [`PluginKind`].
//!
//! Every call gets a new [`Store`] instantiated from the plugin's cached
//! `InstancePre` (the Spin model): no state survives between calls, a trap
//! or a limit hit discards only that instance, and the store's WASI context
//! grants only what the manifest says (no preopens, env, args or network by
//! default; stdin empty; stdout and stderr to the host log tagged with the
//! plugin id): ARCHITECTURE.md, invariant "WASI grants only the manifest's preopens
//! and env, never network".

mod guest_log;
mod instances;
mod offers;
mod policy;
mod store;
mod tool;
mod world;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::InstancePre;

pub use guest_log::GuestLog;

/// The instance pool gauges of `runtime` (`instances.rs`, `Pool`), shared by
/// every plugin loaded on it, for the host's metrics.
pub(crate) fn pool_use(runtime: &crate::engine::Runtime) -> crate::metrics::PoolUse {
    instances::Pool::of(runtime).usage().clone()
}
pub use offers::{MAX_LABEL_BYTES, OfferKind, RefusedOffer, uri_error};
pub use policy::PolicyPlugin;
pub use store::CallState;
use store::new_store;
pub use tool::{
    Completions, MAX_COMPLETIONS, Prompt, PromptError, PromptResult, Resource, ResourceContents,
    ResourceError, ResourceTemplate, ToolError, ToolOutput, ToolPlugin, ToolSpec,
};

use crate::call::{CallInfo, Services};
pub use crate::content::{MAX_CONTENT_BLOCKS, MAX_OUTPUT_BYTES};
use crate::contract::v0_2_0::client::ClientState;
use crate::engine::{CompileSource, MAX_WASM_STACK, Runtime, sha256_hex};
use crate::limits::LimitExceeded;
use crate::manifest::Manifest;
pub use world::{PluginKind, World, check_world, component_names, tool_contract};
use world::{ToolInstance, ToolPre, Work, linker};

/// Most tools one plugin may describe (256). A plugin that describes more is
/// not loaded ([`LoadError::TooManyTools`]): the host never works through an
/// unbounded list a guest hands it.
pub const MAX_TOOLS_PER_PLUGIN: usize = 256;

/// Longest tool name, in bytes (64): `tool.wit` (`tool-spec.name`) allows
/// 1-64 characters of `[A-Za-z0-9_-]`, which MCP tool names also accept. A
/// tool with another name is refused ([`RefusedTool`]).
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Most bytes of one tool's description (16 KiB); a longer one refuses the
/// tool ([`RefusedTool`]).
pub const MAX_DESCRIPTION_BYTES: usize = 16 << 10;

/// Most bytes of one tool's input schema, and of its output schema (64 KiB
/// of JSON text each); a longer one refuses the tool ([`RefusedTool`]).
pub const MAX_INPUT_SCHEMA_BYTES: usize = 64 << 10;

/// Most wall time `describe` may take (10 s), whatever the manifest's `wall`:
/// it only lists tools, and a plugin that hangs there must not hold up the
/// host's start for long. The manifest's CPU and memory limits apply as to
/// any call.
pub const DESCRIBE_WALL_LIMIT: Duration = Duration::from_secs(10);

/// How many bytes of a refused tool's name [`RefusedTool::name`] keeps (the
/// rest is cut, so a hostile name cannot fill the log).
const REFUSED_NAME_KEEP: usize = 80;

/// Errors from loading a plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a valid WebAssembly component.
    #[error("plugin `{plugin}` is not a valid component: {message}")]
    Invalid {
        /// The plugin id.
        plugin: String,
        /// What wasmtime said.
        message: String,
    },
    /// The component does not target the contract's world.
    #[error("plugin `{plugin}` does not target {world}: {message}")]
    WrongWorld {
        /// The plugin id.
        plugin: String,
        /// The expected world, e.g. `toolhost:plugin/tool-plugin@0.1.0`.
        world: String,
        /// What is missing.
        message: String,
    },
    /// The component's sha256 differs from the manifest's pin.
    #[error(
        "plugin `{plugin}`: sha256 mismatch: the manifest pins {expected}, the component is {actual}"
    )]
    Sha256Mismatch {
        /// The plugin id.
        plugin: String,
        /// The manifest's pin.
        expected: String,
        /// The component's digest.
        actual: String,
    },
    /// `describe` failed.
    #[error("plugin `{plugin}` failed to describe its tools: {message}")]
    Describe {
        /// The plugin id.
        plugin: String,
        /// Why.
        message: String,
    },
    /// `list-resources`, `list-templates` or `list-prompts` failed.
    #[error("plugin `{plugin}` failed to list its {what}: {message}")]
    List {
        /// The plugin id.
        plugin: String,
        /// `resources`, `resource templates` or `prompts`.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// A list call returned more items than its limit
    /// ([`MAX_RESOURCES_PER_PLUGIN`], [`MAX_TEMPLATES_PER_PLUGIN`],
    /// [`MAX_PROMPTS_PER_PLUGIN`]).
    #[error(
        "plugin `{plugin}` lists {count} {what}, more than the limit of {limit} per plugin \
         ({limit_name})"
    )]
    TooManyOffers {
        /// The plugin id.
        plugin: String,
        /// `resources`, `resource templates` or `prompts`.
        what: &'static str,
        /// How many it listed.
        count: usize,
        /// The limit.
        limit: usize,
        /// The limit's name, e.g. `MAX_RESOURCES_PER_PLUGIN`.
        limit_name: &'static str,
    },
    /// `describe` returned more than [`MAX_TOOLS_PER_PLUGIN`] tools.
    #[error(
        "plugin `{plugin}` describes {count} tools, more than the limit of {limit} tools per \
         plugin (MAX_TOOLS_PER_PLUGIN)"
    )]
    TooManyTools {
        /// The plugin id.
        plugin: String,
        /// How many it described.
        count: usize,
        /// The limit ([`MAX_TOOLS_PER_PLUGIN`]).
        limit: usize,
    },
    /// A `[[preopen]]` contains the host's state dir or lies inside it (checked by
    /// `Host::new` before any plugin code runs): through it the plugin would read
    /// other sessions' output logs and the event logs, and could rename the state
    /// dir's parents from under the host.
    #[error(
        "plugin `{plugin}`: preopen {guest} ({}) {relation} the host's state dir {}: a preopen \
         may neither contain the state dir nor lie inside it (it holds other sessions' output \
         logs, the host-session event logs, the control socket and the compiled cache); grant \
         a directory beside the state dir, or move the state dir (--state-dir)",
        preopen.display(),
        state_dir.display()
    )]
    PreopenOverlapsStateDir {
        /// The plugin id.
        plugin: String,
        /// Where the guest sees the preopen (e.g. `/ws`).
        guest: String,
        /// The preopen's real host path.
        preopen: PathBuf,
        /// The state dir's real path.
        state_dir: PathBuf,
        /// `contains` or `lies inside` (or `cannot be checked against`, with the
        /// I/O error, which refuses it too).
        relation: String,
    },
}

/// A tool a plugin described that the host does not offer, and why (a name
/// outside `tool.wit`'s rules, a duplicate, a description or schema over its
/// limit, a schema that is not a JSON object, or a name already taken by
/// another tool). The plugin's other tools are offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedTool {
    /// The plugin id.
    pub plugin: String,
    /// The name as the plugin gave it, cut to its first 80 bytes. Raw
    /// plugin text: escape it before showing it ([`crate::display`]).
    pub name: String,
    /// Why it was refused, naming the rule or limit.
    pub reason: String,
}

impl RefusedTool {
    /// A refusal of `name` (cut to its first 80 bytes) for `reason`.
    pub fn new(plugin: &str, name: &str, reason: String) -> RefusedTool {
        let cut = name.floor_char_boundary(REFUSED_NAME_KEEP.min(name.len()));
        let mut kept = name[..cut].to_string();
        if cut < name.len() {
            kept.push('…');
        }
        RefusedTool {
            plugin: plugin.to_string(),
            name: kept,
            reason,
        }
    }
}

/// Why `name` is not a tool name under `tool.wit` (1-64 characters of
/// `[A-Za-z0-9_-]`) and the host's naming rule (no [`PREFIX_SEPARATOR`] `__`,
/// which the host reserves for the names it gives colliding tools), or `None`
/// when it is one.
pub fn tool_name_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the name is empty (tool names are 1-64 characters of [A-Za-z0-9_-])".into());
    }
    if name.len() > MAX_TOOL_NAME_LEN {
        return Some(format!(
            "the name is {} bytes long, more than the limit of {MAX_TOOL_NAME_LEN} \
             (MAX_TOOL_NAME_LEN; tool names are 1-64 characters of [A-Za-z0-9_-])",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Some(format!(
            "the name contains {}, outside [A-Za-z0-9_-] (tool names are 1-64 characters of \
             [A-Za-z0-9_-])",
            describe_char(c)
        ));
    }
    if name.contains(PREFIX_SEPARATOR) {
        return Some(
            "the name contains `__`, which is reserved: the host names a plugin's tool \
             `<plugin id>__<tool>` when another tool has its name, so only the host may make \
             such names"
                .into(),
        );
    }
    None
}

/// What the host puts between a plugin id and a tool name when a tool's own name is
/// taken (`<id>__<tool>`, `host.rs::merge_tools`). Reserved: [`tool_name_error`]
/// refuses it in plugins' tool names and `manifest::validate_id` in plugin ids, so
/// a name `<id>__*` can only be one the host gave plugin `<id>`.
pub const PREFIX_SEPARATOR: &str = "__";

/// `c` for an error message: printable ASCII quoted, anything else as U+XXXX.
fn describe_char(c: char) -> String {
    if c.is_ascii_graphic() {
        format!("`{c}`")
    } else if c == ' ' {
        "a space".to_string()
    } else {
        format!("U+{:04X}", c as u32)
    }
}

/// Checks what `describe` returned against `tool.wit` and the limits above, in
/// one pass: the tools the host offers (in the plugin's order) and the ones it
/// refuses, each with its reason. Names are checked first, then uniqueness
/// within the plugin (the first of a name wins), then the description and
/// input schema sizes, that the input schema is a JSON object, the title's
/// size ([`MAX_LABEL_BYTES`]), and last the output schema, when there is one:
/// at most [`MAX_INPUT_SCHEMA_BYTES`] and a JSON object.
pub fn check_tools(plugin: &str, specs: Vec<ToolSpec>) -> (Vec<ToolSpec>, Vec<RefusedTool>) {
    let mut seen: HashSet<String> = HashSet::with_capacity(specs.len());
    let mut tools = Vec::with_capacity(specs.len());
    let mut refused = Vec::new();
    for spec in specs {
        let reason = if let Some(e) = tool_name_error(&spec.name) {
            Some(e)
        } else if !seen.insert(spec.name.clone()) {
            Some(
                "the plugin describes another tool of the same name first (names must be \
                  unique within a plugin)"
                    .to_string(),
            )
        } else if spec.description.len() > MAX_DESCRIPTION_BYTES {
            Some(format!(
                "its description is {} bytes, more than the limit of {MAX_DESCRIPTION_BYTES} \
                 (MAX_DESCRIPTION_BYTES)",
                spec.description.len()
            ))
        } else if spec.input_schema.len() > MAX_INPUT_SCHEMA_BYTES {
            Some(format!(
                "its input schema is {} bytes, more than the limit of \
                 {MAX_INPUT_SCHEMA_BYTES} (MAX_INPUT_SCHEMA_BYTES)",
                spec.input_schema.len()
            ))
        } else if let Some(e) = json_object_error("input", &spec.input_schema) {
            Some(e)
        } else if let Some(e) = spec
            .title
            .as_deref()
            .filter(|t| t.len() > MAX_LABEL_BYTES)
            .map(|t| {
                format!(
                    "its title is {} bytes, more than the limit of {MAX_LABEL_BYTES} \
                     (MAX_LABEL_BYTES)",
                    t.len()
                )
            })
        {
            Some(e)
        } else {
            match &spec.output_schema {
                Some(schema) if schema.len() > MAX_INPUT_SCHEMA_BYTES => Some(format!(
                    "its output schema is {} bytes, more than the limit of \
                     {MAX_INPUT_SCHEMA_BYTES} (MAX_INPUT_SCHEMA_BYTES)",
                    schema.len()
                )),
                Some(schema) => json_object_error("output", schema),
                None => None,
            }
        };
        match reason {
            None => tools.push(spec),
            Some(reason) => refused.push(RefusedTool::new(plugin, &spec.name, reason)),
        }
    }
    (tools, refused)
}

/// Why a tool's `which` (`input`/`output`) schema is refused: not JSON, or
/// not a JSON object. `None` when it is an object.
fn json_object_error(which: &str, schema: &str) -> Option<String> {
    match serde_json::from_str::<serde_json::Value>(schema) {
        Ok(serde_json::Value::Object(_)) => None,
        Ok(_) => Some(format!("its {which} schema is not a JSON object")),
        Err(e) => Some(format!("its {which} schema is not valid JSON: {e}")),
    }
}

/// Why a plugin call produced no result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// A limit was hit; the instance was discarded.
    #[error("plugin `{plugin}` stopped: {limit}")]
    Limit {
        /// The plugin id.
        plugin: String,
        /// Which limit.
        limit: LimitExceeded,
    },
    /// The guest trapped (a real guest fault); the instance was discarded.
    #[error("plugin `{plugin}` trapped: {message}")]
    Trap {
        /// The plugin id.
        plugin: String,
        /// The trap message.
        message: String,
    },
    /// The call returned more than [`MAX_OUTPUT_BYTES`] (text, media and
    /// resource bytes and structured JSON together, see
    /// [`crate::content::block_bytes`]); the result was dropped.
    #[error(
        "plugin `{plugin}` returned {bytes} bytes of output, more than the limit of {limit} bytes"
    )]
    OutputTooLarge {
        /// The plugin id.
        plugin: String,
        /// How many bytes it returned.
        bytes: usize,
        /// The limit ([`MAX_OUTPUT_BYTES`]).
        limit: usize,
    },
    /// The call returned more than [`MAX_CONTENT_BLOCKS`] content blocks (a
    /// tool result's content, a prompt's messages, a read's contents) or
    /// [`MAX_COMPLETIONS`]-exceeding lists; the result was dropped.
    #[error(
        "plugin `{plugin}` returned {count} {what}, more than the limit of {limit} ({limit_name})"
    )]
    TooManyBlocks {
        /// The plugin id.
        plugin: String,
        /// What it returned too many of: `content blocks`, `prompt messages`,
        /// `resource contents`.
        what: &'static str,
        /// How many it returned.
        count: usize,
        /// The limit ([`MAX_CONTENT_BLOCKS`]).
        limit: usize,
        /// The limit's name.
        limit_name: &'static str,
    },
    /// The host could not run the call (instantiation failed, ...).
    #[error("plugin `{plugin}` could not run: {message}")]
    Host {
        /// The plugin id.
        plugin: String,
        /// Why.
        message: String,
    },
}

impl CallError {
    fn from_wasmtime(plugin: &str, err: wasmtime::Error) -> CallError {
        if let Some(limit) = err.chain().find_map(|e| e.downcast_ref::<LimitExceeded>()) {
            return CallError::Limit {
                plugin: plugin.to_string(),
                limit: limit.clone(),
            };
        }
        if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
            if *trap == wasmtime::Trap::StackOverflow {
                return CallError::Limit {
                    plugin: plugin.to_string(),
                    limit: LimitExceeded::Stack {
                        limit: MAX_WASM_STACK,
                    },
                };
            }
            return CallError::Trap {
                plugin: plugin.to_string(),
                message: trap.to_string(),
            };
        }
        CallError::Trap {
            plugin: plugin.to_string(),
            message: format!("{err:#}"),
        }
    }
}

/// A component checked and linked for `kind` ([`prepare`]).
struct Prepared {
    pre: InstancePre<CallState>,
    source: CompileSource,
    /// The world it targets (for a tool plugin, the contract version of the
    /// `tool` interface it exports).
    world: World,
}

/// The load pipeline every plugin passes: sha256 pin (when the manifest has
/// one), world check on the names in the bytes ([`component_names`],
/// [`check_world`]), compile or load from the cache, link, `InstancePre`.
///
/// Errors: [`LoadError::Sha256Mismatch`], [`LoadError::Invalid`] (not a
/// component), [`LoadError::WrongWorld`] (missing export, unknown import).
fn prepare(
    runtime: &Runtime,
    manifest: &Manifest,
    bytes: &[u8],
    kind: PluginKind,
) -> Result<Prepared, LoadError> {
    let id = manifest.id.as_str();
    check_pin(manifest, bytes)?;
    let invalid = |e: wasmtime::Error| LoadError::Invalid {
        plugin: id.to_string(),
        message: format!("{e:#}"),
    };
    // Names first: a wrong world is refused in milliseconds, not after a compile.
    let names = component_names(bytes).map_err(|message| LoadError::Invalid {
        plugin: id.to_string(),
        message,
    })?;
    let world = check_world(&names, id, kind)?;
    let contract = world.contract();
    // The manifest's `contract` must name the version the component was
    // built for (its exports decide; a plugin without a manifest file gets
    // the default one, whatever it targets).
    if kind == PluginKind::Tool
        && manifest.contract != contract
        && *manifest != Manifest::deny_all(id)
    {
        return Err(LoadError::WrongWorld {
            plugin: id.to_string(),
            world: World::Tool(manifest.contract).name(),
            message: format!(
                "its manifest says `contract = \"{}\"` but the component was built for \
                 contract {contract} (it exports {}); set `contract = \"{contract}\"`",
                manifest.contract,
                world.export()
            ),
        });
    }
    let (component, source) = runtime.compile_plugin(id, bytes).map_err(invalid)?;
    let linker = linker(runtime, world).map_err(invalid)?;
    let pre = linker
        .instantiate_pre(&component)
        .map_err(|e| LoadError::WrongWorld {
            plugin: id.to_string(),
            world: world.name(),
            message: format!("{e:#}"),
        })?;
    Ok(Prepared { pre, source, world })
}

/// One call: a fresh store for `info` (under its manifest's limits, with
/// `client` behind its `client` import and `host_shell` in its environment,
/// `new_store`), a fresh instance, then `f`, all
/// within the wall-time limit `wall` (the manifest's, or less for
/// `describe`).
async fn run_call<R>(
    pre: &ToolPre,
    info: CallInfo,
    host_shell: Option<&Path>,
    wall: Duration,
    services: Option<Arc<Services>>,
    client: ClientState,
    f: impl for<'a> FnOnce(&'a ToolInstance, &'a mut Store<CallState>) -> Work<'a, R>,
) -> Result<R, CallError> {
    let mut store = new_store(pre.engine(), info, host_shell, services, client)?;
    run_in(pre, None, &mut store, wall, f).await
}

/// The rest of a call on `store` (which holds the call's data): instantiate
/// unless `bindings` is an instance already made in this store (a ready one,
/// `instances.rs`), then `f`, within `wall`. A trap's message gets the guest's
/// last stderr lines. The caller drops the store.
async fn run_in<R>(
    pre: &ToolPre,
    bindings: Option<ToolInstance>,
    store: &mut Store<CallState>,
    wall: Duration,
    f: impl for<'a> FnOnce(&'a ToolInstance, &'a mut Store<CallState>) -> Work<'a, R>,
) -> Result<R, CallError> {
    let plugin = store.data().call.plugin.to_string();
    let work = async {
        let bindings = match bindings {
            Some(bindings) => bindings,
            None => pre.instantiate(&mut *store).await?,
        };
        f(&bindings, &mut *store).await
    };
    match within_wall(plugin, wall, work).await {
        // A trap says little on its own (`unreachable` for a Rust panic, a
        // Python exception, a JS TypeError): the guest's last stderr lines
        // say why.
        Err(CallError::Trap { plugin, message }) => Err(CallError::Trap {
            plugin,
            message: with_stderr_tail(message, &store.data().stderr.recent()),
        }),
        other => other,
    }
}

/// A trap `message` followed by the guest's last stderr lines, or by where
/// to find its output when it wrote none.
fn with_stderr_tail(message: String, lines: &[String]) -> String {
    if lines.is_empty() {
        return format!(
            "{message} (the plugin wrote nothing to stderr; its stdout and stderr go to the \
             host log: TOOLHOST_LOG=toolhost::plugin=info)"
        );
    }
    let mut out = format!("{message}; the plugin's last stderr lines:");
    for line in lines {
        out.push_str("\n  ");
        out.push_str(line);
    }
    out
}

/// Runs one call's `work` (instantiate + export call) under the wall-time
/// limit, turning traps and limit hits into [`CallError`]s naming `plugin`.
async fn within_wall<R>(
    plugin: String,
    wall: std::time::Duration,
    work: impl std::future::Future<Output = wasmtime::Result<R>>,
) -> Result<R, CallError> {
    match tokio::time::timeout(wall, work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(CallError::from_wasmtime(&plugin, e)),
        Err(_) => Err(CallError::Limit {
            plugin,
            limit: LimitExceeded::Wall { limit: wall },
        }),
    }
}

fn check_pin(manifest: &Manifest, bytes: &[u8]) -> Result<(), LoadError> {
    if let Some(expected) = &manifest.sha256 {
        let actual = sha256_hex(bytes);
        if &actual != expected {
            return Err(LoadError::Sha256Mismatch {
                plugin: manifest.id.clone(),
                expected: expected.clone(),
                actual,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, description: &str, schema: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema: schema.into(),
            output_schema: None,
            hints: crate::contract::v0_2_0::ToolHints {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: false,
            },
        }
    }

    #[test]
    fn tool_names_follow_the_wit() {
        for ok in [
            "a",
            "bash",
            "bash_output",
            "A-9_z",
            "_a_",
            "a_-_b",
            &"x".repeat(64),
        ] {
            assert_eq!(tool_name_error(ok), None, "{ok:?}");
        }
        for (bad, says) in [
            ("", "empty"),
            ("a b", "a space"),
            ("a.b", "`.`"),
            ("\u{1b}[31m", "U+001B"),
            ("caf\u{e9}", "U+00E9"),
            ("a/b", "`/`"),
            (&"x".repeat(65), "MAX_TOOL_NAME_LEN"),
            ("zzz__run", "`__`, which is reserved"),
            ("__", "`__`"),
            ("a___b", "`__`"),
        ] {
            let e = tool_name_error(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn check_tools_keeps_the_good_and_names_each_refusal() {
        let obj = r#"{"type":"object"}"#;
        let big_schema = format!(r#"{{"x":"{}"}}"#, "y".repeat(MAX_INPUT_SCHEMA_BYTES));
        let specs = vec![
            spec("one", "first", obj),
            spec("one", "again", obj),
            spec("bad name", "", obj),
            spec("long", &"d".repeat(MAX_DESCRIPTION_BYTES + 1), obj),
            spec("edge", &"d".repeat(MAX_DESCRIPTION_BYTES), obj),
            spec("schema", "", &big_schema),
            spec("array", "", "[]"),
            spec("text", "", "nope"),
            spec("two", "second", obj),
        ];
        let (tools, refused) = check_tools("p", specs);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["one", "edge", "two"]);
        assert_eq!(tools[0].description, "first");
        let reasons: Vec<(&str, &str)> = refused
            .iter()
            .map(|r| (r.name.as_str(), r.reason.as_str()))
            .collect();
        let expect = [
            ("one", "unique"),
            ("bad name", "[A-Za-z0-9_-]"),
            ("long", "MAX_DESCRIPTION_BYTES"),
            ("schema", "MAX_INPUT_SCHEMA_BYTES"),
            ("array", "not a JSON object"),
            ("text", "not valid JSON"),
        ];
        assert_eq!(reasons.len(), expect.len(), "{reasons:?}");
        for ((name, reason), (want_name, says)) in reasons.iter().zip(expect) {
            assert_eq!(*name, want_name);
            assert!(reason.contains(says), "{name}: {reason}");
        }
        assert!(refused.iter().all(|r| r.plugin == "p"));
    }

    #[test]
    fn output_schemas_and_titles_are_checked() {
        let obj = r#"{"type":"object"}"#;
        let with = |name: &str, title: Option<String>, output: Option<String>| ToolSpec {
            title,
            output_schema: output,
            ..spec(name, "", obj)
        };
        let big = format!(r#"{{"x":"{}"}}"#, "y".repeat(MAX_INPUT_SCHEMA_BYTES));
        let (tools, refused) = check_tools(
            "p",
            vec![
                with("ok", Some("Ok".into()), Some(obj.into())),
                with("array", None, Some("[]".into())),
                with("text", None, Some("nope".into())),
                with("big", None, Some(big)),
                with("title", Some("t".repeat(MAX_LABEL_BYTES + 1)), None),
            ],
        );
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["ok"]);
        let reasons: Vec<(&str, &str)> = refused
            .iter()
            .map(|r| (r.name.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(
            reasons[..2],
            [
                ("array", "its output schema is not a JSON object"),
                (
                    "text",
                    "its output schema is not valid JSON: expected ident at line 1 column 2"
                ),
            ]
        );
        assert!(reasons[2].1.contains("output schema") && reasons[2].1.contains("MAX_INPUT"));
        assert!(reasons[3].1.contains("MAX_LABEL_BYTES"), "{reasons:?}");
    }

    #[test]
    fn a_refused_name_is_cut() {
        let r = RefusedTool::new("p", &"é".repeat(100), "why".into());
        assert!(r.name.len() <= REFUSED_NAME_KEEP + '…'.len_utf8());
        assert!(r.name.ends_with('…'));
    }
}
