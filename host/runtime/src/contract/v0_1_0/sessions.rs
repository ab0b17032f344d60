//! The host implementation of `toolhost:plugin/sessions@0.1.0` on top of the
//! process session engine (`toolhost-process`). Every `start` goes through the
//! version-neutral start gate, [`start_process`] (the host's hard rules, then the
//! permission pipeline, then the spawn); this module only converts to and from the
//! WIT types. Every other call is scoped to the calling plugin's own sessions
//! (ARCHITECTURE.md, invariant "No plugin spawns without the pipeline").
//!
//! A `start-request.tool-call-id` is bound to the call the host gave the
//! plugin: it must be that call's own id ([`CallInfo::tool_call_id`]), or
//! `none` for a background session; any other id is refused with
//! `invalid-request` before anything else is checked, so a plugin can never
//! attribute a process to, or inject progress into, another call. `start` is
//! the only function of the interface that names a tool call; the others take
//! session ids, scoped to the caller's own sessions.
//!
//! It works on a [`SessionsCtx`], a view of one call's store data (like
//! wasmtime-wasi's `WasiCtxView`), so the plugin store depends on this module
//! and not the other way round.

use std::sync::Arc;

use toolhost_process::{self as process, Caller, SessionError, Sessions};
use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi::p2::{DynPollable, Pollable};

use super::tool_plugin::toolhost::plugin::sessions as wit;
use crate::call::{CallInfo, Services};
use crate::permissions::{StartRefused, start_process};

/// Most events one `subscription.next` call returns.
const MAX_EVENTS_PER_NEXT: usize = 256;
/// Most bytes one `read-output` call returns (1 MiB).
const MAX_READ_BYTES: u32 = 1 << 20;

/// The host side of the `subscription` resource.
pub struct SubscriptionResource {
    inner: process::Subscription,
}

#[wasmtime_wasi::async_trait]
impl Pollable for SubscriptionResource {
    async fn ready(&mut self) {
        self.inner.ready().await;
    }
}

/// What the `sessions` implementation sees of one call's store: the resource
/// table, which call it is, and the host services (`None` for a plugin loaded
/// without any, e.g. by `plugin inspect`: `start` answers `denied` and the
/// other calls trap).
pub struct SessionsCtx<'a> {
    /// The call's resource table (subscriptions live here).
    pub table: &'a mut ResourceTable,
    /// Which call this is.
    pub call: &'a CallInfo,
    /// The host services.
    pub services: Option<&'a Arc<Services>>,
}

/// The [`HasData`] marker that lets `add_to_linker` project a store's data to a
/// [`SessionsCtx`].
pub struct SessionsData;

impl HasData for SessionsData {
    type Data<'a> = SessionsCtx<'a>;
}

/// Adds `toolhost:plugin/sessions@0.1.0` to `linker`, reaching each store's
/// [`SessionsCtx`] through `get`.
///
/// Errors: a name clash in the linker.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut wasmtime::component::Linker<T>,
    get: fn(&mut T) -> SessionsCtx<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, SessionsData>(linker, get)
}

impl SessionsCtx<'_> {
    fn caller(&self) -> Caller {
        self.call.caller()
    }

    fn sessions(&self) -> wasmtime::Result<&Sessions> {
        match self.services {
            Some(services) => Ok(&services.sessions),
            None => Err(wasmtime::Error::msg(
                "this plugin has no access to sessions",
            )),
        }
    }
}

type WitResult<T> = wasmtime::Result<Result<T, wit::SessionError>>;

impl wit::Host for SessionsCtx<'_> {
    async fn start(&mut self, request: wit::StartRequest) -> WitResult<String> {
        let Some(services) = self.services.cloned() else {
            return Ok(Err(wit::SessionError::Denied(
                "this plugin may not start processes".into(),
            )));
        };
        if let Err(e) = check_tool_call_id(request.tool_call_id.as_deref(), self.call) {
            return Ok(Err(e));
        }
        let request = match start_request(request) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let started = start_process(
            &services.sessions,
            &services.permissions,
            &self.call.requester(),
            &self.caller(),
            request,
        )
        .await;
        Ok(match started {
            Ok(id) => Ok(id.to_string()),
            Err(StartRefused::Denied(denial)) => Err(wit::SessionError::Denied(denial.to_string())),
            Err(StartRefused::Session(e)) => Err(session_error(e)),
        })
    }

    async fn check(&mut self, id: String) -> WitResult<wit::Snapshot> {
        Ok(self
            .sessions()?
            .check(&self.caller(), &id)
            .map(snapshot)
            .map_err(session_error))
    }

    async fn subscribe(
        &mut self,
        id: String,
        from_seq: u64,
    ) -> WitResult<Resource<SubscriptionResource>> {
        let sub = match self.sessions()?.subscribe(&self.caller(), &id, from_seq) {
            Ok(sub) => sub,
            Err(e) => return Ok(Err(session_error(e))),
        };
        Ok(Ok(self.table.push(SubscriptionResource { inner: sub })?))
    }

    async fn detach(&mut self, id: String, reason: String) -> WitResult<wit::DetachInfo> {
        Ok(self
            .sessions()?
            .detach(&self.caller(), &id, &reason)
            .map(detach_info)
            .map_err(session_error))
    }

    async fn write_stdin(&mut self, id: String, data: Vec<u8>) -> WitResult<()> {
        Ok(self
            .sessions()?
            .write_stdin(&self.caller(), &id, &data)
            .await
            .map_err(session_error))
    }

    async fn close_stdin(&mut self, id: String) -> WitResult<()> {
        Ok(self
            .sessions()?
            .close_stdin(&self.caller(), &id)
            .await
            .map_err(session_error))
    }

    async fn kill(&mut self, id: String, signal: Option<String>) -> WitResult<wit::KillInfo> {
        let signal = match signal.as_deref().map(process::parse_signal).transpose() {
            Ok(signal) => signal,
            Err(e) => return Ok(Err(session_error(e))),
        };
        Ok(self
            .sessions()?
            .kill(&self.caller(), &id, signal, process::KilledBy::Plugin)
            .await
            .map(|k| wit::KillInfo {
                signalled: k.signalled,
            })
            .map_err(session_error))
    }

    async fn read_output(
        &mut self,
        id: String,
        offset: u64,
        max_bytes: u32,
    ) -> WitResult<wit::OutputRange> {
        let max = max_bytes.min(MAX_READ_BYTES);
        Ok(self
            .sessions()?
            .read_output(&self.caller(), &id, offset, max)
            .await
            .map(output_range)
            .map_err(session_error))
    }

    async fn read_new_output(&mut self, id: String, max_bytes: u32) -> WitResult<wit::OutputRange> {
        let max = max_bytes.min(MAX_READ_BYTES);
        Ok(self
            .sessions()?
            .read_new_output(&self.caller(), &id, max)
            .await
            .map(output_range)
            .map_err(session_error))
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<wit::Snapshot>> {
        Ok(self
            .sessions()?
            .list(&self.caller())
            .into_iter()
            .map(snapshot)
            .collect())
    }
}

impl wit::HostSubscription for SessionsCtx<'_> {
    async fn subscribe(
        &mut self,
        this: Resource<SubscriptionResource>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        wasmtime_wasi::p2::subscribe(self.table, this)
    }

    async fn next(
        &mut self,
        this: Resource<SubscriptionResource>,
    ) -> wasmtime::Result<Vec<wit::SessionEvent>> {
        let sub = self.table.get_mut(&this)?;
        Ok(sub
            .inner
            .next(MAX_EVENTS_PER_NEXT)
            .into_iter()
            .map(event)
            .collect())
    }

    async fn drop(&mut self, this: Resource<SubscriptionResource>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

/// The rule that binds a start's `tool-call-id` to the calling tool call:
/// `none` (a background session) or exactly `call.tool_call_id`. Anything
/// else (another call's id, any id outside a tool call) is `invalid-request`
/// naming the rule.
fn check_tool_call_id(requested: Option<&str>, call: &CallInfo) -> Result<(), wit::SessionError> {
    match requested {
        None => Ok(()),
        Some(id) if !call.tool_call_id.is_empty() && id == call.tool_call_id => Ok(()),
        Some(id) if call.tool_call_id.is_empty() => {
            Err(wit::SessionError::InvalidRequest(format!(
                "tool-call-id `{id}` is not allowed here: this is not a tool call, so a process can \
             only be a background session (tool-call-id none)"
            )))
        }
        Some(id) => Err(wit::SessionError::InvalidRequest(format!(
            "tool-call-id `{id}` is not this call's id (`{}`): a plugin may tie a process only to \
             the tool call it is running, or pass none for a background session",
            call.tool_call_id
        ))),
    }
}

fn start_request(r: wit::StartRequest) -> Result<process::StartRequest, wit::SessionError> {
    let timeout = match r.timeout_ms {
        Some(0) => {
            return Err(wit::SessionError::InvalidRequest(
                "timeout-ms must be at least 1".into(),
            ));
        }
        Some(ms) => Some(std::time::Duration::from_millis(ms)),
        None => None,
    };
    Ok(process::StartRequest {
        command: r.command,
        cwd: r.cwd,
        env: r.env,
        stdin: match r.stdin {
            wit::StdinMode::Closed => process::StdinMode::Closed,
            wit::StdinMode::Bytes(b) => process::StdinMode::Bytes(b),
            wit::StdinMode::Open => process::StdinMode::Open,
        },
        timeout,
        shell: r.shell.into(),
        tool_call_id: r.tool_call_id,
        // v0.1.0 cannot ask for separate streams: its plugins get the terminal's
        // order, every chunk reported as `stdout`; asking for separate streams waits
        // for a later `sessions` version.
        streams: process::OutputStreams::Merged,
    })
}

fn session_error(e: SessionError) -> wit::SessionError {
    use SessionError as E;
    match e {
        E::UnknownSession(id) => wit::SessionError::UnknownSession(id.to_string()),
        E::SessionExited(status) => wit::SessionError::SessionExited(exit_status(status)),
        E::Denied(m) => wit::SessionError::Denied(m),
        E::InvalidRequest(m) => wit::SessionError::InvalidRequest(m),
        E::ResourceLimit(m) => wit::SessionError::ResourceLimit(m),
        E::Io(failure) => wit::SessionError::Io(failure.to_string()),
    }
}

fn exit_status(s: process::ExitStatus) -> wit::ExitStatus {
    wit::ExitStatus {
        code: s.code,
        signal: s.signal,
        reason: match s.reason {
            process::EndReason::Exited => wit::EndReason::Exited,
            process::EndReason::TimedOut => wit::EndReason::TimedOut,
            process::EndReason::Killed(by) => wit::EndReason::Killed(by.to_string()),
            process::EndReason::Failed(why) => wit::EndReason::Failed(why.to_string()),
        },
    }
}

fn snapshot(s: process::Snapshot) -> wit::Snapshot {
    wit::Snapshot {
        id: s.id.to_string(),
        command: s.command,
        status: match s.status {
            process::SessionStatus::Running => wit::SessionStatus::Running,
            process::SessionStatus::Exited => wit::SessionStatus::Exited,
            process::SessionStatus::TimedOut => wit::SessionStatus::TimedOut,
            process::SessionStatus::Killed => wit::SessionStatus::Killed,
            process::SessionStatus::Failed => wit::SessionStatus::Failed,
        },
        exit: s.exit.map(exit_status),
        pid: s.pid,
        elapsed_ms: s.elapsed_ms,
        output_tail: s.output_tail,
        output_bytes: s.output_bytes,
        truncated: s.truncated,
        last_seq: s.last_seq,
        detached: s.detached,
        tool_call_id: s.tool_call_id,
        output_path: s.output_path.display().to_string(),
        // v0.1.0 has no field for the engine's sandbox-denial hint; it follows the
        // one-line summary on a second line (the bash plugin's `session_result` splits it off).
        sandbox: match s.sandbox_denial {
            Some(hint) => format!("{}\n{hint}", s.sandbox),
            None => s.sandbox,
        },
    }
}

fn detach_info(d: process::DetachInfo) -> wit::DetachInfo {
    wit::DetachInfo {
        id: d.id.to_string(),
        reason: d.reason,
        output_bytes: d.output_bytes,
        tool_call_id: d.tool_call_id,
    }
}

fn output_range(r: process::OutputRange) -> wit::OutputRange {
    wit::OutputRange {
        offset: r.offset,
        data: r.data,
        total_bytes: r.total_bytes,
        eof: r.eof,
    }
}

fn event(e: process::SessionEvent) -> wit::SessionEvent {
    let kind = match e.kind {
        // The WIT event carries only the pid; the sandbox is in the snapshot.
        process::SessionEventKind::Started(info) => wit::EventKind::Started(info.pid),
        process::SessionEventKind::Output(c) => wit::EventKind::Output(wit::OutputChunk {
            stream: match c.stream {
                process::OutputStream::Stdout => wit::OutputStream::Stdout,
                process::OutputStream::Stderr => wit::OutputStream::Stderr,
            },
            offset: c.offset,
            data: c.data.to_vec(),
        }),
        process::SessionEventKind::Detached(d) => wit::EventKind::Detached(detach_info(d)),
        process::SessionEventKind::Exited(s) => wit::EventKind::Exited(exit_status(s)),
        process::SessionEventKind::Omitted(r) => wit::EventKind::Omitted(wit::OmittedRange {
            first_seq: r.first_seq,
            last_seq: r.last_seq,
            offset: r.offset,
        }),
    };
    wit::SessionEvent {
        seq: e.seq,
        at_ms: e.at_ms,
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;

    fn call(tool_call_id: &str) -> CallInfo {
        CallInfo {
            tool: "t".into(),
            tool_call_id: tool_call_id.into(),
            ..CallInfo::plugin_only("p".into(), Arc::new(Manifest::deny_all("p")))
        }
    }

    #[test]
    fn a_tool_call_id_is_the_calls_own_or_none() {
        let own = call("tc_1");
        assert!(check_tool_call_id(None, &own).is_ok());
        assert!(check_tool_call_id(Some("tc_1"), &own).is_ok());
        for forged in ["tc_2", "", "tc_1 ", "TC_1"] {
            match check_tool_call_id(Some(forged), &own) {
                Err(wit::SessionError::InvalidRequest(m)) => {
                    assert!(m.contains("is not this call's id (`tc_1`)"), "{m}")
                }
                other => panic!("{forged:?}: {other:?}"),
            }
        }
        // Outside a tool call (describe, a policy call) no id is anyone's.
        let none = call("");
        assert!(check_tool_call_id(None, &none).is_ok());
        for id in ["", "tc_1"] {
            match check_tool_call_id(Some(id), &none) {
                Err(wit::SessionError::InvalidRequest(m)) => {
                    assert!(m.contains("not a tool call"), "{m}")
                }
                other => panic!("{id:?}: {other:?}"),
            }
        }
    }
}
