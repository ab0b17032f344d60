//! The resources: three direct ones and one URI template. The host keeps the
//! clients' subscriptions (`resources/subscribe`); a plugin whose resource
//! changes says so with `client::resource_updated(uri)`.

use toolhost_plugin_sdk::v0_2::{
    Resource, ResourceContents, ResourceError, ResourceTemplate, complete_from,
};

use crate::media::RED_PIXEL_PNG;

/// The template `test://template/{id}/data`, as its prefix and suffix.
const TEMPLATE: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

pub fn list() -> Vec<Resource> {
    vec![
        Resource::new(
            "test://static-text",
            "static-text",
            "A static text resource for testing",
            "text/plain",
        )
        .title("Static Text Resource"),
        Resource::new(
            "test://static-binary",
            "static-binary",
            "A static binary resource (image) for testing",
            "image/png",
        )
        .title("Static Binary Resource"),
        Resource::new(
            "test://watched-resource",
            "watched-resource",
            "A resource clients can subscribe to",
            "text/plain",
        )
        .title("Watched Resource"),
    ]
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(
            TEMPLATE,
            "template",
            "A resource template with parameter substitution",
            "application/json",
        )
        .title("Resource Template"),
    ]
}

pub fn read(uri: &str) -> Result<Vec<ResourceContents>, ResourceError> {
    let contents = match uri {
        "test://static-text" => ResourceContents::text(
            uri,
            "text/plain",
            "This is the content of the static text resource.",
        ),
        "test://static-binary" => ResourceContents::blob(uri, "image/png", RED_PIXEL_PNG),
        "test://watched-resource" => {
            ResourceContents::text(uri, "text/plain", "Watched resource content")
        }
        _ => match template_id(uri) {
            Some(id) => {
                let data = serde_json::json!({
                    "id": id,
                    "templateTest": true,
                    "data": format!("Data for ID: {id}"),
                });
                ResourceContents::text(uri, "application/json", data.to_string())
            }
            None => return Err(ResourceError::NotFound(uri.into())),
        },
    };
    Ok(vec![contents])
}

/// The `{id}` of a URI the template names: one non-empty path segment.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix(TEMPLATE_PREFIX)?
        .strip_suffix(TEMPLATE_SUFFIX)?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// Suggestions for the template's `{id}`.
pub fn complete(uri_template: &str, argument: &str, value: &str) -> Vec<String> {
    match (uri_template, argument) {
        (TEMPLATE, "id") => complete_from(&["123", "456", "789"], value),
        _ => Vec::new(),
    }
}
