//! A fuzz plugin for contract 0.1.0 (world `tool-plugin`), built only for the
//! tests (`tests/all/fuzz.rs`), with wit-bindgen straight against
//! `wit/v0.1.0`. Its one tool, `fuzz_0_1_0`, takes `{"seed": N, "steps": M,
//! "fault": bool}` and, from the seed, makes `steps` random calls of every
//! function and resource method of `sessions` with edge arguments (huge
//! strings, NULs, invalid UTF-8 in bytes, maximal integers, dropped and
//! reused handles, calls out of order): see `../sessions.rs`, which the
//! 0.2.0 fuzz plugin shares. It ends every session it left running, then
//! returns how many calls it made and any answer the contract rules out (as
//! `is-error`). With `fault`, it ends with a guest fault on purpose (a
//! handle used after its drop, a parent dropped before its child, a forged
//! handle), which must trap the call.

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../../../wit/v0.1.0",
        world: "toolhost:plugin/tool-plugin@0.1.0",
        generate_all,
    });

    use exports::toolhost::plugin::tool::{
        Guest, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec,
    };
    use toolhost::plugin::sessions as s;

    include!("../../sessions.rs");

    struct Fuzz;

    impl Guest for Fuzz {
        fn describe() -> Vec<ToolSpec> {
            vec![ToolSpec {
                name: "fuzz_0_1_0".into(),
                description: "Random calls of every sessions function from `seed`.".into(),
                input_schema: r#"{"type":"object"}"#.into(),
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
                world.step();
            }
            if args.fault {
                world.fault();
            }
            world.clean_up();
            Ok(ToolOutput {
                text: world.summary(args.seed),
                structured: None,
                is_error: !world.violations.is_empty(),
            })
        }
    }

    export!(Fuzz);
}
