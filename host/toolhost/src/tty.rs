//! The TTY approver of `toolhost call`: asks the person at the terminal to
//! answer a policy `ask` (the approvers of `Permissions::check_start`;
//! docs/permissions.md#approvers).

use std::io::{BufRead, IsTerminal};
use std::pin::Pin;

use tokio::sync::Mutex;

use toolhost_runtime::{ApprovalOutcome, ApprovalRequest, Approver};
use toolhost_runtime::{escape_block, escape_line};

/// Prompts on stderr and reads the answer from stdin. Only used when stdin is
/// a terminal ([`TtyApprover::if_interactive`]); one prompt at a time.
///
/// Answers: `1`/`y` allow once, `2`/`a` allow always, `3`/`n` (or an empty
/// line) reject once, `4`/`r` reject always; end of input cancels.
pub struct TtyApprover {
    lock: Mutex<()>,
}

impl TtyApprover {
    /// A TTY approver when stdin is a terminal, else `None`.
    pub fn if_interactive() -> Option<TtyApprover> {
        std::io::stdin().is_terminal().then(|| TtyApprover {
            lock: Mutex::new(()),
        })
    }
}

/// The prompt shown for `request`. The command and cwd are plugin text, each
/// shown on one line with every control character (newlines included)
/// escaped (`toolhost_runtime::escape_line`). The policy's prompt
/// quotes the command, so its lines are shown in a block, each prefixed with
/// `| ` (`escape_block`): a line the command smuggles in stays inside the
/// block and cannot pose as the host's `command:` line. What the person reads
/// is what would run.
pub fn prompt_text(request: &ApprovalRequest) -> String {
    format!(
        "\n| {}\n  command: {}\n  cwd:     {}\n  [1] allow once  [2] allow always  [3] reject once (default)  [4] reject always\n> ",
        escape_block(&request.prompt, "| "),
        escape_line(&request.command),
        escape_line(&request.cwd)
    )
}

/// Parses one answer line (see [`TtyApprover`]); `None` for an unknown answer.
pub fn parse_answer(line: &str) -> Option<ApprovalOutcome> {
    Some(match line.trim().to_ascii_lowercase().as_str() {
        "1" | "y" | "yes" | "allow_once" => ApprovalOutcome::AllowOnce,
        "2" | "a" | "always" | "allow_always" => ApprovalOutcome::AllowAlways,
        "3" | "n" | "no" | "" | "reject_once" => ApprovalOutcome::RejectOnce,
        "4" | "r" | "never" | "reject_always" => ApprovalOutcome::RejectAlways,
        _ => return None,
    })
}

impl Approver for TtyApprover {
    fn name(&self) -> &str {
        "tty"
    }

    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn std::future::Future<Output = Option<ApprovalOutcome>> + Send + 'a>> {
        Box::pin(async move {
            let _one_at_a_time = self.lock.lock().await;
            let prompt = prompt_text(request);
            let outcome = tokio::task::spawn_blocking(move || {
                let stdin = std::io::stdin();
                loop {
                    // A prompt the person could not see is not answered.
                    if !crate::err!("{prompt}") {
                        return ApprovalOutcome::Cancelled;
                    }
                    let mut line = String::new();
                    match stdin.lock().read_line(&mut line) {
                        Ok(0) | Err(_) => return ApprovalOutcome::Cancelled,
                        Ok(_) => {
                            if let Some(outcome) = parse_answer(&line) {
                                return outcome;
                            }
                            crate::errln!("answer 1, 2, 3 or 4");
                        }
                    }
                }
            })
            .await
            .unwrap_or(ApprovalOutcome::Cancelled);
            Some(outcome)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        for (line, expected) in [
            ("1\n", Some(ApprovalOutcome::AllowOnce)),
            ("y", Some(ApprovalOutcome::AllowOnce)),
            ("2", Some(ApprovalOutcome::AllowAlways)),
            ("A\n", Some(ApprovalOutcome::AllowAlways)),
            ("3", Some(ApprovalOutcome::RejectOnce)),
            ("\n", Some(ApprovalOutcome::RejectOnce)),
            ("4", Some(ApprovalOutcome::RejectAlways)),
            ("reject_always", Some(ApprovalOutcome::RejectAlways)),
            ("maybe", None),
        ] {
            assert_eq!(parse_answer(line), expected, "{line:?}");
        }
    }
}
