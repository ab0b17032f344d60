//! The tools, one function each; [`call`] dispatches by name.

use std::time::Duration;

use serde_json::Value;
use toolhost_plugin_sdk::v0_2::{
    self, ClientError, ContentBlock, ElicitResponse, LogLevel, ToolCall, ToolError, ToolOutput,
    ToolSpec, client,
};

use crate::media::{RED_PIXEL_PNG, SILENT_WAV};

/// The input schema of a tool without arguments.
const NO_ARGUMENTS: &str = r#"{"type":"object","properties":{}}"#;

/// The input schema of `json_schema_2020_12_tool` (SEP-1613): the suite
/// checks that `$schema`, `$defs` and `additionalProperties` reach the client
/// unchanged.
const JSON_SCHEMA_2020_12: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "type": "object",
      "properties": {
        "street": { "type": "string" },
        "city": { "type": "string" }
      }
    }
  },
  "properties": {
    "name": { "type": "string" },
    "address": { "$ref": "#/$defs/address" }
  },
  "additionalProperties": false
}"##;

/// The pause between the log messages and progress reports.
const STEP: Duration = Duration::from_millis(50);

pub fn specs() -> Vec<ToolSpec> {
    let string_arg = |name: &str, description: &str| {
        serde_json::json!({
            "type": "object",
            "properties": { name: { "type": "string", "description": description } },
            "required": [name],
        })
        .to_string()
    };
    vec![
        ToolSpec::new(
            "test_simple_text",
            "Tests simple text content response",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_image_content",
            "Tests image content response",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_audio_content",
            "Tests audio content response",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_embedded_resource",
            "Tests embedded resource content response",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_error_handling",
            "Tests error response handling",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_reconnection",
            "Tests SSE stream disconnection and client reconnection (SEP-1699): \
             takes a few hundred milliseconds before it answers.",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            &string_arg("prompt", "The prompt to send to the LLM"),
        ),
        ToolSpec::new(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            &string_arg("message", "The message to show the user"),
        ),
        ToolSpec::new(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            JSON_SCHEMA_2020_12,
        ),
        ToolSpec::new(
            "test_input_required_result_elicitation",
            "Asks the user's name (MRTR elicitation, SEP-2322)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_input_required_result_sampling",
            "Asks the client's LLM for the capital of France (MRTR sampling, SEP-2322)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_input_required_result_request_state",
            "Asks for a confirmation and reports the state it resumed with (SEP-2322)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_input_required_result_multi_round",
            "Asks a name, then a favorite color: two rounds (SEP-2322)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_input_required_result_tampered_state",
            "Asks for a confirmation; a tampered requestState is refused (SEP-2322)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_input_required_result_capabilities",
            "Asks the user, then the client's LLM, each only if the client declared it (SEP-2322)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_missing_capability",
            "Needs sampling: fails when the client did not declare it (SEP-2575)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_streaming_elicitation",
            "Asks the user for input while the response stream is open (SEP-2575)",
            NO_ARGUMENTS,
        ),
        ToolSpec::new(
            "test_logging_tool",
            "Logs three messages (sent only at the level the request's _meta asks for)",
            NO_ARGUMENTS,
        ),
    ]
}

pub fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
    let args: Value = serde_json::from_str(&call.arguments)
        .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
    Ok(match call.name.as_str() {
        "test_simple_text" => ToolOutput::text("This is a simple text response for testing."),
        "test_image_content" => {
            ToolOutput::new(vec![ContentBlock::image(RED_PIXEL_PNG, "image/png")])
        }
        "test_audio_content" => ToolOutput::new(vec![ContentBlock::audio(SILENT_WAV, "audio/wav")]),
        "test_embedded_resource" => ToolOutput::new(vec![ContentBlock::embedded_text(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        )]),
        "test_multiple_content_types" => ToolOutput::new(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(RED_PIXEL_PNG, "image/png"),
            ContentBlock::embedded_text(
                "test://mixed-content-resource",
                "application/json",
                r#"{"test":"data","value":123}"#,
            ),
        ]),
        "test_tool_with_logging" => with_logging(),
        "test_tool_with_progress" => with_progress(),
        "test_error_handling" => {
            ToolOutput::error("This tool intentionally returns an error for testing")
        }
        "test_reconnection" => reconnection(),
        "test_sampling" => sampling(string_arg(&args, "prompt")?),
        "test_elicitation" => elicitation(string_arg(&args, "message")?),
        "test_elicitation_sep1034_defaults" => elicitation_defaults(),
        "test_elicitation_sep1330_enums" => elicitation_enums(),
        "json_schema_2020_12_tool" => {
            ToolOutput::text(format!("JSON Schema 2020-12 tool called with: {args}"))
        }
        "test_input_required_result_elicitation" => input_required_elicitation(),
        "test_input_required_result_sampling" => input_required_sampling(),
        "test_input_required_result_request_state" => input_required_confirm("state-ok"),
        "test_input_required_result_tampered_state" => input_required_confirm("confirmed"),
        "test_input_required_result_multi_round" => input_required_multi_round(),
        "test_input_required_result_capabilities" => input_required_capabilities(),
        "test_missing_capability" => sampling("What is the capital of France?"),
        "test_streaming_elicitation" => input_required_confirm("streamed elicitation answered"),
        "test_logging_tool" => with_logging(),
        other => return Err(ToolError::UnknownTool(other.into())),
    })
}

/// The string argument `name`, or `invalid-arguments`.
fn string_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    args[name]
        .as_str()
        .ok_or_else(|| ToolError::InvalidArguments(format!("`{name}` must be a string")))
}

/// Three `info` log messages, 50 ms apart (`tools-call-with-logging`).
fn with_logging() -> ToolOutput {
    v0_2::log(LogLevel::Info, "Tool execution started");
    v0_2::sleep(STEP);
    v0_2::log(LogLevel::Info, "Tool processing data");
    v0_2::sleep(STEP);
    v0_2::log(LogLevel::Info, "Tool execution completed");
    ToolOutput::text("Tool with logging executed successfully")
}

/// Progress 0, 50 and 100 of 100, 50 ms apart (`tools-call-with-progress`).
/// Sent only when the client's request carried a `progressToken`.
fn with_progress() -> ToolOutput {
    for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            v0_2::sleep(STEP);
        }
        // `v0_2::progress(step, 100.0)` without the message.
        let message = format!("Completed step {step} of 100");
        client::report_progress(step, Some(100.0), Some(&message));
    }
    ToolOutput::text("Tool with progress executed successfully")
}

/// SEP-1699 (`server-sse-polling`): the test is of the HTTP transport, which
/// may close the response stream while the call runs; the tool only has to
/// take a while.
fn reconnection() -> ToolOutput {
    v0_2::sleep(Duration::from_millis(300));
    ToolOutput::text(
        "Reconnection test completed successfully. If you received this, \
         the client properly reconnected after stream closure.",
    )
}

/// Asks the client's LLM to complete `prompt` (`tools-call-sampling`).
fn sampling(prompt: &str) -> ToolOutput {
    match v0_2::sample(prompt, 100) {
        Ok(response) => ToolOutput::text(format!(
            "LLM response: {}",
            response.text().unwrap_or("(not text)")
        )),
        Err(err) => client_error("Sampling", &err),
    }
}

/// Asks the user for a username and an email (`tools-call-elicitation`).
fn elicitation(message: &str) -> ToolOutput {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "username": { "type": "string", "description": "User's response" },
            "email": { "type": "string", "description": "User's email address" },
        },
        "required": ["username", "email"],
    });
    match v0_2::elicit(message, &schema.to_string()) {
        Ok(answer) => ToolOutput::text(format!("User response: {}", summary(&answer))),
        Err(err) => client_error("Elicitation", &err),
    }
}

/// A form with a default for every primitive type
/// (`elicitation-sep1034-defaults`).
fn elicitation_defaults() -> ToolOutput {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "User name", "default": "John Doe" },
            "age": { "type": "integer", "description": "User age", "default": 30 },
            "score": { "type": "number", "description": "User score", "default": 95.5 },
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {
                "type": "boolean",
                "description": "Verification status",
                "default": true,
            },
        },
        "required": [],
    });
    elicit_form(
        "Please review and update the form fields with defaults",
        &schema,
    )
}

/// A form with the five enum shapes of SEP-1330
/// (`elicitation-sep1330-enums`).
fn elicitation_enums() -> ToolOutput {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": [
                    { "const": "value1", "title": "First Option" },
                    { "const": "value2", "title": "Second Option" },
                    { "const": "value3", "title": "Third Option" },
                ],
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": [
                        { "const": "value1", "title": "First Choice" },
                        { "const": "value2", "title": "Second Choice" },
                        { "const": "value3", "title": "Third Choice" },
                    ],
                },
            },
        },
        "required": [],
    });
    elicit_form("Please select options from the enum fields", &schema)
}

/// Elicits `schema` and reports the answer as the SEP scenarios expect.
fn elicit_form(message: &str, schema: &Value) -> ToolOutput {
    match v0_2::elicit(message, &schema.to_string()) {
        Ok(answer) => ToolOutput::text(format!("Elicitation completed: {}", summary(&answer))),
        Err(err) => client_error("Elicitation", &err),
    }
}

/// `action=accept, content={...}` (the content `{}` when there is none).
fn summary(answer: &ElicitResponse) -> String {
    format!(
        "action={}, content={}",
        answer.action.as_str(),
        answer.content.as_deref().unwrap_or("{}")
    )
}

/// A client that cannot or will not answer is an `isError` result naming why
/// (e.g. the manifest lacks the grant, or the client lacks the capability).
fn client_error(what: &str, err: &ClientError) -> ToolOutput {
    ToolOutput::error(format!("{what} not supported or error: {}", err.describe()))
}

/// A form of one required property `name` of JSON Schema type `kind`.
fn one_field(name: &str, kind: &str) -> String {
    serde_json::json!({
        "type": "object",
        "properties": { name: { "type": kind } },
        "required": [name],
    })
    .to_string()
}

/// The accepted answer's property `name` as text (a string as is, anything
/// else as JSON), or `None` when the user did not accept or left it out.
fn answered(answer: &ElicitResponse, name: &str) -> Option<String> {
    if answer.action.as_str() != "accept" {
        return None;
    }
    let content: Value = serde_json::from_str(answer.content.as_deref()?).ok()?;
    Some(match content.get(name)? {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// `input-required-result-basic-elicitation`: "Hello, NAME!".
fn input_required_elicitation() -> ToolOutput {
    match v0_2::elicit("What is your name?", &one_field("name", "string")) {
        Ok(answer) => match answered(&answer, "name") {
            Some(name) => ToolOutput::text(format!("Hello, {name}!")),
            None => ToolOutput::text(format!("No name given: {}", summary(&answer))),
        },
        Err(err) => client_error("Elicitation", &err),
    }
}

/// `input-required-result-basic-sampling`: the sampled text.
fn input_required_sampling() -> ToolOutput {
    sampling("What is the capital of France?")
}

/// `input-required-result-request-state` and `-tampered-state`: asks for a
/// confirmation and answers `word` with the answer.
fn input_required_confirm(word: &str) -> ToolOutput {
    match v0_2::elicit("Please confirm", &one_field("ok", "boolean")) {
        Ok(answer) => ToolOutput::text(format!("{word}: {}", summary(&answer))),
        Err(err) => client_error("Elicitation", &err),
    }
}

/// `input-required-result-multi-round`: a name, then a color.
fn input_required_multi_round() -> ToolOutput {
    let name = match v0_2::elicit("Step 1: What is your name?", &one_field("name", "string")) {
        Ok(answer) => answered(&answer, "name").unwrap_or_default(),
        Err(err) => return client_error("Elicitation", &err),
    };
    let color = match v0_2::elicit(
        "Step 2: What is your favorite color?",
        &one_field("color", "string"),
    ) {
        Ok(answer) => answered(&answer, "color").unwrap_or_default(),
        Err(err) => return client_error("Elicitation", &err),
    };
    ToolOutput::text(format!("{name} likes {color}"))
}

/// `input-required-result-capability-check`: asks the user and then the
/// client's LLM; the host asks only what the request's capabilities
/// declare, and the plugin goes on without what it could not ask.
fn input_required_capabilities() -> ToolOutput {
    let name = match v0_2::elicit("What is your name?", &one_field("name", "string")) {
        Ok(answer) => answered(&answer, "name").unwrap_or_default(),
        Err(err) => format!("(no elicitation: {})", err.describe()),
    };
    let capital = match v0_2::sample("What is the capital of France?", 100) {
        Ok(response) => response.text().unwrap_or("(not text)").to_string(),
        Err(err) => format!("(no sampling: {})", err.describe()),
    };
    ToolOutput::text(format!("name: {name}; capital: {capital}"))
}
