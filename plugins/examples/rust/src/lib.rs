//! Example toolhost tool plugin in Rust (contract v0.1.0), built by
//! `plugins/examples/rust/build.sh`. Two tools:
//!
//! - `greet` (pure): `{"name": "Ada"}` → `Hello, Ada!`;
//! - `now`: runs `date -u` through the host's `sessions` and waits for it
//!   with a timeout (`run_and_wait`), returning its output. The manifest
//!   (`example_rust.toml`) grants exactly `date -u`.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_plugin_sdk::{
    Guest, StartRequest, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec, describe_error,
    run_and_wait, sessions,
};

/// How long `now` waits for `date` before giving up.
const WAIT: Duration = Duration::from_secs(5);

struct Example;

impl Guest for Example {
    fn describe() -> Vec<ToolSpec> {
        vec![
            ToolSpec::new(
                "greet",
                "Greets someone by name. Pure: runs nothing.",
                r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#,
            ),
            ToolSpec::new(
                "now",
                "Runs `date -u` on the host and returns the current UTC time.",
                r#"{"type":"object","properties":{}}"#,
            )
            .hints(ToolHints::READ_ONLY_PROCESS),
        ]
    }

    fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
        let args: Value = serde_json::from_str(&call.arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        match call.name.as_str() {
            "greet" => {
                let name = args["name"]
                    .as_str()
                    .ok_or_else(|| ToolError::InvalidArguments("`name` must be a string".into()))?;
                Ok(ToolOutput::text(format!("Hello, {name}!"))
                    .with_structured(json!({ "greeting": format!("Hello, {name}!") }).to_string()))
            }
            "now" => now(&call.tool_call_id),
            other => Err(ToolError::UnknownTool(other.into())),
        }
    }
}

fn now(tool_call_id: &str) -> Result<ToolOutput, ToolError> {
    let request = StartRequest::new("date -u").for_call(tool_call_id);
    // A refusal (no exec grant, the policy denied it, nobody approved an
    // `ask`) is an `Err` here: show it to the agent as an error result.
    let outcome = match run_and_wait(request, WAIT) {
        Ok(outcome) => outcome,
        Err(err) => return Ok(ToolOutput::error(describe_error(&err))),
    };
    if outcome.timed_out {
        let _ = sessions::kill(&outcome.id, None);
        return Ok(ToolOutput::error(format!(
            "`date` did not finish within {WAIT:?}"
        )));
    }
    let text = outcome.snapshot.output_tail.trim_end().to_owned();
    let structured = json!({ "exit_code": outcome.exit_code(), "session": outcome.id });
    let out = if outcome.success() {
        ToolOutput::text(text)
    } else {
        ToolOutput::error(text)
    };
    Ok(out.with_structured(structured.to_string()))
}

toolhost_plugin_sdk::export!(Example);
