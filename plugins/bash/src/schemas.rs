//! The JSON Schemas of the tools' arguments, as the JSON text `describe` returns.
//!
//! Kept as text, not built with `serde_json` at run time: every tool call runs in a
//! fresh instance, so `describe` must be a copy, not a computation (benchmark P1 in
//! `BENCHMARKS.md`). `tools::tests` parses each one and checks its properties.

/// Arguments of `bash`.
pub const BASH_SCHEMA: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "properties": {
    "command": {
      "description": "The command line, run as `sh -c COMMAND`. Pipes, `&&`, redirections and other sh syntax work.",
      "minLength": 1,
      "type": "string"
    },
    "cwd": {
      "description": "Working directory, relative to the workspace root or absolute; must lie inside the workspace. Default: the workspace root.",
      "minLength": 1,
      "type": "string"
    },
    "description": {
      "description": "A short (5-10 words) description of what the command does, for people watching. Not used to run it.",
      "type": "string"
    },
    "interactive": {
      "default": false,
      "description": "Keep stdin open for `write_stdin` (REPLs, prompts). Default false: stdin is closed.",
      "type": "boolean"
    },
    "run_in_background": {
      "default": false,
      "description": "Start as a background session and return its id at once; read output later with `bash_output`.",
      "type": "boolean"
    },
    "timeout_ms": {
      "description": "Kill the process group after this many milliseconds. Default 120000 (2 min) in the foreground; none for background and interactive runs unless given.",
      "maximum": 600000,
      "minimum": 1,
      "type": "integer"
    },
    "yield_ms": {
      "description": "Return after this many milliseconds if the command is still running, detaching it into a background task that keeps running. Default: wait for the end (or 1000 for `interactive`). Not with `run_in_background`.",
      "maximum": 600000,
      "minimum": 0,
      "type": "integer"
    }
  },
  "required": [
    "command"
  ],
  "type": "object"
}"##;

/// Arguments of `bash_output`.
pub const BASH_OUTPUT_SCHEMA: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "properties": {
    "length": {
      "default": 20000,
      "description": "With `offset`: how many bytes to read. Default 20000.",
      "maximum": 1048576,
      "minimum": 1,
      "type": "integer"
    },
    "line": {
      "description": "Read the session's output again from this line (1 is the first; lines counted from the start of the output) instead of its new output; the read cursor does not move. Not with `offset`.",
      "minimum": 1,
      "type": "integer"
    },
    "lines": {
      "default": 200,
      "description": "With `line`: how many lines to read (at most 1 MiB of them). Default 200.",
      "maximum": 100000,
      "minimum": 1,
      "type": "integer"
    },
    "offset": {
      "description": "Read the session's output again from this byte offset (0 is the first byte; the offsets a cut result names) instead of its new output; the read cursor does not move. Not with `line`.",
      "minimum": 0,
      "type": "integer"
    },
    "session_id": {
      "description": "The session to read (`bg_` + 12 hex digits), as returned by `bash` or `list_shells`.",
      "pattern": "^bg_[0-9a-f]{12}$",
      "type": "string"
    },
    "wait_ms": {
      "default": 0,
      "description": "Wait up to this many milliseconds for the session to end before reading. Default 0: read at once.",
      "maximum": 600000,
      "minimum": 0,
      "type": "integer"
    }
  },
  "required": [
    "session_id"
  ],
  "type": "object"
}"##;

/// Arguments of `kill_shell`.
pub const KILL_SHELL_SCHEMA: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "properties": {
    "session_id": {
      "description": "The session to stop (`bg_` + 12 hex digits), as returned by `bash` or `list_shells`.",
      "pattern": "^bg_[0-9a-f]{12}$",
      "type": "string"
    },
    "signal": {
      "description": "Send only this signal. Default: SIGTERM, then SIGKILL after a short grace.",
      "enum": [
        "SIGTERM",
        "SIGINT",
        "SIGKILL",
        "SIGHUP",
        "SIGQUIT"
      ],
      "type": "string"
    }
  },
  "required": [
    "session_id"
  ],
  "type": "object"
}"##;

/// Arguments of `write_stdin`.
pub const WRITE_STDIN_SCHEMA: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "properties": {
    "close_stdin": {
      "default": false,
      "description": "Close stdin after writing, so the program reads end-of-file.",
      "type": "boolean"
    },
    "input": {
      "description": "Text to write to stdin, as UTF-8; include a trailing newline to submit a line. May be empty.",
      "type": "string"
    },
    "session_id": {
      "description": "The interactive session to write to (`bg_` + 12 hex digits), as returned by `bash` or `list_shells`.",
      "pattern": "^bg_[0-9a-f]{12}$",
      "type": "string"
    },
    "yield_ms": {
      "default": 250,
      "description": "How long to collect output after writing, in milliseconds (returns early if the session ends).",
      "maximum": 600000,
      "minimum": 0,
      "type": "integer"
    }
  },
  "required": [
    "session_id",
    "input"
  ],
  "type": "object"
}"##;

/// Arguments of `list_shells`.
pub const LIST_SHELLS_SCHEMA: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "properties": {},
  "type": "object"
}"##;
