//! What one incoming JSON-RPC message is, before rmcp sees it ([`classify`]:
//! JSON-RPC 2.0 §4-5 and MCP "Base Protocol"; the codes are in the docs of
//! `super`), and the cancellations a transport records on the way
//! ([`record_cancel`], [`CancelledSet`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::RequestId;
use rmcp::service::RxJsonRpcMessage;
use serde_json::{Value, json};
use toolhost_runtime::{echo_message, echo_name};

use super::{codes, era};

/// The client-to-server request methods of MCP 2025-11-25 (without the
/// experimental `tasks/*`) and those 2026-07-28 added.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "server/discover",
    "subscriptions/listen",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

/// Requests the client cancelled (`notifications/cancelled`), recorded by the
/// transport before rmcp sees the notification, so the handler can tell a
/// cancel (kill the call) from a client that went away (let it run). Keys:
/// [`cancel_key`].
pub(crate) type CancelledSet = Arc<Mutex<HashSet<String>>>;

/// Longest [`cancel_key`] recorded (512 bytes: a session id and a request
/// id; MCP ids are short).
const MAX_CANCEL_KEY_BYTES: usize = 512;

/// Most cancellations remembered at once (4,096); past it the set is cleared.
const MAX_CANCELLED: usize = 4096;

/// The key of request `id` of session `session` in a [`CancelledSet`]:
/// the session id (`""` on stdio), a newline, the id as compact JSON.
pub(crate) fn cancel_key(session: &str, id: &RequestId) -> String {
    format!(
        "{session}\n{}",
        serde_json::to_string(id).unwrap_or_default()
    )
}

/// Records `message` in `cancelled` if it is a `notifications/cancelled`.
pub(crate) fn record_cancel(
    cancelled: &CancelledSet,
    session: &str,
    message: &RxJsonRpcMessage<RoleServer>,
) {
    if let rmcp::model::JsonRpcMessage::Notification(n) = message
        && let rmcp::model::ClientNotification::CancelledNotification(c) = &n.notification
        && let Some(id) = &c.params.request_id
    {
        let key = cancel_key(session, id);
        // Request ids this long are not ours to cancel; and the set stays
        // bounded: cancels for requests that never ran or already ended
        // would otherwise pile up (oldest forgotten first would need an
        // order; clearing is enough: a lost mark only lets a call run on).
        if key.len() > MAX_CANCEL_KEY_BYTES {
            return;
        }
        let mut set = cancelled.lock().unwrap_or_else(|e| e.into_inner());
        if set.len() >= MAX_CANCELLED {
            set.clear();
        }
        set.insert(key);
    }
}

/// What one incoming JSON-RPC text is, by [`classify`].
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A well-formed message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Not acceptable: answer with `response`, a JSON-RPC error response whose
    /// code is `code` (`-32700`, `-32600`, `-32602`, or `-32601` for a
    /// method a modern request may not use).
    Reject { code: i32, response: Value },
    /// A malformed notification or response: dropped (JSON-RPC 2.0 §4.1: a
    /// notification is never answered), with `why` logged.
    Ignore(String),
}

fn reject(id: Value, code: i32, message: String) -> Incoming {
    tracing::debug!(code, "answering a malformed message: {message}");
    Incoming::Reject {
        code,
        response: crate::jsonrpc::error(&id, code, message),
    }
}

/// Classifies one message's bytes (a stdio line, an HTTP body) as JSON-RPC
/// 2.0 §4-5 and MCP "Base Protocol" define messages; see the module docs for
/// the codes. A request for a method 2026-07-28 removed
/// ([`era::REMOVED_METHODS`]) whose `_meta` names a supported modern version
/// is `-32601`.
pub(crate) fn classify(bytes: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return reject(Value::Null, codes::PARSE_ERROR, format!("Parse error: {e}")),
    };
    let Value::Object(obj) = &value else {
        let what = if value.is_array() {
            "batches are not supported (MCP 2025-06-18 removed JSON-RPC batching)"
        } else {
            "a message must be a JSON object"
        };
        return reject(
            Value::Null,
            codes::INVALID_REQUEST,
            format!("Invalid Request: {what}"),
        );
    };
    let has_id = obj.contains_key("id");
    let reply_id = match obj.get("id") {
        Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
        _ => Value::Null,
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return reject(
            reply_id,
            codes::INVALID_REQUEST,
            "Invalid Request: `jsonrpc` must be \"2.0\"".into(),
        );
    }
    let method = obj.get("method");
    if method.is_some_and(|m| !m.is_string()) {
        return reject(
            reply_id,
            codes::INVALID_REQUEST,
            "Invalid Request: `method` must be a string".into(),
        );
    }
    if method.is_some()
        && let Some(bad) = obj.get("id")
        && !matches!(bad, Value::String(_) | Value::Number(_))
    {
        return reject(
            Value::Null,
            codes::INVALID_REQUEST,
            "Invalid Request: `id` must be a string or a number (MCP: never null)".into(),
        );
    }
    // What the error texts below need, kept before the value moves into the
    // typed message (rmcp's types, converted from the one parse above).
    let method = method.and_then(Value::as_str).map(str::to_string);
    if has_id
        && let Some(m) = method.as_deref()
        && era::REMOVED_METHODS.contains(&m)
        && let Some(version) = era::modern_version_of(obj)
    {
        // Before rmcp's parse: `initialize` with modern `_meta` would
        // otherwise be "Invalid params" for lacking the handshake's fields.
        return reject(
            reply_id,
            codes::METHOD_NOT_FOUND,
            format!("Method not found: `{m}` was removed in MCP {version}"),
        );
    }
    let is_response = obj.contains_key("result") || obj.contains_key("error");
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(rmcp::model::JsonRpcMessage::Request(r))
            if matches!(&r.request, rmcp::model::ClientRequest::CustomRequest(c)
                if KNOWN_METHODS.contains(&c.method.as_str())) =>
        {
            // rmcp falls back to a custom request when a known method's
            // params do not fit; that is Invalid params, not an unknown method.
            let method = r.request.method().to_string();
            reject(
                reply_id,
                codes::INVALID_PARAMS,
                format!("Invalid params for `{}`", echo_name(&method)),
            )
        }
        Ok(message) => Incoming::Message(Box::new(message)),
        // What the client sent, as an error may repeat it (`echo_name`).
        Err(e) => match (method.map(|m| echo_name(&m)), echo_message(&e.to_string())) {
            (Some(method), e) if has_id => reject(
                reply_id,
                codes::INVALID_PARAMS,
                format!("Invalid params for `{method}`: {e}"),
            ),
            (None, e) if has_id && is_response => {
                Incoming::Ignore(format!("a malformed response from the client: {e}"))
            }
            (Some(method), e) if !has_id => {
                Incoming::Ignore(format!("a malformed `{method}` notification: {e}"))
            }
            (_, e) => reject(
                reply_id,
                codes::INVALID_REQUEST,
                format!("Invalid Request: {e}"),
            ),
        },
    }
}
