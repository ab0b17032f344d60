//! The permission pipeline every process start passes (DESIGN §5).
//!
//! Walking-skeleton cut: the policy plugin's `decide` is consulted before
//! every start; `ask` is refused with a reason (no approver yet).

use std::path::PathBuf;
use std::sync::Arc;

use crate::bindings::v0_1_0::policy_plugin::exports::toolhost::plugin::policy as wit;
use crate::plugins::{CallInfo, PolicyPlugin};
use crate::sessions::StartRequest;

/// The pipeline's configuration and the policy plugin it asks.
pub struct Permissions {
    policy: Arc<PolicyPlugin>,
    rules: String,
    workspace: PathBuf,
}

impl Permissions {
    /// A pipeline asking `policy` under `rules` (the `--policy` file's text;
    /// empty for the plugin's defaults). `workspace` is the canonical root.
    pub fn new(policy: Arc<PolicyPlugin>, rules: String, workspace: PathBuf) -> Permissions {
        Permissions {
            policy,
            rules,
            workspace,
        }
    }

    /// Decides whether `call` may start `request`. `Err(reason)` means denied;
    /// the reason says which step refused and how to allow it.
    pub async fn check_start(&self, call: &CallInfo, request: &StartRequest) -> Result<(), String> {
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
        match self.policy.decide(&self.rules, req).await {
            Ok(wit::Decision::Allow) => Ok(()),
            Ok(wit::Decision::Deny(reason)) => Err(format!("denied by policy: {reason}")),
            Ok(wit::Decision::Ask(ask)) => Err(format!(
                "the policy asks for approval ({}) and no approver is available; add an allow rule to the --policy file",
                ask.prompt
            )),
            // Fail closed: a policy that traps or hits a limit denies.
            Err(e) => Err(format!("denied: the policy plugin failed ({e})")),
        }
    }
}
