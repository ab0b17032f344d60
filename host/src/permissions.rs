//! The permission pipeline every process start passes (DESIGN §5).
//!
//! Order, fixed here and impossible for a plugin to skip (the plugin only
//! reaches `sessions.start`, whose host implementation calls
//! [`Permissions::check_start`] before the engine spawns anything):
//!
//! 1. the plugin's manifest exec grant;
//! 2. the host's hard rules (cwd inside the workspace, env names) — checked by
//!    the session engine when it resolves the request;
//! 3. the policy plugin's `decide`;
//! 4. for `ask`, the first [`Approver`] that can answer (an attached control
//!    client, MCP elicitation, a TTY prompt); with none, deny with a reason
//!    that says how to allow the command.
//!
//! Outcomes use the Agent Client Protocol vocabulary (`allow_once`,
//! `allow_always`, `reject_once`, `reject_always`, `cancelled`);
//! `allow_always` / `reject_always` are remembered for the host session.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::bindings::v0_1_0::policy_plugin::exports::toolhost::plugin::policy as wit;
use crate::plugins::{CallInfo, PolicyPlugin};
use crate::sessions::StartRequest;

/// A question for an approver: which call wants to run what, and why the
/// policy asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// Unique in the host session (`perm_` + 12 hex digits); what an
    /// approver's answer refers to (the control API's `permission.resolve`).
    pub request_id: String,
    /// The plugin asking.
    pub plugin: String,
    /// The tool it runs.
    pub tool: String,
    /// The tool call it runs.
    pub tool_call_id: String,
    /// The command line.
    pub command: String,
    /// The resolved working directory.
    pub cwd: String,
    /// The policy's prompt.
    pub prompt: String,
}

/// An approver's answer (ACP `RequestPermissionOutcome` + option kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Run it, this time.
    AllowOnce,
    /// Run it, and the same command again for the rest of the host session.
    AllowAlways,
    /// Refuse it, this time.
    RejectOnce,
    /// Refuse it, and the same command again for the rest of the host session.
    RejectAlways,
    /// The prompt was withdrawn (the client went away, the call was cancelled).
    Cancelled,
}

impl ApprovalOutcome {
    /// The ACP name: `allow_once`, `allow_always`, `reject_once`,
    /// `reject_always`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalOutcome::AllowOnce => "allow_once",
            ApprovalOutcome::AllowAlways => "allow_always",
            ApprovalOutcome::RejectOnce => "reject_once",
            ApprovalOutcome::RejectAlways => "reject_always",
            ApprovalOutcome::Cancelled => "cancelled",
        }
    }

    /// Parses an ACP name (see [`ApprovalOutcome::as_str`]).
    pub fn parse(name: &str) -> Option<ApprovalOutcome> {
        Some(match name {
            "allow_once" => ApprovalOutcome::AllowOnce,
            "allow_always" => ApprovalOutcome::AllowAlways,
            "reject_once" => ApprovalOutcome::RejectOnce,
            "reject_always" => ApprovalOutcome::RejectAlways,
            "cancelled" => ApprovalOutcome::Cancelled,
            _ => return None,
        })
    }

    fn allows(self) -> bool {
        matches!(
            self,
            ApprovalOutcome::AllowOnce | ApprovalOutcome::AllowAlways
        )
    }
}

/// Someone who can answer an `ask`: an attached control client, an MCP client
/// through elicitation, a person at a TTY.
pub trait Approver: Send + Sync {
    /// A short name for logs and events, e.g. `tty` or `control-client`.
    fn name(&self) -> &str;

    /// Asks; `None` means this approver cannot answer now (e.g. no client is
    /// attached), so the next one is tried.
    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<ApprovalOutcome>> + Send + 'a>>;
}

/// Told about every approval request and its resolution (the host-session
/// event log hooks in here: DESIGN §5, "every request and resolution is an
/// event"). Called synchronously; must return quickly.
pub trait PermissionObserver: Send + Sync {
    /// The pipeline is about to ask the approvers (or to apply a remembered
    /// answer) for `request`.
    fn requested(&self, request: &ApprovalRequest);
    /// `request` was resolved with `outcome` by `by`: an approver's name,
    /// `remembered`, `no-approver` (nobody could answer: rejected), or
    /// `call-ended` (the call was cancelled while asking: `cancelled`).
    fn resolved(&self, request: &ApprovalRequest, outcome: ApprovalOutcome, by: &str);
}

/// Records `cancelled` by `call-ended` if an ask is dropped unanswered (the
/// tool call was cancelled while an approver was being asked).
struct AskGuard<'a> {
    observer: Option<Arc<dyn PermissionObserver>>,
    request: &'a ApprovalRequest,
    resolved: bool,
}

impl AskGuard<'_> {
    fn resolve(&mut self, outcome: ApprovalOutcome, by: &str) {
        self.resolved = true;
        if let Some(o) = &self.observer {
            o.resolved(self.request, outcome, by);
        }
    }
}

impl Drop for AskGuard<'_> {
    fn drop(&mut self) {
        if !self.resolved {
            self.resolve(ApprovalOutcome::Cancelled, "call-ended");
        }
    }
}

/// The option kinds every approval request offers (ACP `PermissionOptionKind`).
pub const APPROVAL_OPTIONS: [&str; 4] =
    ["allow_once", "allow_always", "reject_once", "reject_always"];

/// The pipeline's configuration, the policy plugin it asks and the approvers.
pub struct Permissions {
    policy: Arc<PolicyPlugin>,
    rules: String,
    workspace: PathBuf,
    approvers: Mutex<Vec<Arc<dyn Approver>>>,
    /// Commands answered `allow_always` / `reject_always` in this host session.
    remembered: Mutex<Vec<(String, ApprovalOutcome)>>,
    observer: Mutex<Option<Arc<dyn PermissionObserver>>>,
    next_request: AtomicU64,
}

impl Permissions {
    /// A pipeline asking `policy` under `rules` (the `--policy` file's text;
    /// empty for the plugin's defaults). `workspace` is the canonical root.
    pub fn new(policy: Arc<PolicyPlugin>, rules: String, workspace: PathBuf) -> Permissions {
        Permissions {
            policy,
            rules,
            workspace,
            approvers: Mutex::new(Vec::new()),
            remembered: Mutex::new(Vec::new()),
            observer: Mutex::new(None),
            next_request: AtomicU64::new(1),
        }
    }

    /// Sets the observer told about every approval request and resolution.
    pub fn set_observer(&self, observer: Arc<dyn PermissionObserver>) {
        *self.observer.lock().unwrap_or_else(|e| e.into_inner()) = Some(observer);
    }

    /// Adds an approver; approvers are asked in the order they were added.
    pub fn add_approver(&self, approver: Arc<dyn Approver>) {
        self.approvers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(approver);
    }

    /// Decides whether `call` may start `request`. `Err(reason)` means denied;
    /// the reason says which step refused and how to allow it.
    ///
    /// Step 1 is the calling plugin's manifest exec grant
    /// ([`crate::manifest::ExecGrant::check`]): a plugin without one is
    /// denied before the policy plugin is asked.
    pub async fn check_start(&self, call: &CallInfo, request: &StartRequest) -> Result<(), String> {
        call.manifest
            .exec
            .check(&request.command, request.shell.as_deref())
            .map_err(|reason| format!("denied by manifest: {reason}"))?;
        let cwd = match &request.cwd {
            Some(cwd) => self.workspace.join(cwd),
            None => self.workspace.clone(),
        };
        let req = wit::PermissionRequest {
            plugin: call.plugin.to_string(),
            tool: call.tool.clone(),
            tool_call_id: call.tool_call_id.clone(),
            action: wit::Action::ProcessStart(wit::ProcessStart {
                command: request.command.clone(),
                cwd: cwd.display().to_string(),
                workspace: self.workspace.display().to_string(),
                env_keys: request.env.iter().map(|(k, _)| k.clone()).collect(),
                shell: request.shell.clone().unwrap_or_else(|| "/bin/sh".into()),
            }),
        };
        let ask = match self.policy.decide(&self.rules, req).await {
            Ok(wit::Decision::Allow) => return Ok(()),
            Ok(wit::Decision::Deny(reason)) => return Err(format!("denied by policy: {reason}")),
            Ok(wit::Decision::Ask(ask)) => ask,
            // Fail closed: a policy that traps or hits a limit denies.
            Err(e) => return Err(format!("denied: the policy plugin failed ({e})")),
        };
        let approval = ApprovalRequest {
            request_id: format!(
                "perm_{:012x}",
                self.next_request.fetch_add(1, Ordering::Relaxed)
            ),
            plugin: call.plugin.to_string(),
            tool: call.tool.clone(),
            tool_call_id: call.tool_call_id.clone(),
            command: request.command.clone(),
            cwd: cwd.display().to_string(),
            prompt: ask.prompt.clone(),
        };
        let observer = self
            .observer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(o) = &observer {
            o.requested(&approval);
        }
        let mut guard = AskGuard {
            observer,
            request: &approval,
            resolved: false,
        };
        if let Some(outcome) = self.remembered(&request.command) {
            guard.resolve(outcome, "remembered");
            return decide_outcome(outcome, "remembered for this host session");
        }
        let approvers: Vec<_> = self
            .approvers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for approver in approvers {
            if let Some(outcome) = approver.ask(&approval).await {
                if matches!(
                    outcome,
                    ApprovalOutcome::AllowAlways | ApprovalOutcome::RejectAlways
                ) {
                    self.remembered
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((request.command.clone(), outcome));
                }
                guard.resolve(outcome, approver.name());
                return decide_outcome(outcome, approver.name());
            }
        }
        guard.resolve(ApprovalOutcome::RejectOnce, "no-approver");
        Err(format!(
            "the policy asks for approval ({}) and no approver is available (no TTY or attached \
             client). To allow it, add a matching pattern to the `allow` list of the --policy file.",
            ask.prompt
        ))
    }

    fn remembered(&self, command: &str) -> Option<ApprovalOutcome> {
        let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        remembered
            .iter()
            .rev()
            .find(|(c, _)| c == command)
            .map(|(_, o)| *o)
    }
}

fn decide_outcome(outcome: ApprovalOutcome, by: &str) -> Result<(), String> {
    if outcome.allows() {
        Ok(())
    } else {
        Err(format!("rejected by {by} ({})", outcome.as_str()))
    }
}
