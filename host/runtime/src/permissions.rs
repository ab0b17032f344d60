//! The permission pipeline every process start passes (docs/permissions.md;
//! ARCHITECTURE.md, invariant "Exec grant before policy; no grant, no exec").
//!
//! Order, fixed by the `sessions.start` host implementation and impossible for
//! a plugin to skip:
//!
//! 1. the host's hard rules (cwd inside the workspace, env names, shell,
//!    timeout): the session engine resolves the request
//!    (`toolhost_process::Sessions::resolve`), so every later step, and a
//!    person asked to approve, sees the resolved cwd and shell;
//! 2. the plugin's manifest exec grants ([`crate::manifest::Manifest::check_exec`]):
//!    the command, and for grants other than `**` also the shell, every
//!    environment name and stdin;
//! 3. the [`Policy`] (the policy plugin's `decide`);
//! 4. for `ask`, the first [`Approver`] that can answer (an attached control
//!    client, MCP elicitation, a TTY prompt); with none, deny with a reason
//!    that says how to allow the command;
//! 5. spawn (`toolhost_process::Sessions::spawn`).
//!
//! Steps 2-4 are [`Permissions::check_start`], and the whole order is
//! [`start_process`], the start gate every contract version's `sessions.start`
//! calls (the binding modules under `contract/` only convert to and from their WIT
//! types). A refusal is a typed [`Denial`]: which step refused ([`DeniedBy`]), why,
//! and how to allow it. The pipeline depends on the [`Policy`] trait, not on the
//! plugin loader: the policy plugin implements it (`crate::plugin::PolicyPlugin`),
//! and tests can pass a table.
//!
//! Outcomes use the Agent Client Protocol vocabulary (`allow_once`,
//! `allow_always`, `reject_once`, `reject_always`, `cancelled`);
//! `allow_always` / `reject_always` are remembered for the host session, for
//! the same whole request from the same plugin and tool ([`remember_key`]:
//! the program the kernel will execute, the cwd, command, shell, environment
//! names, stdin), never for the command text alone.
//!
//! Two host rules sit around the policy: a plain program name (`ls`) that
//! the command's `PATH` finds inside the workspace is asked about even when
//! the policy allows it (a rule names a program, not a file of the
//! workspace; [`workspace_program`]), and a question for a start with a
//! timeout waits at most that long: it ends with its call
//! ([`BY_CALL_TIMEOUT`]; a cancelled call drops it, `call-ended`).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::Instrument as _;

use toolhost_process::{
    Caller, ResolvedStart, SessionError, SessionId, Sessions, StartRequest, StdinMode,
};

use crate::manifest::{ExecDenial, ExecRequest, Manifest};
use crate::metrics::{DecisionSource, Metrics};

/// Who asks to start a process: the plugin, the tool call, and the plugin's
/// manifest (its exec grants).
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// The plugin id.
    pub plugin: &'a str,
    /// The tool it runs (empty outside a tool call).
    pub tool: &'a str,
    /// The tool call it runs (empty outside a tool call).
    pub tool_call_id: &'a str,
    /// Its manifest, whose exec grants are step 2 ([`Manifest::check_exec`]).
    pub manifest: &'a Manifest,
}

/// Which step of the start gate refused a start ([`Denial::by`]). Callers branch on
/// this, never on the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeniedBy {
    /// The plugin's manifest: its exec grant does not cover the request
    /// ([`Manifest::check_exec`]). Text: `denied by manifest: REASON (HINT)`.
    Manifest,
    /// A rule of the host itself: the policy plugin failed (a trap, a limit), and the
    /// pipeline fails closed. Text: `denied: REASON`.
    HostRule,
    /// The policy plugin's `decide` answered `deny`. Text: `denied by policy: REASON`.
    Policy,
    /// The policy asked and an approver rejected it, or no approver could answer.
    /// Text: the reason alone (`rejected by tty (reject_once)`, or the no-approver
    /// message with how to allow the command).
    Approver,
    /// A quota of the session engine (its ledger's per-plugin or total session
    /// count). [`Permissions::check_start`] never gives it: the engine refuses those
    /// in `Sessions::spawn`, as a `resource-limit` error. Text: the reason alone.
    Quota,
}

/// A start the permission pipeline refused: which step ([`DeniedBy`]), why, and how
/// to allow it when there is a way.
///
/// Its `Display` is the text the plugin gets in `session-error.denied` (byte for
/// byte what it has always been): a prefix naming the step (see each [`DeniedBy`]),
/// the reason, then ` (HINT)` when there is a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The step that refused.
    pub by: DeniedBy,
    /// Why, without the step's prefix or the hint.
    pub reason: String,
    /// How to allow it (the manifest key to add, what to do instead), if anything can.
    pub hint: Option<String>,
}

impl Denial {
    fn new(by: DeniedBy, reason: impl Into<String>) -> Denial {
        Denial {
            by,
            reason: reason.into(),
            hint: None,
        }
    }
}

impl From<ExecDenial> for Denial {
    fn from(denial: ExecDenial) -> Denial {
        Denial {
            by: DeniedBy::Manifest,
            reason: denial.reason(),
            hint: denial.hint(),
        }
    }
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.by {
            DeniedBy::Manifest => "denied by manifest: ",
            DeniedBy::Policy => "denied by policy: ",
            DeniedBy::HostRule => "denied: ",
            DeniedBy::Approver | DeniedBy::Quota => "",
        })?;
        f.write_str(&self.reason)?;
        match &self.hint {
            Some(hint) => write!(f, " ({hint})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Denial {}

/// Why the start gate refused a start ([`start_process`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartRefused {
    /// The permission pipeline denied it (`session-error.denied`, the [`Denial`]'s
    /// text).
    Denied(Denial),
    /// The host's hard rules refused the request (`Sessions::resolve`), or the engine
    /// could not start it (`Sessions::spawn`: a quota, an I/O failure): the engine's
    /// error as it is.
    Session(SessionError),
}

impl StartRefused {
    /// The `kind` label of `toolhost_denials_total`: the [`DeniedBy`] step
    /// (`manifest`, `policy`, `host_rule`, `approver`, `quota`), or for the
    /// engine's refusals `quota` (a resource limit), `io` or `invalid_request`
    /// (the hard rules).
    pub fn kind(&self) -> &'static str {
        match self {
            StartRefused::Denied(d) => match d.by {
                DeniedBy::Manifest => "manifest",
                DeniedBy::Policy => "policy",
                DeniedBy::HostRule => "host_rule",
                DeniedBy::Approver => "approver",
                DeniedBy::Quota => "quota",
            },
            StartRefused::Session(SessionError::ResourceLimit(_)) => "quota",
            StartRefused::Session(SessionError::Io(_)) => "io",
            StartRefused::Session(_) => "invalid_request",
        }
    }
}

/// The start gate every process start from a plugin passes, whatever its contract
/// version (ARCHITECTURE.md, invariant "No plugin spawns without the pipeline"), in
/// an order nothing can skip:
///
/// 1. the host's hard rules: `Sessions::resolve` (cwd inside the workspace, env
///    names, shell, timeout, sizes), under the stricter of the operator's sandbox and
///    the one `who`'s manifest asks for (`SandboxPolicy::stricter`: a manifest can
///    only tighten), so every later step judges the resolved request;
/// 2. to 4. [`Permissions::check_start`]: the exec grant, the policy, an approver;
/// 5. `Sessions::spawn` as `caller`.
///
/// Errors: [`StartRefused::Session`] from steps 1 and 5, [`StartRefused::Denied`]
/// from 2 to 4.
///
/// The whole gate is the span `process.start` (docs/operations.md#traces-and-logs):
/// the session started, or the refusal's [`StartRefused::kind`] as `error.type`.
pub async fn start_process(
    sessions: &Sessions,
    permissions: &Permissions,
    who: &Requester<'_>,
    caller: &Caller,
    request: StartRequest,
) -> Result<SessionId, StartRefused> {
    let span = tracing::info_span!(
        "process.start",
        toolhost.plugin.id = who.plugin,
        toolhost.tool_call.id = who.tool_call_id,
        toolhost.process.session.id = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let started = start_gate(sessions, permissions, who, caller, request)
        .instrument(span.clone())
        .await;
    if !span.is_disabled() {
        match &started {
            Ok(id) => span.record("toolhost.process.session.id", id.as_str()),
            Err(refused) => span
                .record("error.type", refused.kind())
                .record("otel.status_code", "error"),
        };
    }
    started
}

/// [`start_process`]'s steps.
async fn start_gate(
    sessions: &Sessions,
    permissions: &Permissions,
    who: &Requester<'_>,
    caller: &Caller,
    request: StartRequest,
) -> Result<SessionId, StartRefused> {
    let resolved = match sessions.resolve(request, &who.manifest.sandbox_policy()) {
        Ok(resolved) => resolved,
        Err(e) => {
            let refused = StartRefused::Session(e);
            permissions.metrics.refused(refused.kind());
            return Err(refused);
        }
    };
    let started = match permissions.check_start(who, &resolved).await {
        Ok(()) => sessions
            .spawn(caller, resolved)
            .await
            .map_err(StartRefused::Session),
        Err(denial) => Err(StartRefused::Denied(denial)),
    };
    if let Err(refused) = &started {
        permissions.metrics.refused(refused.kind());
    }
    started
}

/// What a [`Policy`] decides on (the WIT `permission-request` with a
/// `process-start` action): the resolved request, never the raw one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRequest {
    /// The plugin asking.
    pub plugin: String,
    /// The tool it runs.
    pub tool: String,
    /// The tool call it runs.
    pub tool_call_id: String,
    /// The command line (`SHELL -c COMMAND`).
    pub command: String,
    /// The resolved working directory (absolute, inside the workspace).
    pub cwd: String,
    /// The workspace root (absolute).
    pub workspace: String,
    /// Names of the extra environment variables the request sets.
    pub env_keys: Vec<String>,
    /// The resolved shell (absolute path).
    pub shell: String,
}

/// A policy's answer (WIT `decision`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it, with the reason shown to the plugin.
    Deny(String),
    /// Ask an approver, with this prompt.
    Ask(String),
}

/// Decides on permission requests: the policy plugin, or a table in tests.
pub trait Policy: Send + Sync {
    /// Decides on `request`. `Err` (the policy failed: a trap, a limit) denies:
    /// the pipeline fails closed.
    fn decide<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Decision, String>> + Send + 'a>>;
}

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
    /// The resolved shell (absolute path).
    pub shell: String,
    /// The names of the environment variables the request sets, sorted, each
    /// once (never the values).
    pub env_names: Vec<String>,
    /// What the command gets on stdin.
    pub stdin: StdinShown,
    /// The program the kernel will execute for the command's first word, as
    /// the shell finds it (`toolhost_process::Program`): its canonical path,
    /// or `` `WORD` (not found) ``; `None` when the first word is no plain
    /// program word (a builtin, an expansion).
    pub program: Option<String>,
}

/// The most bytes of fed stdin an approver is shown ([`StdinShown::Bytes`]'s
/// head): 256.
pub const STDIN_HEAD_BYTES: usize = 256;

/// What a command gets on stdin, as an approver is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinShown {
    /// `/dev/null`.
    Closed,
    /// A pipe the plugin may write to while it runs.
    Open,
    /// These bytes, then end of file.
    Bytes {
        /// How many bytes are fed.
        len: usize,
        /// The first of them, at most [`STDIN_HEAD_BYTES`].
        head: Vec<u8>,
    },
}

impl StdinShown {
    /// What `stdin` feeds, as shown.
    pub fn of(stdin: &StdinMode) -> StdinShown {
        match stdin {
            StdinMode::Closed => StdinShown::Closed,
            StdinMode::Open => StdinShown::Open,
            StdinMode::Bytes(bytes) => StdinShown::Bytes {
                len: bytes.len(),
                head: bytes[..bytes.len().min(STDIN_HEAD_BYTES)].to_vec(),
            },
        }
    }
}

/// The `by` of a question that ended because its start's timeout passed
/// unanswered (the command would have been killed by then): `call-timeout`.
pub const BY_CALL_TIMEOUT: &str = "call-timeout";

/// An approver's answer (ACP `RequestPermissionOutcome` + option kinds; see the
/// Agent Client Protocol's `session/request_permission`).
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

    /// Asks, as [`Approver::ask`], and says who settled the question and
    /// why: an approver that can settle a question itself (it expired, was
    /// withdrawn, or was refused past a limit) labels that apart from its
    /// user's answer. The default is [`Approver::ask`]'s outcome by
    /// [`Approver::name`], with the usual denial text.
    fn answer<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Answer>> + Send + 'a>> {
        Box::pin(async move {
            self.ask(request).await.map(|outcome| Answer {
                outcome,
                by: self.name().to_string(),
                reason: None,
            })
        })
    }
}

/// An approver's settled question ([`Approver::answer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The outcome.
    pub outcome: ApprovalOutcome,
    /// Who settled it, for the log (`PermissionObserver::resolved`'s `by`).
    pub by: String,
    /// The denial text instead of `rejected by {by} ({outcome})`, when it
    /// does not allow.
    pub reason: Option<String>,
}

/// Told about every approval request and its resolution (the host-session
/// event log hooks in here: every request and resolution is an event, see
/// `LogObserver`). Called synchronously; must return quickly.
pub trait PermissionObserver: Send + Sync {
    /// The pipeline is about to ask the approvers (or to apply a remembered
    /// answer) for `request`.
    fn requested(&self, request: &ApprovalRequest);
    /// `request` was resolved with `outcome` by `by`: an approver's name (or
    /// the label of its own settling, [`Approver::answer`]),
    /// `remembered`, `no-approver` (nobody could answer: rejected), or
    /// `call-ended` (the call was cancelled while asking: `cancelled`).
    fn resolved(&self, request: &ApprovalRequest, outcome: ApprovalOutcome, by: &str);

    /// `request` was resolved by an `allow_always` / `reject_always` answer
    /// remembered from request `original` (its `request_id`). The default
    /// reports it as [`PermissionObserver::resolved`] by `remembered`.
    fn resolved_from_memory(
        &self,
        request: &ApprovalRequest,
        outcome: ApprovalOutcome,
        original: &str,
    ) {
        let _ = original;
        self.resolved(request, outcome, "remembered");
    }
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

    fn resolve_from_memory(&mut self, outcome: ApprovalOutcome, original: &str) {
        self.resolved = true;
        if let Some(o) = &self.observer {
            o.resolved_from_memory(self.request, outcome, original);
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

/// The pipeline's configuration, the policy it asks and the approvers.
pub struct Permissions {
    policy: Arc<dyn Policy>,
    workspace: PathBuf,
    approvers: Mutex<Vec<Arc<dyn Approver>>>,
    /// Requests answered `allow_always` / `reject_always` in this host session:
    /// ([`remember_key`], the answer, the id of the request it was given for).
    remembered: Mutex<Vec<(String, ApprovalOutcome, String)>>,
    observer: Mutex<Option<Arc<dyn PermissionObserver>>>,
    next_request: AtomicU64,
    metrics: Metrics,
}

impl Permissions {
    /// A pipeline asking `policy`. `workspace` is the canonical root.
    pub fn new(policy: Arc<dyn Policy>, workspace: PathBuf) -> Permissions {
        Permissions {
            policy,
            workspace,
            approvers: Mutex::new(Vec::new()),
            remembered: Mutex::new(Vec::new()),
            observer: Mutex::new(None),
            next_request: AtomicU64::new(1),
            metrics: Metrics::default(),
        }
    }

    /// This pipeline, counting its decisions and refusals in `metrics`
    /// (`toolhost_permission_decisions_total`, `toolhost_denials_total`).
    pub(crate) fn with_metrics(self, metrics: Metrics) -> Permissions {
        Permissions { metrics, ..self }
    }

    /// Numbers new permission requests above `last` (a resumed host session's
    /// highest, [`Recovery::last_permission_request`](toolhost_host_session::Recovery::last_permission_request)),
    /// so no request id repeats within one log.
    pub fn continue_request_ids_after(&self, last: u64) {
        self.next_request.fetch_max(last + 1, Ordering::Relaxed);
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

    /// Steps 2-4 of the pipeline: decides whether `who` may start `request`
    /// (already resolved by the session engine: step 1). `Err` is the [`Denial`]:
    /// the step that refused ([`DeniedBy::Manifest`], [`DeniedBy::Policy`],
    /// [`DeniedBy::HostRule`] when the policy failed, [`DeniedBy::Approver`]), why,
    /// and how to allow it.
    ///
    /// Step 2 is the calling plugin's manifest exec grants
    /// ([`Manifest::check_exec`]: command, shell, environment names, stdin): a
    /// plugin without a grant is denied before the policy is asked. The policy
    /// then sees the command, cwd, shell and environment names (never values
    /// or stdin bytes).
    pub async fn check_start(
        &self,
        who: &Requester<'_>,
        request: &ResolvedStart,
    ) -> Result<(), Denial> {
        // The span `permission.decide` (docs/operations.md#traces-and-logs).
        let span = tracing::info_span!(
            "permission.decide",
            toolhost.plugin.id = who.plugin,
            toolhost.permission.source = tracing::field::Empty,
            toolhost.permission.decision = tracing::field::Empty,
        );
        let (source, decided) = self
            .decide_start(who, request)
            .instrument(span.clone())
            .await;
        span.record("toolhost.permission.source", source.label());
        span.record(
            "toolhost.permission.decision",
            if decided.is_ok() { "allow" } else { "deny" },
        );
        self.metrics.decision(source, decided.is_ok());
        decided
    }

    /// [`Permissions::check_start`], and which step decided.
    async fn decide_start(
        &self,
        who: &Requester<'_>,
        request: &ResolvedStart,
    ) -> (DecisionSource, Result<(), Denial>) {
        let command = &request.request.command;
        let shell = request.shell.to_string_lossy();
        let granted = who.manifest.check_exec(&ExecRequest {
            command,
            shell: &shell,
            env: &request.request.env,
            feeds_stdin: !matches!(request.request.stdin, StdinMode::Closed),
        });
        if let Err(e) = granted {
            return (DecisionSource::Manifest, Err(Denial::from(e)));
        }
        let key = remember_key(who, request);
        let cwd = request.cwd.display().to_string();
        let req = PermissionRequest {
            plugin: who.plugin.to_string(),
            tool: who.tool.to_string(),
            tool_call_id: who.tool_call_id.to_string(),
            command: command.clone(),
            cwd: cwd.clone(),
            workspace: self.workspace.display().to_string(),
            env_keys: request.request.env.iter().map(|(k, _)| k.clone()).collect(),
            shell: request.shell.display().to_string(),
        };
        let prompt = match self.policy.decide(&req).await {
            Ok(Decision::Allow) => match workspace_program(request, &self.workspace) {
                None => return (DecisionSource::Policy, Ok(())),
                Some(prompt) => prompt,
            },
            Ok(Decision::Deny(reason)) => {
                return (
                    DecisionSource::Policy,
                    Err(Denial::new(DeniedBy::Policy, reason)),
                );
            }
            Ok(Decision::Ask(prompt)) => prompt,
            // Fail closed: a policy that traps or hits a limit denies.
            Err(e) => {
                return (
                    DecisionSource::PolicyFailed,
                    Err(Denial::new(
                        DeniedBy::HostRule,
                        format!("the policy plugin failed ({e})"),
                    )),
                );
            }
        };
        let approval = ApprovalRequest {
            request_id: toolhost_host_session::permission_request_id(
                self.next_request.fetch_add(1, Ordering::Relaxed),
            ),
            plugin: req.plugin,
            tool: req.tool,
            tool_call_id: req.tool_call_id,
            command: command.clone(),
            cwd,
            prompt: prompt.clone(),
            shell: req.shell,
            env_names: {
                let mut names = req.env_keys;
                names.sort_unstable();
                names.dedup();
                names
            },
            stdin: StdinShown::of(&request.request.stdin),
            program: request.program.as_ref().map(|p| match &p.path {
                Some(path) => path.display().to_string(),
                None => format!("`{}` (not found)", p.word),
            }),
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
        if let Some((outcome, original)) = self.remembered(&key) {
            guard.resolve_from_memory(outcome, &original);
            return (
                DecisionSource::Remembered,
                decide_outcome(
                    outcome,
                    &format!("an answer remembered for this host session (to {original})"),
                ),
            );
        }
        let approvers: Vec<_> = self
            .approvers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let asking = async {
            for approver in approvers {
                if let Some(answer) = approver.answer(&approval).await {
                    return Some(answer);
                }
            }
            None
        };
        // A question ends with its call: a start with a timeout would have
        // been killed by then, so nobody is asked for longer.
        let answered = match request.request.timeout {
            None => asking.await,
            Some(limit) => match tokio::time::timeout(limit, asking).await {
                Ok(answer) => answer,
                Err(_) => {
                    guard.resolve(ApprovalOutcome::Cancelled, BY_CALL_TIMEOUT);
                    let denial = Denial::new(
                        DeniedBy::Approver,
                        format!(
                            "the permission question was not answered within the command's \
                             timeout ({} ms) and was withdrawn; nothing ran",
                            limit.as_millis()
                        ),
                    );
                    return (DecisionSource::NoApprover, Err(denial));
                }
            },
        };
        if let Some(answer) = answered {
            let outcome = answer.outcome;
            if matches!(
                outcome,
                ApprovalOutcome::AllowAlways | ApprovalOutcome::RejectAlways
            ) {
                self.remembered
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((key.clone(), outcome, approval.request_id.clone()));
            }
            guard.resolve(outcome, &answer.by);
            let decided = match answer.reason {
                Some(reason) if !outcome.allows() => Err(Denial::new(DeniedBy::Approver, reason)),
                _ => decide_outcome(outcome, &answer.by),
            };
            return (DecisionSource::Approver, decided);
        }
        guard.resolve(ApprovalOutcome::RejectOnce, "no-approver");
        // The prompt's last line tells an approver how to answer; nobody can here.
        let question = prompt
            .lines()
            .filter(|l| !l.starts_with("Answer "))
            .collect::<Vec<_>>()
            .join("\n");
        let denial = Denial::new(
            DeniedBy::Approver,
            format!(
                "the policy asks before running this, and no approver is available (no TTY, \
                 attached control client or MCP client that answers elicitations). To allow it \
                 without asking, add a matching pattern to the `allow` list of the --policy \
                 file. The policy's question:\n{question}"
            ),
        );
        (DecisionSource::NoApprover, Err(denial))
    }

    /// The remembered answer for `key` and the request it was given for.
    fn remembered(&self, key: &str) -> Option<(ApprovalOutcome, String)> {
        let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        remembered
            .iter()
            .rev()
            .find(|(k, _, _)| k == key)
            .map(|(_, o, id)| (*o, id.clone()))
    }
}

/// The question the host asks itself when the policy allowed a command whose
/// first word is a plain name (`ls`) that the command's `PATH` finds inside
/// the workspace: a rule names a program, and a file of the workspace is not
/// the program a rule for its name meant (docs/policy.md#patterns). `None`
/// when the first word is no such name.
fn workspace_program(request: &ResolvedStart, workspace: &std::path::Path) -> Option<String> {
    let program = request.program.as_ref()?;
    let path = program.path.as_ref()?;
    if program.by_path() || !path.starts_with(workspace) {
        return None;
    }
    Some(format!(
        "Run `{}`? `{}` is found on the command's PATH at `{}`, inside the workspace: a policy \
         rule for `{}` names a program, not a file of the workspace.\nAnswer allow_once, \
         allow_always, reject_once or reject_always.",
        request
            .request
            .command
            .chars()
            .take(300)
            .collect::<String>(),
        program.word,
        path.display(),
        program.word,
    ))
}

/// What an `allow_always` / `reject_always` answer covers: the whole request
/// the approver was shown, from the same plugin and tool: the program the
/// kernel will execute for the first word (its resolved path), the resolved
/// cwd, the command, the shell, the sorted environment names and whether
/// stdin is fed. So an answer for `sleep 1` never covers `sleep 1` with
/// `BASH_ENV` set or under another shell, an answer for `./run.sh` in one
/// directory never covers another directory's `run.sh`, and an answer given
/// to the built-in bash tool never covers another plugin's request.
fn remember_key(who: &Requester<'_>, request: &ResolvedStart) -> String {
    let mut names: Vec<&str> = request
        .request
        .env
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    let stdin = match request.request.stdin {
        StdinMode::Closed => "closed",
        StdinMode::Open => "open",
        _ => "bytes",
    };
    let program = match &request.program {
        Some(p) => match &p.path {
            Some(path) => path.display().to_string(),
            None => format!("{} (not found)", p.word),
        },
        None => String::new(),
    };
    // Each field is length-prefixed, so no field's text can shift another's.
    let mut key = String::new();
    for field in [
        who.plugin,
        who.tool,
        &program,
        &request.cwd.display().to_string(),
        &request.request.command,
        &request.shell.display().to_string(),
        &names.join("\0"),
        stdin,
    ] {
        key.push_str(&format!("{}:{field}\0", field.len()));
    }
    key
}

fn decide_outcome(outcome: ApprovalOutcome, by: &str) -> Result<(), Denial> {
    if outcome.allows() {
        Ok(())
    } else {
        Err(Denial::new(
            DeniedBy::Approver,
            format!("rejected by {by} ({})", outcome.as_str()),
        ))
    }
}

#[cfg(test)]
mod tests {
    //! The pipeline on its own: a table policy, scripted approvers and a
    //! recording observer, over requests the real session engine resolved.

    use super::*;
    use crate::manifest::ExecGrant;
    use std::sync::atomic::AtomicUsize;
    use toolhost_process::SandboxPolicy;
    use toolhost_process::{Sessions, SessionsConfig, StartRequest};

    /// Answers every request with one decision and counts the calls.
    struct TablePolicy {
        decision: Result<Decision, String>,
        calls: AtomicUsize,
        seen: Mutex<Vec<PermissionRequest>>,
    }

    impl TablePolicy {
        fn new(decision: Result<Decision, String>) -> Arc<TablePolicy> {
            Arc::new(TablePolicy {
                decision,
                calls: AtomicUsize::new(0),
                seen: Mutex::new(Vec::new()),
            })
        }
    }

    impl Policy for TablePolicy {
        fn decide<'a>(
            &'a self,
            request: &'a PermissionRequest,
        ) -> Pin<Box<dyn Future<Output = Result<Decision, String>> + Send + 'a>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.seen.lock().unwrap().push(request.clone());
            let decision = self.decision.clone();
            Box::pin(async move { decision })
        }
    }

    /// Answers with a fixed outcome (or `None`: cannot answer) and records
    /// what it was asked.
    struct Scripted {
        answer: Option<ApprovalOutcome>,
        asked: Mutex<Vec<ApprovalRequest>>,
    }

    impl Approver for Scripted {
        fn name(&self) -> &str {
            "scripted"
        }
        fn ask<'a>(
            &'a self,
            request: &'a ApprovalRequest,
        ) -> Pin<Box<dyn Future<Output = Option<ApprovalOutcome>> + Send + 'a>> {
            self.asked.lock().unwrap().push(request.clone());
            let answer = self.answer;
            Box::pin(async move { answer })
        }
    }

    fn scripted(answer: Option<ApprovalOutcome>) -> Arc<Scripted> {
        Arc::new(Scripted {
            answer,
            asked: Mutex::new(Vec::new()),
        })
    }

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl PermissionObserver for Recorder {
        fn requested(&self, request: &ApprovalRequest) {
            self.0
                .lock()
                .unwrap()
                .push(format!("requested {}", request.command));
        }
        fn resolved(&self, request: &ApprovalRequest, outcome: ApprovalOutcome, by: &str) {
            self.0.lock().unwrap().push(format!(
                "resolved {} {} by {by}",
                request.command,
                outcome.as_str()
            ));
        }
    }

    struct Setup {
        ws: tempfile::TempDir,
        _state: tempfile::TempDir,
        sessions: Sessions,
    }

    fn setup() -> Setup {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("sub")).unwrap();
        let sessions = Sessions::new(SessionsConfig::new(ws.path(), state.path())).unwrap();
        Setup {
            ws,
            _state: state,
            sessions,
        }
    }

    fn resolve(s: &Setup, command: &str) -> ResolvedStart {
        resolve_with(s, command, &[])
    }

    fn resolve_with(s: &Setup, command: &str, env: &[(&str, &str)]) -> ResolvedStart {
        resolve_in(s, "sub", command, env)
    }

    fn resolve_in(s: &Setup, cwd: &str, command: &str, env: &[(&str, &str)]) -> ResolvedStart {
        let mut request = StartRequest::new(command);
        request.cwd = Some(cwd.into());
        request.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        s.sessions
            .resolve(request, &SandboxPolicy::default())
            .unwrap()
    }

    fn grant(patterns: &[&str]) -> Manifest {
        Manifest {
            exec: ExecGrant::Patterns(patterns.iter().map(|p| p.to_string()).collect()),
            ..Manifest::deny_all("p")
        }
    }

    /// A pipeline whose policy asks `question` of every start, its events
    /// going to the returned recorder.
    fn asking(s: &Setup, question: &str) -> (Permissions, Arc<Recorder>) {
        let pipeline = Permissions::new(
            TablePolicy::new(Ok(Decision::Ask(question.into()))),
            s.ws.path().to_path_buf(),
        );
        let recorder = Arc::new(Recorder::default());
        pipeline.set_observer(recorder.clone());
        (pipeline, recorder)
    }

    fn who(manifest: &Manifest) -> Requester<'_> {
        Requester {
            plugin: "p",
            tool: "t",
            tool_call_id: "tc_1",
            manifest,
        }
    }

    #[tokio::test]
    async fn the_exec_grant_refuses_before_the_policy_is_asked() {
        let s = setup();
        let policy = TablePolicy::new(Ok(Decision::Allow));
        let pipeline = Permissions::new(policy.clone(), s.ws.path().to_path_buf());
        let request = resolve(&s, "ls");
        for (exec, want) in [
            (
                Manifest::deny_all("p"),
                "denied by manifest: the plugin's manifest grants no exec (add `exec = \
                 [\"PATTERN\"]` to its manifest to allow commands)",
            ),
            (
                grant(&["git status"]),
                "denied by manifest: the command does not match the plugin's exec grant (`git \
                 status`); a pattern matches one simple command word by word, without shell \
                 metacharacters",
            ),
        ] {
            let err = pipeline
                .check_start(&who(&exec), &request)
                .await
                .unwrap_err();
            assert_eq!(err.by, DeniedBy::Manifest);
            assert_eq!(err.to_string(), want);
        }
        let err = pipeline
            .check_start(&who(&Manifest::deny_all("p")), &request)
            .await
            .unwrap_err();
        assert_eq!(err.reason, "the plugin's manifest grants no exec");
        assert_eq!(
            err.hint.as_deref(),
            Some("add `exec = [\"PATTERN\"]` to its manifest to allow commands")
        );
        assert_eq!(policy.calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn the_policy_decides_on_the_resolved_request_and_fails_closed() {
        let s = setup();
        let exec = grant(&["ls *"]);
        let request = resolve(&s, "ls -l");
        type Case = (
            Result<Decision, String>,
            Result<(), (DeniedBy, &'static str)>,
        );
        let cases: [Case; 3] = [
            (Ok(Decision::Allow), Ok(())),
            (
                Ok(Decision::Deny("no".into())),
                Err((DeniedBy::Policy, "denied by policy: no")),
            ),
            (
                Err("trapped".into()),
                Err((
                    DeniedBy::HostRule,
                    "denied: the policy plugin failed (trapped)",
                )),
            ),
        ];
        for (decision, want) in cases {
            let policy = TablePolicy::new(decision);
            let pipeline = Permissions::new(policy.clone(), s.ws.path().to_path_buf());
            let got = pipeline.check_start(&who(&exec), &request).await;
            let got = got.map_err(|d| (d.by, d.to_string()));
            assert_eq!(
                got.as_ref().map_err(|(by, text)| (*by, text.as_str())),
                want.as_ref().map_err(|(by, text)| (*by, *text))
            );
            let seen = policy.seen.lock().unwrap();
            let canonical_ws = s.ws.path().canonicalize().unwrap();
            assert_eq!(seen[0].cwd, canonical_ws.join("sub").display().to_string());
            assert_eq!(seen[0].workspace, s.ws.path().display().to_string());
            assert_eq!(seen[0].shell, "/bin/sh");
            assert_eq!(seen[0].command, "ls -l");
            assert_eq!(seen[0].tool_call_id, "tc_1");
        }
    }

    #[tokio::test]
    async fn an_ask_goes_to_the_first_approver_that_answers_and_always_is_remembered() {
        let s = setup();
        let exec = grant(&["**"]);
        let policy = TablePolicy::new(Ok(Decision::Ask("sure?".into())));
        let pipeline = Permissions::new(policy, s.ws.path().to_path_buf());
        let recorder = Arc::new(Recorder::default());
        pipeline.set_observer(recorder.clone());
        let absent = scripted(None);
        let person = scripted(Some(ApprovalOutcome::AllowAlways));
        pipeline.add_approver(absent.clone());
        pipeline.add_approver(person.clone());
        let request = resolve(&s, "make");
        assert_eq!(pipeline.check_start(&who(&exec), &request).await, Ok(()));
        assert_eq!(pipeline.check_start(&who(&exec), &request).await, Ok(()));
        // The second time was remembered: nobody was asked again.
        assert_eq!(absent.asked.lock().unwrap().len(), 1);
        let asked = person.asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].request_id, "perm_000000000001");
        assert_eq!(asked[0].prompt, "sure?");
        assert!(asked[0].cwd.ends_with("/sub"), "{}", asked[0].cwd);
        assert_eq!(
            *recorder.0.lock().unwrap(),
            [
                "requested make",
                "resolved make allow_always by scripted",
                "requested make",
                "resolved make allow_always by remembered",
            ]
        );
    }

    #[tokio::test]
    async fn an_ask_without_an_approver_is_rejected_with_how_to_allow_it() {
        let s = setup();
        let exec = grant(&["**"]);
        let (pipeline, recorder) = asking(&s, "unknown");
        let err = pipeline
            .check_start(&who(&exec), &resolve(&s, "make"))
            .await
            .unwrap_err();
        assert_eq!(err.by, DeniedBy::Approver);
        assert_eq!(
            err.to_string(),
            "the policy asks before running this, and no approver is available (no TTY, attached \
             control client or MCP client that answers elicitations). To allow it without \
             asking, add a matching pattern to the `allow` list of the --policy file. The \
             policy's question:\nunknown"
        );
        assert_eq!(
            *recorder.0.lock().unwrap(),
            ["requested make", "resolved make reject_once by no-approver"]
        );
    }

    #[tokio::test]
    async fn a_rejection_names_the_approver() {
        let s = setup();
        let exec = grant(&["**"]);
        let (pipeline, _) = asking(&s, "?");
        pipeline.add_approver(scripted(Some(ApprovalOutcome::RejectOnce)));
        let err = pipeline
            .check_start(&who(&exec), &resolve(&s, "make"))
            .await
            .unwrap_err();
        assert_eq!(err.by, DeniedBy::Approver);
        assert_eq!(err.to_string(), "rejected by scripted (reject_once)");
    }

    #[tokio::test]
    async fn the_manifest_judges_env_names_before_the_policy_and_the_policy_sees_them() {
        let s = setup();
        let policy = TablePolicy::new(Ok(Decision::Allow));
        let pipeline = Permissions::new(policy.clone(), s.ws.path().to_path_buf());
        let exec = grant(&["sleep *"]);
        let err = pipeline
            .check_start(
                &who(&exec),
                &resolve_with(&s, "sleep 1", &[("BASH_ENV", "/x")]),
            )
            .await
            .unwrap_err();
        assert_eq!(err.by, DeniedBy::Manifest);
        assert!(err.to_string().contains("`BASH_ENV`"), "{err}");
        assert_eq!(policy.calls.load(Ordering::SeqCst), 0);
        let request = resolve_with(&s, "sleep 1", &[("LANG", "C"), ("TZ", "UTC")]);
        assert_eq!(pipeline.check_start(&who(&exec), &request).await, Ok(()));
        let seen = policy.seen.lock().unwrap();
        assert_eq!(seen[0].env_keys, ["LANG", "TZ"]);
        assert_eq!(seen[0].shell, "/bin/sh");
    }

    #[tokio::test]
    async fn an_always_answer_covers_the_whole_request_not_the_command_text() {
        let s = setup();
        let exec = grant(&["**"]);
        let (pipeline, _) = asking(&s, "?");
        let person = scripted(Some(ApprovalOutcome::AllowAlways));
        pipeline.add_approver(person.clone());
        let plain = resolve(&s, "make");
        assert_eq!(pipeline.check_start(&who(&exec), &plain).await, Ok(()));
        assert_eq!(pipeline.check_start(&who(&exec), &plain).await, Ok(()));
        assert_eq!(person.asked.lock().unwrap().len(), 1);
        // The same text with an environment name the approver never saw is
        // asked again.
        let with_env = resolve_with(&s, "make", &[("LD_PRELOAD", "/x.so")]);
        assert_eq!(pipeline.check_start(&who(&exec), &with_env).await, Ok(()));
        assert_eq!(person.asked.lock().unwrap().len(), 2);
    }

    /// Never answers (a person who is not there).
    struct Silent;

    impl Approver for Silent {
        fn name(&self) -> &str {
            "silent"
        }
        fn ask<'a>(
            &'a self,
            _request: &'a ApprovalRequest,
        ) -> Pin<Box<dyn Future<Output = Option<ApprovalOutcome>> + Send + 'a>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn an_always_answer_stays_with_its_program_directory_plugin_and_tool() {
        let s = setup();
        std::fs::create_dir(s.ws.path().join("other")).unwrap();
        let exec = grant(&["**"]);
        let (pipeline, _) = asking(&s, "?");
        let person = scripted(Some(ApprovalOutcome::AllowAlways));
        pipeline.add_approver(person.clone());
        let here = resolve_in(&s, "sub", "./run.sh", &[]);
        assert_eq!(pipeline.check_start(&who(&exec), &here).await, Ok(()));
        assert_eq!(pipeline.check_start(&who(&exec), &here).await, Ok(()));
        assert_eq!(person.asked.lock().unwrap().len(), 1);
        // The same text in another directory is another program.
        let there = resolve_in(&s, "other", "./run.sh", &[]);
        assert_eq!(pipeline.check_start(&who(&exec), &there).await, Ok(()));
        assert_eq!(person.asked.lock().unwrap().len(), 2);
        // The same request from another plugin, or another tool, is asked.
        let other_plugin = Requester {
            plugin: "q",
            ..who(&exec)
        };
        assert_eq!(pipeline.check_start(&other_plugin, &here).await, Ok(()));
        let other_tool = Requester {
            tool: "u",
            ..who(&exec)
        };
        assert_eq!(pipeline.check_start(&other_tool, &here).await, Ok(()));
        assert_eq!(person.asked.lock().unwrap().len(), 4);
        let asked = person.asked.lock().unwrap();
        let ws = s.ws.path().canonicalize().unwrap();
        assert_eq!(
            asked[0].program,
            Some(ws.join("sub/run.sh").display().to_string())
        );
        assert_eq!(
            asked[1].program,
            Some(ws.join("other/run.sh").display().to_string())
        );
    }

    #[tokio::test]
    async fn a_question_ends_when_its_start_would_have_timed_out() {
        let s = setup();
        let exec = grant(&["**"]);
        let (pipeline, recorder) = asking(&s, "?");
        pipeline.add_approver(Arc::new(Silent));
        let mut request = StartRequest::new("make");
        request.timeout = Some(std::time::Duration::from_millis(50));
        let request = s
            .sessions
            .resolve(request, &SandboxPolicy::default())
            .unwrap();
        let err = pipeline
            .check_start(&who(&exec), &request)
            .await
            .unwrap_err();
        assert_eq!(err.by, DeniedBy::Approver);
        assert_eq!(
            err.to_string(),
            "the permission question was not answered within the command's timeout (50 ms) and \
             was withdrawn; nothing ran"
        );
        assert_eq!(
            *recorder.0.lock().unwrap(),
            ["requested make", "resolved make cancelled by call-timeout"]
        );
    }

    #[tokio::test]
    async fn a_name_the_path_finds_inside_the_workspace_is_asked_even_when_allowed() {
        let s = setup();
        let bin = s.ws.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("ls"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            bin.join("ls"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let exec = grant(&["**"]);
        let ws = s.ws.path().canonicalize().unwrap();
        let pipeline = Permissions::new(TablePolicy::new(Ok(Decision::Allow)), ws.clone());
        let path = ws.join("bin").display().to_string();
        let err = pipeline
            .check_start(
                &who(&exec),
                &resolve_with(&s, "ls -l", &[("PATH", path.as_str())]),
            )
            .await
            .unwrap_err();
        assert_eq!(err.by, DeniedBy::Approver);
        assert!(
            err.to_string().ends_with(&format!(
                "The policy's question:\nRun `ls -l`? `ls` is found on the command's PATH at \
                 `{}/bin/ls`, inside the workspace: a policy rule for `ls` names a program, not \
                 a file of the workspace.",
                ws.display()
            )),
            "{err}"
        );
        // The same name found outside the workspace is the policy's to allow.
        assert_eq!(
            pipeline
                .check_start(&who(&exec), &resolve(&s, "ls -l"))
                .await,
            Ok(())
        );
    }
}
