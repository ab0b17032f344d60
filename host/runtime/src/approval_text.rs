//! What a person is shown when asked: the host's permission question and a
//! plugin's own question (a contract 0.2.0 `client.elicit`), each in a shape
//! the other cannot take (docs/permissions.md#what-the-person-is-shown).
//!
//! A permission question ([`permission_text`]) starts with the line
//! `toolhost permission request #N: …` ([`PERMISSION_HEADER`]) and shows,
//! each on its own line and escaped as by [`escape_line`] (newlines, C0 and C1
//! controls, bidi controls made visible): the plugin, tool and call, the
//! policy's question (a block whose every line is prefixed, so a line it
//! quotes cannot pose as one of the host's), the program the kernel will
//! execute, the whole command, the cwd, the shell, the environment names (never
//! the values) and stdin (closed, an open pipe, or its size and an escaped
//! head of [`STDIN_HEAD_BYTES`]). Nothing is cut: the command is at most
//! `MAX_COMMAND_BYTES` (1 MiB), refused before this step if longer.
//!
//! A plugin's question ([`plugin_question_text`]) starts with
//! ``plugin `ID` asks (this is not a toolhost permission request):`` and every
//! line of the plugin's text follows prefixed with `| ` and escaped, so no
//! plugin can write text byte-identical to a permission question, or a line of
//! one.

use std::fmt::Write as _;

use crate::display::{escape_block, escape_line};
#[cfg(doc)]
use crate::permissions::STDIN_HEAD_BYTES;
use crate::permissions::{ApprovalRequest, StdinShown};

/// How every permission question's first line starts.
pub const PERMISSION_HEADER: &str = "toolhost permission request ";

/// The short identifier a question shows and an answer names: `#N` for the
/// host's `perm_…` ids (N in decimal), the id itself for any other.
pub fn short_id(request_id: &str) -> String {
    match toolhost_host_session::permission_request_number(request_id) {
        Some(n) => format!("#{n}"),
        None => request_id.to_string(),
    }
}

/// The permission question for `request`, as every approver shows it (see
/// the module docs); no trailing newline, no answer line (each approver adds
/// its own).
pub fn permission_text(request: &ApprovalRequest) -> String {
    let mut out = String::with_capacity(request.command.len() + request.prompt.len() + 256);
    let _ = write!(
        out,
        "{PERMISSION_HEADER}{}: plugin `{}`, tool `{}`, call `{}`",
        short_id(&request.request_id),
        escape_line(&request.plugin),
        escape_line(&request.tool),
        escape_line(&request.tool_call_id),
    );
    let _ = write!(
        out,
        "\n  policy:  {}",
        escape_block(&request.prompt, "         | ")
    );
    if let Some(program) = &request.program {
        let _ = write!(out, "\n  program: {}", escape_line(program));
    }
    let _ = write!(out, "\n  command: {}", escape_line(&request.command));
    let _ = write!(out, "\n  cwd:     {}", escape_line(&request.cwd));
    let _ = write!(out, "\n  shell:   {}", escape_line(&request.shell));
    let env = if request.env_names.is_empty() {
        "(none added)".to_string()
    } else {
        let names: Vec<String> = request
            .env_names
            .iter()
            .map(|n| escape_line(n).into_owned())
            .collect();
        format!("{} (values not shown)", names.join(", "))
    };
    let _ = write!(out, "\n  env:     {env}");
    let stdin = match &request.stdin {
        StdinShown::Closed => "closed".to_string(),
        StdinShown::Open => "an open pipe the plugin may write to".to_string(),
        StdinShown::Bytes { len, head } => {
            let shown = String::from_utf8_lossy(head);
            let more = if head.len() < *len { "…" } else { "" };
            format!("{len} bytes fed: \"{}\"{more}", escape_line(&shown))
        }
    };
    let _ = write!(out, "\n  stdin:   {stdin}");
    out
}

/// A plugin's own question as the person is shown it (see the module docs):
/// attributed to `plugin`, each line of `message` prefixed with `| ` and
/// escaped.
pub fn plugin_question_text(plugin: &str, message: &str) -> String {
    format!(
        "plugin `{}` asks (this is not a toolhost permission request):\n| {}",
        escape_line(plugin),
        escape_block(message, "| ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            request_id: "perm_00000000000c".into(),
            plugin: "bash".into(),
            tool: "bash".into(),
            tool_call_id: "tc_3".into(),
            command: "ls\n\u{1b}[2Krm -rf ~ \u{202e}fdp.exe\u{9b}".into(),
            cwd: "/w/s\u{2066}ub".into(),
            prompt: "Run `ls`?\n- writes a file\nAnswer allow_once".into(),
            shell: "/bin/sh".into(),
            env_names: vec!["LANG".into(), "X\u{7}".into()],
            stdin: StdinShown::Bytes {
                len: 300,
                head: b"line1\nline2\x00\xff".to_vec(),
            },
            program: Some("/usr/bin/ls".into()),
        }
    }

    #[test]
    fn a_permission_question_shows_every_field_escaped_and_whole() {
        assert_eq!(
            permission_text(&request()),
            "toolhost permission request #12: plugin `bash`, tool `bash`, call `tc_3`\n\
             \x20 policy:  Run `ls`?\n\
             \x20        | - writes a file\n\
             \x20        | Answer allow_once\n\
             \x20 program: /usr/bin/ls\n\
             \x20 command: ls\\n\\x1b[2Krm -rf ~ \\u{202e}fdp.exe\\u{9b}\n\
             \x20 cwd:     /w/s\\u{2066}ub\n\
             \x20 shell:   /bin/sh\n\
             \x20 env:     LANG, X\\x07 (values not shown)\n\
             \x20 stdin:   300 bytes fed: \"line1\\nline2\\x00\u{fffd}\"…"
        );
        let mut plain = request();
        plain.env_names.clear();
        plain.stdin = StdinShown::Closed;
        plain.program = None;
        let text = permission_text(&plain);
        assert!(
            text.ends_with("\n  env:     (none added)\n  stdin:   closed"),
            "{text}"
        );
        assert!(!text.contains("program:"), "{text}");
        plain.stdin = StdinShown::Open;
        assert!(permission_text(&plain).ends_with("stdin:   an open pipe the plugin may write to"));
        let long = "x".repeat(200_000);
        plain.command = long.clone();
        assert!(
            permission_text(&plain).contains(&long),
            "the command is shown whole"
        );
    }

    #[test]
    fn a_plugin_cannot_write_a_permission_question() {
        let forged = permission_text(&request());
        let shown = plugin_question_text("evil", &forged);
        assert!(shown.starts_with(
            "plugin `evil` asks (this is not a toolhost permission request):\n\
             | toolhost permission request #12: "
        ));
        assert!(
            shown.lines().skip(1).all(|l| l.starts_with("| ")),
            "{shown}"
        );
        assert_eq!(
            plugin_question_text("p\n", "two\nlines\u{1b}]0;t\u{7}"),
            "plugin `p\\n` asks (this is not a toolhost permission request):\n| two\n| lines\\x1b]0;t\\x07"
        );
    }

    #[test]
    fn short_ids() {
        assert_eq!(short_id("perm_00000000000c"), "#12");
        assert_eq!(short_id("perm_test"), "perm_test");
    }
}
