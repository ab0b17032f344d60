//! The TTY approver of `toolhost call`: asks the person at the terminal to
//! answer a policy `ask` (the approvers of `Permissions::check_start`;
//! docs/permissions.md#approvers). Terminal job control never stops the host:
//! a host in a background job of its shell does not ask (it says why and
//! rejects), and the stop signals its terminal access would raise are ignored
//! (`toolhost_process::ignore_terminal_stops`).

use std::io::{BufRead, IsTerminal};
use std::os::fd::AsFd;
use std::pin::Pin;

use tokio::sync::Mutex;

use toolhost_runtime::{Answer, ApprovalOutcome, ApprovalRequest, Approver};
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
    /// A TTY approver when stdin is a terminal, else `None`. With one, the
    /// host ignores SIGTTOU and SIGTTIN from then on: its prompts, flushes and
    /// output reach a terminal it may be a background job of without the
    /// kernel stopping it.
    pub fn if_interactive() -> Option<TtyApprover> {
        std::io::stdin().is_terminal().then(|| {
            toolhost_process::ignore_terminal_stops();
            TtyApprover {
                lock: Mutex::new(()),
            }
        })
    }
}

/// How often a prompt that waits for its answer looks whether the host is
/// still in the terminal's foreground: 200 ms.
const FOREGROUND_CHECK: std::time::Duration = std::time::Duration::from_millis(200);

/// Why the person at the terminal cannot be asked, the denial's text, when
/// the host is not in the terminal's foreground process group (a background
/// job: `toolhost call … &`, or moved there with Ctrl-Z and `bg`).
pub fn background_reason(id: &str) -> String {
    format!(
        "the policy asks before running this, and the terminal cannot be asked: toolhost runs \
         in a background job of its terminal (not in the terminal's foreground process group), \
         where reading an answer would stop it. Permission request {id} was rejected and \
         nothing ran. Run toolhost in the foreground (or bring it there with `fg`) to answer \
         prompts, or allow the command in the --policy file."
    )
}

/// What one prompt came to.
enum Prompted {
    /// The person answered, or the prompt ended without an answer.
    Answered(ApprovalOutcome),
    /// The host is (or went) in the background: nobody was asked.
    Background,
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

impl TtyApprover {
    /// Shows the prompt and reads the answer, on a blocking thread; never
    /// while the host is in the background of its terminal.
    async fn prompt(&self, request: &ApprovalRequest) -> Prompted {
        let _one_at_a_time = self.lock.lock().await;
        let prompt = prompt_text(request);
        let id = short_id(&request.request_id);
        // Dropped with this future (the call ended, was cancelled or timed
        // out): the wait below ends and the terminal is told.
        let (wait, _withdraw) = match toolhost_process::input_wait() {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!("cannot wait for the terminal: {e}");
                return Prompted::Answered(ApprovalOutcome::Cancelled);
            }
        };
        tokio::task::spawn_blocking(move || {
            let stdin = std::io::stdin();
            // Not a terminal of ours any more counts as not in its foreground.
            let foreground =
                || toolhost_process::in_terminal_foreground(stdin.as_fd()).unwrap_or(false);
            loop {
                if !foreground() {
                    return Prompted::Background;
                }
                // Keys pressed before this prompt is on screen were meant
                // for something else: they never answer it. Discarded
                // before the prompt is drawn, so an answer typed once it
                // shows is never lost.
                if let Err(e) = toolhost_process::discard_typed_input(stdin.as_fd()) {
                    tracing::debug!("cannot discard earlier terminal input: {e}");
                }
                // A prompt the person could not see is not answered.
                if !crate::err!("{prompt}") {
                    return Prompted::Answered(ApprovalOutcome::Cancelled);
                }
                // Waits for the answer, looking now and then whether the host
                // was moved to the background meanwhile (Ctrl-Z, `bg`).
                let ready = loop {
                    match wait.wait_for(stdin.as_fd(), Some(FOREGROUND_CHECK)) {
                        Ok(Some(ready)) => break Ok(ready),
                        Ok(None) if foreground() => {}
                        Ok(None) => return Prompted::Background,
                        Err(e) => break Err(e),
                    }
                };
                match ready {
                    Ok(true) => {}
                    Ok(false) => {
                        crate::errln!("\npermission request {id} withdrawn: its call ended");
                        return Prompted::Answered(ApprovalOutcome::Cancelled);
                    }
                    Err(_) => return Prompted::Answered(ApprovalOutcome::Cancelled),
                }
                // Input seen while in the foreground; moved to the background
                // since, the read would fail (SIGTTIN is ignored): not asked.
                if !foreground() {
                    return Prompted::Background;
                }
                let mut line = String::new();
                match stdin.lock().read_line(&mut line) {
                    Ok(0) | Err(_) => return Prompted::Answered(ApprovalOutcome::Cancelled),
                    Ok(_) => {
                        if let Some(outcome) = parse_answer(&line) {
                            return Prompted::Answered(outcome);
                        }
                        crate::errln!("answer 1, 2, 3 or 4");
                    }
                }
            }
        })
        .await
        .unwrap_or(Prompted::Answered(ApprovalOutcome::Cancelled))
    }
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
            Some(match self.prompt(request).await {
                Prompted::Answered(outcome) => outcome,
                Prompted::Background => ApprovalOutcome::RejectOnce,
            })
        })
    }

    /// As [`Approver::ask`], and a host in the background of its terminal
    /// rejects with [`background_reason`] (also on stderr, which SIGTTOU no
    /// longer stops), never blocking on the terminal.
    fn answer<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn std::future::Future<Output = Option<Answer>> + Send + 'a>> {
        Box::pin(async move {
            let (outcome, reason) = match self.prompt(request).await {
                Prompted::Answered(outcome) => (outcome, None),
                Prompted::Background => {
                    let reason = background_reason(&short_id(&request.request_id));
                    crate::errln!("toolhost: {reason}");
                    (ApprovalOutcome::RejectOnce, Some(reason))
                }
            };
            Some(Answer {
                outcome,
                by: self.name().to_string(),
                reason,
            })
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
