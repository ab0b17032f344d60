//! The component glue: `toolhost:plugin/tool-plugin@0.1.0`.
//!
//! Thin on purpose: it converts between the WIT types and the native modules
//! ([`crate::args`], [`crate::text`], [`crate::report`], [`crate::tools`]) and
//! makes the `sessions` calls. The plugin keeps no state between calls.

wit_bindgen::generate!({
    path: "../../wit/v0.1.0",
    world: "toolhost:plugin/tool-plugin@0.1.0",
    generate_all,
});

use exports::toolhost::plugin::tool::{
    Guest, ToolCall, ToolError, ToolHints, ToolOutput, ToolSpec,
};
use serde_json::Value;
use toolhost::plugin::sessions::{self as s, EventKind, StartRequest, StdinMode, Subscription};
use wasi::clocks::monotonic_clock;
use wasi::io::poll;

use crate::report::{self, Ending, Outcome, Reason, SessionError, Status};
use crate::text::{self, Capture, MAX_CHARS, Render, Source};
use crate::{args, range, tools};

/// Bytes asked for per `read-output`/`read-new-output` call (the host's maximum).
const READ_CHUNK: u32 = 1 << 20;
/// How long `kill_shell` waits to report how the session ended.
const KILL_WAIT_MS: u64 = 1_000;

struct Bash;

impl Guest for Bash {
    fn describe() -> Vec<ToolSpec> {
        tools::specs()
            .into_iter()
            .map(|spec| ToolSpec {
                name: spec.name.into(),
                description: spec.description.into(),
                input_schema: spec.input_schema.into(),
                hints: ToolHints {
                    read_only: spec.hints.read_only,
                    destructive: spec.hints.destructive,
                    idempotent: spec.hints.idempotent,
                    open_world: spec.hints.open_world,
                },
            })
            .collect()
    }

    fn call(call: ToolCall) -> Result<ToolOutput, ToolError> {
        // Every tool's result obeys one cap, marker included.
        Bash::dispatch(call).map(|mut out| {
            out.text = text::cap_result(out.text);
            out
        })
    }
}

impl Bash {
    /// Runs the tool `call` names.
    fn dispatch(call: ToolCall) -> Result<ToolOutput, ToolError> {
        let invalid = ToolError::InvalidArguments;
        match call.name.as_str() {
            tools::BASH => Ok(bash(
                &call.tool_call_id,
                args::bash(&call.arguments).map_err(invalid)?,
            )),
            tools::BASH_OUTPUT => Ok(bash_output(
                args::bash_output(&call.arguments).map_err(invalid)?,
            )),
            tools::KILL_SHELL => Ok(kill_shell(
                args::kill_shell(&call.arguments).map_err(invalid)?,
            )),
            tools::WRITE_STDIN => Ok(write_stdin(
                args::write_stdin(&call.arguments).map_err(invalid)?,
            )),
            tools::LIST_SHELLS => {
                args::list_shells(&call.arguments).map_err(invalid)?;
                Ok(list_shells())
            }
            _ => Err(ToolError::UnknownTool(call.name)),
        }
    }
}

export!(Bash);

// ---- conversions -------------------------------------------------------------

fn ending(e: s::ExitStatus) -> Ending {
    Ending {
        code: e.code,
        signal: e.signal,
        reason: match e.reason {
            s::EndReason::Exited => Reason::Exited,
            s::EndReason::TimedOut => Reason::TimedOut,
            s::EndReason::Killed(by) => Reason::Killed(by),
            s::EndReason::Failed(why) => Reason::Failed(why),
        },
    }
}

fn status(st: s::SessionStatus) -> Status {
    match st {
        s::SessionStatus::Running => Status::Running,
        s::SessionStatus::Exited => Status::Exited,
        s::SessionStatus::TimedOut => Status::TimedOut,
        s::SessionStatus::Killed => Status::Killed,
        s::SessionStatus::Failed => Status::Failed,
    }
}

fn session_error(e: s::SessionError) -> SessionError {
    match e {
        s::SessionError::UnknownSession(id) => SessionError::UnknownSession(id),
        s::SessionError::SessionExited(st) => SessionError::SessionExited(ending(st)),
        s::SessionError::Denied(r) => SessionError::Denied(r),
        s::SessionError::InvalidRequest(m) => SessionError::InvalidRequest(m),
        s::SessionError::ResourceLimit(m) => SessionError::ResourceLimit(m),
        s::SessionError::Io(m) => SessionError::Io(m),
    }
}

// ---- results -----------------------------------------------------------------

fn output(text: String, structured: Option<Value>, is_error: bool) -> ToolOutput {
    ToolOutput {
        text,
        structured: structured.map(|v| v.to_string()),
        is_error,
    }
}

fn error_output(what: &str, id: Option<&str>, err: s::SessionError) -> ToolOutput {
    output(
        report::session_error_text(what, id, &session_error(err)),
        None,
        true,
    )
}

/// Output text plus its trailer, and the structured result, from a snapshot;
/// `source` says where the capture's bytes lie in the session's output (the
/// cut's marker names them).
fn session_result(
    snap: &s::Snapshot,
    capture: &Capture,
    source: &Source<'_>,
    empty_label: &str,
    trailer: String,
    ending: Option<&Ending>,
    detached: bool,
) -> (String, Value) {
    let rendered = capture.render(MAX_CHARS, source);
    let mut text = report::compose(&rendered.text, capture.total(), empty_label, &trailer);
    // Contract v0.1.0 carries the host's sandbox-denial hint (set only when the
    // sandbox likely caused a failure) on the snapshot's `sandbox` line after
    // the one-line summary.
    let (sandbox, denial) = match snap.sandbox.split_once('\n') {
        Some((summary, hint)) => (summary, Some(hint)),
        None => (snap.sandbox.as_str(), None),
    };
    if let Some(hint) = denial {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[{hint}]"));
    }
    let mut json = Outcome {
        session_id: &snap.id,
        status: ending.map_or(status(snap.status), Ending::status),
        ending,
        output_bytes: snap.output_bytes,
        truncated: rendered.truncated,
        output_path: &snap.output_path,
        detached,
        elapsed_ms: snap.elapsed_ms,
        sandbox,
    }
    .to_json();
    if let (Some(hint), Value::Object(map)) = (denial, &mut json) {
        map.insert("sandbox_denial".into(), Value::String(hint.to_owned()));
    }
    (text, json)
}

// ---- reading output and waiting ------------------------------------------------

/// How a wait ended.
enum Waited {
    /// The session ended (with its exit status when known).
    Ended(Option<s::ExitStatus>),
    /// The run was detached into a background task.
    Detached(s::DetachInfo),
    /// The time limit passed first.
    Elapsed,
}

/// Waits on `sub` until the session ends, it is detached (when
/// `stop_on_detach`), or `limit_ms` passes. Blocks in `wasi:io/poll.poll`
/// over the subscription's pollable and a monotonic-clock timer: no busy loop.
fn wait(id: &str, sub: &Subscription, limit_ms: Option<u64>, stop_on_detach: bool) -> Waited {
    let ready = sub.subscribe();
    let timer =
        limit_ms.map(|ms| monotonic_clock::subscribe_duration(ms.saturating_mul(1_000_000)));
    let scan = |events: Vec<s::SessionEvent>| {
        for event in events {
            match event.kind {
                EventKind::Exited(st) => return Some(Waited::Ended(Some(st))),
                EventKind::Detached(info) if stop_on_detach => return Some(Waited::Detached(info)),
                _ => {}
            }
        }
        None
    };
    loop {
        let events = sub.next();
        if !events.is_empty() {
            if let Some(done) = scan(events) {
                return done;
            }
        } else if ready.ready() {
            // Ready with nothing to return means the session ended and every
            // event was returned (an `exited` event we never saw was dropped
            // from memory): ask for the final state instead of spinning.
            match s::check(id) {
                Ok(snap) if snap.status == s::SessionStatus::Running => {
                    // An event raced in between `next` and `ready`; back off
                    // briefly in case a host keeps the pollable ready.
                    monotonic_clock::subscribe_duration(10_000_000).block();
                }
                Ok(snap) => return Waited::Ended(snap.exit),
                Err(_) => return Waited::Ended(None),
            }
        }
        match &timer {
            None => ready.block(),
            Some(timer) => {
                let fired = poll::poll(&[&ready, timer]);
                if fired.contains(&1) {
                    // Time is up; take what arrived meanwhile into account.
                    return scan(sub.next()).unwrap_or(Waited::Elapsed);
                }
            }
        }
    }
}

// ---- tools -------------------------------------------------------------------

/// The variable in which the host names its shell: the absolute path of the first
/// bash it has, else `/bin/sh`, resolved once when it started
/// (`toolhost_process::Shell`; docs/manifests.md#the-plugins-own-environment).
const SHELL_VAR: &str = "TOOLHOST_SHELL";

/// The shell the contract runs a request under when it names none, and what this
/// plugin asks for on a host that does not set [`SHELL_VAR`].
const DEFAULT_SHELL: &str = "/bin/sh";

/// Starts `request` under the host's shell ([`SHELL_VAR`]: a non-login,
/// non-interactive `bash -c`, which reads no rc files, wherever the host has bash),
/// in one `start`. A host that does not name its shell runs it under the contract's
/// default, `/bin/sh`. Returns the session id and the shell that runs it.
fn start_with_host_shell(mut request: StartRequest) -> Result<(String, String), s::SessionError> {
    request.shell = std::env::var(SHELL_VAR).ok().filter(|s| s.starts_with('/'));
    let shell = request
        .shell
        .clone()
        .unwrap_or_else(|| DEFAULT_SHELL.to_owned());
    s::start(&request).map(|id| (id, shell))
}

fn bash(tool_call_id: &str, a: args::Bash) -> ToolOutput {
    let request = StartRequest {
        command: a.command.clone(),
        cwd: a.cwd.clone(),
        env: Vec::new(),
        stdin: if a.interactive {
            StdinMode::Open
        } else {
            StdinMode::Closed
        },
        timeout_ms: a.timeout_ms,
        shell: None,
        tool_call_id: (!a.background).then(|| tool_call_id.to_owned()),
    };
    let (id, shell) = match start_with_host_shell(request) {
        Ok(started) => started,
        Err(e) => return error_output("start the command", None, e),
    };
    if a.background {
        return started_in_background(&id, &a, &shell);
    }
    let sub = match s::subscribe(&id, 1) {
        Ok(sub) => sub,
        Err(e) => return error_output("follow the command", Some(&id), e),
    };
    let mut detach_reason = None;
    let mut end = None;
    match wait(&id, &sub, a.yield_ms, true) {
        Waited::Ended(st) => end = Some(st),
        Waited::Detached(info) => detach_reason = Some(info.reason),
        Waited::Elapsed => {
            let reason = if a.interactive {
                "yield_ms elapsed; stdin is open for write_stdin"
            } else {
                "yield_ms elapsed"
            };
            match s::detach(&id, reason) {
                Ok(info) => detach_reason = Some(info.reason),
                // It ended just as the time ran out.
                Err(s::SessionError::SessionExited(st)) => end = Some(Some(st)),
                Err(e) => return error_output("detach the command", Some(&id), e),
            }
        }
    }
    drop(sub);
    let snap = match s::check(&id) {
        Ok(snap) => snap,
        Err(e) => return error_output("check the command", Some(&id), e),
    };
    let read = match read_within(&id, u64::MAX) {
        Ok(read) => read,
        Err(e) => return error_output("read the command's output", Some(&id), e),
    };
    let (capture, source) = (&read.capture, read.source(&id));
    if let Some(reason) = detach_reason {
        let trailer = report::detached_trailer(&id, &reason);
        let (text, json) =
            session_result(&snap, capture, &source, "(no output)", trailer, None, true);
        return output(text, Some(with_shell(json, &shell)), false);
    }
    let ending = end.flatten().or(snap.exit.clone()).map(ending);
    let (trailer, is_error) = match &ending {
        // A clean exit needs no status line: the output is the answer (the
        // exit code is still in the structured content).
        Some(e) if !e.is_error() => (String::new(), false),
        Some(e) => (
            report::status_line(e, a.timeout_ms, snap.elapsed_ms),
            e.is_error(),
        ),
        None => ("[ended; the host reported no exit status]".to_owned(), true),
    };
    let (text, json) = session_result(
        &snap,
        capture,
        &source,
        "(no output)",
        trailer,
        ending.as_ref(),
        snap.detached,
    );
    output(text, Some(with_shell(json, &shell)), is_error)
}

/// Adds which shell ran the command to a structured result.
fn with_shell(mut json: Value, shell: &str) -> Value {
    if let Value::Object(map) = &mut json {
        map.insert("shell".into(), Value::String(shell.to_owned()));
    }
    json
}

fn started_in_background(id: &str, a: &args::Bash, shell: &str) -> ToolOutput {
    let timeout = a
        .timeout_ms
        .map_or("no timeout".to_owned(), |t| format!("killed after {t} ms"));
    let stdin = if a.interactive {
        "; stdin is open: send input with write_stdin"
    } else {
        ""
    };
    let snap = s::check(id).ok();
    let text = format!(
        "Started background task {id} ({timeout}{stdin}); use bash_output with \
         session_id \"{id}\" to read its output and kill_shell to stop it."
    );
    let json = serde_json::json!({
        "session_id": id,
        "status": "running",
        "exit_code": null,
        "signal": null,
        "timed_out": false,
        "output_bytes": 0,
        "truncated": false,
        "output_path": snap.as_ref().map(|snap| snap.output_path.clone()).unwrap_or_default(),
        "detached": true,
        "shell": shell,
        "sandbox": snap.map(|snap| snap.sandbox.lines().next().unwrap_or_default().to_owned()).unwrap_or_default(),
    });
    output(text, Some(json), false)
}

/// Waits up to `ms` for the session to end, watching events after `last_seq`.
fn wait_for_end(id: &str, last_seq: u64, ms: u64) {
    if ms == 0 {
        return;
    }
    if let Ok(sub) = s::subscribe(id, last_seq + 1) {
        let _ = wait(id, &sub, Some(ms), false);
    }
}

/// Most output bytes one `bash_output`/`write_stdin` result reads; the rest of
/// what there was is left, unread, for the next call ([`read_unread`]).
const READ_BUDGET: u64 = 128 << 20;

/// Most empty ranges in a row [`read_within`] reads on after (see there).
const MAX_PASSES: u32 = 1_000;

/// What [`read_unread`] read.
struct Unread {
    /// The bytes read: head and tail held, the middle counted.
    capture: Capture,
    /// Bytes that were there when the read began and are still unread (the
    /// budget ran out first).
    left: u64,
    /// Offset in the output of the capture's first byte.
    start: u64,
    /// Offset just past its last byte.
    end: u64,
    /// The bytes the capped log dropped within `start..end`, `(from, to)`.
    dropped: Option<(u64, u64)>,
}

impl Unread {
    /// Where the read's bytes lie in session `id`'s output, for the marker.
    fn source<'a>(&self, id: &'a str) -> Source<'a> {
        Source {
            session_id: id,
            start: self.start,
            end: self.end,
            dropped: self.dropped,
        }
    }
}

/// Reads the output no earlier read returned, up to what there was at the first
/// read and at most [`READ_BUDGET`] bytes, all of it through `read-new-output`:
/// the session's read cursor ends exactly past the last byte read. So the bytes a
/// result omits from its middle (they stay in the log) are never served again by a
/// later read, and none is passed over without being read or counted: the middle
/// a capped log dropped (the host moves the cursor over it with an empty range at
/// the cursor, then reads on from its end) is counted as omitted bytes, so the
/// marker's count and the cursor agree. A character split across reads is
/// stitched back together; a trailing incomplete one is left for the next read
/// while the session may still write.
fn read_unread(id: &str) -> Result<Unread, s::SessionError> {
    read_within(id, READ_BUDGET)
}

/// As [`read_unread`], reading at most `budget` bytes (`u64::MAX`: all there was
/// at the first read, as a finished foreground run's result does; the capture
/// keeps only its head and tail). Bytes the log dropped count against `budget`
/// as the bytes read do: it bounds the output a result covers.
fn read_within(id: &str, budget: u64) -> Result<Unread, s::SessionError> {
    let mut capture = Capture::new();
    let first = s::read_new_output(id, READ_CHUNK)?;
    let mut start = first.offset;
    let lead = text::leading_continuation_len(&first.data);
    if lead > 0 && first.offset > 0 {
        let back = first.offset.min(3);
        if let Ok(prev) = s::read_output(id, first.offset - back, back as u32)
            && prev.offset + prev.data.len() as u64 == first.offset
        {
            let k = text::incomplete_suffix_len(&prev.data);
            capture.push(&prev.data[prev.data.len() - k..]);
            start -= k as u64;
        }
    }
    let mut dropped: Option<(u64, u64)> = None;
    let end = first.total_bytes;
    let stop = end.min(first.offset.saturating_add(budget));
    // Where the bytes read so far end: a later range that starts past it follows
    // bytes the log dropped.
    let mut pos = first.offset;
    let mut eof = false;
    let mut next = first;
    // Empty ranges in a row: the host returns one each time it moves the cursor
    // over a dropped middle, each time further on (a flood can grow the dropped
    // middle past the cursor again), so a bound only guards against a host that
    // does not move it.
    let mut empty = 0;
    loop {
        if next.offset > pos {
            capture.skip(next.offset - pos);
            dropped = Some((dropped.map_or(pos, |(from, _)| from), next.offset));
        }
        capture.push(&next.data);
        pos = pos.max(next.offset + next.data.len() as u64);
        eof = eof || next.eof;
        empty = if next.data.is_empty() { empty + 1 } else { 0 };
        // An empty range short of the end is the host passing over a dropped
        // middle: read on from its end.
        let passed_over =
            next.data.is_empty() && next.offset < next.total_bytes && empty <= MAX_PASSES;
        if eof || (pos >= stop && !passed_over) || (next.data.is_empty() && !passed_over) {
            break;
        }
        let want = stop.saturating_sub(pos).clamp(1, u64::from(READ_CHUNK));
        next = s::read_new_output(id, want as u32)?;
    }
    if !eof {
        pos -= capture.hold_back_incomplete_end() as u64;
    }
    Ok(Unread {
        capture,
        left: end.saturating_sub(pos),
        start,
        end: pos,
        dropped,
    })
}

/// The text, structured result and error flag of a session's new output plus its
/// state (or the error result). `ended_before`: the session had ended before this
/// call began, so a read with nothing new tells the end as the session's state
/// ([`report::ended_earlier`]), not as a fresh status line. A session's status
/// line comes with the read that reaches the end of its output. `note` (may be
/// empty) goes before the status line.
fn new_output(
    id: &str,
    ended_before: bool,
    note: &str,
) -> Result<(String, Value, bool), ToolOutput> {
    // Check first: when the snapshot says ended, the read below is complete.
    let snap = s::check(id).map_err(|e| error_output("check the session", Some(id), e))?;
    let read =
        read_unread(id).map_err(|e| error_output("read the session's output", Some(id), e))?;
    let ending = snap.exit.clone().map(ending);
    let mut lines = Vec::new();
    if !note.is_empty() {
        lines.push(note.to_owned());
    }
    if read.left > 0 {
        lines.push(report::more_to_read(read.left));
    }
    let mut empty_label = "(no new output)".to_owned();
    let is_error = match &ending {
        Some(e) if ended_before && read.capture.total() == 0 => {
            empty_label = report::ended_earlier(id, e, snap.elapsed_ms);
            e.is_error()
        }
        // Its status follows the rest of the output, with the read that gets there.
        Some(e) if read.left > 0 => e.is_error(),
        Some(e) => {
            lines.push(report::status_line(e, None, snap.elapsed_ms));
            e.is_error()
        }
        None => {
            lines.push(report::running_line(id, snap.elapsed_ms, false));
            false
        }
    };
    let (text, json) = session_result(
        &snap,
        &read.capture,
        &read.source(id),
        &empty_label,
        lines.join("\n"),
        ending.as_ref(),
        snap.detached,
    );
    Ok((text, json, is_error))
}

fn bash_output(a: args::BashOutput) -> ToolOutput {
    let id = a.session_id.as_str();
    let snap = match s::check(id) {
        Ok(snap) => snap,
        Err(e) => return error_output("check the session", Some(id), e),
    };
    let running = snap.status == s::SessionStatus::Running;
    if running && a.wait_ms > 0 {
        wait_for_end(id, snap.last_seq, a.wait_ms);
    }
    if let Some(range) = a.range() {
        return read_again(id, range);
    }
    match new_output(id, !running, "") {
        Ok((text, json, is_error)) => output(text, Some(json), is_error),
        Err(out) => out,
    }
}

/// A line range's bytes: `(start, end, (first line, last line when known))`.
type LineSpan = (u64, u64, (u64, Option<u64>));

/// The bytes of a line range of session `id`'s output ([`LineSpan`]), found by reading it from byte 0 ([`range::LineRange`]); at most
/// [`args::MAX_RANGE_BYTES`] of them. `Err` with the result's text when the
/// output has no such line, or when the log dropped bytes before it (line
/// numbers past a dropped middle are not known).
fn line_range(
    id: &str,
    line: u64,
    lines: u64,
    total: u64,
) -> Result<Result<LineSpan, String>, s::SessionError> {
    let mut finder = range::LineRange::new(line, lines);
    let mut pos = 0;
    let mut cut = None;
    while pos < total && finder.end().is_none() {
        let r = s::read_output(id, pos, READ_CHUNK)?;
        if r.offset > pos {
            if finder.start().is_none() {
                return Ok(Err(format!(
                    "Line {line} cannot be found: bytes {pos}-{} of session {id}'s output were \
                     dropped from the log at its size cap, so the lines after byte {pos} cannot \
                     be counted. Read by `offset` instead (bytes from {} on are kept).",
                    r.offset, r.offset
                )));
            }
            cut = Some(pos);
            break;
        }
        if r.data.is_empty() {
            break;
        }
        finder.feed(r.offset, &r.data);
        pos = r.offset + r.data.len() as u64;
        if finder
            .start()
            .is_some_and(|start| pos - start >= args::MAX_RANGE_BYTES)
        {
            break;
        }
    }
    // Right after the last newline is the start of no line.
    let Some(start) = finder.start().filter(|&start| start < total) else {
        let seen = finder.lines_seen();
        return Ok(Err(format!(
            "Session {id}'s output has no line {line}: it has {seen} line(s) so far \
             ({total} bytes)."
        )));
    };
    let end = finder
        .end()
        .or(cut)
        .unwrap_or(pos)
        .min(start + args::MAX_RANGE_BYTES);
    // The last line is known only when the range's end was found; otherwise
    // the lines run to where the output (or the read) ended.
    let last = (finder.end() == Some(end)).then_some(line + lines - 1);
    Ok(Ok((start, end, (line, last))))
}

/// `bash_output` with `offset` or `line`: reads that part of session `id`'s
/// output again, cut like any result, without moving its read cursor; bytes
/// the capped log dropped are counted and named by the marker.
fn read_again(id: &str, range: args::Range) -> ToolOutput {
    let what = "read the session's output";
    let snap = match s::check(id) {
        Ok(snap) => snap,
        Err(e) => return error_output("check the session", Some(id), e),
    };
    let total = snap.output_bytes;
    let (start, end, lines) = match range {
        args::Range::Bytes { offset, length } => {
            if offset >= total {
                let text = format!(
                    "(no output at byte {offset}: session {id} has {total} bytes of output so \
                     far, bytes 0-{total})"
                );
                return output(text, None, false);
            }
            (offset, offset.saturating_add(length).min(total), None)
        }
        args::Range::Lines { line, lines } => match line_range(id, line, lines, total) {
            Ok(Ok((start, end, shown))) => (start, end, Some(shown)),
            Ok(Err(text)) => return output(text, None, false),
            Err(e) => return error_output(what, Some(id), e),
        },
    };
    let mut capture = Capture::new();
    let mut pos = start;
    let mut dropped: Option<(u64, u64)> = None;
    while pos < end {
        let want = (end - pos).min(u64::from(READ_CHUNK)) as u32;
        let r = match s::read_output(id, pos, want) {
            Ok(r) => r,
            Err(e) => return error_output(what, Some(id), e),
        };
        if r.offset > pos {
            let to = r.offset.min(end);
            capture.skip(to - pos);
            dropped = Some((dropped.map_or(pos, |(from, _)| from), to));
            pos = to;
            continue;
        }
        if r.data.is_empty() {
            break;
        }
        let take = r.data.len().min((end - r.offset) as usize);
        capture.push(&r.data[..take]);
        pos = r.offset + take as u64;
    }
    let source = Source {
        session_id: id,
        start,
        end: pos,
        dropped,
    };
    let trailer = range::range_line(start, pos, lines, total);
    let ending = snap.exit.clone().map(ending);
    let (text, mut json) = session_result(
        &snap,
        &capture,
        &source,
        "(no output in that range)",
        trailer,
        ending.as_ref(),
        snap.detached,
    );
    if let Value::Object(map) = &mut json {
        map.insert(
            "range".into(),
            serde_json::json!({"offset": start, "length": pos - start,
                "first_line": lines.map(|(first, _)| first),
                "last_line": lines.and_then(|(_, last)| last)}),
        );
    }
    output(text, Some(json), false)
}

fn write_stdin(a: args::WriteStdin) -> ToolOutput {
    let id = a.session_id.as_str();
    let snap = match s::check(id) {
        Ok(snap) => snap,
        Err(e) => return error_output("write to stdin", Some(id), e),
    };
    let sub = s::subscribe(id, snap.last_seq + 1).ok();
    let hint = "\n(Only sessions started with `bash` and `interactive: true` have an open stdin.)";
    // The host takes the bytes at once (what the pipe cannot take yet waits in
    // its queue), so this never waits for the program to read.
    if !a.input.is_empty()
        && let Err(e) = s::write_stdin(id, a.input.as_bytes())
    {
        let invalid = matches!(e, s::SessionError::InvalidRequest(_));
        let mut out = error_output("write to stdin", Some(id), e);
        if invalid {
            out.text.push_str(hint);
        }
        return out;
    }
    if a.close_stdin
        && let Err(e) = s::close_stdin(id)
    {
        return error_output("close stdin", Some(id), e);
    }
    if let Some(sub) = sub
        && a.yield_ms > 0
    {
        let _ = wait(id, &sub, Some(a.yield_ms), false);
    }
    let ended_before = snap.status != s::SessionStatus::Running;
    let note = report::stdin_note(a.input.len(), a.close_stdin);
    match new_output(id, ended_before, &note) {
        Ok((text, mut json, is_error)) => {
            if let Value::Object(map) = &mut json {
                map.insert("stdin_accepted_bytes".into(), a.input.len().into());
                map.insert("stdin_close_requested".into(), a.close_stdin.into());
            }
            output(text, Some(json), is_error)
        }
        Err(out) => out,
    }
}

fn kill_shell(a: args::KillShell) -> ToolOutput {
    let id = a.session_id.as_str();
    let last_seq = match s::check(id) {
        Ok(snap) => snap.last_seq,
        Err(e) => return error_output("kill the session", Some(id), e),
    };
    match s::kill(id, a.signal.as_deref()) {
        Ok(info) => {
            let sent = a
                .signal
                .clone()
                .unwrap_or_else(|| "SIGTERM (then SIGKILL after a grace)".into());
            let ends = a
                .signal
                .as_deref()
                .is_none_or(|s| s == "SIGTERM" || s == "SIGKILL");
            if ends {
                wait_for_end(id, last_seq, KILL_WAIT_MS);
            }
            let after = match s::check(id) {
                Ok(snap) => match snap.exit.map(ending) {
                    Some(e) => format!(
                        " It has ended {}.",
                        report::status_line(&e, None, snap.elapsed_ms)
                    ),
                    None => {
                        " It is still running; check again with bash_output or list_shells.".into()
                    }
                },
                Err(_) => String::new(),
            };
            let text = format!(
                "Sent {sent} to {} process(es) in the process group of session {id}.{after} \
                 Unread output stays readable with bash_output.",
                info.signalled
            );
            let json = serde_json::json!({"session_id": id, "signalled": info.signalled, "signal": a.signal});
            output(text, Some(json), false)
        }
        Err(s::SessionError::SessionExited(st)) => {
            let e = ending(st);
            let text = format!(
                "Session {id} had already ended {}; nothing was signalled.",
                report::status_line(&e, None, 0)
            );
            let json = serde_json::json!({"session_id": id, "signalled": 0, "already_ended": true});
            output(text, Some(json), false)
        }
        Err(e) => error_output("kill the session", Some(id), e),
    }
}

fn list_shells() -> ToolOutput {
    let rows: Vec<report::Row> = s::list()
        .into_iter()
        .map(|snap| report::Row {
            status: status(snap.status),
            ending: snap.exit.map(ending),
            id: snap.id,
            command: snap.command,
            elapsed_ms: snap.elapsed_ms,
            output_bytes: snap.output_bytes,
            detached: snap.detached,
            output_path: snap.output_path,
        })
        .collect();
    let listing = report::Listing::new(rows);
    output(listing.text(), Some(listing.json()), false)
}
