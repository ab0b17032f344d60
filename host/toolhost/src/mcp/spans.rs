//! The SERVER span of an MCP request, as the OpenTelemetry semantic
//! conventions for MCP name it (docs/operations.md#traces-and-logs): span
//! name `{mcp.method.name} {target}` (`tools/call bash`), kind `SERVER`, the
//! client's W3C trace context as its parent, and the attributes
//! `mcp.method.name`, `mcp.protocol.version`, `mcp.session.id`,
//! `jsonrpc.request.id`, `gen_ai.tool.name`, `gen_ai.operation.name`
//! (`execute_tool`), `network.transport` (`tcp` on HTTP, `pipe` on stdio),
//! `network.protocol.name` / `.version`, `client.address` / `.port`, and on
//! failure `error.type` (`tool_error` for an `isError` result, the JSON-RPC
//! code otherwise) with `rpc.response.status_code` and an error status.
//!
//! The parent is read from the request's `_meta` `traceparent` /
//! `tracestate` (MCP 2026-07-28, where the keys are unprefixed), else from
//! the HTTP request's headers of the same names. A span nobody records
//! (no exporter, logs below `info`) costs a callsite check: nothing here is
//! computed for it.

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, ErrorData};
use rmcp::service::RequestContext;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The span of a `tools/call` of tool `tool` (the served name), with its
/// attributes from `context`; its parent the client's trace context.
pub(crate) fn tools_call(context: &RequestContext<RoleServer>, tool: &str) -> tracing::Span {
    let span = tracing::info_span!(
        target: "toolhost::mcp",
        "mcp.request",
        otel.name = %format_args!("tools/call {tool}"),
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = "tools/call",
        mcp.protocol.version = Empty,
        mcp.session.id = Empty,
        jsonrpc.request.id = %context.id,
        gen_ai.tool.name = tool,
        gen_ai.operation.name = "execute_tool",
        network.transport = Empty,
        network.protocol.name = Empty,
        network.protocol.version = Empty,
        client.address = Empty,
        client.port = Empty,
        "error.type" = Empty,
        rpc.response.status_code = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(version) = context.protocol_version() {
        span.record("mcp.protocol.version", version.to_string());
    }
    let parts = context.extensions.get::<http::request::Parts>();
    match parts {
        Some(parts) => {
            span.record("network.transport", "tcp");
            span.record("network.protocol.name", "http");
            span.record("network.protocol.version", "1.1");
            if let Some(session) = header(parts, "mcp-session-id") {
                span.record("mcp.session.id", session);
            }
            if let Some(a) = crate::mcp::identity::Authenticated::of(parts) {
                span.record("client.address", a.remote.ip().to_string());
                span.record("client.port", i64::from(a.remote.port()));
            }
        }
        None => {
            span.record("network.transport", "pipe");
        }
    }
    let meta = |key: &str| context.meta.get(key).and_then(|v| v.as_str());
    let carrier = match meta("traceparent") {
        Some(parent) => Some((parent, meta("tracestate"))),
        None => parts.and_then(|p| Some((header(p, "traceparent")?, header(p, "tracestate")))),
    };
    if let Some((parent, state)) = carrier {
        let _ = span.set_parent(parent_context(parent, state));
    }
    span
}

/// Records on `span` how its `tools/call` ended: an `isError` result is
/// `error.type` `tool_error`; a JSON-RPC error its code, as `error.type` and
/// `rpc.response.status_code`, with the message as the status description.
pub(crate) fn record_tools_call(
    span: &tracing::Span,
    result: &Result<CallToolResponse, ErrorData>,
) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "error");
        }
        Ok(_) => {}
        Err(e) => {
            let code = e.code.0.to_string();
            span.record("error.type", code.as_str());
            span.record("rpc.response.status_code", code.as_str());
            span.record("otel.status_code", "error");
            span.record("otel.status_description", e.message.as_ref());
        }
    }
}

/// The value of header `name` of `parts`, when it is text.
fn header<'a>(parts: &'a http::request::Parts, name: &str) -> Option<&'a str> {
    parts.headers.get(name)?.to_str().ok()
}

/// The remote context of a W3C `traceparent` (and `tracestate`), as the
/// SDK's trace-context propagator reads them; an invalid one gives an
/// empty context (the span is then a root).
fn parent_context(traceparent: &str, tracestate: Option<&str>) -> opentelemetry::Context {
    use opentelemetry::propagation::TextMapPropagator as _;
    struct Carrier<'a>(&'a str, Option<&'a str>);
    impl opentelemetry::propagation::Extractor for Carrier<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            match key {
                "traceparent" => Some(self.0),
                "tracestate" => self.1,
                _ => None,
            }
        }
        fn keys(&self) -> Vec<&str> {
            let mut keys = vec!["traceparent"];
            keys.extend(self.1.map(|_| "tracestate"));
            keys
        }
    }
    opentelemetry_sdk::propagation::TraceContextPropagator::new()
        .extract(&Carrier(traceparent, tracestate))
}
