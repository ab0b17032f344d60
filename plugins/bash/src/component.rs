//! The component glue: `toolhost:plugin/tool-plugin@0.1.0`.

use serde::Deserialize;

wit_bindgen::generate!({
    path: "../../wit/v0.1.0",
    world: "toolhost:plugin/tool-plugin@0.1.0",
    generate_all,
});

use exports::toolhost::plugin::tool::{
    Guest, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec,
};
use toolhost::plugin::sessions::{self, EventKind, StartRequest, StdinMode};

struct Bash;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BashArgs {
    command: String,
    timeout_ms: Option<u64>,
}

impl Guest for Bash {
    fn describe() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "bash".into(),
            description: "Run a shell command in the workspace and return its output.".into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line to run with sh -c."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000}
                },
                "required": ["command"],
                "additionalProperties": false
            })
            .to_string(),
            hints: ToolHints { read_only: false, destructive: true, idempotent: false, open_world: true },
        }]
    }

    fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
        if call.name != "bash" {
            return Err(ToolError::UnknownTool(call.name));
        }
        let args: BashArgs = serde_json::from_str(&call.arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        let id = sessions::start(&StartRequest {
            command: args.command,
            cwd: None,
            env: vec![],
            stdin: StdinMode::Closed,
            timeout_ms: Some(args.timeout_ms.unwrap_or(120_000)),
            shell: None,
            tool_call_id: Some(call.tool_call_id),
        })
        .map_err(|e| ToolError::Failed(format!("{e:?}")))?;
        let sub = sessions::subscribe(&id, 1).map_err(|e| ToolError::Failed(format!("{e:?}")))?;
        let pollable = sub.subscribe();
        let mut out = Vec::new();
        loop {
            pollable.block();
            for ev in sub.next() {
                match ev.kind {
                    EventKind::Output(chunk) => out.extend_from_slice(&chunk.data),
                    EventKind::Exited(status) => {
                        let mut text = String::from_utf8_lossy(&out).into_owned();
                        let is_error = status.code != Some(0);
                        if is_error {
                            text.push_str(&format!(
                                "\n[exit code {:?}, signal {:?}]",
                                status.code, status.signal
                            ));
                        }
                        return Ok(ToolOutput {
                            text,
                            structured: None,
                            is_error,
                        });
                    }
                    _ => {}
                }
            }
        }
    }
}

export!(Bash);
