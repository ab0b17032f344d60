//! A hostile tool plugin, built only for the tests (`tests/all/hostile.rs`).
//!
//! Each tool tries one way to escape the sandbox or exhaust the host; the
//! tests assert the exact containment. Tools that attempt I/O report what
//! happened as text (`is-error` when the attempt failed) so the test can see
//! the guest's view; tools that exhaust a limit never return.

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../../wit/v0.1.0",
        world: "toolhost:plugin/tool-plugin@0.1.0",
        generate_all,
    });

    use std::hint::black_box;

    use exports::toolhost::plugin::tool::{
        Guest, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec,
    };
    use toolhost::plugin::sessions::{self as s, StartRequest, StdinMode};

    const TOOLS: &[(&str, &str)] = &[
        (
            "hello",
            "Prints a line to stdout and stderr, returns `hello`.",
        ),
        ("spin", "Loops forever (CPU limit)."),
        (
            "sleep",
            "Blocks in a host call for `ms` (default 60000) ms (wall limit).",
        ),
        (
            "alloc",
            "Allocates `mib` MiB (default 1024) and touches it (memory limit).",
        ),
        (
            "recurse",
            "Recurses without end (stack limit); `frames`: with 512-byte frames in linear memory.",
        ),
        (
            "huge",
            "Returns `mib` MiB (default 20) of text (output cap).",
        ),
        ("trap", "Panics mid-call."),
        ("read", "Reads the file `path` (default /etc/passwd)."),
        ("write", "Writes `text` to the file `path`."),
        ("env", "Returns every environment variable it sees."),
        ("socket", "Connects to TCP `addr`."),
        (
            "exec",
            "Asks the host to start `command` (default `echo pwned`).",
        ),
        (
            "steal",
            "Checks and kills the session `id` (another plugin's).",
        ),
    ];

    struct Hostile;

    fn arg<'a>(args: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
        args.get(key)
    }

    fn text(text: String, is_error: bool) -> ToolOutput {
        ToolOutput {
            text,
            structured: None,
            is_error,
        }
    }

    fn report<T: std::fmt::Debug, E: std::fmt::Debug>(r: Result<T, E>) -> ToolOutput {
        match r {
            Ok(v) => text(format!("ok: {v:?}"), false),
            Err(e) => text(format!("err: {e:?}"), true),
        }
    }

    /// Recursion on the wasm stack only (the host's stack limit trips).
    #[inline(never)]
    fn recurse(n: u64) -> u64 {
        if black_box(n) == u64::MAX {
            return 0;
        }
        recurse(black_box(n + 1)).wrapping_add(black_box(n))
    }

    /// Recursion with a frame on Rust's shadow stack in linear memory: the
    /// shadow stack runs out first, below address 0 (an out-of-bounds trap).
    #[inline(never)]
    #[allow(unconditional_recursion)]
    fn recurse_frames(n: u64) -> u64 {
        let frame = black_box([n as u8; 512]);
        recurse_frames(black_box(n + 1)) + frame[0] as u64
    }

    impl Guest for Hostile {
        fn describe() -> Vec<ToolSpec> {
            TOOLS
                .iter()
                .map(|(name, description)| ToolSpec {
                    name: (*name).into(),
                    description: (*description).into(),
                    input_schema: r#"{"type":"object"}"#.into(),
                    hints: ToolHints {
                        read_only: false,
                        destructive: true,
                        idempotent: false,
                        open_world: true,
                    },
                })
                .collect()
        }

        fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
            let args: serde_json::Value = serde_json::from_str(&call.arguments)
                .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
            let str_arg = |key: &str, default: &str| -> String {
                arg(&args, key)
                    .and_then(|v| v.as_str())
                    .unwrap_or(default)
                    .to_string()
            };
            let num_arg = |key: &str, default: u64| -> u64 {
                arg(&args, key).and_then(|v| v.as_u64()).unwrap_or(default)
            };
            Ok(match call.name.as_str() {
                "hello" => {
                    println!("hello from the hostile plugin's stdout");
                    eprintln!("hello from the hostile plugin's stderr");
                    text("hello".into(), false)
                }
                "spin" => {
                    let mut i = 0u64;
                    loop {
                        i = black_box(i.wrapping_add(1));
                    }
                }
                "sleep" => {
                    let ms = num_arg("ms", 60_000);
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                    text("slept".into(), false)
                }
                "alloc" => {
                    let bytes = (num_arg("mib", 1024) << 20) as usize;
                    let mut v: Vec<u8> = Vec::with_capacity(bytes);
                    v.resize(bytes, 1);
                    let v = black_box(v);
                    text(format!("allocated {} bytes", v.len()), false)
                }
                "recurse" if arg(&args, "frames").is_some() => {
                    text(format!("{}", recurse_frames(0)), false)
                }
                "recurse" => text(format!("{}", recurse(0)), false),
                "huge" => text("x".repeat((num_arg("mib", 20) << 20) as usize), false),
                "trap" => panic!("the hostile plugin panics on purpose"),
                "read" => {
                    report(std::fs::read_to_string(str_arg("path", "/etc/passwd")).map(|s| s.len()))
                }
                "write" => report(std::fs::write(str_arg("path", "/x"), str_arg("text", ""))),
                "env" => {
                    let vars: Vec<String> =
                        std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
                    text(vars.join("\n"), false)
                }
                "socket" => {
                    report(std::net::TcpStream::connect(str_arg("addr", "127.0.0.1:1")).map(|_| ()))
                }
                "exec" => report(s::start(&StartRequest {
                    command: str_arg("command", "echo pwned"),
                    cwd: None,
                    env: Vec::new(),
                    stdin: StdinMode::Closed,
                    timeout_ms: Some(10_000),
                    shell: None,
                    tool_call_id: Some(call.tool_call_id.clone()),
                })),
                "steal" => {
                    let id = str_arg("id", "");
                    let check = s::check(&id).map(|snap| snap.command);
                    let kill = s::kill(&id, Some("SIGKILL")).map(|k| k.signalled);
                    let out = s::read_output(&id, 0, 1 << 20).map(|r| r.data.len());
                    let listed = s::list().len();
                    let any_ok = check.is_ok() || kill.is_ok() || out.is_ok() || listed > 0;
                    text(
                        format!("check: {check:?}\nkill: {kill:?}\nread: {out:?}\nlist: {listed}"),
                        !any_ok,
                    )
                }
                other => return Err(ToolError::UnknownTool(other.into())),
            })
        }
    }

    export!(Hostile);
}
