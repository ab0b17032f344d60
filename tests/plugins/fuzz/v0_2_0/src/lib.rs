//! A fuzz plugin for contract 0.2.0 (world `tool-plugin`), built only for the
//! tests (`tests/all/fuzz.rs`), with wit-bindgen straight against
//! `wit/v0.2.0`. Like the 0.1.0 fuzz plugin (whose `../sessions.rs` it
//! shares for `sessions`), its tool `fuzz_0_2_0` takes `{"seed": N, "steps": M,
//! "fault": bool}`; its random steps also call every function of `client`
//! (progress that is NaN, infinite or shrinking, log messages of any size
//! and level, elicitations and samplings with malformed schemas, blocks and
//! numbers, resource notices for any URI), and its result is random content
//! blocks when the seed says so.

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../../../wit/v0.2.0",
        world: "toolhost:plugin/tool-plugin@0.2.0",
        generate_all,
    });

    use exports::toolhost::plugin0_2_0::tool::{
        Guest, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec,
    };
    use toolhost::plugin0_1_0::sessions as s;
    use toolhost::plugin0_2_0::client::{
        self, ElicitRequest, LogLevel, SamplingMessage, SamplingRequest,
    };
    use toolhost::plugin0_2_0::content::{
        Annotations, ContentBlock, Media, ResourceBody, ResourceContents, ResourceLink, Role,
    };

    include!("../../sessions.rs");

    fn f64_edge(rng: &mut Rng) -> f64 {
        let random = (rng.next() % 1000) as f64;
        *rng.pick(&[
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            -1.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            1e308,
            random,
        ])
    }

    fn annotations(rng: &mut Rng) -> Option<Annotations> {
        rng.chance(2).then(|| Annotations {
            audience: vec![Role::User, Role::Assistant, Role::User],
            priority: Some(f64_edge(rng)),
            last_modified: Some(rng.string()),
        })
    }

    fn block(rng: &mut Rng) -> ContentBlock {
        match rng.below(5) {
            0 => ContentBlock::Text(rng.string()),
            1 => ContentBlock::Image(Media {
                data: rng.bytes(1 << 20),
                mime_type: rng.string(),
                annotations: annotations(rng),
            }),
            2 => ContentBlock::Audio(Media {
                data: rng.bytes(1 << 10),
                mime_type: "audio/wav".into(),
                annotations: annotations(rng),
            }),
            3 => ContentBlock::Resource(ResourceContents {
                uri: rng.string(),
                mime_type: rng.chance(2).then(|| rng.string()),
                body: if rng.chance(2) {
                    ResourceBody::Text(rng.string())
                } else {
                    ResourceBody::Blob(rng.bytes(1 << 16))
                },
            }),
            _ => ContentBlock::ResourceLink(ResourceLink {
                uri: rng.string(),
                name: rng.string(),
                title: rng.chance(2).then(|| rng.string()),
                description: rng.chance(2).then(|| rng.string()),
                mime_type: rng.chance(2).then(|| rng.string()),
                size: rng.chance(2).then(|| rng.u64()),
                annotations: annotations(rng),
            }),
        }
    }

    fn json_text(rng: &mut Rng) -> String {
        match rng.below(6) {
            0 => r#"{"type":"object","properties":{"a":{"type":"string"}}}"#.into(),
            1 => "[]".into(),
            2 => "{".repeat(1 + rng.below(100_000)),
            3 => format!("{{\"k\":\"{}\"}}", "v".repeat(rng.below(200_000))),
            4 => "null".into(),
            _ => rng.string(),
        }
    }

    /// One random call of `client`.
    fn client_step(rng: &mut Rng, world_calls: &mut usize, errors: &mut usize) {
        *world_calls += 1;
        match rng.below(5) {
            0 => {
                let message = rng.chance(2).then(|| rng.string());
                let total = rng.chance(2).then(|| f64_edge(rng));
                client::report_progress(f64_edge(rng), total, message.as_deref());
            }
            1 => {
                let level = *rng.pick(&[
                    LogLevel::Debug,
                    LogLevel::Info,
                    LogLevel::Notice,
                    LogLevel::Warning,
                    LogLevel::Error,
                    LogLevel::Critical,
                    LogLevel::Alert,
                    LogLevel::Emergency,
                ]);
                let logger = rng.chance(2).then(|| rng.string());
                let data = json_text(rng);
                client::log(level, logger.as_deref(), &data);
            }
            2 => {
                let r = client::elicit(&ElicitRequest {
                    message: rng.string(),
                    requested_schema: json_text(rng),
                });
                *errors += r.is_err() as usize;
            }
            3 => {
                let messages = (0..rng.below(4))
                    .map(|_| SamplingMessage {
                        role: if rng.chance(2) {
                            Role::User
                        } else {
                            Role::Assistant
                        },
                        content: block(rng),
                    })
                    .collect();
                let r = client::sample(&SamplingRequest {
                    messages,
                    max_tokens: rng.u32(),
                    system_prompt: rng.chance(2).then(|| rng.string()),
                    temperature: rng.chance(2).then(|| f64_edge(rng)),
                    stop_sequences: (0..rng.below(3)).map(|_| rng.string()).collect(),
                    model_preferences: rng.chance(2).then(|| json_text(rng)),
                });
                *errors += r.is_err() as usize;
            }
            _ => client::resource_updated(&rng.string()),
        }
    }

    struct Fuzz;

    impl Guest for Fuzz {
        fn describe() -> Vec<ToolSpec> {
            vec![ToolSpec {
                name: "fuzz_0_2_0".into(),
                title: None,
                description: "Random calls of every sessions and client function from `seed`."
                    .into(),
                input_schema: r#"{"type":"object"}"#.into(),
                output_schema: None,
                hints: ToolHints {
                    read_only: false,
                    destructive: true,
                    idempotent: false,
                    open_world: true,
                },
            }]
        }

        fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
            let args = Args::parse(&call.arguments)?;
            let mut world = World::new(args.seed, call.tool_call_id);
            for _ in 0..args.steps {
                if world.rng.chance(3) {
                    let (mut calls, mut errors) = (world.calls, world.errors);
                    client_step(&mut world.rng, &mut calls, &mut errors);
                    (world.calls, world.errors) = (calls, errors);
                } else {
                    world.step();
                }
            }
            if args.fault {
                world.fault();
            }
            world.clean_up();
            let mut content = vec![ContentBlock::Text(world.summary(args.seed))];
            // Random blocks in the result, a few in most seeds: what the host
            // refuses (too many, too big) it refuses with an error, not a trap.
            if world.rng.chance(4) {
                let n = *world.rng.pick(&[1, 10, 1001]);
                content.extend((0..n).map(|_| block(&mut world.rng)));
            }
            Ok(ToolOutput {
                content,
                structured: None,
                is_error: !world.violations.is_empty(),
            })
        }
    }

    export!(Fuzz);
}
