//! `toolhost-bench-mcp`: the baseline of P8 and P9 (BENCHMARKS.md). A minimal MCP
//! server on stdio built on rmcp, the SDK `toolhost serve` is built on, with one
//! tool `greet` that answers what the Rust example plugin's `greet` answers
//! (`{"name": "Ada"}` → text `Hello, Ada!` and structured `{"greeting": ...}`), and
//! nothing else: no plugin, no event log, no permission pipeline.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// The server: one tool, no state.
struct Greeter {
    tool: Tool,
}

impl ServerHandler for Greeter {
    fn get_info(&self) -> InitializeResult {
        let capabilities: ServerCapabilities =
            serde_json::from_value(json!({ "tools": {} })).unwrap_or_default();
        InitializeResult::new(capabilities).with_server_info(Implementation::new(
            "toolhost-bench-mcp",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "greet" {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        }
        let name = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("name"))
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params("`name` must be a string", None))?;
        let greeting = format!("Hello, {name}!");
        let mut result = CallToolResult::success(vec![ContentBlock::text(greeting.clone())]);
        result.structured_content = Some(json!({ "greeting": greeting }));
        Ok(result.into())
    }
}

fn main() -> std::process::ExitCode {
    let schema = json!({
        "type": "object",
        "properties": { "name": { "type": "string" } },
        "required": ["name"]
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object")
    };
    let server = Greeter {
        tool: Tool::new(
            "greet",
            "Greets someone by name. Pure: runs nothing.",
            Arc::new(schema),
        ),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("toolhost-bench-mcp: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async {
        let running = server
            .serve((tokio::io::stdin(), tokio::io::stdout()))
            .await
            .map_err(|e| e.to_string())?;
        running.waiting().await.map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    });
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolhost-bench-mcp: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
