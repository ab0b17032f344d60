//! Argument parsing and validation for every tool.
//!
//! Arguments arrive as a JSON object text. Unknown fields, wrong types and
//! out-of-range values are refused with a message that names the field, so the
//! agent can fix its call; the host turns the message into
//! `tool-error::invalid-arguments`.

use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Default `timeout_ms` of a foreground `bash` run (2 minutes).
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Largest accepted `timeout_ms` (10 minutes).
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Largest accepted `yield_ms` / `wait_ms` (10 minutes).
pub const MAX_WAIT_MS: u64 = 600_000;
/// Default `yield_ms` of an `interactive` run that is not started in the background.
pub const DEFAULT_INTERACTIVE_YIELD_MS: u64 = 1_000;
/// Default `yield_ms` of `write_stdin`.
pub const DEFAULT_WRITE_YIELD_MS: u64 = 250;
/// Signals `kill_shell` accepts by name.
pub const SIGNALS: [&str; 5] = ["SIGTERM", "SIGINT", "SIGKILL", "SIGHUP", "SIGQUIT"];

/// Raw `bash` arguments, as the agent sent them.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawBash {
    command: String,
    timeout_ms: Option<u64>,
    run_in_background: Option<bool>,
    cwd: Option<String>,
    #[allow(dead_code)] // accepted for clients' display; not used by the plugin
    description: Option<String>,
    yield_ms: Option<u64>,
    interactive: Option<bool>,
}

/// A validated `bash` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bash {
    /// The command line (`sh -c COMMAND`).
    pub command: String,
    /// The timeout passed to `sessions.start` (`None`: no timeout).
    pub timeout_ms: Option<u64>,
    /// Start as a background session and return its id at once.
    pub background: bool,
    /// Working directory, relative to the workspace root or absolute.
    pub cwd: Option<String>,
    /// Detach the foreground run into a background task after this long.
    pub yield_ms: Option<u64>,
    /// Keep stdin open for `write_stdin`.
    pub interactive: bool,
}

/// Validated `bash_output` arguments.
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BashOutput {
    /// The session to read.
    pub session_id: String,
    /// Wait up to this long for the session to end before reading (default 0).
    #[serde(default)]
    pub wait_ms: u64,
    /// Read the bytes from this offset of the session's output again
    /// ([`Range::Bytes`]) instead of its new output.
    pub offset: Option<u64>,
    /// With `offset`: how many bytes (default [`DEFAULT_RANGE_BYTES`]).
    pub length: Option<u64>,
    /// Read from this line (1: the first) of the session's output again
    /// ([`Range::Lines`]) instead of its new output.
    pub line: Option<u64>,
    /// With `line`: how many lines (default [`DEFAULT_RANGE_LINES`]).
    pub lines: Option<u64>,
}

/// Most bytes one range read covers: 1 MiB, one host read
/// (`toolhost_process::MAX_READ_BYTES`); its text is still cut to a result's size.
pub const MAX_RANGE_BYTES: u64 = 1 << 20;
/// Bytes a range read by `offset` covers when `length` is not given: about what
/// one result shows.
pub const DEFAULT_RANGE_BYTES: u64 = 20_000;
/// Most lines one range read by `line` covers (within [`MAX_RANGE_BYTES`]).
pub const MAX_RANGE_LINES: u64 = 100_000;
/// Lines a range read by `line` covers when `lines` is not given.
pub const DEFAULT_RANGE_LINES: u64 = 200;

/// A part of a session's output to read again, by bytes or by lines; a range
/// read never moves the session's read cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// `length` bytes from byte `offset` (0: the first).
    Bytes {
        /// Offset of the first byte.
        offset: u64,
        /// How many bytes.
        length: u64,
    },
    /// `lines` lines from line `line` (1: the first), at most
    /// [`MAX_RANGE_BYTES`] of them.
    Lines {
        /// The first line's number.
        line: u64,
        /// How many lines.
        lines: u64,
    },
}

impl BashOutput {
    /// The range to read again, if the call asked for one.
    pub fn range(&self) -> Option<Range> {
        match (self.offset, self.line) {
            (Some(offset), _) => Some(Range::Bytes {
                offset,
                length: self.length.unwrap_or(DEFAULT_RANGE_BYTES),
            }),
            (None, Some(line)) => Some(Range::Lines {
                line,
                lines: self.lines.unwrap_or(DEFAULT_RANGE_LINES),
            }),
            (None, None) => None,
        }
    }
}

/// Validated `kill_shell` arguments.
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KillShell {
    /// The session to kill.
    pub session_id: String,
    /// A signal name from [`SIGNALS`]; `None`: SIGTERM, a grace, then SIGKILL.
    pub signal: Option<String>,
}

/// Validated `write_stdin` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteStdin {
    /// The session to write to.
    pub session_id: String,
    /// The text to write (may be empty).
    pub input: String,
    /// Close stdin after writing.
    pub close_stdin: bool,
    /// How long to collect output after writing.
    pub yield_ms: u64,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawWriteStdin {
    session_id: String,
    input: String,
    close_stdin: Option<bool>,
    yield_ms: Option<u64>,
}

/// `list_shells` takes no arguments.
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ListShells {}

/// Decodes a JSON object into `T`, naming the tool in the error.
fn decode<T: DeserializeOwned>(tool: &str, json: &str) -> Result<T, String> {
    let json = if json.trim().is_empty() { "{}" } else { json };
    serde_json::from_str(json).map_err(|e| format!("{tool}: {e}"))
}

fn check_range(tool: &str, field: &str, value: u64, min: u64, max: u64) -> Result<(), String> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{tool}: `{field}` must be between {min} and {max} (milliseconds); got {value}"
        ))
    }
}

/// Checks that `id` looks like a session id (`bg_` + 12 lowercase hex digits).
pub fn check_session_id(tool: &str, id: &str) -> Result<(), String> {
    let ok = id.len() == 15
        && id.starts_with("bg_")
        && id[3..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{tool}: `session_id` must look like `bg_` followed by 12 lowercase hex digits \
             (e.g. `bg_00000000002a`), as returned by `bash` or `list_shells`; got {id:?}"
        ))
    }
}

/// Parses and validates `bash` arguments.
pub fn bash(json: &str) -> Result<Bash, String> {
    let raw: RawBash = decode("bash", json)?;
    if raw.command.trim().is_empty() {
        return Err("bash: `command` must not be empty".into());
    }
    if let Some(t) = raw.timeout_ms {
        check_range("bash", "timeout_ms", t, 1, MAX_TIMEOUT_MS)?;
    }
    if let Some(y) = raw.yield_ms {
        check_range("bash", "yield_ms", y, 0, MAX_WAIT_MS)?;
    }
    if let Some(cwd) = &raw.cwd
        && cwd.trim().is_empty()
    {
        return Err("bash: `cwd` must not be empty (omit it for the workspace root)".into());
    }
    let background = raw.run_in_background.unwrap_or(false);
    let interactive = raw.interactive.unwrap_or(false);
    if background && raw.yield_ms.is_some() {
        return Err(
            "bash: `yield_ms` cannot be combined with `run_in_background` (a background run \
             returns at once)"
                .into(),
        );
    }
    // Background and interactive sessions are long-lived: no timeout unless asked.
    let timeout_ms = match raw.timeout_ms {
        Some(t) => Some(t),
        None if background || interactive => None,
        None => Some(DEFAULT_TIMEOUT_MS),
    };
    let yield_ms = match raw.yield_ms {
        Some(y) => Some(y),
        None if interactive && !background => Some(DEFAULT_INTERACTIVE_YIELD_MS),
        None => None,
    };
    Ok(Bash {
        command: raw.command,
        timeout_ms,
        background,
        cwd: raw.cwd,
        yield_ms,
        interactive,
    })
}

/// Parses and validates `bash_output` arguments.
pub fn bash_output(json: &str) -> Result<BashOutput, String> {
    let args: BashOutput = decode("bash_output", json)?;
    check_session_id("bash_output", &args.session_id)?;
    check_range("bash_output", "wait_ms", args.wait_ms, 0, MAX_WAIT_MS)?;
    let within = |field: &str, value: Option<u64>, min: u64, max: u64, unit: &str| match value {
        Some(v) if !(min..=max).contains(&v) => Err(format!(
            "bash_output: `{field}` must be between {min} and {max} ({unit}); got {v}"
        )),
        _ => Ok(()),
    };
    within("length", args.length, 1, MAX_RANGE_BYTES, "bytes")?;
    within("line", args.line, 1, u64::MAX >> 1, "1 is the first line")?;
    within("lines", args.lines, 1, MAX_RANGE_LINES, "lines")?;
    if args.offset.is_some() && args.line.is_some() {
        return Err(
            "bash_output: `offset` and `line` cannot be combined: read a range by bytes \
             (`offset`, `length`) or by lines (`line`, `lines`)"
                .into(),
        );
    }
    if args.length.is_some() && args.offset.is_none() {
        return Err("bash_output: `length` needs `offset` (the first byte to read)".into());
    }
    if args.lines.is_some() && args.line.is_none() {
        return Err("bash_output: `lines` needs `line` (the first line to read)".into());
    }
    Ok(args)
}

/// Parses and validates `kill_shell` arguments.
pub fn kill_shell(json: &str) -> Result<KillShell, String> {
    let args: KillShell = decode("kill_shell", json)?;
    check_session_id("kill_shell", &args.session_id)?;
    if let Some(sig) = &args.signal
        && !SIGNALS.contains(&sig.as_str())
    {
        return Err(format!(
            "kill_shell: `signal` must be one of {}; got {sig:?}",
            SIGNALS.join(", ")
        ));
    }
    Ok(args)
}

/// Parses and validates `write_stdin` arguments.
pub fn write_stdin(json: &str) -> Result<WriteStdin, String> {
    let raw: RawWriteStdin = decode("write_stdin", json)?;
    check_session_id("write_stdin", &raw.session_id)?;
    let yield_ms = raw.yield_ms.unwrap_or(DEFAULT_WRITE_YIELD_MS);
    check_range("write_stdin", "yield_ms", yield_ms, 0, MAX_WAIT_MS)?;
    Ok(WriteStdin {
        session_id: raw.session_id,
        input: raw.input,
        close_stdin: raw.close_stdin.unwrap_or(false),
        yield_ms,
    })
}

/// Parses `list_shells` arguments (there are none).
pub fn list_shells(json: &str) -> Result<ListShells, String> {
    decode("list_shells", json)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "bg_00000000002a";

    #[test]
    fn bash_defaults() {
        let a = bash(r#"{"command":"ls"}"#).unwrap();
        assert_eq!(
            a,
            Bash {
                command: "ls".into(),
                timeout_ms: Some(120_000),
                background: false,
                cwd: None,
                yield_ms: None,
                interactive: false,
            }
        );
        let a = bash(r#"{"command":"srv","run_in_background":true}"#).unwrap();
        assert!(a.background);
        assert_eq!(a.timeout_ms, None);
        let a = bash(r#"{"command":"python3 -i","interactive":true}"#).unwrap();
        assert_eq!((a.timeout_ms, a.yield_ms), (None, Some(1_000)));
        let a = bash(r#"{"command":"python3 -i","interactive":true,"run_in_background":true}"#)
            .unwrap();
        assert_eq!((a.timeout_ms, a.yield_ms, a.background), (None, None, true));
    }

    #[test]
    fn bash_all_fields() {
        let a = bash(
            r#"{"command":"make","timeout_ms":5000,"cwd":"sub","description":"Build",
                "yield_ms":0,"interactive":false,"run_in_background":false}"#,
        )
        .unwrap();
        assert_eq!(a.timeout_ms, Some(5000));
        assert_eq!(a.cwd.as_deref(), Some("sub"));
        assert_eq!(a.yield_ms, Some(0));
        // null is the same as absent
        let a = bash(r#"{"command":"x","timeout_ms":null,"cwd":null}"#).unwrap();
        assert_eq!(a.timeout_ms, Some(120_000));
    }

    #[test]
    fn bash_rejections() {
        let cases: &[(&str, &str)] = &[
            (r#"{}"#, "missing field `command`"),
            (r#"{"command":""}"#, "`command` must not be empty"),
            (r#"{"command":"  "}"#, "`command` must not be empty"),
            (
                r#"{"command":1}"#,
                "invalid type: integer `1`, expected a string",
            ),
            (
                r#"{"command":"x","timeout_ms":0}"#,
                "`timeout_ms` must be between 1 and 600000 (milliseconds); got 0",
            ),
            (
                r#"{"command":"x","timeout_ms":600001}"#,
                "`timeout_ms` must be between 1 and 600000 (milliseconds); got 600001",
            ),
            (r#"{"command":"x","timeout_ms":-5}"#, "expected u64"),
            (
                r#"{"command":"x","timeout_ms":1.5}"#,
                "invalid type: floating point",
            ),
            (
                r#"{"command":"x","timeout_ms":"100"}"#,
                "invalid type: string",
            ),
            (
                r#"{"command":"x","yield_ms":700000}"#,
                "`yield_ms` must be between 0",
            ),
            (
                r#"{"command":"x","run_in_background":"yes"}"#,
                "expected a boolean",
            ),
            (r#"{"command":"x","cwd":""}"#, "`cwd` must not be empty"),
            (
                r#"{"command":"x","timeout":5}"#,
                "unknown field `timeout`, expected one of",
            ),
            (
                r#"{"command":"x","run_in_background":true,"yield_ms":5}"#,
                "cannot be combined",
            ),
            (r#"[1]"#, "invalid type"),
            (r#"{"command":"x""#, "EOF while parsing"),
        ];
        for (json, want) in cases {
            let err = bash(json).unwrap_err();
            assert!(err.starts_with("bash: "), "{err}");
            assert!(err.contains(want), "{json}: {err}");
        }
    }

    #[test]
    fn bash_bounds_inclusive() {
        assert_eq!(
            bash(r#"{"command":"x","timeout_ms":1}"#)
                .unwrap()
                .timeout_ms,
            Some(1)
        );
        assert_eq!(
            bash(r#"{"command":"x","timeout_ms":600000}"#)
                .unwrap()
                .timeout_ms,
            Some(600_000)
        );
        assert_eq!(
            bash(r#"{"command":"x","yield_ms":600000}"#)
                .unwrap()
                .yield_ms,
            Some(600_000)
        );
    }

    #[test]
    fn session_ids() {
        assert!(check_session_id("t", ID).is_ok());
        for bad in [
            "",
            "bg_",
            "bg_00000000002A",
            "bg_0000000002a",
            "xx_00000000002a",
            "bg_00000000002g",
            "bg_00000000002aa",
        ] {
            let err = check_session_id("t", bad).unwrap_err();
            assert!(err.contains("`session_id` must look like"), "{bad}: {err}");
        }
    }

    #[test]
    fn bash_output_args() {
        let a = bash_output(&format!(r#"{{"session_id":"{ID}"}}"#)).unwrap();
        assert_eq!(a.wait_ms, 0);
        let a = bash_output(&format!(r#"{{"session_id":"{ID}","wait_ms":3000}}"#)).unwrap();
        assert_eq!(a.wait_ms, 3000);
        assert!(
            bash_output("{}")
                .unwrap_err()
                .contains("missing field `session_id`")
        );
        assert!(bash_output(&format!(r#"{{"session_id":"{ID}","wait_ms":600001}}"#)).is_err());
        assert!(
            bash_output(&format!(r#"{{"session_id":"{ID}","filter":"x"}}"#))
                .unwrap_err()
                .contains("unknown field `filter`")
        );
        assert_eq!(a.range(), None);
        let range = |json: &str| bash_output(&format!(r#"{{"session_id":"{ID}",{json}}}"#));
        assert_eq!(
            range(r#""offset":5"#).unwrap().range(),
            Some(Range::Bytes {
                offset: 5,
                length: DEFAULT_RANGE_BYTES
            })
        );
        assert_eq!(
            range(r#""line":3,"lines":2"#).unwrap().range(),
            Some(Range::Lines { line: 3, lines: 2 })
        );
        for (json, error) in [
            (
                r#""offset":0,"line":1"#,
                "`offset` and `line` cannot be combined",
            ),
            (r#""length":10"#, "`length` needs `offset`"),
            (r#""lines":10"#, "`lines` needs `line`"),
            (
                r#""offset":0,"length":0"#,
                "`length` must be between 1 and 1048576 (bytes)",
            ),
            (r#""line":0"#, "`line` must be between 1 and"),
            (
                r#""line":1,"lines":100001"#,
                "`lines` must be between 1 and 100000",
            ),
            (r#""offset":-1"#, "invalid value"),
        ] {
            let e = range(json).unwrap_err();
            assert!(e.contains(error), "{json}: {e}");
        }
    }

    #[test]
    fn kill_shell_args() {
        let a = kill_shell(&format!(r#"{{"session_id":"{ID}"}}"#)).unwrap();
        assert_eq!(a.signal, None);
        let a = kill_shell(&format!(r#"{{"session_id":"{ID}","signal":"SIGINT"}}"#)).unwrap();
        assert_eq!(a.signal.as_deref(), Some("SIGINT"));
        let err = kill_shell(&format!(r#"{{"session_id":"{ID}","signal":"INT"}}"#)).unwrap_err();
        assert!(err.contains("`signal` must be one of SIGTERM"), "{err}");
        assert!(
            kill_shell(r#"{"session_id":5}"#)
                .unwrap_err()
                .contains("invalid type")
        );
    }

    #[test]
    fn write_stdin_args() {
        let a = write_stdin(&format!(r#"{{"session_id":"{ID}","input":"1+1\n"}}"#)).unwrap();
        assert_eq!(
            a,
            WriteStdin {
                session_id: ID.into(),
                input: "1+1\n".into(),
                close_stdin: false,
                yield_ms: 250,
            }
        );
        let a = write_stdin(&format!(
            r#"{{"session_id":"{ID}","input":"","close_stdin":true,"yield_ms":0}}"#
        ))
        .unwrap();
        assert!(a.close_stdin);
        assert_eq!(a.yield_ms, 0);
        assert!(
            write_stdin(&format!(r#"{{"session_id":"{ID}"}}"#))
                .unwrap_err()
                .contains("missing field `input`")
        );
        assert!(
            write_stdin(&format!(
                r#"{{"session_id":"{ID}","input":"x","yield_ms":900000}}"#
            ))
            .unwrap_err()
            .contains("`yield_ms` must be between 0 and 600000")
        );
    }

    #[test]
    fn list_shells_args() {
        assert!(list_shells("{}").is_ok());
        assert!(list_shells("").is_ok());
        assert!(
            list_shells(r#"{"all":true}"#)
                .unwrap_err()
                .contains("unknown field `all`")
        );
    }
}
