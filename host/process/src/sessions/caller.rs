//! Who is calling the engine: the host or a plugin, for whom, and what each may see.

use std::sync::Arc;

use super::session::Session;
#[cfg(doc)]
use crate::SessionError;

/// Who a plugin's call runs for: an identity of a front door (a bearer
/// token's name, `stdio`, `local`), the owner of the background sessions the
/// call starts. Another principal's sessions are invisible to it (as another
/// plugin's are) unless it is `admin`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The identity's name.
    pub name: Arc<str>,
    /// Whether it sees every principal's sessions.
    pub admin: bool,
}

/// Who is calling: the host (sees every session) or a plugin (sees only the sessions
/// it started; another plugin's id answers [`SessionError::UnknownSession`]), and,
/// for a plugin running a tool call, the [`Principal`] it runs for (sees only the
/// sessions the plugin started for that principal, or for none).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The host itself (front doors, control clients, the embedder).
    Host,
    /// A plugin, by its name, for no principal in particular.
    Plugin(Arc<str>),
    /// A plugin running tool call `tool_call_id` for `principal`.
    PluginFor {
        /// The plugin's name.
        plugin: Arc<str>,
        /// Who the call runs for.
        principal: Principal,
        /// The tool call (the `tc_…` id), recorded as the session's
        /// `started_by`.
        tool_call_id: Arc<str>,
    },
}

impl Caller {
    /// The plugin calling, `None` for the host.
    pub fn plugin(&self) -> Option<&Arc<str>> {
        match self {
            Caller::Host => None,
            Caller::Plugin(name) | Caller::PluginFor { plugin: name, .. } => Some(name),
        }
    }

    /// The principal the call runs for, if any.
    pub fn principal(&self) -> Option<&Principal> {
        match self {
            Caller::PluginFor { principal, .. } => Some(principal),
            _ => None,
        }
    }

    /// The tool call the caller runs, if it said.
    pub(super) fn tool_call(&self) -> Option<Arc<str>> {
        match self {
            Caller::PluginFor { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        }
    }

    pub(super) fn owner(&self) -> Option<Arc<str>> {
        self.plugin().cloned()
    }

    pub(super) fn sees(&self, session: &Session) -> bool {
        match self {
            Caller::Host => true,
            Caller::Plugin(name) => session.owner.as_deref() == Some(&**name),
            Caller::PluginFor {
                plugin, principal, ..
            } => {
                session.owner.as_deref() == Some(&**plugin)
                    && (principal.admin
                        || session
                            .principal
                            .as_ref()
                            .is_none_or(|p| p.name == principal.name))
            }
        }
    }
}
