# Type stubs for toolhost_sdk (contract v0.1.0, wit/v0.1.0, world tool-plugin).
#
# Written by hand in componentize-py 0.25's conventions (records are dataclasses
# with snake_case fields, a variant `v` with case `c` is the class `V_C`, enum
# cases are UPPER_SNAKE, u64/u32/s32 are int, option<T> is Optional[T],
# list<u8> is bytes). The test plugins/sdk/rust/tests/stubs_match_wit.rs checks
# that every type, field, case and function of the WIT appears here.

from dataclasses import dataclass
from enum import Enum
from types import TracebackType
from typing import Any, Generic, List, Optional, Protocol, Tuple, TypeVar, Union

T = TypeVar("T")

class Err(Exception, Generic[T]):
    value: T
    def __init__(self, value: T) -> None: ...

@dataclass
class Ok(Generic[T]):
    value: T

@dataclass
class Some(Generic[T]):
    value: T

# ---- wasi:io/poll, wasi:clocks/monotonic-clock (what the helpers use) ------

class Pollable:
    def ready(self) -> bool: ...
    def block(self) -> None: ...
    def __enter__(self) -> "Pollable": ...
    def __exit__(self, t: Optional[type], v: Optional[BaseException], tb: Optional[TracebackType]) -> Optional[bool]: ...

class _Poll(Protocol):
    Pollable: type[Pollable]
    def poll(self, in_: List[Pollable]) -> List[int]: ...

class _MonotonicClock(Protocol):
    def now(self) -> int: ...
    def resolution(self) -> int: ...
    def subscribe_instant(self, when: int) -> Pollable: ...
    def subscribe_duration(self, when: int) -> Pollable: ...

poll: _Poll
monotonic_clock: _MonotonicClock

# ---- toolhost:plugin/tool (exported) -----------------------------------------

@dataclass
class ToolHints:
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool

@dataclass
class ToolSpec:
    name: str
    description: str
    input_schema: str
    hints: ToolHints

@dataclass
class ToolCall:
    tool_call_id: str
    name: str
    arguments: str

@dataclass
class ToolOutput:
    text: str
    structured: Optional[str]
    is_error: bool

@dataclass
class ToolError_UnknownTool:
    value: str

@dataclass
class ToolError_InvalidArguments:
    value: str

@dataclass
class ToolError_Failed:
    value: str

ToolError = Union[ToolError_UnknownTool, ToolError_InvalidArguments, ToolError_Failed]

class _ToolBase(Protocol):
    def describe(self) -> List[ToolSpec]: ...
    # Raises Err(ToolError_...) when the call cannot run at all.
    def call(self, call: ToolCall) -> ToolOutput: ...

class _Exports(Protocol):
    # Subclass it as `class Tool(exports.Tool)` in the app module.
    Tool: type[_ToolBase]

exports: _Exports

# ---- toolhost:plugin/sessions (imported) -------------------------------------

@dataclass
class StdinMode_Closed: ...

@dataclass
class StdinMode_Bytes:
    value: bytes

@dataclass
class StdinMode_Open: ...

StdinMode = Union[StdinMode_Closed, StdinMode_Bytes, StdinMode_Open]

@dataclass
class StartRequest:
    command: str
    cwd: Optional[str]
    env: List[Tuple[str, str]]
    stdin: StdinMode
    timeout_ms: Optional[int]
    shell: Optional[str]
    tool_call_id: Optional[str]

class SessionStatus(Enum):
    RUNNING = 0
    EXITED = 1
    TIMED_OUT = 2
    KILLED = 3
    FAILED = 4

@dataclass
class EndReason_Exited: ...

@dataclass
class EndReason_TimedOut: ...

@dataclass
class EndReason_Killed:
    value: str

@dataclass
class EndReason_Failed:
    value: str

EndReason = Union[EndReason_Exited, EndReason_TimedOut, EndReason_Killed, EndReason_Failed]

@dataclass
class ExitStatus:
    code: Optional[int]
    signal: Optional[str]
    reason: EndReason

class OutputStream(Enum):
    STDOUT = 0
    STDERR = 1

@dataclass
class OutputChunk:
    stream: OutputStream
    offset: int
    data: bytes

@dataclass
class Snapshot:
    id: str
    command: str
    status: SessionStatus
    exit: Optional[ExitStatus]
    pid: Optional[int]
    elapsed_ms: int
    output_tail: str
    output_bytes: int
    truncated: bool
    last_seq: int
    detached: bool
    tool_call_id: Optional[str]
    output_path: str
    sandbox: str

@dataclass
class DetachInfo:
    id: str
    reason: str
    output_bytes: int
    tool_call_id: Optional[str]

@dataclass
class KillInfo:
    signalled: int

@dataclass
class OmittedRange:
    first_seq: int
    last_seq: int
    offset: int

@dataclass
class EventKind_Started:
    value: int

@dataclass
class EventKind_Output:
    value: OutputChunk

@dataclass
class EventKind_Detached:
    value: DetachInfo

@dataclass
class EventKind_Exited:
    value: ExitStatus

@dataclass
class EventKind_Omitted:
    value: OmittedRange

EventKind = Union[EventKind_Started, EventKind_Output, EventKind_Detached, EventKind_Exited, EventKind_Omitted]

@dataclass
class SessionEvent:
    seq: int
    at_ms: int
    kind: EventKind

@dataclass
class OutputRange:
    offset: int
    data: bytes
    total_bytes: int
    eof: bool

@dataclass
class SessionError_UnknownSession:
    value: str

@dataclass
class SessionError_SessionExited:
    value: ExitStatus

@dataclass
class SessionError_Denied:
    value: str

@dataclass
class SessionError_InvalidRequest:
    value: str

@dataclass
class SessionError_ResourceLimit:
    value: str

@dataclass
class SessionError_Io:
    value: str

SessionError = Union[
    SessionError_UnknownSession,
    SessionError_SessionExited,
    SessionError_Denied,
    SessionError_InvalidRequest,
    SessionError_ResourceLimit,
    SessionError_Io,
]

class Subscription:
    """Dropping it (`with`, or `__exit__`) unsubscribes."""
    def subscribe(self) -> Pollable: ...
    def next(self) -> List[SessionEvent]: ...
    def __enter__(self) -> "Subscription": ...
    def __exit__(self, t: Optional[type], v: Optional[BaseException], tb: Optional[TracebackType]) -> Optional[bool]: ...

class _Sessions(Protocol):
    """Every function raises Err(SessionError_...) on failure (except list)."""
    def start(self, request: StartRequest) -> str: ...
    def check(self, id: str) -> Snapshot: ...
    def subscribe(self, id: str, from_seq: int) -> Subscription: ...
    def detach(self, id: str, reason: str) -> DetachInfo: ...
    def write_stdin(self, id: str, data: bytes) -> None: ...
    def close_stdin(self, id: str) -> None: ...
    def kill(self, id: str, signal: Optional[str]) -> KillInfo: ...
    def read_output(self, id: str, offset: int, max_bytes: int) -> OutputRange: ...
    def read_new_output(self, id: str, max_bytes: int) -> OutputRange: ...
    def list(self) -> List[Snapshot]: ...

sessions: _Sessions

# ---- helpers -----------------------------------------------------------------

PURE: ToolHints
READ_ONLY_PROCESS: ToolHints

@dataclass
class Outcome:
    id: str
    snapshot: Snapshot
    timed_out: bool
    @property
    def exit_code(self) -> Optional[int]: ...
    @property
    def success(self) -> bool: ...

def start_request(
    command: str,
    *,
    tool_call_id: Optional[str] = ...,
    timeout_ms: Optional[int] = ...,
    cwd: Optional[str] = ...,
    env: Optional[List[Tuple[str, str]]] = ...,
    stdin: Optional[StdinMode] = ...,
    shell: Optional[str] = ...,
) -> StartRequest: ...
def wait(id: str, timeout_ms: int) -> Outcome: ...
def run_and_wait(request: StartRequest, timeout_ms: int) -> Outcome: ...
def tool_spec(name: str, description: str, input_schema: Any, hints: ToolHints = ...) -> ToolSpec: ...
def text(text: str, structured: Optional[Any] = ...) -> ToolOutput: ...
def error(text: str, structured: Optional[Any] = ...) -> ToolOutput: ...
def describe_error(err: Any) -> str: ...
