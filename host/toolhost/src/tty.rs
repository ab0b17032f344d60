//! The TTY approver of `toolhost call`: asks the person at the terminal to
//! answer a policy `ask` (the approvers of `Permissions::check_start`;
//! docs/permissions.md#approvers).

use std::io::{BufRead, IsTerminal};
use std::os::fd::AsFd;
use std::pin::Pin;

use tokio::sync::Mutex;

use toolhost_runtime::{ApprovalOutcome, ApprovalRequest, Approver};
use toolhost_runtime::{permission_text, short_id};

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

/// The prompt shown for `request`: the host's permission question
/// (`toolhost_runtime::permission_text`: every field escaped and whole, the
/// policy's lines in a block), then the answers and the `> ` cue.
pub fn prompt_text(request: &ApprovalRequest) -> String {
    format!(
        "\n{}\n  [1] allow once  [2] allow always  [3] reject once (default)  [4] reject always\n> ",
        permission_text(request)
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
            let id = short_id(&request.request_id);
            // Dropped with this future (the call ended, was cancelled or timed
            // out): the wait below ends and the terminal is told.
            let (wait, _withdraw) = match toolhost_process::input_wait() {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!("cannot wait for the terminal: {e}");
                    return None;
                }
            };
            let outcome = tokio::task::spawn_blocking(move || {
                let stdin = std::io::stdin();
                loop {
                    // Keys pressed before this prompt is on screen were meant
                    // for something else: they never answer it. Discarded
                    // before the prompt is drawn, so an answer typed once it
                    // shows is never lost.
                    if let Err(e) = toolhost_process::discard_typed_input(stdin.as_fd()) {
                        tracing::debug!("cannot discard earlier terminal input: {e}");
                    }
                    // A prompt the person could not see is not answered.
                    if !crate::err!("{prompt}") {
                        return ApprovalOutcome::Cancelled;
                    }
                    match wait.wait(stdin.as_fd()) {
                        Ok(true) => {}
                        Ok(false) => {
                            crate::errln!("\npermission request {id} withdrawn: its call ended");
                            return ApprovalOutcome::Cancelled;
                        }
                        Err(_) => return ApprovalOutcome::Cancelled,
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
