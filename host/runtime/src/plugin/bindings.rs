//! A tool plugin's linked component ([`ToolPre`]) and its instances
//! ([`ToolInstance`]) whatever contract version it targets, answering in the newest
//! contract's types: the one place the tool path tells versions apart. A 0.1.0
//! plugin's specs and results go through [`crate::contract::v0_1_0::adapt`]; a 0.2.0
//! plugin may also export `resources` and `prompts` (the `server-plugin` world).

use std::future::Future;
use std::pin::Pin;

use wasmtime::Store;
use wasmtime::component::InstancePre;

use super::CallState;
use crate::contract::v0_1_0::{adapt, tool_plugin};
use crate::contract::v0_2_0::{self as v2, ServerPlugin, ServerPluginPre};
use toolhost_manifest::ContractVersion;

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
    /// `pre` as a component of contract `contract` (what `check_world` found).
    ///
    /// Errors: the component lacks an export of that version's world.
    pub(super) fn new(
        pre: InstancePre<CallState>,
        contract: ContractVersion,
    ) -> wasmtime::Result<ToolPre> {
        Ok(if contract >= ContractVersion::V0_2_0 {
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
