//! MCP content blocks as the host handles them (the types are contract
//! 0.2.0's, [`crate::contract::v0_2_0`]): how many bytes a plugin's answer
//! holds, the limits on it, and how a person reads it on a terminal
//! ([`render_terminal`], used by `toolhost call`).
//!
//! The limits (`wit/v0.2.0/tool.wit`, `tool-output.content`): at most
//! [`MAX_CONTENT_BLOCKS`] blocks and [`MAX_OUTPUT_BYTES`] in all, text, media
//! and resource bytes and structured JSON counted together. A plugin's answer
//! over them is dropped with an error naming the limit.

use std::fmt::Write as _;

use crate::contract::v0_2_0::{ContentBlock, ResourceBody};

pub use crate::contract::v0_2_0::{
    MAX_CONTENT_BLOCKS, MAX_OUTPUT_BYTES, block_bytes, contents_bytes,
};

/// How `block` is shown on a terminal: a text block as it is, anything else
/// as a one-line marker, e.g. `[image image/png, 68 bytes]`,
/// `[audio audio/wav, 44 bytes]`, `[resource test://x (text/plain), 12 bytes
/// of text]`, `[resource link test://x "name"]`. Raw plugin text: escape it
/// before it reaches a terminal ([`crate::display::escape`]).
pub fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.clone(),
        ContentBlock::Image(m) => format!("[image {}, {} bytes]", m.mime_type, m.data.len()),
        ContentBlock::Audio(m) => format!("[audio {}, {} bytes]", m.mime_type, m.data.len()),
        ContentBlock::Resource(r) => {
            let mut s = format!("[resource {}", r.uri);
            if let Some(mime) = &r.mime_type {
                let _ = write!(s, " ({mime})");
            }
            let _ = match &r.body {
                ResourceBody::Text(t) => write!(s, ", {} bytes of text]", t.len()),
                ResourceBody::Blob(b) => write!(s, ", {} bytes]", b.len()),
            };
            s
        }
        ContentBlock::ResourceLink(l) => format!("[resource link {} {:?}]", l.uri, l.name),
    }
}

/// `blocks` as a terminal shows them ([`render_block`]), one block after
/// another, separated by a newline when the previous one does not end with
/// one. For `toolhost call`; escape the result before printing it.
pub fn render_terminal(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&render_block(block));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::v0_2_0::{Media, ResourceContents, ResourceLink};

    #[test]
    fn terminal_rendering_keeps_text_and_marks_the_rest() {
        let blocks = vec![
            ContentBlock::Text("hello".into()),
            ContentBlock::Image(Media {
                data: vec![0; 68],
                mime_type: "image/png".into(),
                annotations: None,
            }),
            ContentBlock::Text("line\n".into()),
            ContentBlock::Audio(Media {
                data: vec![1; 44],
                mime_type: "audio/wav".into(),
                annotations: None,
            }),
            ContentBlock::Resource(ResourceContents {
                uri: "test://x".into(),
                mime_type: Some("text/plain".into()),
                body: ResourceBody::Text("twelve bytes".into()),
            }),
            ContentBlock::Resource(ResourceContents {
                uri: "test://b".into(),
                mime_type: None,
                body: ResourceBody::Blob(vec![0; 3]),
            }),
            ContentBlock::ResourceLink(ResourceLink {
                uri: "test://x".into(),
                name: "x".into(),
                title: None,
                description: None,
                mime_type: None,
                size: None,
                annotations: None,
            }),
        ];
        assert_eq!(
            render_terminal(&blocks),
            "hello\n[image image/png, 68 bytes]\nline\n[audio audio/wav, 44 bytes]\n\
             [resource test://x (text/plain), 12 bytes of text]\n[resource test://b, 3 bytes]\n\
             [resource link test://x \"x\"]"
        );
        assert_eq!(render_terminal(&[]), "");
        let sizes: Vec<usize> = blocks.iter().map(block_bytes).collect();
        assert_eq!(sizes, [5, 68 + 9, 5, 44 + 9, 8 + 10 + 12, 8 + 3, 8 + 1]);
    }
}
