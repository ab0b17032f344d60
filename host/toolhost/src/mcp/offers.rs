//! The resources, resource templates, prompts and completions that contract
//! 0.2.0 plugins offer, as MCP 2025-11-25 answers them ("Server Features",
//! "Resources" and "Prompts"; "Utilities", "Completion"): the host's merged
//! catalog ([`Host::resources`], [`Host::prompts`], ...) turned into rmcp's
//! result types, and [`RequestError`] turned into JSON-RPC errors
//! (`-32002` Resource not found, `-32602` Invalid params, `-32603` Internal
//! error). The results are built as JSON and read into rmcp's types, so
//! every field keeps MCP's wire name.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Reference,
};
use serde_json::{Map, Value, json};

use toolhost_runtime::{Annotations, Role};
use toolhost_runtime::{CompletionRef, Host, RequestError};

use crate::content::{content_block, resource_contents};

/// Reads result `value` (built from our data) into rmcp type `T`, with
/// `resultType: "complete"` (MCP 2026-07-28 requires it on every result;
/// rmcp drops it again for a legacy peer); a mismatch is an internal error
/// naming `what`.
fn typed<T: serde::de::DeserializeOwned>(what: &str, mut value: Value) -> Result<T, McpError> {
    if let Value::Object(o) = &mut value {
        o.entry("resultType").or_insert_with(|| json!("complete"));
    }
    serde_json::from_value(value)
        .map_err(|e| McpError::internal_error(format!("building the {what} result: {e}"), None))
}

/// Adds `key: value` to `object` when `value` is `Some`.
fn put<T: serde::Serialize>(object: &mut Map<String, Value>, key: &str, value: &Option<T>) {
    if let Some(v) = value {
        object.insert(key.into(), json!(v));
    }
}

fn annotations_json(a: &Option<Annotations>) -> Option<Value> {
    a.as_ref()
        .map(|a| serde_json::to_value(crate::content::annotations(a)).unwrap_or(Value::Null))
}

/// `resources/list`: every resource the plugins list (one page).
pub(crate) fn list_resources(host: &Host) -> Result<ListResourcesResult, McpError> {
    let resources: Vec<Value> = host
        .resources()
        .iter()
        .map(|e| {
            let r = &e.resource;
            let mut o = Map::new();
            o.insert("uri".into(), json!(r.uri));
            o.insert("name".into(), json!(r.name));
            put(&mut o, "title", &r.title);
            put(&mut o, "description", &r.description);
            put(&mut o, "mimeType", &r.mime_type);
            put(&mut o, "size", &r.size);
            put(&mut o, "annotations", &annotations_json(&r.annotations));
            Value::Object(o)
        })
        .collect();
    typed("resources/list", json!({ "resources": resources }))
}

/// `resources/templates/list`: every resource template (one page).
pub(crate) fn list_resource_templates(
    host: &Host,
) -> Result<ListResourceTemplatesResult, McpError> {
    let templates: Vec<Value> = host
        .resource_templates()
        .iter()
        .map(|e| {
            let t = &e.template;
            let mut o = Map::new();
            o.insert("uriTemplate".into(), json!(t.uri_template));
            o.insert("name".into(), json!(t.name));
            put(&mut o, "title", &t.title);
            put(&mut o, "description", &t.description);
            put(&mut o, "mimeType", &t.mime_type);
            put(&mut o, "annotations", &annotations_json(&t.annotations));
            Value::Object(o)
        })
        .collect();
    typed(
        "resources/templates/list",
        json!({ "resourceTemplates": templates }),
    )
}

/// `resources/read`'s result from the contents a plugin returned.
pub(crate) fn read_result(
    contents: &[toolhost_runtime::ResourceContents],
) -> Result<ReadResourceResult, McpError> {
    let contents: Vec<Value> = contents
        .iter()
        .map(|c| serde_json::to_value(resource_contents(c)).unwrap_or(Value::Null))
        .collect();
    typed("resources/read", json!({ "contents": contents }))
}

/// `prompts/list`: every prompt (one page).
pub(crate) fn list_prompts(host: &Host) -> Result<ListPromptsResult, McpError> {
    let prompts: Vec<Value> = host
        .prompts()
        .iter()
        .map(|e| {
            let p = &e.prompt;
            let mut o = Map::new();
            o.insert("name".into(), json!(p.name));
            put(&mut o, "title", &p.title);
            put(&mut o, "description", &p.description);
            let arguments: Vec<Value> = p
                .arguments
                .iter()
                .map(|a| {
                    let mut o = Map::new();
                    o.insert("name".into(), json!(a.name));
                    put(&mut o, "title", &a.title);
                    put(&mut o, "description", &a.description);
                    o.insert("required".into(), json!(a.required));
                    Value::Object(o)
                })
                .collect();
            o.insert("arguments".into(), json!(arguments));
            Value::Object(o)
        })
        .collect();
    typed("prompts/list", json!({ "prompts": prompts }))
}

/// `prompts/get`'s result from the prompt a plugin rendered.
pub(crate) fn prompt_result(
    result: &toolhost_runtime::PromptResult,
) -> Result<GetPromptResult, McpError> {
    let messages: Vec<Value> = result
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({
                "role": role,
                "content": serde_json::to_value(content_block(&m.content)).unwrap_or(Value::Null),
            })
        })
        .collect();
    let mut o = Map::new();
    put(&mut o, "description", &result.description);
    o.insert("messages".into(), json!(messages));
    typed("prompts/get", Value::Object(o))
}

/// The (name, value) pairs of a JSON object of arguments; non-string values
/// are refused with `-32602` (MCP prompt arguments are strings).
pub(crate) fn string_arguments(
    arguments: Option<&Map<String, Value>>,
) -> Result<Vec<(String, String)>, McpError> {
    let mut out = Vec::new();
    for (name, value) in arguments.into_iter().flatten() {
        match value {
            Value::String(s) => out.push((name.clone(), s.clone())),
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "argument `{}` must be a string, not {}",
                        toolhost_runtime::echo_name(name),
                        toolhost_runtime::echo_message(&other.to_string())
                    ),
                    None,
                ));
            }
        }
    }
    Ok(out)
}

/// `completion/complete` on the host's catalog.
pub(crate) async fn complete(
    host: &Host,
    request: CompleteRequestParams,
) -> Result<CompleteResult, McpError> {
    let reference = match &request.r#ref {
        Reference::Prompt(p) => CompletionRef::Prompt(p.name.clone()),
        Reference::Resource(r) => CompletionRef::Resource(r.uri.clone()),
        other => {
            return Err(McpError::invalid_params(
                format!(
                    "unknown completion reference {}",
                    toolhost_runtime::echo_name(&format!("{other:?}"))
                ),
                None,
            ));
        }
    };
    let context: Vec<(String, String)> = request
        .context
        .and_then(|c| c.arguments)
        .map(|a| a.into_iter().collect())
        .unwrap_or_default();
    let completions = host
        .complete(
            &reference,
            &request.argument.name,
            &request.argument.value,
            context,
        )
        .await
        .map_err(mcp_error)?;
    let has_more = completions.total > completions.values.len();
    typed(
        "completion/complete",
        json!({"completion": {
            "values": completions.values,
            "total": completions.total,
            "hasMore": has_more,
        }}),
    )
}

/// A [`RequestError`] as the JSON-RPC error MCP gives it.
pub(crate) fn mcp_error(e: RequestError) -> McpError {
    match &e {
        RequestError::ResourceNotFound { uri, .. } => {
            McpError::resource_not_found(e.to_string(), Some(json!({ "uri": uri })))
        }
        RequestError::UnknownPrompt { .. }
        | RequestError::UnknownReference(_)
        | RequestError::InvalidArguments { .. } => McpError::invalid_params(e.to_string(), None),
        RequestError::Failed { .. }
        | RequestError::ForeignContents { .. }
        | RequestError::Plugin(_) => McpError::internal_error(e.to_string(), None),
    }
}
