//! Which MCP era a request belongs to, and what the stdio transport does
//! with a message before a lifecycle is chosen (MCP 2026-07-28,
//! "Versioning and Compatibility", "Backward Compatibility with
//! Initialization-Based Versions").
//!
//! toolhost is a dual-era server: a *legacy* client (2025-11-25 and earlier)
//! opens with `initialize` and gets a session scoped to the stdio process or
//! the HTTP session; a *modern* client (2026-07-28) sends no handshake and
//! carries `io.modelcontextprotocol/protocolVersion` and
//! `io.modelcontextprotocol/clientCapabilities` in every request's `_meta`,
//! and each such request is served on its own. rmcp decides the era of each
//! request ([`rmcp::service::RequestContext::protocol_version`]: the
//! request's own `_meta` first, then the session's `initialize`); on stdio,
//! [`open_stdio`] says what happens to a message before either lifecycle is
//! open, so that a legacy client keeps today's behaviour (only `ping` before
//! `initialize`) while a modern client's first request, or its
//! `server/discover` probe ("stdio: Backward Compatibility"), reaches rmcp.

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, GetMeta, JsonRpcMessage, ProtocolVersion};
use rmcp::service::{RequestContext, RxJsonRpcMessage};
use serde_json::{Value, json};

use super::{SUPPORTED_PROTOCOL_VERSIONS, codes};
use crate::jsonrpc;

/// Whether `version` is one of the modern revisions (2026-07-28 and later:
/// no `initialize` handshake).
pub(crate) fn is_modern_version(version: &ProtocolVersion) -> bool {
    !version.has_initialize()
}

/// The request methods MCP 2026-07-28 removed ("Key Changes": the
/// handshake, `ping`, `logging/setLevel`, and `resources/subscribe` /
/// `unsubscribe`, replaced by `subscriptions/listen`): `-32601` (HTTP `404`)
/// for a request whose `_meta` names a modern version.
pub(crate) const REMOVED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The supported modern version a raw request object's
/// `params._meta["io.modelcontextprotocol/protocolVersion"]` names, if any.
pub(crate) fn modern_version_of(request: &serde_json::Map<String, Value>) -> Option<&str> {
    let version = request
        .get("params")?
        .get("_meta")?
        .get("io.modelcontextprotocol/protocolVersion")?
        .as_str()?;
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .any(|v| v.as_str() == version && is_modern_version(v))
        .then_some(version)
}

/// Whether the request of `context` is served under a modern revision: its
/// `_meta` names 2026-07-28 or later (a legacy session's requests name
/// nothing, or a legacy version).
pub(crate) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| is_modern_version(&v))
}

/// What the stdio transport does with one message while no lifecycle is open
/// (no `initialize` yet, and no modern request rmcp accepted).
#[derive(Debug)]
pub(crate) enum Opening {
    /// Hand it to rmcp; `opens` is whether rmcp leaves its pre-lifecycle
    /// loop with it (an `initialize`, or a request other than
    /// `server/discover` whose `_meta` is complete and names a supported
    /// modern version). Anything else rmcp answers itself (`server/discover`, a
    /// missing `_meta` key: `-32602`, an unsupported version: `-32022`) and
    /// keeps waiting.
    Pass { opens: bool },
    /// Answer with this response and drop the message.
    Answer(Value),
    /// Drop it (a notification or a response before any lifecycle).
    Drop,
}

/// The decision for `message` before a lifecycle is open:
///
/// - `initialize`: passed; it opens the legacy lifecycle.
/// - `ping` without a protocol version in `_meta`: `{}`, as 2025-11-25
///   allows before `initialize`. With one: `-32022` if toolhost does not
///   support it, `-32601` if it is modern (2026-07-28 removed `ping`),
///   else `{}`.
/// - `server/discover`, or any request whose `_meta` names a modern or an
///   unsupported protocol version: passed to rmcp (see [`Opening::Pass`]).
/// - Any other request (no `_meta` protocol version, or a supported legacy
///   one such as 2025-11-25, whose lifecycle opens only with `initialize`):
///   `-32600`, naming both ways to open.
/// - Notifications and responses: dropped (rmcp would end the connection on
///   them here).
pub(crate) fn open_stdio(message: &RxJsonRpcMessage<RoleServer>) -> Opening {
    let JsonRpcMessage::Request(r) = message else {
        return Opening::Drop;
    };
    let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
    let meta = r.request.get_meta();
    let version = meta.protocol_version();
    match &r.request {
        ClientRequest::InitializeRequest(_) => Opening::Pass { opens: true },
        ClientRequest::PingRequest(_) => match version {
            Some(v) if !SUPPORTED_PROTOCOL_VERSIONS.contains(&v) => {
                Opening::Answer(unsupported_version(&id, &v))
            }
            Some(v) if is_modern_version(&v) => Opening::Answer(jsonrpc::error(
                &id,
                codes::METHOD_NOT_FOUND,
                format!("Method not found: `ping` was removed in MCP {v}"),
            )),
            _ => Opening::Answer(jsonrpc::result(&id, json!({}))),
        },
        ClientRequest::DiscoverRequest(_) => Opening::Pass { opens: false },
        request => match version {
            Some(v) if !SUPPORTED_PROTOCOL_VERSIONS.contains(&v) || is_modern_version(&v) => {
                Opening::Pass {
                    opens: SUPPORTED_PROTOCOL_VERSIONS.contains(&v)
                        && meta
                            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                            .is_empty(),
                }
            }
            _ => {
                let method = request.method().to_string();
                tracing::debug!(%method, "a request before `initialize` without a modern protocol version");
                Opening::Answer(jsonrpc::error(
                    &id,
                    codes::INVALID_REQUEST,
                    format!(
                        "Invalid Request: `{method}` before `initialize`; the server is not \
                         initialized yet (MCP 2025-11-25 lifecycle: only `ping` may precede \
                         it). A 2026-07-28 client carries \
                         `io.modelcontextprotocol/protocolVersion` and \
                         `io.modelcontextprotocol/clientCapabilities` in every request's \
                         `_meta` instead"
                    ),
                ))
            }
        },
    }
}

/// The revision's `UnsupportedProtocolVersionError` (`-32022`, data
/// `{supported, requested}`) for request `id` (MCP 2026-07-28,
/// "Versioning and Compatibility", "Protocol Version Negotiation").
pub(crate) fn unsupported_version(id: &Value, requested: &ProtocolVersion) -> Value {
    let error = rmcp::ErrorData::unsupported_protocol_version(
        requested.clone(),
        SUPPORTED_PROTOCOL_VERSIONS,
    );
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}
