//! Who is calling the engine: the host or a plugin, and what each may see.

use std::sync::Arc;

use super::session::Session;
#[cfg(doc)]
use crate::SessionError;

/// Who is calling: the host (sees every session) or a plugin (sees only the sessions
/// it started; another plugin's id answers [`SessionError::UnknownSession`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The host itself (front doors, control clients, the embedder).
    Host,
    /// A plugin, by its name.
    Plugin(Arc<str>),
}

impl Caller {
    pub(super) fn owner(&self) -> Option<Arc<str>> {
        match self {
            Caller::Host => None,
            Caller::Plugin(name) => Some(name.clone()),
        }
    }

    pub(super) fn sees(&self, session: &Session) -> bool {
        match self {
            Caller::Host => true,
            Caller::Plugin(name) => session.owner.as_deref() == Some(&**name),
        }
    }
}
