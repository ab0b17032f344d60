//! The runtime's content blocks (contract 0.2.0's, `toolhost_runtime::ContentBlock`)
//! as MCP's, in rmcp's types: what `tools/call` answers and `toolhost call
//! --json` prints. Binary data (images, audio, resource blobs) is encoded
//! base64 (standard alphabet, padded), as MCP's `ImageContent.data`,
//! `AudioContent.data` and `BlobResourceContents.blob` require
//! (<https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-result>).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{self as mcp, CallToolResult};
use toolhost_runtime::ToolResult;
use toolhost_runtime::{
    Annotations, ContentBlock, ResourceBody, ResourceContents, ResourceLink, Role,
};

/// An MCP role.
pub fn role(role: Role) -> mcp::Role {
    match role {
        Role::User => mcp::Role::User,
        Role::Assistant => mcp::Role::Assistant,
    }
}

/// MCP `Annotations` (an empty `audience` is left out; `priority` as f32).
pub fn annotations(a: &Annotations) -> mcp::Annotations {
    let mut out = mcp::Annotations::default();
    if !a.audience.is_empty() {
        out = out.with_audience(a.audience.iter().copied().map(role).collect());
    }
    if let Some(p) = a.priority {
        out = out.with_priority(p as f32);
    }
    out.last_modified = a.last_modified.clone();
    out
}

/// MCP `TextResourceContents` / `BlobResourceContents` (blob base64).
pub fn resource_contents(c: &ResourceContents) -> mcp::ResourceContents {
    let out = match &c.body {
        ResourceBody::Text(t) => mcp::ResourceContents::TextResourceContents {
            uri: c.uri.clone(),
            mime_type: None,
            text: t.clone(),
            meta: None,
        },
        ResourceBody::Blob(b) => mcp::ResourceContents::blob(STANDARD.encode(b), c.uri.clone()),
    };
    match &c.mime_type {
        Some(m) => out.with_mime_type(m.clone()),
        None => out,
    }
}

/// MCP `ResourceLink` (the `Resource` shape).
pub fn resource_link(l: &ResourceLink) -> mcp::Resource {
    let mut r = mcp::Resource::new(l.uri.clone(), l.name.clone());
    r.title = l.title.clone();
    r.description = l.description.clone();
    r.mime_type = l.mime_type.clone();
    r.size = l.size;
    r.annotations = l.annotations.as_ref().map(annotations);
    r
}

/// One MCP content block: text, image, audio (data base64), embedded
/// resource or resource link.
pub fn content_block(block: &ContentBlock) -> mcp::ContentBlock {
    match block {
        ContentBlock::Text(t) => mcp::ContentBlock::text(t.clone()),
        ContentBlock::Image(m) => {
            let mut image = mcp::ImageContent::new(STANDARD.encode(&m.data), m.mime_type.clone());
            image.annotations = m.annotations.as_ref().map(annotations);
            mcp::ContentBlock::Image(image)
        }
        ContentBlock::Audio(m) => {
            let mut audio = mcp::AudioContent::new(STANDARD.encode(&m.data), m.mime_type.clone());
            audio.annotations = m.annotations.as_ref().map(annotations);
            mcp::ContentBlock::Audio(audio)
        }
        ContentBlock::Resource(c) => mcp::ContentBlock::resource(resource_contents(c)),
        ContentBlock::ResourceLink(l) => mcp::ContentBlock::resource_link(resource_link(l)),
    }
}

/// A tool result as MCP `CallToolResult`: every block converted in order,
/// `structuredContent`, `isError`.
pub fn call_tool_result(result: &ToolResult) -> CallToolResult {
    let content = result.content.iter().map(content_block).collect();
    let mut out = if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    out.structured_content = result.structured.clone();
    out.is_error = Some(result.is_error);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_runtime::Media;

    #[test]
    fn blocks_serialize_as_mcp_content() {
        let result = ToolResult {
            content: vec![
                ContentBlock::Text("hi".into()),
                ContentBlock::Image(Media {
                    data: vec![1, 2, 3],
                    mime_type: "image/png".into(),
                    annotations: Some(Annotations {
                        audience: vec![Role::User],
                        priority: Some(0.5),
                        last_modified: Some("2025-11-25T10:00:00Z".into()),
                    }),
                }),
                ContentBlock::Audio(Media {
                    data: vec![255],
                    mime_type: "audio/wav".into(),
                    annotations: None,
                }),
                ContentBlock::Resource(ResourceContents {
                    uri: "test://t".into(),
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("t".into()),
                }),
                ContentBlock::Resource(ResourceContents {
                    uri: "test://b".into(),
                    mime_type: None,
                    body: ResourceBody::Blob(vec![0, 1]),
                }),
                ContentBlock::ResourceLink(ResourceLink {
                    uri: "test://l".into(),
                    name: "l".into(),
                    title: Some("L".into()),
                    description: None,
                    mime_type: None,
                    size: Some(2),
                    annotations: None,
                }),
            ],
            structured: Some(json!({"ok": true})),
            is_error: false,
        };
        let value = serde_json::to_value(call_tool_result(&result)).unwrap();
        assert_eq!(value["structuredContent"], json!({"ok": true}));
        assert_eq!(value["isError"], json!(false));
        assert_eq!(
            value["content"],
            json!([
                    {"type": "text", "text": "hi"},
                    {"type": "image", "data": "AQID", "mimeType": "image/png",
                     "annotations": {"audience": ["user"], "priority": 0.5,
                                     "lastModified": "2025-11-25T10:00:00Z"}},
                    {"type": "audio", "data": "/w==", "mimeType": "audio/wav"},
                    {"type": "resource", "resource": {"uri": "test://t", "mimeType": "text/plain", "text": "t"}},
                    {"type": "resource", "resource": {"uri": "test://b", "blob": "AAE="}},
                    {"type": "resource_link", "uri": "test://l", "name": "l", "title": "L", "size": 2},
            ])
        );
    }
}
