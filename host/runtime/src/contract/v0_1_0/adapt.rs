//! Contract 0.1.0 as a thin adapter onto the newest contract's types
//! (the newest module holds the types; `ContractVersion::ALL` keeps every version
//! linked): what a 0.1.0 `tool` export returns, converted to the 0.2.0 types the rest of the runtime
//! works with. A 0.1.0 spec has no title and no output schema; a 0.1.0
//! result's `text` becomes one text block (even when empty, so every result
//! has content).

use super::tool_plugin::exports::toolhost::plugin::tool as v1;
use crate::contract::v0_2_0 as v2;

/// A 0.1.0 tool spec as a 0.2.0 one: `title` and `output-schema` none.
pub fn tool_spec(spec: v1::ToolSpec) -> v2::ToolSpec {
    v2::ToolSpec {
        name: spec.name,
        title: None,
        description: spec.description,
        input_schema: spec.input_schema,
        output_schema: None,
        hints: v2::ToolHints {
            read_only: spec.hints.read_only,
            destructive: spec.hints.destructive,
            idempotent: spec.hints.idempotent,
            open_world: spec.hints.open_world,
        },
    }
}

/// A 0.1.0 tool result as a 0.2.0 one: `text` becomes one text block.
pub fn tool_output(output: v1::ToolOutput) -> v2::ToolOutput {
    v2::ToolOutput {
        content: vec![v2::ContentBlock::Text(output.text)],
        structured: output.structured,
        is_error: output.is_error,
    }
}

/// A 0.1.0 tool error as a 0.2.0 one (the same three cases).
pub fn tool_error(error: v1::ToolError) -> v2::ToolError {
    match error {
        v1::ToolError::UnknownTool(t) => v2::ToolError::UnknownTool(t),
        v1::ToolError::InvalidArguments(t) => v2::ToolError::InvalidArguments(t),
        v1::ToolError::Failed(t) => v2::ToolError::Failed(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_result_becomes_one_text_block() {
        for text in ["Hello, Ada!", ""] {
            let out = tool_output(v1::ToolOutput {
                text: text.into(),
                structured: Some("{}".into()),
                is_error: true,
            });
            assert_eq!(out.content, [v2::ContentBlock::Text(text.into())]);
            assert_eq!(out.structured.as_deref(), Some("{}"));
            assert!(out.is_error);
        }
        let spec = tool_spec(v1::ToolSpec {
            name: "n".into(),
            description: "d".into(),
            input_schema: "{}".into(),
            hints: v1::ToolHints {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: false,
            },
        });
        assert_eq!((spec.title, spec.output_schema), (None, None));
        assert!(spec.hints.read_only && spec.hints.idempotent);
        assert_eq!(
            tool_error(v1::ToolError::Failed("x".into())),
            v2::ToolError::Failed("x".into())
        );
    }
}
