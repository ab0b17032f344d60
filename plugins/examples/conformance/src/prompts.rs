//! The prompts: plain, with arguments (and completions for them), with an
//! embedded resource, and with an image.

use toolhost_plugin_sdk::v0_2::{
    self, ContentBlock, Prompt, PromptError, PromptMessage, PromptResult, arg, complete_from,
};

use crate::media::RED_PIXEL_PNG;

pub fn list() -> Vec<Prompt> {
    vec![
        Prompt::new("test_simple_prompt", "A simple prompt without arguments")
            .title("Simple Test Prompt"),
        Prompt::new(
            "test_prompt_with_arguments",
            "A prompt with required arguments",
        )
        .title("Prompt With Arguments")
        .argument("arg1", "First test argument", true)
        .argument("arg2", "Second test argument", true),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            "A prompt that includes an embedded resource",
        )
        .title("Prompt With Embedded Resource")
        .argument("resourceUri", "URI of the resource to embed", true),
        Prompt::new(
            "test_prompt_with_image",
            "A prompt that includes image content",
        )
        .title("Prompt With Image"),
        Prompt::new(
            "test_input_required_result_prompt",
            "A prompt that asks the user for its context (MRTR on prompts/get, SEP-2322)",
        )
        .title("Prompt Asking For Context"),
    ]
}

pub fn get(name: &str, arguments: &[(String, String)]) -> Result<PromptResult, PromptError> {
    let required = |key: &str| {
        arg(arguments, key)
            .ok_or_else(|| PromptError::InvalidArguments(format!("`{key}` is required")))
    };
    let messages = match name {
        "test_simple_prompt" => vec![PromptMessage::user(ContentBlock::text(
            "This is a simple prompt for testing.",
        ))],
        "test_prompt_with_arguments" => {
            let (arg1, arg2) = (required("arg1")?, required("arg2")?);
            vec![PromptMessage::user(ContentBlock::text(format!(
                "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            )))]
        }
        "test_prompt_with_embedded_resource" => vec![
            PromptMessage::user(ContentBlock::embedded_text(
                required("resourceUri")?,
                "text/plain",
                "Embedded resource content for testing.",
            )),
            PromptMessage::user(ContentBlock::text(
                "Please process the embedded resource above.",
            )),
        ],
        "test_prompt_with_image" => vec![
            PromptMessage::user(ContentBlock::image(RED_PIXEL_PNG, "image/png")),
            PromptMessage::user(ContentBlock::text("Please analyze the image above.")),
        ],
        "test_input_required_result_prompt" => vec![PromptMessage::user(ContentBlock::text(
            format!("Use this context: {}", asked_context()?),
        ))],
        other => return Err(PromptError::UnknownPrompt(other.into())),
    };
    Ok(PromptResult::new(messages))
}

/// Suggestions for the arguments of `test_prompt_with_arguments`, by prefix.
pub fn complete(name: &str, argument: &str, value: &str) -> Vec<String> {
    match (name, argument) {
        ("test_prompt_with_arguments", "arg1") => {
            complete_from(&["paris", "park", "party", "test"], value)
        }
        ("test_prompt_with_arguments", "arg2") => {
            complete_from(&["hello", "help", "world", "test"], value)
        }
        _ => Vec::new(),
    }
}

/// The context the user gives through the client (an elicitation; on a
/// 2026-07-28 `prompts/get`, a question of the request).
fn asked_context() -> Result<String, PromptError> {
    let schema =
        r#"{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}"#;
    let answer = v0_2::elicit("What context should the prompt use?", schema)
        .map_err(|e| PromptError::Failed(format!("elicitation: {}", e.describe())))?;
    let content: serde_json::Value =
        serde_json::from_str(answer.content.as_deref().unwrap_or("{}")).unwrap_or_default();
    Ok(content["context"].as_str().unwrap_or("(none)").to_string())
}
