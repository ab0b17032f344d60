//! What one plugin call is and what it may reach: the identity of a tool call
//! ([`CallInfo`]) and the host services its imports reach ([`Services`]).
//! Below both the plugin store and the contract bindings, so neither depends on
//! the other.

use std::sync::Arc;

use toolhost_process::{Caller, Principal, Sessions};

use crate::manifest::Manifest;
use crate::permissions::{Permissions, Requester};

/// The host services a call can reach through its imports.
pub struct Services {
    /// The process session engine.
    pub sessions: Sessions,
    /// The permission pipeline every `sessions.start` passes.
    pub permissions: Permissions,
}

/// What one call is: which plugin, which tool call.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// The calling plugin's id.
    pub plugin: Arc<str>,
    /// The calling plugin's manifest (its exec grant is a step of the permission
    /// pipeline).
    pub manifest: Arc<Manifest>,
    /// The tool being called (empty for `describe` and policy calls).
    pub tool: String,
    /// The host-assigned tool call id (empty for `describe` and policy calls).
    pub tool_call_id: String,
    /// Who the tool call runs for ([`crate::CallRequest::principal`]).
    pub principal: Option<Principal>,
}

impl CallInfo {
    /// A call of no tool (`describe`, a policy call) by the plugin of `manifest`.
    pub fn plugin_only(plugin: Arc<str>, manifest: Arc<Manifest>) -> CallInfo {
        CallInfo {
            plugin,
            manifest,
            tool: String::new(),
            tool_call_id: String::new(),
            principal: None,
        }
    }

    /// Who the plugin is, to the session engine: itself, for the call's
    /// principal when it has one.
    pub fn caller(&self) -> Caller {
        match &self.principal {
            Some(principal) if !self.tool_call_id.is_empty() => Caller::PluginFor {
                plugin: self.plugin.clone(),
                principal: principal.clone(),
                tool_call_id: self.tool_call_id.as_str().into(),
            },
            _ => Caller::Plugin(self.plugin.clone()),
        }
    }

    /// Who asks, as the permission pipeline sees it.
    pub fn requester(&self) -> Requester<'_> {
        Requester {
            plugin: &self.plugin,
            tool: &self.tool,
            tool_call_id: &self.tool_call_id,
            manifest: &self.manifest,
        }
    }
}
