//! Contract 0.2.0 on the real host: the test plugin `tests/plugins/server`
//! (built with wit-bindgen straight against `wit/v0.2.0`, world
//! `server-plugin`) loaded through `Host`, with a fake MCP client that
//! records what reaches it. Content blocks come back exactly; the client
//! channel obeys the manifest grants and the flood limits; results over the
//! limits are errors; resources, templates, prompts and completions route to
//! the plugin. (The v0.1.0 fixture and the built-in bash, which load beside
//! it, are covered by `contract.rs` and the other modules.)

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::json;
use toolhost_runtime::{
    Annotations, ContentBlock, Media, PromptMessage, PromptResult, ResourceBody, ResourceContents,
    ResourceLink, Role,
};
use toolhost_runtime::{
    CallClient, ClientError, ClientFuture, ElicitAction, ElicitRequest, ElicitResponse, LogLevel,
    MAX_LOGS_PER_CALL, MAX_PROGRESS_PER_CALL, SamplingRequest, SamplingResponse,
};
use toolhost_runtime::{CallError, Completions, MAX_CONTENT_BLOCKS, MAX_OUTPUT_BYTES};
use toolhost_runtime::{
    CallRequest, CompletionRef, ContractVersion, Host, HostConfig, RequestError, ToolCallError,
    ToolResult,
};
use toolhost_test_fixtures::SERVER;

use crate::support::{dirs, use_cache};

/// The 1x1 PNG the `content` tool returns.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0b, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

const TEMPLATE: &str = "test://template/{id}/data";

/// A host with the server plugin loaded as each `(id, extra manifest lines)`.
struct Env {
    host: Host,
    _dirs: [tempfile::TempDir; 3],
}

async fn env_with(plugins: &[(&str, &str)]) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = Vec::new();
    for (id, extra) in plugins {
        let wasm = dir.path().join(format!("{id}.wasm"));
        std::fs::write(&wasm, SERVER).unwrap();
        std::fs::write(
            dir.path().join(format!("{id}.toml")),
            format!("id = \"{id}\"\ncontract = \"0.2.0\"\n{extra}"),
        )
        .unwrap();
        files.push(wasm);
    }
    let (ws, state) = dirs();
    use_cache(state.path());
    let config = HostConfig {
        plugins: files,
        ..HostConfig::new(ws.path(), state.path())
    };
    let host = Host::new(config)
        .await
        .expect("host with the server plugin");
    Env {
        host,
        _dirs: [dir, ws, state],
    }
}

async fn env(extra: &str) -> Env {
    env_with(&[("server", extra)]).await
}

const GRANTS: &str = "elicitation = true\nsampling = true\n";

/// A client that records every call and answers elicitations and samplings.
#[derive(Default)]
struct FakeClient {
    calls: Mutex<Vec<String>>,
}

impl FakeClient {
    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl CallClient for FakeClient {
    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> ClientFuture<'_, ()> {
        self.record(format!("progress {progress} {total:?} {message:?}"));
        Box::pin(async {})
    }

    fn log(
        &self,
        level: LogLevel,
        logger: String,
        data: serde_json::Value,
    ) -> ClientFuture<'_, ()> {
        let level = match level {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        };
        self.record(format!("log {level} {logger} {data}"));
        Box::pin(async {})
    }

    fn elicit(
        &self,
        request: ElicitRequest,
    ) -> ClientFuture<'_, Result<ElicitResponse, ClientError>> {
        self.record(format!(
            "elicit {} {}",
            request.message, request.requested_schema
        ));
        Box::pin(async {
            Ok(ElicitResponse {
                action: ElicitAction::Accept,
                content: Some(r#"{"name":"Ada"}"#.into()),
            })
        })
    }

    fn sample(
        &self,
        request: SamplingRequest,
    ) -> ClientFuture<'_, Result<SamplingResponse, ClientError>> {
        self.record(format!(
            "sample {} messages, max {}, system {:?}",
            request.messages.len(),
            request.max_tokens,
            request.system_prompt
        ));
        Box::pin(async {
            Ok(SamplingResponse {
                role: Role::Assistant,
                content: ContentBlock::Text("hi".into()),
                model: "fake-model".into(),
                stop_reason: Some("endTurn".into()),
            })
        })
    }

    fn resource_updated(&self, uri: String) -> ClientFuture<'_, ()> {
        self.record(format!("updated {uri}"));
        Box::pin(async {})
    }
}

/// Calls `tool` with `client` behind the call.
async fn call_with(
    host: &Host,
    tool: &str,
    arguments: serde_json::Value,
    client: Option<Arc<FakeClient>>,
) -> Result<ToolResult, ToolCallError> {
    let serde_json::Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    host.call(CallRequest {
        tool_call_id: host.new_call_id(),
        tool: host.tool(tool).expect("the tool exists"),
        arguments,
        source: "test",
        cancel: Arc::default(),
        client: client.map(|c| c as Arc<dyn CallClient>),
        progress: None,
        actor: None,
        principal: None,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_returns_every_kind_of_content_block_exactly() {
    let env = env("").await;
    let plugin = env
        .host
        .plugins()
        .into_iter()
        .find(|p| p.id() == "server")
        .unwrap();
    assert_eq!(plugin.contract(), ContractVersion::V0_2_0);
    let bash = env.host.plugins().into_iter().next().unwrap();
    assert_eq!(
        bash.contract(),
        ContractVersion::V0_1_0,
        "the built-in bash is a 0.1.0 plugin"
    );

    let entry = env
        .host
        .tools()
        .iter()
        .find(|t| t.name == "content")
        .unwrap();
    assert_eq!(entry.spec.title.as_deref(), Some("The content tool"));
    let schema = env
        .host
        .tools()
        .iter()
        .find(|t| t.name == "schema")
        .unwrap();
    assert!(schema.spec.output_schema.is_some());
    // An output schema that is not a JSON object refuses the tool at load.
    let refused: Vec<(&str, &str)> = env
        .host
        .refused_tools()
        .iter()
        .map(|r| (r.name.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(
        refused,
        [(
            "bad_output_schema",
            "its output schema is not a JSON object"
        )]
    );

    let out = env.host.call_tool("content", json!({})).await.unwrap();
    assert_eq!(
        out.content,
        vec![
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
        ]
    );
    assert_eq!(out.structured, Some(json!({"ok": true, "blocks": 6})));
    assert!(!out.is_error);
    assert_eq!(out.text(), "hello");
    assert_eq!(
        out.render_terminal(),
        "hello\n[image image/png, 67 bytes]\n[audio audio/wav, 12 bytes]\n\
         [resource test://static (text/plain), 11 bytes of text]\n\
         [resource test://template/7/data, 4 bytes]\n[resource link test://static \"static\"]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_manifest_grants_elicit_and_sample_are_not_granted() {
    let env = env("").await;
    let client = Arc::new(FakeClient::default());
    let out = call_with(&env.host, "client", json!({}), Some(client.clone()))
        .await
        .unwrap();
    let text = out.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "elicit: not-granted: plugin `server` may not use elicitation: its manifest does not \
             grant it (add `elicitation = true` to the manifest)",
            "bad elicit: not-granted: plugin `server` may not use elicitation: its manifest does \
             not grant it (add `elicitation = true` to the manifest)",
            "sample: not-granted: plugin `server` may not use sampling: its manifest does not \
             grant it (add `sampling = true` to the manifest)",
            "bad sample: not-granted: plugin `server` may not use sampling: its manifest does \
             not grant it (add `sampling = true` to the manifest)",
        ]
    );
    // Progress, log and resource notices still reach the client, within the
    // rules: progress only when it grows, a log over 64 KiB replaced by a note,
    // resource-updated only for the plugin's own URIs.
    let calls = client.calls();
    assert_eq!(
        calls,
        [
            "progress 1 Some(10.0) Some(\"one\")",
            "progress 2 None None",
            "log info test {\"k\":1}",
            "log warning server \"not json\"",
            &format!(
                "log warning server \"plugin `server`: a log message of {} bytes was \
                 dropped: at most 65536 bytes per message (MAX_LOG_MESSAGE_BYTES)\"",
                70 * 1024
            ),
            "updated test://static",
            "updated test://template/9/data",
        ],
        "elicit and sample must not reach the client without the grants"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_grants_elicit_and_sample_reach_the_client() {
    let env = env(GRANTS).await;
    let client = Arc::new(FakeClient::default());
    let out = call_with(&env.host, "client", json!({}), Some(client.clone()))
        .await
        .unwrap();
    let text = out.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "elicit: accept {\"name\":\"Ada\"}",
            "bad elicit: failed: requested-schema is not a JSON object",
            "sample: assistant \"hi\" model fake-model stop endTurn",
            "bad sample: failed: message 0 of the sampling request is not text, image or audio \
             (MCP `SamplingMessage` content)",
        ],
        "{text}"
    );
    let calls = client.calls();
    let asked: Vec<&String> = calls
        .iter()
        .filter(|c| c.starts_with("elicit") || c.starts_with("sample"))
        .collect();
    assert_eq!(
        asked,
        [
            "elicit plugin `server` asks (this is not a toolhost permission request):\n| Your name? {\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"]}",
            "sample 1 messages, max 50, system Some(\"Be brief.\")",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_elicit_and_sample_are_unsupported() {
    let env = env(GRANTS).await;
    let out = env.host.call_tool("client", json!({})).await.unwrap();
    let text = out.text();
    let lines: Vec<&str> = text.lines().collect();
    let unsupported = "unsupported: no MCP client is behind this call (e.g. `toolhost call`, \
                       or the plugin is being loaded), so nobody can answer";
    assert_eq!(
        lines,
        [
            format!("elicit: {unsupported} elicitation"),
            format!("bad elicit: {unsupported} elicitation"),
            format!("sample: {unsupported} sampling"),
            format!("bad sample: {unsupported} sampling"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_plugin_is_cut_off_at_the_limits() {
    let env = env("").await;
    let client = Arc::new(FakeClient::default());
    let out = call_with(&env.host, "flood", json!({}), Some(client.clone()))
        .await
        .unwrap();
    assert_eq!(out.text(), "flooded");
    let calls = client.calls();
    let progress = calls.iter().filter(|c| c.starts_with("progress")).count();
    assert_eq!(progress, MAX_PROGRESS_PER_CALL);
    assert_eq!(
        calls.iter().rfind(|c| c.starts_with("progress")).unwrap(),
        &format!("progress {MAX_PROGRESS_PER_CALL} None None")
    );
    let logs: Vec<&String> = calls.iter().filter(|c| c.starts_with("log")).collect();
    assert_eq!(
        logs.len(),
        MAX_LOGS_PER_CALL + 1,
        "the messages and one note"
    );
    assert_eq!(logs[0], "log debug server 0");
    assert_eq!(
        logs[MAX_LOGS_PER_CALL],
        &format!(
            "log warning server \"plugin `server`: further log messages of this call \
             are dropped: at most {MAX_LOGS_PER_CALL} per call (MAX_LOGS_PER_CALL)\""
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_over_the_limits_are_errors() {
    let env = env("memory = \"128MiB\"\n").await;
    match env.host.call_tool("too_many", json!({})).await {
        Err(ToolCallError::Plugin(CallError::TooManyBlocks {
            plugin,
            what,
            count,
            limit,
            limit_name,
        })) => {
            assert_eq!(
                (plugin.as_str(), what, count, limit, limit_name),
                (
                    "server",
                    "content blocks",
                    MAX_CONTENT_BLOCKS + 1,
                    MAX_CONTENT_BLOCKS,
                    "MAX_CONTENT_BLOCKS"
                )
            );
        }
        other => panic!("{other:?}"),
    }
    match env.host.call_tool("too_big", json!({"mib": 17})).await {
        Err(ToolCallError::Plugin(CallError::OutputTooLarge {
            plugin,
            bytes,
            limit,
        })) => {
            assert_eq!(plugin, "server");
            assert_eq!(bytes, (17 << 20) + "image/png".len());
            assert_eq!(limit, MAX_OUTPUT_BYTES);
        }
        other => panic!("{other:?}"),
    }
    // Just under the limit is fine.
    let out = env
        .host
        .call_tool("too_big", json!({"mib": 15}))
        .await
        .unwrap();
    assert!(matches!(&out.content[..], [ContentBlock::Image(m)] if m.data.len() == 15 << 20));
    // A tool that declares an output schema must give structured content.
    let out = env.host.call_tool("schema", json!({})).await.unwrap();
    assert!(out.is_error);
    assert_eq!(
        out.content,
        [
            ContentBlock::Text(
                "tool `schema` of plugin `server` declares an output schema, but its result has \
                 no structured content (a JSON object), which MCP requires"
                    .into()
            ),
            ContentBlock::Text("n is 3".into()),
        ]
    );
    let out = env
        .host
        .call_tool("schema", json!({"give": true}))
        .await
        .unwrap();
    assert!(!out.is_error);
    assert_eq!(out.structured, Some(json!({"n": 3})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_templates_route_to_the_plugin() {
    let env = env("").await;
    let host = &env.host;
    let uris: Vec<&str> = host
        .resources()
        .iter()
        .map(|r| r.resource.uri.as_str())
        .collect();
    assert_eq!(uris, ["test://static"]);
    assert_eq!(host.resources()[0].plugin.id(), "server");
    let templates: Vec<&str> = host
        .resource_templates()
        .iter()
        .map(|t| t.template.uri_template.as_str())
        .collect();
    assert_eq!(templates, [TEMPLATE]);

    let client = Arc::new(FakeClient::default());
    let contents = host
        .read_resource("test://static", Some(client.clone()))
        .await
        .unwrap();
    assert_eq!(
        contents,
        [ResourceContents {
            uri: "test://static".into(),
            mime_type: Some("text/plain".into()),
            body: ResourceBody::Text("static text".into()),
        }]
    );
    assert_eq!(
        client.calls(),
        ["log info server \"reading static\""],
        "the client channel reaches resource reads too"
    );
    let contents = host
        .read_resource("test://template/42/data", None)
        .await
        .unwrap();
    assert_eq!(
        contents,
        [ResourceContents {
            uri: "test://template/42/data".into(),
            mime_type: Some("application/octet-stream".into()),
            body: ResourceBody::Blob(b"42".to_vec()),
        }]
    );
    match host
        .read_resource("test://template/missing/data", None)
        .await
    {
        Err(RequestError::ResourceNotFound { uri, message }) => {
            assert_eq!(uri, "test://template/missing/data");
            assert_eq!(message.as_deref(), Some("no data missing"));
        }
        other => panic!("{other:?}"),
    }
    for unknown in [
        "test://nothing",
        "test://template/a/b/data",
        "",
        "no scheme",
    ] {
        match host.read_resource(unknown, None).await {
            Err(RequestError::ResourceNotFound { uri, message: None }) => assert_eq!(uri, unknown),
            other => panic!("{unknown}: {other:?}"),
        }
    }
    match host
        .read_resource("test://template/broken/data", None)
        .await
    {
        Err(RequestError::Failed { plugin, message }) => {
            assert_eq!(
                (plugin.as_str(), message.as_str()),
                ("server", "the data is broken")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_render_with_their_arguments() {
    let env = env("").await;
    let host = &env.host;
    let prompts: Vec<(&str, Vec<(&str, bool)>)> = host
        .prompts()
        .iter()
        .map(|p| {
            (
                p.prompt.name.as_str(),
                p.prompt
                    .arguments
                    .iter()
                    .map(|a| (a.name.as_str(), a.required))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(prompts, [("greet", vec![("name", true), ("style", false)])]);

    let args = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let rendered = host
        .get_prompt("greet", args(&[("name", "Ada"), ("style", "formal")]), None)
        .await
        .unwrap();
    assert_eq!(
        rendered,
        PromptResult {
            description: Some("A formal greeting".into()),
            messages: vec![
                PromptMessage {
                    role: Role::User,
                    content: ContentBlock::Text("Greet Ada.".into()),
                },
                PromptMessage {
                    role: Role::Assistant,
                    content: ContentBlock::Text("Good day, Ada.".into()),
                },
            ],
        }
    );
    match host
        .get_prompt("greet", args(&[("style", "formal")]), None)
        .await
    {
        Err(RequestError::InvalidArguments { what, message }) => {
            assert_eq!(what, "prompt `greet`");
            assert_eq!(message, "missing required argument `name`");
        }
        other => panic!("{other:?}"),
    }
    match host
        .get_prompt("greet", args(&[("name", "Ada"), ("style", "rude")]), None)
        .await
    {
        Err(RequestError::InvalidArguments { message, .. }) => {
            assert_eq!(message, "style must be casual or formal, not rude");
        }
        other => panic!("{other:?}"),
    }
    match host.get_prompt("nope", vec![], None).await {
        Err(RequestError::UnknownPrompt { name }) => assert_eq!(name, "nope"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_route_to_the_prompt_or_template() {
    let env = env("").await;
    let host = &env.host;
    let prompt = CompletionRef::Prompt("greet".into());
    let got = host
        .complete(&prompt, "style", "f", vec![("name".into(), "Ada".into())])
        .await
        .unwrap();
    assert_eq!(
        got,
        Completions {
            values: vec!["formal".into(), "name=Ada".into()],
            total: 2,
        }
    );
    let template = CompletionRef::Resource(TEMPLATE.into());
    let got = host.complete(&template, "id", "2", vec![]).await.unwrap();
    let expected: Vec<String> = std::iter::once("2".to_string())
        .chain((20..30).map(|i| i.to_string()))
        .collect();
    assert_eq!(got.values, expected);
    assert_eq!(got.total, 11);
    // At most 100 values are passed on; `total` says how many there were.
    let got = host
        .complete(&template, "id", "many", vec![])
        .await
        .unwrap();
    assert_eq!(got.values.len(), toolhost_runtime::MAX_COMPLETIONS);
    assert_eq!(got.total, 150);

    match host
        .complete(&CompletionRef::Prompt("nope".into()), "x", "", vec![])
        .await
    {
        Err(RequestError::UnknownReference(r)) => {
            assert_eq!(r, CompletionRef::Prompt("nope".into()))
        }
        other => panic!("{other:?}"),
    }
    match host.complete(&prompt, "colour", "", vec![]).await {
        Err(RequestError::InvalidArguments { what, message }) => {
            assert_eq!(what, "prompt `greet`");
            assert_eq!(message, "it has no argument `colour`");
        }
        other => panic!("{other:?}"),
    }
    match host.complete(&template, "name", "", vec![]).await {
        Err(RequestError::InvalidArguments { what, .. }) => {
            assert_eq!(what, format!("resource template `{TEMPLATE}`"))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_plugin_offering_the_same_names_is_refused_them() {
    let env = env_with(&[("server", ""), ("server2", "")]).await;
    let host = &env.host;
    assert_eq!(host.resources().len(), 1);
    assert_eq!(host.resources()[0].plugin.id(), "server");
    assert_eq!(host.resource_templates().len(), 1);
    assert_eq!(host.prompts().len(), 1);
    assert_eq!(host.prompts()[0].plugin.id(), "server");
    let refused: Vec<(&str, &str, &str, &str)> = host
        .refused_offers()
        .iter()
        .map(|r| {
            (
                r.plugin.as_str(),
                r.kind.as_str(),
                r.name.as_str(),
                r.reason.as_str(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            (
                "server2",
                "resource",
                "test://static",
                "plugin `server` already offers a resource of that name"
            ),
            (
                "server2",
                "resource template",
                TEMPLATE,
                "plugin `server` already offers a resource template of that name"
            ),
            (
                "server2",
                "prompt",
                "greet",
                "plugin `server` already offers a prompt of that name"
            ),
        ]
    );
    // Tools are prefixed instead, as for any two plugins.
    assert!(host.tools().iter().any(|t| t.name == "server2__content"));
    // And server2 may not announce changes of the URIs refused it: reads of
    // them go to `server`, so its notices for them are dropped.
    let client = Arc::new(FakeClient::default());
    call_with(host, "server2__client", json!({}), Some(client.clone()))
        .await
        .unwrap();
    let updates: Vec<String> = client
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("updated"))
        .collect();
    assert_eq!(updates, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_the_contract_offers_and_grants() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("server.wasm");
    std::fs::write(&wasm, SERVER).unwrap();
    std::fs::write(
        dir.path().join("server.toml"),
        format!("id = \"server\"\ncontract = \"0.2.0\"\n{GRANTS}"),
    )
    .unwrap();
    let report = toolhost_runtime::inspect(&wasm).await.unwrap();
    assert_eq!(report.load_error(), None);
    assert_eq!(report.contract, Some(ContractVersion::V0_2_0));
    let text = report.to_text();
    for expected in [
        "contract   0.2.0",
        "toolhost:plugin/client@0.2.0",
        "toolhost:plugin/resources@0.2.0",
        "resources:\n  test://static",
        "resource templates:\n  test://template/{id}/data",
        "prompts:\n  greet            (name, style?) Greets someone.",
        "refused tools (not offered):\n  bad_output_schema: its output schema is not a JSON object",
        "elicitation yes",
        "sampling   yes",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let json = report.to_json();
    assert_eq!(json["contract"], "0.2.0");
    assert_eq!(json["resources"][0]["uri"], "test://static");
    assert_eq!(json["resourceTemplates"][0]["uriTemplate"], TEMPLATE);
    assert_eq!(json["prompts"][0]["name"], "greet");
    assert_eq!(json["manifest"]["elicitation"], true);
    assert_eq!(json["manifest"]["sampling"], true);
}
