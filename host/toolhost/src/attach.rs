//! `toolhost attach`: follow a host session's events through the control
//! socket, answer permission prompts, cancel or detach calls, detach and
//! re-attach (docs/attach.md; the events: docs/event-log.md).
//!
//! The client rules live in [`Follower`], a pure state machine:
//! - events at or before the cursor are duplicates and are not applied again;
//! - the first new event must be cursor + 1 and each next one + 1; a batch
//!   with a gap is refused whole and the cursor does not move (the client
//!   then replays from its cursor with the `events` method);
//! - a permission request is answered at most once;
//! - each tool call's settlement is applied once, in seq order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use crate::control::{ControlClient, ControlError, HEARTBEAT_INTERVAL, PendingPermission};
use toolhost_runtime::{HostEvent, HostEventKind, Replay};
use toolhost_runtime::{escape, escape_line};

/// Why a batch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FollowError {
    /// The batch skips seqs: the next one expected was `expected`, it holds `found`.
    #[error("gap in the event stream: expected seq {expected}, got {found}")]
    Gap {
        /// The seq the cursor needs next.
        expected: u64,
        /// The first seq in the batch past the cursor that does not fit.
        found: u64,
    },
}

/// A pending approval request as the follower knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The id to answer with.
    pub request_id: String,
    /// The tool call asking.
    pub tool_call_id: String,
    /// The command line.
    pub command: String,
    /// The working directory.
    pub cwd: String,
    /// The policy's prompt.
    pub prompt: String,
}

/// The client side of the event stream: cursor, dedupe, gap detection and
/// the state derived from applied events (pending prompts, running calls).
#[derive(Debug, Clone, Default)]
pub struct Follower {
    cursor: u64,
    prompts: BTreeMap<String, Prompt>,
    answered: BTreeSet<String>,
    running: BTreeMap<String, String>,
    settled: Vec<String>,
    stopped: bool,
}

impl Follower {
    /// A follower that has applied every event up to `cursor` (0: none).
    pub fn new(cursor: u64) -> Follower {
        Follower {
            cursor,
            ..Follower::default()
        }
    }

    /// The seq of the last applied event.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Applies the events of a batch that come after the cursor, exactly
    /// once and in order, and returns them. Duplicates (seq ≤ cursor) are
    /// skipped. A batch whose new events do not start at cursor + 1 or skip
    /// a seq is refused whole: nothing is applied and the cursor stays.
    ///
    /// Errors: [`FollowError::Gap`].
    pub fn apply(&mut self, events: &[HostEvent]) -> Result<Vec<HostEvent>, FollowError> {
        let mut expected = self.cursor + 1;
        let mut fresh = Vec::new();
        for event in events {
            if event.seq < expected && fresh.is_empty() {
                continue; // already applied
            }
            if event.seq != expected {
                return Err(FollowError::Gap {
                    expected,
                    found: event.seq,
                });
            }
            fresh.push(event.clone());
            expected += 1;
        }
        for event in &fresh {
            self.apply_one(event);
        }
        Ok(fresh)
    }

    /// Applies a replay answer (see [`Follower::apply`]).
    pub fn apply_replay(
        &mut self,
        replay: &Replay<HostEvent>,
    ) -> Result<Vec<HostEvent>, FollowError> {
        self.apply(&replay.events)
    }

    fn apply_one(&mut self, event: &HostEvent) {
        self.cursor = event.seq;
        match &event.kind {
            HostEventKind::PermissionRequested {
                request_id,
                tool_call_id,
                command,
                cwd,
                prompt,
                ..
            } => {
                self.prompts.insert(
                    request_id.clone(),
                    Prompt {
                        request_id: request_id.clone(),
                        tool_call_id: tool_call_id.clone(),
                        command: command.clone(),
                        cwd: cwd.clone(),
                        prompt: prompt.clone(),
                    },
                );
            }
            HostEventKind::PermissionResolved { request_id, .. } => {
                self.prompts.remove(request_id);
            }
            HostEventKind::ToolCallStarted {
                tool_call_id, tool, ..
            } => {
                self.running.insert(tool_call_id.clone(), tool.clone());
            }
            HostEventKind::ToolCallSettled { tool_call_id, .. }
            | HostEventKind::ToolCallFailed { tool_call_id, .. }
                if self.running.remove(tool_call_id).is_some() =>
            {
                self.settled.push(tool_call_id.clone());
            }
            HostEventKind::Lifecycle { state, .. } => {
                // A draining host still serves the calls it has.
                self.stopped = !matches!(
                    state,
                    toolhost_runtime::Lifecycle::Running | toolhost_runtime::Lifecycle::Draining
                );
                if self.stopped {
                    self.running.clear();
                    self.prompts.clear();
                }
            }
            _ => {}
        }
    }

    /// The oldest pending prompt not yet answered by this client.
    pub fn next_prompt(&self) -> Option<&Prompt> {
        self.prompts
            .values()
            .find(|p| !self.answered.contains(&p.request_id))
    }

    /// Marks `request_id` answered; true only the first time and only for a
    /// request that is pending (so an answer is sent at most once).
    pub fn answer(&mut self, request_id: &str) -> bool {
        self.prompts.contains_key(request_id) && self.answered.insert(request_id.to_string())
    }

    /// Tool calls started and not yet settled, `(tool_call_id, tool)`.
    pub fn running_calls(&self) -> impl Iterator<Item = (&str, &str)> {
        self.running.iter().map(|(a, b)| (a.as_str(), b.as_str()))
    }

    /// Tool calls settled, in the order their settlement was applied.
    pub fn settled(&self) -> &[String] {
        &self.settled
    }

    /// True once the last lifecycle event says the host is not running.
    pub fn host_stopped(&self) -> bool {
        self.stopped
    }
}

/// One line for a human about an event. Plugin text in it (tool names,
/// arguments, results, commands, output, prompts) has its control characters
/// escaped (`toolhost_runtime::escape_line`): commands and prompts on one line,
/// output and results keeping their newlines and tabs.
pub fn describe(event: &HostEvent) -> String {
    let body = match &event.kind {
        HostEventKind::Lifecycle { state, message, .. } => format!(
            "host {}{}",
            serde_json::to_value(state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ),
        HostEventKind::ToolCallStarted {
            tool_call_id,
            tool,
            arguments,
            source,
            ..
        } => format!(
            "{tool_call_id} {} {} (via {source})",
            escape_line(tool),
            escape_line(&arguments.to_string())
        ),
        HostEventKind::ToolCallSettled {
            tool_call_id,
            is_error,
            text,
            ..
        } => format!(
            "{tool_call_id} {}: {}",
            if *is_error { "failed" } else { "done" },
            escape_line(text.lines().last().unwrap_or_default())
        ),
        HostEventKind::ToolCallFailed {
            tool_call_id,
            error,
            cancelled,
        } => format!(
            "{tool_call_id} {}: {error}",
            if *cancelled { "cancelled" } else { "error" }
        ),
        HostEventKind::ProcessStarted {
            session_id,
            command,
            pid,
            ..
        } => format!("{session_id} started (pid {pid}): {}", escape_line(command)),
        HostEventKind::ProcessOutput {
            session_id, text, ..
        } => format!("{session_id} | {}", text.trim_end_matches('\n')),
        HostEventKind::PayloadOmitted {
            session_id,
            len,
            offset,
            path,
            ..
        } => format!("{session_id} | [{len} bytes at offset {offset} in {path}]"),
        HostEventKind::ProcessExited {
            session_id,
            summary,
            ..
        } => format!("{session_id} {summary}"),
        HostEventKind::Detached {
            session_id, reason, ..
        } => format!("{session_id} detached to background: {reason}"),
        HostEventKind::PermissionRequested {
            request_id,
            command,
            prompt,
            ..
        } => format!(
            "{request_id} ({}) permission asked for `{}`: {}",
            toolhost_runtime::short_id(request_id),
            escape_line(command),
            escape_line(prompt)
        ),
        HostEventKind::PermissionResolved {
            request_id,
            outcome,
            by,
            remembered_from,
        } => match remembered_from {
            Some(original) => format!(
                "{request_id} {outcome} (by {by}: the answer to {})",
                escape_line(original)
            ),
            None => format!("{request_id} {outcome} (by {by})"),
        },
        HostEventKind::Omitted {
            what,
            offset,
            len,
            session_id,
            reason,
            ..
        } => {
            let who = session_id.as_deref().unwrap_or("host");
            // Each kind says where the bytes went (`HostEventKind::Omitted`).
            let range = match (offset, len) {
                (Some(o), Some(l)) => format!(" bytes {o}..{}", o.saturating_add(*l)),
                _ => String::new(),
            };
            match what.as_str() {
                "session" => format!("{who} evicted from memory (output.log kept): {reason}"),
                "output" => format!("{who} output{range} omitted past the cap: {reason}"),
                "event_line" => format!("{who} torn event line{range} cut on resume: {reason}"),
                _ => format!("{who} {what}{range} omitted: {reason}"),
            }
        }
    };
    format!("[{}] {}", event.seq, escape(&body))
}

/// How `toolhost attach` runs.
#[derive(Debug, Clone)]
pub struct AttachOptions {
    /// The host session's control socket.
    pub socket: PathBuf,
    /// Where the cursor is saved on detach and read on attach (`None`: not saved).
    pub cursor_file: Option<PathBuf>,
    /// Start after this seq instead of the saved cursor (0: from the start).
    pub from: Option<u64>,
    /// Print the history up to now and detach (no prompts).
    pub once: bool,
}

/// How an attach ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachEnd {
    /// The user detached (gracefully or abruptly).
    Detached,
    /// The host stopped.
    HostStopped,
    /// The connection was lost without the host saying it stopped.
    ConnectionLost,
    /// A write to the output failed (a closed pipe or terminal; the error's
    /// text): attach detached at once and left the saved cursor where it was,
    /// so the events it could not show are shown by the next attach.
    OutputClosed(String),
}

/// The commands `attach` reads from its input, one per line.
pub const ATTACH_HELP: &str = "commands: a #N (allow once), A #N (allow always), r #N (reject once), \
     R #N (reject always) for the prompt on screen, #N its identifier; cancel [CALL]; bg [CALL] \
     (detach a running call to the background); kill SESSION; ls; q (detach, flushing queued \
     actions); Q (detach at once); stop (stop the host)";

/// The prompt on screen and the host's pending questions, as `attach` shows
/// and answers them (docs/attach.md#answering-prompts): only the prompt on
/// screen can be answered, and only by an answer naming its identifier; an
/// answer naming another (one answered, withdrawn or replaced since) is
/// refused and the prompt on screen drawn again.
#[derive(Debug, Default)]
pub struct Prompts {
    /// The host's pending questions, oldest first (`permission.pending`).
    pending: Vec<PendingPermission>,
    /// The one on screen.
    shown: Option<PendingPermission>,
    /// Answered from here (never answered twice).
    answered: BTreeSet<String>,
}

/// What an answer line does ([`Prompts::answer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerCheck {
    /// Send `permission.resolve` for this request id.
    Send(String),
    /// Refused: print this, then the prompt on screen again (if any).
    Refused(String),
}

impl Prompts {
    /// Takes the host's pending list; returns the prompt to draw when the one
    /// on screen changes (the oldest pending question not answered from here).
    pub fn update(&mut self, pending: Vec<PendingPermission>) -> Option<&PendingPermission> {
        self.pending = pending;
        let current = self
            .pending
            .iter()
            .find(|p| !self.answered.contains(&p.request_id))
            .cloned();
        let changed =
            current.as_ref().map(|p| &p.request_id) != self.shown.as_ref().map(|p| &p.request_id);
        self.shown = current;
        if changed { self.shown.as_ref() } else { None }
    }

    /// The prompt on screen.
    pub fn shown(&self) -> Option<&PendingPermission> {
        self.shown.as_ref()
    }

    /// Forgets the prompt on screen if it is `request_id` (it was resolved);
    /// returns it when it was not answered from here (it was withdrawn, or
    /// answered elsewhere).
    pub fn resolved(&mut self, request_id: &str) -> Option<PendingPermission> {
        if self
            .shown
            .as_ref()
            .is_some_and(|p| p.request_id == request_id)
        {
            let gone = self.shown.take()?;
            self.pending.retain(|p| p.request_id != request_id);
            return (!self.answered.contains(request_id)).then_some(gone);
        }
        None
    }

    /// Checks an answer naming `named` (`#N`, `N` or a full request id;
    /// `None`: none named) against the prompt on screen.
    pub fn answer(&mut self, named: Option<&str>) -> AnswerCheck {
        let Some(shown) = &self.shown else {
            return AnswerCheck::Refused("toolhost: no pending permission request".into());
        };
        let Some(named) = named else {
            return AnswerCheck::Refused(format!(
                "toolhost: name the prompt you answer, e.g. `a {}`; nothing was answered",
                shown.short_id
            ));
        };
        let named = if named.starts_with("perm_") {
            toolhost_runtime::short_id(named)
        } else if named.bytes().all(|b| b.is_ascii_digit()) {
            format!("#{named}")
        } else {
            named.to_string()
        };
        if named != shown.short_id {
            return AnswerCheck::Refused(format!(
                "toolhost: refused: {} is not the prompt on screen (it was answered, withdrawn or \
                 replaced); nothing was answered",
                escape_line(&named)
            ));
        }
        let id = shown.request_id.clone();
        self.answered.insert(id.clone());
        AnswerCheck::Send(id)
    }
}

/// The lines that draw `p`: the whole question, then how to answer it.
pub fn prompt_lines(p: &PendingPermission) -> String {
    let id = &p.short_id;
    format!(
        "{}\n  answer: a {id} (allow once), A {id} (allow always), r {id} (reject once), R {id} \
         (reject always)",
        p.text
    )
}

/// Runs an attach session: prints events to `out`, reads commands from
/// `input` (see [`ATTACH_HELP`]), keeps the cursor in `options.cursor_file`.
///
/// Errors: [`ControlError`] when the socket cannot be reached.
pub async fn run_attach<I, O>(
    options: AttachOptions,
    input: I,
    out: O,
) -> Result<AttachEnd, ControlError>
where
    I: tokio::io::AsyncBufRead + Unpin,
    O: AsyncWrite + Unpin,
{
    let saved = options
        .cursor_file
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let mut follower = Follower::new(options.from.unwrap_or(saved));
    let mut out = Printer { out, failed: None };
    let mut client = ControlClient::connect(&options.socket).await?;
    let hello = client.call("hello", json!({})).await?;
    let host_session = hello["host_session"].as_str().unwrap_or("?").to_string();
    if options.once {
        loop {
            let r: Replay<HostEvent> = serde_json::from_value(
                client
                    .call("events", json!({"cursor": follower.cursor()}))
                    .await?,
            )
            .map_err(|e| ControlError::Io {
                path: options.socket.clone(),
                message: e.to_string(),
            })?;
            match follower.apply_replay(&r) {
                Ok(events) => {
                    for e in &events {
                        say(&mut out, describe(e)).await;
                    }
                }
                Err(e) => say(&mut out, format!("toolhost: {e}")).await,
            }
            if let Some(e) = &out.failed {
                let _ = client.call("detach", json!({"mode": "abrupt"})).await;
                return Ok(AttachEnd::OutputClosed(e.clone()));
            }
            if r.history_complete || r.events.is_empty() {
                break;
            }
        }
        save_cursor(&options, follower.cursor());
        client
            .call("detach", json!({"mode": "graceful"}))
            .await
            .ok();
        return Ok(AttachEnd::Detached);
    }

    let attach_id = client
        .send(
            "attach",
            json!({"cursor": follower.cursor(), "client": "toolhost attach"}),
        )
        .await?;
    say(
        &mut out,
        format!(
            "attached to host session {host_session} after seq {} ({ATTACH_HELP})",
            follower.cursor()
        ),
    )
    .await;

    // Requests sent and not yet answered: id -> what they were.
    let mut outstanding: BTreeMap<u64, String> = BTreeMap::new();
    outstanding.insert(attach_id, "attach".into());
    let mut detaching: Option<bool> = None; // Some(graceful)
    let mut prompts = Prompts::default();
    let mut lines = input.lines();
    let mut input_open = true;
    let mut heartbeat = tokio::time::interval(HEARTBEAT_INTERVAL);
    heartbeat.tick().await;
    let (reader_tx, mut reader_rx) = tokio::sync::mpsc::unbounded_channel();
    // Move the reading half into a task so select! stays cancel-safe.
    let (mut read_client, write_client) = split(client);
    tokio::spawn(async move {
        loop {
            let m = read_client.next_message().await;
            let end = m.is_err();
            if reader_tx.send(m).is_err() || end {
                break;
            }
        }
    });
    let mut writer = write_client;
    let end = loop {
        if let Some(e) = &out.failed {
            break AttachEnd::OutputClosed(e.clone());
        }
        if let Some(graceful) = detaching
            && (!graceful || outstanding.is_empty())
        {
            if graceful {
                let _ = writer.send("detach", json!({"mode": "graceful"})).await;
            }
            break AttachEnd::Detached;
        }
        tokio::select! {
            msg = reader_rx.recv() => {
                let msg = match msg {
                    Some(Ok(m)) => m,
                    _ => break if follower.host_stopped() { AttachEnd::HostStopped } else { AttachEnd::ConnectionLost },
                };
                let mut refresh = false;
                if let Some(id) = msg.get("id").and_then(Value::as_u64) {
                    let what = outstanding.remove(&id).unwrap_or_default();
                    if let Some(err) = msg.get("error") {
                        say(&mut out, format!("toolhost: {what} failed: {}", err["message"].as_str().unwrap_or("?"))).await;
                        refresh |= what == "permission.resolve";
                    } else if what == "attach" || what == "pending" {
                        let list = if what == "attach" { &msg["result"]["pending_permissions"] } else { &msg["result"] };
                        if let Ok(list) = serde_json::from_value::<Vec<PendingPermission>>(list.clone())
                            && let Some(p) = prompts.update(list)
                        {
                            say(&mut out, prompt_lines(p)).await;
                        }
                    } else if what == "ls" {
                        say(&mut out, format!("{:#}", msg["result"])).await;
                    } else if what == "resync"
                        && let Ok(replay) = serde_json::from_value::<Replay<HostEvent>>(msg["result"].clone())
                    {
                        refresh |= handle_batch(&mut follower, &replay, &mut out, &mut writer, &mut outstanding, &mut prompts).await;
                    }
                } else if msg.get("method").and_then(Value::as_str) == Some("events")
                    && let Ok(replay) = serde_json::from_value::<Replay<HostEvent>>(msg["params"].clone())
                {
                    refresh |= handle_batch(&mut follower, &replay, &mut out, &mut writer, &mut outstanding, &mut prompts).await;
                }
                // The whole question comes from the host's pending list, never
                // from the event (whose fields the log bounds).
                if refresh {
                    match writer.send("permission.pending", json!({})).await {
                        Ok(id) => { outstanding.insert(id, "pending".into()); }
                        Err(_) => break AttachEnd::ConnectionLost,
                    }
                }
            }
            line = lines.next_line(), if input_open && detaching.is_none() => {
                let line = match line {
                    Ok(Some(l)) => l,
                    _ => { input_open = false; detaching = Some(true); continue; }
                };
                let mut words = line.split_whitespace();
                let cmd = words.next().unwrap_or("");
                let arg = words.next().map(str::to_string);
                let newest_call = || follower.running_calls().last().map(|(c, _)| c.to_string());
                let request = match cmd {
                    "" => None,
                    "a" | "A" | "r" | "R" => {
                        let outcome = match cmd { "a" => "allow_once", "A" => "allow_always", "r" => "reject_once", _ => "reject_always" };
                        match prompts.answer(arg.as_deref()) {
                            AnswerCheck::Send(id) => Some(("permission.resolve", json!({"request_id": id, "outcome": outcome}))),
                            AnswerCheck::Refused(why) => {
                                say(&mut out, why).await;
                                if let Some(p) = prompts.shown() {
                                    let lines = prompt_lines(p);
                                    say(&mut out, lines).await;
                                }
                                None
                            }
                        }
                    }
                    "cancel" => arg.or_else(newest_call).map(|c| ("call.cancel", json!({"tool_call_id": c}))),
                    "bg" => arg.or_else(newest_call).map(|c| ("call.detach", json!({"tool_call_id": c, "reason": "detached from toolhost attach"}))),
                    "kill" => arg.map(|s| ("session.kill", json!({"session_id": s}))),
                    "ls" => Some(("sessions.list", json!({}))),
                    "stop" => Some(("stop", json!({}))),
                    "q" | "detach" => { detaching = Some(true); None }
                    "Q" | "abort" => { detaching = Some(false); None }
                    _ => { say(&mut out, format!("toolhost: unknown command `{cmd}`; {ATTACH_HELP}")).await; None }
                };
                if let Some((method, params)) = request {
                    match writer.send(method, params).await {
                        Ok(id) => { outstanding.insert(id, if method == "sessions.list" { "ls".into() } else { method.into() }); }
                        Err(_) => break AttachEnd::ConnectionLost,
                    }
                }
            }
            _ = heartbeat.tick() => {
                if writer.send("heartbeat", json!({})).await.is_ok() {
                    // The answer is not needed; count it so a graceful detach waits for it too.
                }
            }
        }
    };
    if let AttachEnd::OutputClosed(_) = &end {
        return Ok(end);
    }
    save_cursor(&options, follower.cursor());
    let message = match &end {
        AttachEnd::Detached => format!(
            "detached from host session {host_session} at seq {}; `toolhost attach {host_session}` resumes",
            follower.cursor()
        ),
        AttachEnd::HostStopped => format!("host session {host_session} stopped"),
        AttachEnd::ConnectionLost => format!(
            "lost the connection to host session {host_session} at seq {}",
            follower.cursor()
        ),
        AttachEnd::OutputClosed(_) => unreachable!("returned above"),
    };
    say(&mut out, format!("toolhost: {message}")).await;
    Ok(end)
}

/// Applies and prints a batch; true when it holds a permission event (the
/// prompts are then fetched again). A prompt on screen that the batch
/// resolves without an answer from here is said to be withdrawn.
async fn handle_batch<O: AsyncWrite + Unpin>(
    follower: &mut Follower,
    replay: &Replay<HostEvent>,
    out: &mut Printer<O>,
    writer: &mut WriteHalf,
    outstanding: &mut BTreeMap<u64, String>,
    prompts: &mut Prompts,
) -> bool {
    let mut permission_events = false;
    match follower.apply_replay(replay) {
        Ok(events) => {
            let mut text = String::new();
            for e in &events {
                text.push_str(&describe(e));
                text.push('\n');
                match &e.kind {
                    HostEventKind::PermissionRequested { .. } => permission_events = true,
                    HostEventKind::PermissionResolved {
                        request_id,
                        outcome,
                        by,
                        ..
                    } => {
                        permission_events = true;
                        if let Some(gone) = prompts.resolved(request_id) {
                            text.push_str(&format!(
                                "toolhost: permission request {} was withdrawn ({outcome} by {}): \
                                 nothing to answer\n",
                                gone.short_id,
                                escape_line(by)
                            ));
                        }
                    }
                    _ => {}
                }
            }
            if !replay.history_complete
                && events.is_empty()
                && replay.snapshot_seq > follower.cursor()
            {
                text.push_str(&format!(
                    "toolhost: events before seq {} are no longer retained\n",
                    replay.first_retained_seq
                ));
            }
            out.write(&text).await;
        }
        Err(e) => {
            out.write(&format!(
                "toolhost: {e}; replaying from seq {}\n",
                follower.cursor()
            ))
            .await;
            if let Ok(id) = writer
                .send("events", json!({"cursor": follower.cursor()}))
                .await
            {
                outstanding.insert(id, "resync".into());
            }
        }
    }
    permission_events
}

/// Where attach prints: `out` until a write fails, then nothing (the error's
/// text in `failed`, and the attach ends with [`AttachEnd::OutputClosed`]).
struct Printer<O> {
    out: O,
    failed: Option<String>,
}

impl<O: AsyncWrite + Unpin> Printer<O> {
    /// Writes `text` as it is and flushes, unless an earlier write failed.
    async fn write(&mut self, text: &str) {
        if self.failed.is_some() || text.is_empty() {
            return;
        }
        let written = match self.out.write_all(text.as_bytes()).await {
            Ok(()) => self.out.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            self.failed = Some(e.to_string());
        }
    }
}

/// Writes `line` and a newline to `out`, with control characters escaped
/// (newlines and tabs kept): every line attach prints can hold plugin text.
async fn say<O: AsyncWrite + Unpin>(out: &mut Printer<O>, line: String) {
    out.write(&format!("{}\n", escape(&line))).await;
}

fn save_cursor(options: &AttachOptions, cursor: u64) {
    if let Some(path) = &options.cursor_file {
        let _ = toolhost_process::write_private_file(path, format!("{cursor}\n").as_bytes());
    }
}

type WriteHalf = crate::control::ControlWriter;

type ReadHalf = crate::control::ControlReader;

fn split(client: ControlClient) -> (ReadHalf, WriteHalf) {
    client.into_split()
}

/// `<state_dir>/hosts/<id>/attach.cursor`: where `toolhost attach` keeps its cursor.
pub fn cursor_file(state_dir: &Path, host_session: &str) -> PathBuf {
    toolhost_runtime::hosts_dir(state_dir)
        .join(host_session)
        .join("attach.cursor")
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_runtime::Lifecycle;

    fn ev(seq: u64, kind: HostEventKind) -> HostEvent {
        HostEvent {
            seq,
            ts_ms: 0,
            kind,
        }
    }

    fn started(seq: u64, tc: &str) -> HostEvent {
        ev(
            seq,
            HostEventKind::ToolCallStarted {
                actor: None,
                tool_call_id: tc.into(),
                tool: "bash".into(),
                arguments: json!({}),
                source: "mcp".into(),
            },
        )
    }

    fn settled(seq: u64, tc: &str) -> HostEvent {
        ev(
            seq,
            HostEventKind::ToolCallSettled {
                tool_call_id: tc.into(),
                is_error: false,
                text: "ok".into(),
                truncated: false,
                structured: None,
            },
        )
    }

    fn asked(seq: u64, id: &str) -> HostEvent {
        ev(
            seq,
            HostEventKind::PermissionRequested {
                actor: None,
                request_id: id.into(),
                tool_call_id: "tc_1".into(),
                plugin: "bash".into(),
                tool: "bash".into(),
                command: "rm x".into(),
                cwd: "/w".into(),
                prompt: "?".into(),
                options: vec![],
                program: None,
            },
        )
    }

    #[test]
    fn duplicates_are_not_applied_twice() {
        let mut f = Follower::new(0);
        let batch = vec![started(1, "tc_1"), settled(2, "tc_1")];
        assert_eq!(f.apply(&batch).unwrap().len(), 2);
        // The same batch again, and an overlapping one.
        assert!(f.apply(&batch).unwrap().is_empty());
        let fresh = f.apply(&[settled(2, "tc_1"), started(3, "tc_2")]).unwrap();
        assert_eq!(fresh.iter().map(|e| e.seq).collect::<Vec<_>>(), [3]);
        assert_eq!(f.cursor(), 3);
        assert_eq!(f.settled(), ["tc_1"]);
    }

    #[test]
    fn a_gap_is_refused_without_moving_the_cursor() {
        let mut f = Follower::new(0);
        f.apply(&[started(1, "tc_1")]).unwrap();
        let err = f.apply(&[settled(3, "tc_1")]).unwrap_err();
        assert_eq!(
            err,
            FollowError::Gap {
                expected: 2,
                found: 3
            }
        );
        assert_eq!(f.cursor(), 1);
        // A gap in the middle refuses the whole batch (nothing half-applied).
        let err = f
            .apply(&[asked(2, "perm_1"), settled(4, "tc_1")])
            .unwrap_err();
        assert_eq!(
            err,
            FollowError::Gap {
                expected: 3,
                found: 4
            }
        );
        assert_eq!(f.cursor(), 1);
        assert!(
            f.next_prompt().is_none(),
            "nothing of the refused batch applied"
        );
        // Re-sync: the replay fills the hole.
        f.apply(&[
            asked(2, "perm_1"),
            ev(
                3,
                HostEventKind::PermissionResolved {
                    request_id: "perm_1".into(),
                    outcome: "allow_once".into(),
                    by: "x".into(),
                    remembered_from: None,
                },
            ),
            settled(4, "tc_1"),
        ])
        .unwrap();
        assert_eq!(f.cursor(), 4);
    }

    #[test]
    fn a_permission_is_answered_once() {
        let mut f = Follower::new(0);
        f.apply(&[asked(1, "perm_1")]).unwrap();
        assert_eq!(f.next_prompt().unwrap().request_id, "perm_1");
        assert!(f.answer("perm_1"));
        assert!(!f.answer("perm_1"), "second answer refused");
        assert!(f.next_prompt().is_none());
        assert!(!f.answer("perm_unknown"));
        f.apply(&[ev(
            2,
            HostEventKind::PermissionResolved {
                request_id: "perm_1".into(),
                outcome: "allow_once".into(),
                by: "control-client".into(),
                remembered_from: None,
            },
        )])
        .unwrap();
        assert!(!f.answer("perm_1"), "resolved requests cannot be answered");
    }

    #[test]
    fn settlements_are_delivered_once_in_order() {
        let mut f = Follower::new(0);
        f.apply(&[started(1, "tc_1"), started(2, "tc_2")]).unwrap();
        f.apply(&[settled(3, "tc_2")]).unwrap();
        f.apply(&[settled(3, "tc_2"), settled(4, "tc_1")]).unwrap();
        f.apply(&[settled(4, "tc_1")]).unwrap();
        assert_eq!(f.settled(), ["tc_2", "tc_1"]);
        assert_eq!(f.running_calls().count(), 0);
    }

    #[test]
    fn lifecycle_stopped_marks_the_host_stopped() {
        let mut f = Follower::new(0);
        let life = |seq, state| {
            ev(
                seq,
                HostEventKind::Lifecycle {
                    state,
                    pid: 1,
                    message: None,
                },
            )
        };
        f.apply(&[life(1, Lifecycle::Running), asked(2, "perm_1")])
            .unwrap();
        assert!(!f.host_stopped());
        f.apply(&[life(3, Lifecycle::Stopped)]).unwrap();
        assert!(f.host_stopped());
        assert!(f.next_prompt().is_none());
    }
    /// A command or prompt holding escape
    /// sequences, newlines or bidi overrides is shown escaped, on one line.
    #[test]
    fn event_lines_escape_plugin_text() {
        let mut e = asked(1, "perm_1");
        if let HostEventKind::PermissionRequested {
            command, prompt, ..
        } = &mut e.kind
        {
            *command = "rm -rf ~\u{1b}[2K\u{1b}]0;x\u{7}\nls \u{202e}fdp".into();
            *prompt = "run it?\u{9b}31m".into();
        }
        let line = describe(&e);
        assert!(!line.contains('\u{1b}'), "{line:?}");
        assert!(!line.contains('\n'), "{line:?}");
        assert!(!line.contains('\u{202e}'), "{line:?}");
        assert!(!line.contains('\u{9b}'), "{line:?}");
        assert!(
            line.contains("rm -rf ~\\x1b[2K\\x1b]0;x\\x07\\nls \\u{202e}fdp"),
            "{line:?}"
        );
        assert!(line.contains("run it?\\u{9b}31m"), "{line:?}");
    }
}
