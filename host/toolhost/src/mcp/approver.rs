//! A policy `ask` of a legacy (2025-11-25) call, sent to the MCP client that
//! made the call as `elicitation/create` ([`ElicitationApprover`]); modern
//! calls ask through MRTR instead (`mrtr.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::RequestId;
use rmcp::service::Peer;
use serde_json::json;

use super::{client, mrtr};

/// The MCP clients as one permission approver (an [`toolhost_runtime::Approver`]
/// that `Permissions::check_start` asks after the policy plugin's `ask`,
/// docs/permissions.md#approvers): a policy `ask`
/// during a tool call goes to the client that made that call (its stdio
/// connection or its HTTP session), when that client declared the
/// `elicitation` capability (form mode, MCP 2025-11-25 "Client Features",
/// "Elicitation", `elicitation/create`). The form has one required field,
/// `decision`, an enum of the ACP option kinds (`allow_once`,
/// `allow_always`, `reject_once`, `reject_always`).
///
/// `accept` answers with that decision, `decline` is `reject_once`,
/// `cancel` is `cancelled`. A call from a client without the capability, a
/// failed request or a malformed answer leaves the question to the next
/// approver (none: deny). An unanswered elicitation times out after
/// [`ELICITATION_TIMEOUT`].
#[derive(Default)]
pub struct ElicitationApprover {
    /// The client of each call in progress (by tool call id) that can answer,
    /// and the id of its `tools/call` request (whose SSE stream carries the
    /// ask on HTTP).
    routes: Mutex<HashMap<String, (Peer<RoleServer>, RequestId)>>,
}

/// How long an elicitation waits for the person at the MCP client (5 min).
pub const ELICITATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Removes a call's route when dropped (the call settled).
pub(super) struct Route {
    approver: Option<(Arc<ElicitationApprover>, String)>,
}

impl Route {
    /// No route: the call's asks go to the next approver.
    pub(super) fn none() -> Route {
        Route { approver: None }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Some((approver, id)) = self.approver.take() {
            approver
                .routes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        }
    }
}

impl ElicitationApprover {
    /// Sends the asks of call `tool_call_id` to `peer` until the returned
    /// guard is dropped, if `peer` declared form elicitation.
    pub(super) fn route(
        self: &Arc<Self>,
        tool_call_id: &str,
        peer: &Peer<RoleServer>,
        origin: &RequestId,
    ) -> Route {
        if !peer
            .supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Form)
        {
            return Route { approver: None };
        }
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tool_call_id.to_string(), (peer.clone(), origin.clone()));
        Route {
            approver: Some((self.clone(), tool_call_id.to_string())),
        }
    }

    /// The form's message for `request`: the host's permission question
    /// (`toolhost_runtime::permission_text`: the plugin, tool and call, the
    /// policy's prompt, the program, the whole command, cwd, shell,
    /// environment names and stdin, each escaped), in a shape no plugin's
    /// own elicitation can take (`toolhost_runtime::plugin_question_text`).
    pub(crate) fn message(request: &toolhost_runtime::ApprovalRequest) -> String {
        toolhost_runtime::permission_text(request)
    }

    /// The form's schema: one required `decision`, an enum of the ACP
    /// option kinds.
    pub(crate) fn schema() -> Option<rmcp::model::ElicitationSchema> {
        serde_json::from_value(json!({
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "enum": ["allow_once", "allow_always", "reject_once", "reject_always"],
                    "enumNames": ["Allow once", "Allow always", "Reject once", "Reject always"]
                }
            },
            "required": ["decision"]
        }))
        .ok()
    }
}

impl toolhost_runtime::Approver for ElicitationApprover {
    fn name(&self) -> &str {
        "mcp-elicitation"
    }

    fn ask<'a>(
        &'a self,
        request: &'a toolhost_runtime::ApprovalRequest,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<Output = Option<toolhost_runtime::ApprovalOutcome>> + Send + 'a,
        >,
    > {
        use rmcp::model::ElicitRequestParams;
        Box::pin(async move {
            let (peer, origin) = self
                .routes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&request.tool_call_id)
                .cloned()?;
            let message = Self::message(request);
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: Self::schema()?,
            };
            let result = match client::elicit_for(&peer, &origin, params, ELICITATION_TIMEOUT).await
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("elicitation failed; trying the next approver: {e}");
                    return None;
                }
            };
            mrtr::outcome_of(&result)
        })
    }
}
