//! A contract 0.2.0 test plugin (world `server-plugin`), built only for the
//! tests (`host/runtime/tests/all/contract_v0_2.rs`), with wit-bindgen straight against
//! `wit/v0.2.0` (no SDK in between, so the host is tested against the
//! contract itself).
//!
//! - tool `content`: one block of every kind, plus structured content;
//! - tool `client`: calls every `client` function and reports what came back;
//! - tool `flood`: more progress and log messages than the host passes on,
//!   and one log message over the size limit;
//! - tool `too_many` / `too_big`: more blocks / bytes than the host accepts;
//! - tool `schema`: declares an output schema, gives structured content only
//!   when asked to;
//! - tool `bad_output_schema`: an output schema that is not a JSON object
//!   (refused at load);
//! - tool `updates`: `count` resource-updated notices for `uri` (default
//!   `test://h/` and `len` `a`s and a `b`: what every `hostile` template
//!   matches);
//! - resource `test://static`, template `test://template/{id}/data`;
//! - prompt `greet` (`name` required, `style` optional), with completion.
//!
//! The manifest's `[env]` `SERVER_OFFERS` changes what it offers besides:
//! `hostile` adds 256 templates of 1,000 bytes and 16 expressions that
//! every URI `updates` makes matches (as much work as a template check can
//! be); `overlap` lists, besides its own, offers that take URIs of another
//! server plugin loaded first: the resource `test://template/1/data`, the
//! template `test://{kind}/{id}/data`, and the template `other://{x}` of
//! its own.

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../../wit/v0.2.0",
        world: "toolhost:plugin/server-plugin@0.2.0",
        generate_all,
    });

    use exports::toolhost::plugin0_2_0::prompts::{
        self, Prompt, PromptArgument, PromptError, PromptMessage, PromptResult,
    };
    use exports::toolhost::plugin0_2_0::resources::{
        self, Resource, ResourceError, ResourceTemplate,
    };
    use exports::toolhost::plugin0_2_0::tool::{
        self, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec,
    };
    use toolhost::plugin0_2_0::client::{
        self, ClientError, ElicitAction, ElicitRequest, ElicitResponse, LogLevel, SamplingMessage,
        SamplingRequest, SamplingResponse,
    };
    use toolhost::plugin0_2_0::content::{
        Annotations, ContentBlock, Media, ResourceBody, ResourceContents, ResourceLink, Role,
    };

    /// The bytes of the `content` tool's image: a 1x1 PNG (67 bytes).
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0b, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];

    const HINTS: ToolHints = ToolHints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };

    fn spec(name: &str, description: &str, output_schema: Option<&str>) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            title: Some(format!("The {name} tool")),
            description: description.into(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: output_schema.map(str::to_string),
            hints: HINTS,
        }
    }

    fn text(text: String) -> ToolOutput {
        ToolOutput {
            content: vec![ContentBlock::Text(text)],
            structured: None,
            is_error: false,
        }
    }

    struct Server;

    impl tool::Guest for Server {
        fn describe() -> Vec<ToolSpec> {
            vec![
                spec("content", "One content block of each kind.", None),
                spec("client", "Calls every client function.", None),
                spec("flood", "Floods progress and log.", None),
                spec("too_many", "Returns 1001 blocks.", None),
                spec("too_big", "Returns an image of `mib` MiB.", None),
                spec(
                    "schema",
                    "Declares an output schema; structured only when `give`.",
                    Some(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#),
                ),
                spec("bad_output_schema", "Refused at load.", Some("[]")),
                spec("updates", "Sends `count` resource-updated notices.", None),
            ]
        }

        fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
            let args: serde_json::Value = serde_json::from_str(&call.arguments)
                .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
            Ok(match call.name.as_str() {
                "content" => ToolOutput {
                    content: vec![
                        ContentBlock::Text("hello".into()),
                        ContentBlock::Image(Media {
                            data: PNG.to_vec(),
                            mime_type: "image/png".into(),
                            annotations: Some(Annotations {
                                audience: vec![Role::User, Role::Assistant],
                                priority: Some(0.5),
                                last_modified: Some("2025-11-25T10:00:00Z".into()),
                            }),
                        }),
                        ContentBlock::Audio(Media {
                            data: b"RIFF\0\0\0\0WAVE".to_vec(),
                            mime_type: "audio/wav".into(),
                            annotations: None,
                        }),
                        ContentBlock::Resource(ResourceContents {
                            uri: "test://static".into(),
                            mime_type: Some("text/plain".into()),
                            body: ResourceBody::Text("static text".into()),
                        }),
                        ContentBlock::Resource(ResourceContents {
                            uri: "test://template/7/data".into(),
                            mime_type: None,
                            body: ResourceBody::Blob(vec![0, 1, 2, 255]),
                        }),
                        ContentBlock::ResourceLink(ResourceLink {
                            uri: "test://static".into(),
                            name: "static".into(),
                            title: Some("Static".into()),
                            description: None,
                            mime_type: Some("text/plain".into()),
                            size: Some(11),
                            annotations: None,
                        }),
                    ],
                    structured: Some(r#"{"ok":true,"blocks":6}"#.into()),
                    is_error: false,
                },
                "client" => client_tool(),
                "flood" => {
                    for i in 1..=1100 {
                        client::report_progress(i as f64, None, None);
                    }
                    for i in 0..1100 {
                        client::log(LogLevel::Debug, None, &format!("{i}"));
                    }
                    text("flooded".into())
                }
                "too_many" => ToolOutput {
                    content: (0..1001)
                        .map(|i| ContentBlock::Text(format!("{i}")))
                        .collect(),
                    structured: None,
                    is_error: false,
                },
                "too_big" => {
                    let mib = args.get("mib").and_then(|v| v.as_u64()).unwrap_or(17);
                    ToolOutput {
                        content: vec![ContentBlock::Image(Media {
                            data: vec![7; (mib << 20) as usize],
                            mime_type: "image/png".into(),
                            annotations: None,
                        })],
                        structured: None,
                        is_error: false,
                    }
                }
                "schema" => ToolOutput {
                    content: vec![ContentBlock::Text("n is 3".into())],
                    structured: (args.get("give") == Some(&serde_json::Value::Bool(true)))
                        .then(|| r#"{"n":3}"#.into()),
                    is_error: false,
                },
                "updates" => {
                    let count = args.get("count").and_then(|v| v.as_u64()).unwrap_or(1);
                    let len = args.get("len").and_then(|v| v.as_u64()).unwrap_or(3000);
                    let uri = args
                        .get("uri")
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("test://h/{}b", "a".repeat(len as usize)));
                    for _ in 0..count {
                        client::resource_updated(&uri);
                    }
                    text(format!("sent {count}"))
                }
                other => return Err(ToolError::UnknownTool(other.into())),
            })
        }
    }

    /// The manifest's `SERVER_OFFERS` (see the crate docs), or empty.
    fn offers_mode() -> String {
        std::env::var("SERVER_OFFERS").unwrap_or_default()
    }

    /// Template `i` of the `hostile` offers: `test://h/`, 15 variables each
    /// followed by `a`, `a`s, a 16th variable and `b` (about 1,000 bytes).
    fn hostile_template(i: usize) -> String {
        let mut t = String::from("test://h/");
        for v in 0..15 {
            t.push_str(&format!("{{v{v}}}a"));
        }
        let pad = 999 - t.len() - i % 200;
        t.push_str(&"a".repeat(pad));
        t.push_str(&format!("{{z{i}}}b"));
        t
    }

    fn template(uri_template: String, name: &str) -> ResourceTemplate {
        ResourceTemplate {
            uri_template,
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            annotations: None,
        }
    }

    /// Calls every client function and reports each answer, one line each.
    fn client_tool() -> ToolOutput {
        client::report_progress(1.0, Some(10.0), Some("one"));
        client::report_progress(0.5, Some(10.0), Some("backwards"));
        client::report_progress(2.0, None, None);
        client::log(LogLevel::Info, Some("test"), r#"{"k":1}"#);
        client::log(LogLevel::Warning, None, "not json");
        client::log(LogLevel::Error, None, &"x".repeat(70 * 1024));
        let elicit = client::elicit(&ElicitRequest {
            message: "Your name?".into(),
            requested_schema:
                r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#
                    .into(),
        });
        let bad_elicit = client::elicit(&ElicitRequest {
            message: "bad".into(),
            requested_schema: "[]".into(),
        });
        let sample = client::sample(&SamplingRequest {
            messages: vec![SamplingMessage {
                role: Role::User,
                content: ContentBlock::Text("Say hi".into()),
            }],
            max_tokens: 50,
            system_prompt: Some("Be brief.".into()),
            temperature: Some(0.2),
            stop_sequences: vec!["\n".into()],
            model_preferences: Some(r#"{"hints":[{"name":"claude"}]}"#.into()),
        });
        let bad_sample = client::sample(&SamplingRequest {
            messages: vec![SamplingMessage {
                role: Role::User,
                content: ContentBlock::ResourceLink(ResourceLink {
                    uri: "test://static".into(),
                    name: "static".into(),
                    title: None,
                    description: None,
                    mime_type: None,
                    size: None,
                    annotations: None,
                }),
            }],
            max_tokens: 1,
            system_prompt: None,
            temperature: None,
            stop_sequences: vec![],
            model_preferences: None,
        });
        client::resource_updated("test://static");
        client::resource_updated("other://not-mine");
        client::resource_updated("test://template/9/data");
        let lines = [
            format!("elicit: {}", elicited(elicit)),
            format!("bad elicit: {}", elicited(bad_elicit)),
            format!("sample: {}", sampled(sample)),
            format!("bad sample: {}", sampled(bad_sample)),
        ];
        text(lines.join("\n"))
    }

    fn client_error(e: ClientError) -> String {
        match e {
            ClientError::NotGranted(m) => format!("not-granted: {m}"),
            ClientError::Unsupported(m) => format!("unsupported: {m}"),
            ClientError::Failed(m) => format!("failed: {m}"),
        }
    }

    fn elicited(r: Result<ElicitResponse, ClientError>) -> String {
        match r {
            Ok(r) => {
                let action = match r.action {
                    ElicitAction::Accept => "accept",
                    ElicitAction::Decline => "decline",
                    ElicitAction::Cancel => "cancel",
                };
                format!("{action} {}", r.content.unwrap_or_default())
            }
            Err(e) => client_error(e),
        }
    }

    fn sampled(r: Result<SamplingResponse, ClientError>) -> String {
        match r {
            Ok(r) => {
                let role = match r.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                let content = match r.content {
                    ContentBlock::Text(t) => t,
                    _ => "(not text)".into(),
                };
                format!(
                    "{role} {content:?} model {} stop {}",
                    r.model,
                    r.stop_reason.unwrap_or_default()
                )
            }
            Err(e) => client_error(e),
        }
    }

    impl resources::Guest for Server {
        fn list_resources() -> Vec<Resource> {
            let mut out = vec![Resource {
                uri: "test://static".into(),
                name: "static".into(),
                title: Some("Static text".into()),
                description: Some("A fixed text.".into()),
                mime_type: Some("text/plain".into()),
                size: Some(11),
                annotations: None,
            }];
            if offers_mode() == "overlap" {
                out.push(Resource {
                    uri: "test://template/1/data".into(),
                    name: "taken".into(),
                    title: None,
                    description: None,
                    mime_type: None,
                    size: None,
                    annotations: None,
                });
            }
            out
        }

        fn list_templates() -> Vec<ResourceTemplate> {
            let mut out = vec![ResourceTemplate {
                uri_template: "test://template/{id}/data".into(),
                name: "data".into(),
                title: None,
                description: Some("The bytes of `id`.".into()),
                mime_type: Some("application/octet-stream".into()),
                annotations: None,
            }];
            match offers_mode().as_str() {
                "hostile" => {
                    out.extend((0..255).map(|i| template(hostile_template(i), "hostile")));
                }
                "overlap" => {
                    out.push(template("test://{kind}/{id}/data".into(), "overlap"));
                    out.push(template("other://{x}".into(), "other"));
                }
                _ => {}
            }
            out
        }

        fn read(uri: String) -> Result<Vec<ResourceContents>, ResourceError> {
            if uri.starts_with("other://") {
                // `other://steal` answers with another plugin's URI.
                let uri = if uri == "other://steal" {
                    "test://template/1/data".to_string()
                } else {
                    uri
                };
                return Ok(vec![ResourceContents {
                    uri,
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("other".into()),
                }]);
            }
            if offers_mode() == "overlap" && uri.starts_with("test://template/") {
                return Ok(vec![ResourceContents {
                    uri,
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("overlap has it".into()),
                }]);
            }
            if uri == "test://static" {
                client::log(LogLevel::Info, None, "\"reading static\"");
                return Ok(vec![ResourceContents {
                    uri,
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("static text".into()),
                }]);
            }
            let id = uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
                .ok_or_else(|| ResourceError::NotFound(uri.clone()))?;
            match id {
                "missing" => Err(ResourceError::NotFound(format!("no data {id}"))),
                "broken" => Err(ResourceError::Failed("the data is broken".into())),
                _ => Ok(vec![ResourceContents {
                    uri: uri.clone(),
                    mime_type: Some("application/octet-stream".into()),
                    body: ResourceBody::Blob(id.as_bytes().to_vec()),
                }]),
            }
        }

        fn complete(
            uri_template: String,
            argument: String,
            value: String,
            _context: Vec<(String, String)>,
        ) -> Vec<String> {
            if uri_template != "test://template/{id}/data" || argument != "id" {
                return vec![];
            }
            let count = if value == "many" { 150 } else { 30 };
            (0..count)
                .map(|i| i.to_string())
                .filter(|v| value == "many" || v.starts_with(&value))
                .collect()
        }
    }

    impl prompts::Guest for Server {
        fn list_prompts() -> Vec<Prompt> {
            vec![Prompt {
                name: "greet".into(),
                title: Some("Greeting".into()),
                description: Some("Greets someone.".into()),
                arguments: vec![
                    PromptArgument {
                        name: "name".into(),
                        title: None,
                        description: Some("Who".into()),
                        required: true,
                    },
                    PromptArgument {
                        name: "style".into(),
                        title: None,
                        description: None,
                        required: false,
                    },
                ],
            }]
        }

        fn get(
            name: String,
            arguments: Vec<(String, String)>,
        ) -> Result<PromptResult, PromptError> {
            if name != "greet" {
                return Err(PromptError::UnknownPrompt(name));
            }
            let arg = |k: &str| {
                arguments
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            let who = arg("name").unwrap_or_default();
            let style = arg("style").unwrap_or_else(|| "casual".into());
            if style != "casual" && style != "formal" {
                return Err(PromptError::InvalidArguments(format!(
                    "style must be casual or formal, not {style}"
                )));
            }
            client::log(LogLevel::Info, None, "\"rendering greet\"");
            let greeting = if style == "formal" {
                format!("Good day, {who}.")
            } else {
                format!("Hi {who}!")
            };
            Ok(PromptResult {
                description: Some(format!("A {style} greeting")),
                messages: vec![
                    PromptMessage {
                        role: Role::User,
                        content: ContentBlock::Text(format!("Greet {who}.")),
                    },
                    PromptMessage {
                        role: Role::Assistant,
                        content: ContentBlock::Text(greeting),
                    },
                ],
            })
        }

        fn complete(
            name: String,
            argument: String,
            value: String,
            context: Vec<(String, String)>,
        ) -> Vec<String> {
            if name != "greet" || argument != "style" {
                return vec![];
            }
            let mut out: Vec<String> = ["casual", "formal"]
                .iter()
                .filter(|s| s.starts_with(&value))
                .map(|s| s.to_string())
                .collect();
            // Shows the context reached the plugin.
            out.extend(context.into_iter().map(|(k, v)| format!("{k}={v}")));
            out
        }
    }

    export!(Server);
}
