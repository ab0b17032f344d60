//! The tools this plugin offers: names, descriptions, JSON Schemas and hints.
//! These texts are what the agent reads to decide how to call each tool.

use crate::schemas;

/// Name of the shell tool.
pub const BASH: &str = "bash";
/// Name of the tool that reads a session's new output.
pub const BASH_OUTPUT: &str = "bash_output";
/// Name of the tool that kills a session.
pub const KILL_SHELL: &str = "kill_shell";
/// Name of the tool that writes to a session's stdin.
pub const WRITE_STDIN: &str = "write_stdin";
/// Name of the tool that lists sessions.
pub const LIST_SHELLS: &str = "list_shells";

/// Behaviour hints (mirror of `tool.tool-hints`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// Does not modify its environment.
    pub read_only: bool,
    /// May perform destructive updates.
    pub destructive: bool,
    /// Repeating the call has no further effect.
    pub idempotent: bool,
    /// Interacts with an open world.
    pub open_world: bool,
}

/// A tool description (mirror of `tool.tool-spec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Tool name.
    pub name: &'static str,
    /// What the agent reads.
    pub description: &'static str,
    /// JSON Schema of the arguments, as JSON text.
    pub input_schema: &'static str,
    /// Behaviour hints.
    pub hints: Hints,
}

const BASH_DESCRIPTION: &str = "\
Run a shell command in the workspace and return its output.

The command runs as `bash -c COMMAND` (bash found on the host; non-login, no rc files; `/bin/sh` \
only where the host has no bash; the result's `shell` says which) in its own process group, in \
the workspace root (or `cwd`), with stdin closed (reads get end-of-file at once, so nothing waits \
for input), a minimal non-interactive environment (PATH, HOME, LANG, TERM=dumb, GIT_EDITOR=false, \
GIT_PAGER=cat, ...: editors and pagers fail or print instead of waiting) and the host's sandbox. The host's permission \
policy may refuse a command; the refusal text says how to get it allowed.

Output: stdout and stderr through one pipe, in exactly the order the command wrote them, as in a \
terminal. Colour and other terminal escape codes \
are removed and progress-bar redraws (`\\r`) are collapsed to their final state. A result holds \
at most 30000 characters: longer output is cut in the middle; the cut says which bytes it covers \
and the `bash_output` call (`offset`/`length` or `line`/`lines`) that reads any range of them. \
The result ends with a status line: `[exit code N]`, `[killed by SIGNAL]`, \
`[timed out after N ms; process group killed]` or `[failed to start: ...]`. A non-zero exit, \
signal, timeout or refusal is reported as an error result.

Foreground (default): waits for the command to finish, at most `timeout_ms` (default 120000 = \
2 min, max 600000 = 10 min); on timeout the whole process group is killed. Set `yield_ms` to \
return early instead: after that long the run is detached into a background task and the \
result is the output so far followed by `[Detached to background task bg_...: reason]`; the \
command keeps running (still bound by `timeout_ms`). A person or client may also detach a \
long run the same way.

Background (`run_in_background: true`): returns the session id at once; no timeout unless \
`timeout_ms` is given. Use it for servers, watchers and long builds, then `bash_output` to \
read new output, `kill_shell` to stop, `list_shells` to see sessions. Do not append `&` to \
the command for this.

Interactive (`interactive: true`): stdin stays open for `write_stdin` (REPLs, prompts). No \
timeout unless `timeout_ms` is given. Unless it exits first, the call returns after `yield_ms` \
(default 1000) with the output so far and the session id.

Prefer dedicated file tools for reading and editing files when you have them; quote paths \
that contain spaces; chain dependent commands with `&&`.";

const BASH_OUTPUT_DESCRIPTION: &str = "\
Read the new output of a shell session (started with `bash` in the background, detached, \
or interactive): everything written since the last read of that session, including by the \
`bash` call that started it, cleaned and cut like `bash` output (at most 30000 characters, \
middle omitted with a note naming the bytes it covers). Each byte is served once: a middle the result \
omits is passed over for good (it stays in the log), and one call reads at most 128 MiB \
(`[N more bytes of output not read yet ...]`: call again for the rest). Ends with a status \
line: `[still running after ...]` or how it ended (`[exit code N]`, `[killed by SIGNAL]`, \
...), given once, with the read that reaches the end of the output; later reads of an ended \
session say `(no new output; session ID ended earlier: exit code N)`. Set `wait_ms` to wait \
up to that long for the session to end first, instead of calling repeatedly in a loop; the \
call returns as soon as it ends. To read any part of the output again (the middle a result \
omitted, the start of a long log), give `offset` (a byte offset, with `length`, default \
20000) or `line` (1 is the first line, with `lines`, default 200): that reads the range \
without moving the read cursor, cut like any result; bytes a capped log dropped are named, \
not shown.";

const KILL_SHELL_DESCRIPTION: &str = "\
Stop a shell session: signals every process in its process group. By default SIGTERM, then \
SIGKILL after a short grace; `signal` sends one specific signal instead (e.g. SIGINT, like \
Ctrl-C, to interrupt a REPL's current command without ending it). Reports how many processes \
were signalled and, if the session ended within a second, how. Killing a session that has \
already ended is harmless and says how it ended. Unread output stays readable with \
`bash_output`.";

const WRITE_STDIN_DESCRIPTION: &str = "\
Write text to the stdin of a session started with `bash` and `interactive: true`, then \
return the output that arrives within `yield_ms` (default 250, max 600000; returns early if \
the session ends), cleaned and cut like `bash` output, with a status line. The write never \
waits for the program to read: the host accepts the bytes at once and delivers them in order \
as the program reads (at most 8 MiB may wait; a write past that is refused whole, saying how \
much is waiting), and the result says `[stdin: accepted N bytes ...]`. Include the newline a \
program waits for (e.g. `\"input\": \"print(1+1)\\n\"`). `input` may be empty to just \
collect output. `close_stdin: true` closes stdin once what was written is delivered (the \
program reads end-of-file, e.g. to finish `cat`, `wc` or `sort`).";

const LIST_SHELLS_DESCRIPTION: &str = "\
List this tool's shell sessions, oldest first: every running one and the 20 most recent \
finished ones (the text says how many older ones it leaves out; at most 30000 characters): \
session id, state (running, exit code, signal, timed-out, killed, failed), elapsed time, \
output size and command. Takes no arguments.";

/// The specs of every tool, in the order they are offered.
pub fn specs() -> Vec<Spec> {
    vec![
        Spec {
            name: BASH,
            description: BASH_DESCRIPTION,
            input_schema: schemas::BASH_SCHEMA,
            hints: Hints {
                read_only: false,
                destructive: true,
                idempotent: false,
                open_world: true,
            },
        },
        Spec {
            name: BASH_OUTPUT,
            description: BASH_OUTPUT_DESCRIPTION,
            input_schema: schemas::BASH_OUTPUT_SCHEMA,
            // Reading advances the session's read cursor, so it is not idempotent.
            hints: Hints {
                read_only: true,
                destructive: false,
                idempotent: false,
                open_world: false,
            },
        },
        Spec {
            name: KILL_SHELL,
            description: KILL_SHELL_DESCRIPTION,
            input_schema: schemas::KILL_SHELL_SCHEMA,
            hints: Hints {
                read_only: false,
                destructive: true,
                idempotent: true,
                open_world: false,
            },
        },
        Spec {
            name: WRITE_STDIN,
            description: WRITE_STDIN_DESCRIPTION,
            input_schema: schemas::WRITE_STDIN_SCHEMA,
            hints: Hints {
                read_only: false,
                destructive: true,
                idempotent: false,
                open_world: true,
            },
        },
        Spec {
            name: LIST_SHELLS,
            description: LIST_SHELLS_DESCRIPTION,
            input_schema: schemas::LIST_SHELLS_SCHEMA,
            hints: Hints {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: false,
            },
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// What a session id looks like (`bg_` + 12 hex digits).
    const SESSION_ID_PATTERN: &str = "^bg_[0-9a-f]{12}$";

    #[test]
    fn session_id_arguments_carry_the_id_pattern() {
        for name in [BASH_OUTPUT, KILL_SHELL, WRITE_STDIN] {
            let s = schema(name);
            assert_eq!(s["properties"]["session_id"]["type"], "string", "{name}");
            assert_eq!(
                s["properties"]["session_id"]["pattern"], SESSION_ID_PATTERN,
                "{name}"
            );
        }
    }

    fn schema(name: &str) -> Value {
        let spec = specs().into_iter().find(|s| s.name == name).unwrap();
        serde_json::from_str(spec.input_schema).expect("schema is JSON")
    }

    #[test]
    fn names_are_valid_and_unique() {
        let specs = specs();
        let mut names: Vec<_> = specs.iter().map(|s| s.name).collect();
        for n in &names {
            assert!((1..=64).contains(&n.len()));
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            );
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 5);
    }

    #[test]
    fn schemas_are_objects_with_required_fields() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                BASH,
                &["command"],
                &[
                    "command",
                    "timeout_ms",
                    "run_in_background",
                    "cwd",
                    "description",
                    "yield_ms",
                    "interactive",
                ],
            ),
            (
                BASH_OUTPUT,
                &["session_id"],
                &["session_id", "wait_ms", "offset", "length", "line", "lines"],
            ),
            (KILL_SHELL, &["session_id"], &["session_id", "signal"]),
            (
                WRITE_STDIN,
                &["session_id", "input"],
                &["session_id", "input", "close_stdin", "yield_ms"],
            ),
            (LIST_SHELLS, &[], &[]),
        ];
        for (name, required, props) in cases {
            let s = schema(name);
            assert_eq!(s["type"], "object", "{name}");
            assert_eq!(s["additionalProperties"], false, "{name}");
            let req: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|v| v.as_str().unwrap()).collect())
                .unwrap_or_default();
            assert_eq!(&req, required, "{name}");
            let mut have: Vec<&str> = s["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            have.sort();
            let mut want = props.to_vec();
            want.sort();
            assert_eq!(have, want, "{name}");
            for (prop, def) in s["properties"].as_object().unwrap() {
                assert!(
                    def["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{name}.{prop}"
                );
            }
        }
    }

    #[test]
    fn schema_bounds_match_validation() {
        let s = schema(BASH);
        assert_eq!(s["properties"]["timeout_ms"]["minimum"], 1);
        assert_eq!(
            s["properties"]["timeout_ms"]["maximum"],
            crate::args::MAX_TIMEOUT_MS
        );
        assert_eq!(
            s["properties"]["yield_ms"]["maximum"],
            crate::args::MAX_WAIT_MS
        );
        let w = schema(WRITE_STDIN);
        assert_eq!(
            w["properties"]["yield_ms"]["default"],
            crate::args::DEFAULT_WRITE_YIELD_MS
        );
        let o = schema(BASH_OUTPUT);
        for (field, max, default) in [
            (
                "length",
                crate::args::MAX_RANGE_BYTES,
                crate::args::DEFAULT_RANGE_BYTES,
            ),
            (
                "lines",
                crate::args::MAX_RANGE_LINES,
                crate::args::DEFAULT_RANGE_LINES,
            ),
        ] {
            assert_eq!(o["properties"][field]["maximum"], max, "{field}");
            assert_eq!(o["properties"][field]["default"], default, "{field}");
        }
        let k = schema(KILL_SHELL);
        assert_eq!(
            k["properties"]["signal"]["enum"].as_array().unwrap().len(),
            5
        );
    }

    #[test]
    fn descriptions_say_the_essentials() {
        let bash = specs().into_iter().find(|s| s.name == BASH).unwrap();
        for needle in [
            "sh -c",
            "30000",
            "cut in the middle",
            "120000",
            "run_in_background",
            "yield_ms",
            "[exit code N]",
            "Detached to background task",
        ] {
            assert!(bash.description.contains(needle), "{needle}");
        }
        for s in specs() {
            assert!(s.description.len() > 80, "{}", s.name);
        }
    }
}
