"""Guest SDK for toolhost tool plugins written in Python (contract v0.1.0).

Build a plugin with componentize-py, putting this directory on the Python path:

    componentize-py -d wit/v0.1.0 -w tool-plugin componentize app \
        -p . -p plugins/sdk/python -o app.wasm

componentize-py generates the `wit_world` package from the WIT at build time;
this module re-exports the types a plugin needs and adds the helpers every
plugin would otherwise write itself:

- `run_and_wait(request, timeout_ms)`: start a command through `sessions`,
  wait for it with a timeout (wasi:io/poll on the session's pollable plus a
  monotonic-clock timer, no busy loop), then `check` it;
- `start_request(command, ...)`: a `StartRequest` with the contract's defaults;
- `tool_spec(...)`, `text(...)`, `error(...)`, `describe_error(...)`.

Conventions of the generated bindings (componentize-py 0.25): the exported
class must be named `Tool` and subclass `exports.Tool`; WIT names are
snake_case; a failed call raises `Err(ToolError_InvalidArguments("..."))`; an
import's error is raised as `Err` whose `.value` is the variant (e.g.
`SessionError_Denied`); u64 are plain ints; `option<T>` is `T` or `None`;
resources are context managers (`with`). Types for editors: toolhost_sdk.pyi.
See plugins/README.md.
"""

import json
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from componentize_py_types import Err, Ok, Some  # noqa: F401  (re-exported)
from wit_world import exports  # noqa: F401  (re-exported: subclass exports.Tool)
from wit_world.exports.tool import (  # noqa: F401  (re-exported)
    ToolCall,
    ToolError,
    ToolError_Failed,
    ToolError_InvalidArguments,
    ToolError_UnknownTool,
    ToolHints,
    ToolOutput,
    ToolSpec,
)
from wit_world.imports import monotonic_clock, poll, sessions  # noqa: F401
from wit_world.imports.poll import Pollable  # noqa: F401  (re-exported)
from wit_world.imports.sessions import (  # noqa: F401  (re-exported)
    DetachInfo,
    EndReason,
    EndReason_Exited,
    EndReason_Failed,
    EndReason_Killed,
    EndReason_TimedOut,
    EventKind,
    EventKind_Detached,
    EventKind_Exited,
    EventKind_Omitted,
    EventKind_Output,
    EventKind_Started,
    ExitStatus,
    KillInfo,
    OmittedRange,
    OutputChunk,
    OutputRange,
    OutputStream,
    SessionError,
    SessionError_Denied,
    SessionError_InvalidRequest,
    SessionError_Io,
    SessionError_ResourceLimit,
    SessionError_SessionExited,
    SessionError_UnknownSession,
    SessionEvent,
    SessionStatus,
    Snapshot,
    StartRequest,
    StdinMode,
    StdinMode_Bytes,
    StdinMode_Closed,
    StdinMode_Open,
    Subscription,
)

# Hints for a tool that changes nothing and touches no outside world.
PURE = ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False)
# Hints for a tool that runs processes but changes nothing.
READ_ONLY_PROCESS = ToolHints(read_only=True, destructive=False, idempotent=False, open_world=True)


@dataclass
class Outcome:
    """What `run_and_wait` (or `wait`) saw."""

    # The session id (`bg_` + 12 hex digits).
    id: str
    # The session as `check` reported it after the wait.
    snapshot: Snapshot
    # True when the timeout elapsed first: the process is still running (a
    # foreground run is killed by the host when the call ends).
    timed_out: bool

    @property
    def exit_code(self) -> Optional[int]:
        """The exit code, when the process exited normally."""
        return self.snapshot.exit.code if self.snapshot.exit is not None else None

    @property
    def success(self) -> bool:
        """True when the process exited by itself with code 0."""
        return self.snapshot.status == SessionStatus.EXITED and self.exit_code == 0


def start_request(
    command: str,
    *,
    tool_call_id: Optional[str] = None,
    timeout_ms: Optional[int] = None,
    cwd: Optional[str] = None,
    env: Optional[List[Tuple[str, str]]] = None,
    stdin: Optional[StdinMode] = None,
    shell: Optional[str] = None,
) -> StartRequest:
    """A StartRequest for `command` with the contract's defaults: workspace
    root, no extra env, stdin closed, no host timeout, /bin/sh, and a
    background session unless `tool_call_id` makes it a foreground run."""
    return StartRequest(
        command=command,
        cwd=cwd,
        env=list(env or []),
        stdin=stdin if stdin is not None else StdinMode_Closed(),
        timeout_ms=timeout_ms,
        shell=shell,
        tool_call_id=tool_call_id,
    )


def _ended(events: List[SessionEvent]) -> bool:
    return any(isinstance(e.kind, EventKind_Exited) for e in events)


def wait(id: str, timeout_ms: int) -> Outcome:
    """Waits at most `timeout_ms` for session `id` to end, then checks it.
    Raises `Err(SessionError_...)` as the sessions calls do."""
    with sessions.subscribe(id, 1) as sub, sub.subscribe() as ready, \
            monotonic_clock.subscribe_duration(timeout_ms * 1_000_000) as timer:
        timed_out = False
        while True:
            events = sub.next()
            if _ended(events):
                break
            if not events and ready.ready():
                # Ready with nothing to return: the session ended and every
                # event was returned.
                if sessions.check(id).status != SessionStatus.RUNNING:
                    break
                # An event raced in; back off briefly instead of spinning.
                with monotonic_clock.subscribe_duration(10_000_000) as pause:
                    pause.block()
            if 1 in poll.poll([ready, timer]):
                timed_out = not _ended(sub.next())
                break
    return Outcome(id=id, snapshot=sessions.check(id), timed_out=timed_out)


def run_and_wait(request: StartRequest, timeout_ms: int) -> Outcome:
    """Starts `request` and waits at most `timeout_ms` for it to end: start,
    subscribe, poll the subscription's pollable with a monotonic-clock timer,
    then check. A refused start raises `Err(SessionError_Denied(reason))`."""
    return wait(sessions.start(request), timeout_ms)


def tool_spec(name: str, description: str, input_schema: Any, hints: ToolHints = PURE) -> ToolSpec:
    """A ToolSpec; `input_schema` is a JSON Schema as a dict or as text."""
    schema = input_schema if isinstance(input_schema, str) else json.dumps(input_schema)
    return ToolSpec(name=name, description=description, input_schema=schema, hints=hints)


def text(text: str, structured: Optional[Any] = None) -> ToolOutput:
    """A successful result; `structured` (a dict) becomes structuredContent."""
    return ToolOutput(text=text, structured=_json(structured), is_error=False)


def error(text: str, structured: Optional[Any] = None) -> ToolOutput:
    """A result the agent should see as a failure (MCP isError)."""
    return ToolOutput(text=text, structured=_json(structured), is_error=True)


def _json(value: Optional[Any]) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def describe_error(err: Any) -> str:
    """A one-line description of a SessionError variant (or an `Err` holding one)."""
    if isinstance(err, Err):
        err = err.value
    names = {
        SessionError_UnknownSession: "unknown session",
        SessionError_SessionExited: "session already ended",
        SessionError_Denied: "denied",
        SessionError_InvalidRequest: "invalid request",
        SessionError_ResourceLimit: "resource limit",
        SessionError_Io: "host I/O error",
    }
    return f"{names.get(type(err), type(err).__name__)}: {err.value}"
