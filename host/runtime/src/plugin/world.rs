//! A plugin's world, and everything that differs between contract versions on the
//! host's side of a plugin (the contract's own types are in `crate::contract`):
//!
//! - which world a component targets ([`World`]: a tool world of one contract
//!   version, or the policy world), read from the names in its bytes before any
//!   compile ([`component_names`], [`check_world`]), and what the host links for it
//!   ([`linker`]);
//! - a tool plugin's linked component ([`ToolPre`]) and its instances
//!   ([`ToolInstance`]), answering in the newest contract's types whatever the
//!   version: a 0.1.0 plugin's specs and results go through
//!   [`crate::contract::v0_1_0::adapt`]; a 0.2.0 plugin may also export `resources`
//!   and `prompts` (the `server-plugin` world).
//!
//! Nothing else in the plugin layer tells contract versions apart.

use std::future::Future;
use std::pin::Pin;

use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};
use wasmtime::error::Context as _;

use super::{CallState, LoadError};
use crate::contract::v0_1_0::{self, adapt, tool_plugin};
use crate::contract::v0_2_0::{self as v2, ServerPlugin, ServerPluginPre};
use crate::engine::Runtime;
use toolhost_manifest::ContractVersion;

/// Interface prefixes the host links for every plugin (`package/`). The
/// sockets interfaces are linked so Rust-std guests load, but the WASI
/// context never grants network access.
const LINKED_WASI: &[&str] = &[
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// The kinds of plugin the contract defines: which world a component must
/// target and what the host links for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    /// `tool-plugin` of any supported contract: exports `tool`, imports
    /// `sessions` (and `client` from 0.2.0, which also allows the
    /// `server-plugin` world's `resources` and `prompts` exports).
    Tool,
    /// `policy-plugin`: exports `policy@0.1.0`, imports nothing of ours
    /// (0.2.0's `policy-plugin` exports that same interface).
    Policy,
}

/// The world a component targets: its kind and the contract version it was built
/// for, read from the interfaces it exports ([`check_world`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    /// `tool-plugin` of contract `V`: exports `tool@V`, imports `sessions@0.1.0`,
    /// and from 0.2.0 `client` and `content` (0.2.0's `server-plugin` world also
    /// exports `resources` and `prompts`).
    Tool(ContractVersion),
    /// `policy-plugin@0.1.0`: exports `policy@0.1.0`, imports nothing of ours
    /// (0.2.0's `policy-plugin` exports that same interface).
    Policy,
}

impl World {
    /// The contract version it belongs to (`0.1.0` for a policy).
    pub fn contract(self) -> ContractVersion {
        match self {
            World::Tool(version) => version,
            World::Policy => ContractVersion::V0_1_0,
        }
    }

    /// Its name, e.g. `toolhost:plugin/tool-plugin@0.1.0`.
    pub fn name(self) -> String {
        match self {
            World::Tool(version) => format!("toolhost:plugin/tool-plugin@{version}"),
            World::Policy => format!("toolhost:plugin/policy-plugin@{}", self.contract()),
        }
    }

    /// The interface a component of it must export, e.g.
    /// `toolhost:plugin/tool@0.1.0` (`policy@0.1.0` for a policy).
    pub fn export(self) -> String {
        match self {
            World::Tool(version) => format!("toolhost:plugin/tool@{version}"),
            World::Policy => v0_1_0::names::POLICY.to_string(),
        }
    }

    /// The interfaces of ours a component of it may import (WASI aside).
    fn imports(self) -> &'static [&'static str] {
        match self {
            World::Policy => &[],
            World::Tool(version) if version >= ContractVersion::V0_2_0 => &[
                v0_1_0::names::SESSIONS,
                v2::names::CLIENT,
                v2::names::CONTENT,
            ],
            World::Tool(_) => &[v0_1_0::names::SESSIONS],
        }
    }

    /// The world of `kind` under contract `version` (a policy has one, whatever
    /// the version).
    fn of(kind: PluginKind, version: ContractVersion) -> World {
        match kind {
            PluginKind::Tool => World::Tool(version),
            PluginKind::Policy => World::Policy,
        }
    }
}

/// The contract version of a tool plugin component, from the `tool`
/// interface it exports (`toolhost:plugin/tool@X.Y.Z`, newest supported
/// first), or `None` when it exports none the host supports.
pub fn tool_contract(names: &ComponentNames) -> Option<ContractVersion> {
    ContractVersion::ALL
        .iter()
        .rev()
        .copied()
        .find(|v| names.exports.contains(&World::Tool(*v).export()))
}

/// What a component binary imports and exports at its top level, read from
/// the bytes without compiling them ([`component_names`]): enough to check it
/// against a world in milliseconds, before a compile that can take half a
/// minute for an interpreted plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentNames {
    /// Import names in binary order (interfaces such as
    /// `wasi:cli/stdout@0.2.6`, or functions), each with whether it is a
    /// function.
    pub imports: Vec<(String, bool)>,
    /// Export names in binary order.
    pub exports: Vec<String>,
}

impl ComponentNames {
    /// The import names alone.
    pub fn import_names(&self) -> Vec<String> {
        self.imports.iter().map(|(n, _)| n.clone()).collect()
    }
}

/// Reads a component's top-level import and export names from its bytes,
/// skipping nested modules and components, without validating or compiling
/// anything (the compile validates).
///
/// Errors: why the bytes are not a component (a core module, not
/// WebAssembly, truncated), as a message for [`LoadError::Invalid`]: for
/// people, nothing branches on it.
pub fn component_names(bytes: &[u8]) -> Result<ComponentNames, String> {
    use wasmparser::{Chunk, ComponentExternalKind, ComponentTypeRef, Encoding, Parser, Payload};
    // wasmparser's own text for this lists both headers' bytes, one per line.
    if !bytes.starts_with(b"\0asm") {
        return Err(
            "not a WebAssembly file (it does not start with the `\\0asm` header): \
             give the built `.wasm` component"
                .into(),
        );
    }
    let mut names = ComponentNames::default();
    let mut parser = Parser::new(0);
    let mut pos = 0usize;
    loop {
        let (payload, consumed) = match parser.parse(&bytes[pos..], true) {
            Ok(Chunk::Parsed { payload, consumed }) => (payload, consumed),
            Ok(Chunk::NeedMoreData(_)) => return Err("the file is truncated".into()),
            Err(e) => return Err(format!("not a WebAssembly component: {e}")),
        };
        pos += consumed;
        match payload {
            Payload::Version {
                encoding: Encoding::Module,
                ..
            } => {
                return Err(
                    "it is a core WebAssembly module, not a component (build for \
                            wasm32-wasip2, or wrap it with `wasm-tools component new`)"
                        .into(),
                );
            }
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                if unchecked_range.end > bytes.len() {
                    return Err("the file is truncated".into());
                }
                pos = unchecked_range.end;
            }
            Payload::ComponentImportSection(reader) => {
                for import in reader {
                    let import = import.map_err(|e| format!("bad import section: {e}"))?;
                    let function = matches!(import.ty, ComponentTypeRef::Func(_));
                    names.imports.push((import.name.name.to_string(), function));
                }
            }
            Payload::ComponentExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(|e| format!("bad export section: {e}"))?;
                    // Type exports are not items a host links or calls.
                    if export.kind != ComponentExternalKind::Type {
                        names.exports.push(export.name.name.to_string());
                    }
                }
            }
            Payload::End(_) => return Ok(names),
            _ => {}
        }
    }
}

/// Checks a component's names against `kind`'s world before compiling or
/// linking, so the error names what is wrong: the export it lacks, or an
/// import the host does not link. (Linking then checks the types.) A tool
/// plugin's contract version is the one of the `tool` interface it exports
/// ([`tool_contract`]); under 0.2.0 it may also export `resources` and
/// `prompts` (the `server-plugin` world) and import `client`.
///
/// Returns the world the component targets.
///
/// Errors: [`LoadError::WrongWorld`] naming the missing export (every
/// supported version's) or the first import the host does not provide.
pub fn check_world(names: &ComponentNames, id: &str, kind: PluginKind) -> Result<World, LoadError> {
    let world = match kind {
        PluginKind::Tool => tool_contract(names).map(World::Tool),
        PluginKind::Policy => names
            .exports
            .contains(&World::Policy.export())
            .then_some(World::Policy),
    };
    let Some(world) = world else {
        let mut wanted: Vec<String> = ContractVersion::ALL
            .iter()
            .map(|v| World::of(kind, *v).export())
            .collect();
        wanted.dedup();
        return Err(LoadError::WrongWorld {
            plugin: id.to_string(),
            world: match kind {
                PluginKind::Tool => format!(
                    "toolhost:plugin/tool-plugin of any supported contract ({})",
                    ContractVersion::supported_list()
                ),
                PluginKind::Policy => World::Policy.name(),
            },
            message: format!(
                "it does not export {} (it exports: {})",
                wanted.join(" or "),
                if names.exports.is_empty() {
                    "nothing".to_string()
                } else {
                    names.exports.join(", ")
                }
            ),
        });
    };
    // A 0.2.0 tool plugin that exports `resources` or `prompts` targets the
    // `server-plugin` world, which the error names.
    let name = match world {
        World::Tool(version)
            if version >= ContractVersion::V0_2_0
                && names
                    .exports
                    .iter()
                    .any(|e| e == v2::names::RESOURCES || e == v2::names::PROMPTS) =>
        {
            format!("toolhost:plugin/server-plugin@{version}")
        }
        _ => world.name(),
    };
    let wrong = |message: String| LoadError::WrongWorld {
        plugin: id.to_string(),
        world: name.clone(),
        message,
    };
    let ours = world.imports();
    for (name, function) in &names.imports {
        let linked = LINKED_WASI.iter().any(|p| name.starts_with(p))
            || (!*function && ours.contains(&name.as_str()));
        if !linked {
            let what = if *function { "function " } else { "" };
            return Err(wrong(format!(
                "it imports {what}{name}, which toolhost does not provide to this kind of plugin"
            )));
        }
    }
    Ok(world)
}

/// The linker for `world`: WASI p2 always; for tool
/// plugins `sessions@0.1.0` (every version imports that one), and from 0.2.0
/// `client` and the types-only `content`.
pub(super) fn linker(runtime: &Runtime, world: World) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(runtime.engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).context("linking WASI")?;
    let imports = world.imports();
    if imports.contains(&v0_1_0::names::SESSIONS) {
        v0_1_0::add_sessions_to_linker(&mut linker, CallState::sessions_ctx)
            .context("linking toolhost:plugin/sessions")?;
    }
    if imports.contains(&v2::names::CLIENT) {
        v2::add_client_to_linker(&mut linker, CallState::client_ctx)
            .context("linking toolhost:plugin/client")?;
    }
    Ok(linker)
}

/// What a call does with its instance: an export call in the instance's store.
pub(super) type Work<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// A tool plugin's component, checked and linked, of the contract version it targets.
#[derive(Clone)]
pub(super) enum ToolPre {
    /// `toolhost:plugin/tool-plugin@0.1.0`.
    V0_1_0(tool_plugin::ToolPluginPre<CallState>),
    /// `toolhost:plugin/tool-plugin@0.2.0` or `server-plugin@0.2.0`.
    V0_2_0(ServerPluginPre<CallState>),
}

/// An instance of a [`ToolPre`], in the store it was made in.
pub(super) enum ToolInstance {
    /// Of a 0.1.0 component.
    V0_1_0(tool_plugin::ToolPlugin),
    /// Of a 0.2.0 component.
    V0_2_0(ServerPlugin),
}

impl ToolPre {
    /// `pre` as a component of tool world `world` (what [`check_world`] found).
    ///
    /// Errors: the component lacks an export of that version's world.
    pub(super) fn new(pre: InstancePre<CallState>, world: World) -> wasmtime::Result<ToolPre> {
        Ok(if world.contract() >= ContractVersion::V0_2_0 {
            ToolPre::V0_2_0(ServerPluginPre::new(pre)?)
        } else {
            ToolPre::V0_1_0(tool_plugin::ToolPluginPre::new(pre)?)
        })
    }

    /// The engine it was linked in.
    pub(super) fn engine(&self) -> &wasmtime::Engine {
        match self {
            ToolPre::V0_1_0(pre) => pre.engine(),
            ToolPre::V0_2_0(pre) => pre.engine(),
        }
    }

    /// A new instance in `store` (the component's start code runs).
    pub(super) async fn instantiate(
        &self,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<ToolInstance> {
        Ok(match self {
            ToolPre::V0_1_0(pre) => ToolInstance::V0_1_0(pre.instantiate_async(store).await?),
            ToolPre::V0_2_0(pre) => ToolInstance::V0_2_0(pre.instantiate_async(store).await?),
        })
    }

    /// Whether its contract has the `client` import (0.2.0 on): a call's client
    /// state matters only then.
    pub(super) fn has_client(&self) -> bool {
        matches!(self, ToolPre::V0_2_0(_))
    }

    /// Whether its contract has `resources` and `prompts` exports at all (0.2.0 on).
    pub(super) fn has_offers(&self) -> bool {
        matches!(self, ToolPre::V0_2_0(_))
    }

    /// Whether the component exports `resources`.
    pub(super) fn has_resources(&self) -> bool {
        matches!(self, ToolPre::V0_2_0(pre) if pre.has_resources())
    }

    /// Whether the component exports `prompts`.
    pub(super) fn has_prompts(&self) -> bool {
        matches!(self, ToolPre::V0_2_0(pre) if pre.has_prompts())
    }
}

impl ToolInstance {
    /// `tool.describe`, as 0.2.0 tool specs.
    pub(super) async fn describe(
        &self,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<Vec<v2::ToolSpec>> {
        match self {
            ToolInstance::V0_1_0(b) => {
                let specs = b.toolhost_plugin_tool().call_describe(store).await?;
                Ok(specs.into_iter().map(adapt::tool_spec).collect())
            }
            ToolInstance::V0_2_0(b) => b.tool().call_describe(store).await,
        }
    }

    /// `tool.call`, answered as a 0.2.0 result.
    pub(super) async fn call(
        &self,
        store: &mut Store<CallState>,
        call: v2::ToolCall,
    ) -> wasmtime::Result<Result<v2::ToolOutput, v2::ToolError>> {
        match self {
            ToolInstance::V0_1_0(b) => {
                let call = tool_plugin::exports::toolhost::plugin::tool::ToolCall {
                    tool_call_id: call.tool_call_id,
                    name: call.name,
                    arguments: call.arguments,
                };
                let result = b.toolhost_plugin_tool().call_call(store, &call).await?;
                Ok(result.map(adapt::tool_output).map_err(adapt::tool_error))
            }
            ToolInstance::V0_2_0(b) => b.tool().call_call(store, &call).await,
        }
    }

    /// The instance's `resources` and `prompts` exports; an error (not a trap of
    /// the guest's making) for a contract without them, which routing rules out.
    pub(super) fn server(&self) -> wasmtime::Result<&ServerPlugin> {
        match self {
            ToolInstance::V0_2_0(b) => Ok(b),
            ToolInstance::V0_1_0(_) => Err(wasmtime::Error::msg(
                "the plugin's contract has no resources or prompts",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_webassembly_are_named_so_in_one_line() {
        let e = component_names(b"[plugin]\nid = \"notes\"\n").unwrap_err();
        assert_eq!(
            e,
            "not a WebAssembly file (it does not start with the `\\0asm` header): give the \
             built `.wasm` component"
        );
        assert_eq!(component_names(b"").unwrap_err(), e);
        // A WebAssembly header with nothing after it is still wasmparser's to judge.
        assert_eq!(
            component_names(b"\0asm").unwrap_err(),
            "not a WebAssembly component: unexpected end-of-file (at offset 0x4)"
        );
    }

    #[test]
    fn the_world_is_picked_by_the_tool_export() {
        let names = |imports: &[&str], exports: &[&str]| ComponentNames {
            imports: imports.iter().map(|i| (i.to_string(), false)).collect(),
            exports: exports.iter().map(|e| e.to_string()).collect(),
        };
        let v2 = names(
            &[
                "wasi:io/poll@0.2.12",
                "toolhost:plugin/sessions@0.1.0",
                "toolhost:plugin/content@0.2.0",
                "toolhost:plugin/client@0.2.0",
            ],
            &[
                "toolhost:plugin/tool@0.2.0",
                "toolhost:plugin/resources@0.2.0",
            ],
        );
        assert_eq!(tool_contract(&v2), Some(ContractVersion::V0_2_0));
        assert_eq!(
            check_world(&v2, "p", PluginKind::Tool).unwrap(),
            World::Tool(ContractVersion::V0_2_0)
        );
        let v1 = names(
            &["toolhost:plugin/sessions@0.1.0"],
            &["toolhost:plugin/tool@0.1.0"],
        );
        assert_eq!(
            check_world(&v1, "p", PluginKind::Tool).unwrap(),
            World::Tool(ContractVersion::V0_1_0)
        );
        // A 0.1.0 tool gets no `client`.
        let v1_client = names(
            &["toolhost:plugin/client@0.2.0"],
            &["toolhost:plugin/tool@0.1.0"],
        );
        let e = check_world(&v1_client, "p", PluginKind::Tool).unwrap_err();
        assert_eq!(
            e.to_string(),
            "plugin `p` does not target toolhost:plugin/tool-plugin@0.1.0: it imports \
             toolhost:plugin/client@0.2.0, which toolhost does not provide to this kind of plugin"
        );
        let none = names(&[], &["toolhost:plugin/policy@0.1.0"]);
        let e = check_world(&none, "p", PluginKind::Tool).unwrap_err();
        assert_eq!(
            e.to_string(),
            "plugin `p` does not target toolhost:plugin/tool-plugin of any supported contract \
             (0.1.0, 0.2.0): it does not export toolhost:plugin/tool@0.1.0 or \
             toolhost:plugin/tool@0.2.0 (it exports: toolhost:plugin/policy@0.1.0)"
        );
        assert_eq!(
            check_world(&none, "p", PluginKind::Policy).unwrap(),
            World::Policy
        );
        let e = check_world(&v2, "p", PluginKind::Policy).unwrap_err();
        assert!(e.to_string().contains("policy-plugin@0.1.0"), "{e}");
    }
}
