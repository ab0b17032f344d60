// Type declarations for toolhost.js (contract v0.1.0, wit/v0.1.0, world tool-plugin).
//
// Written by hand in componentize-js 0.23 / jco 1.35's conventions (jco cannot
// generate guest types from a WIT folder today): record fields are camelCase,
// u64 is bigint, u32/s32 are number, option<T> is `T | undefined`, list<u8> is
// Uint8Array, variants are `{ tag: 'kebab-case', val }`, enums are kebab-case
// strings, resources are classes released with `[Symbol.dispose]()`. The test
// plugins/sdk/rust/tests/stubs_match_wit.rs checks that every type, field,
// case and function of the WIT appears here.

// ---- wasi:io/poll --------------------------------------------------------

export declare class Pollable {
  ready(): boolean;
  block(): void;
  [Symbol.dispose](): void;
}

// ---- toolhost:plugin/tool (exported as `export const tool = {...}`) ------

export interface ToolHints {
  readOnly: boolean;
  destructive: boolean;
  idempotent: boolean;
  openWorld: boolean;
}

export interface ToolSpec {
  name: string;
  description: string;
  /** A JSON Schema object, as JSON text. */
  inputSchema: string;
  hints: ToolHints;
}

export interface ToolCall {
  toolCallId: string;
  name: string;
  /** The arguments, as a JSON object text. */
  arguments: string;
}

export interface ToolOutput {
  text: string;
  structured?: string;
  isError: boolean;
}

/** Thrown by `call` when the call cannot run at all. */
export type ToolError =
  | { tag: 'unknown-tool'; val: string }
  | { tag: 'invalid-arguments'; val: string }
  | { tag: 'failed'; val: string };

/** The shape of the `tool` export. */
export interface Tool {
  describe(): ToolSpec[];
  /** Throws a ToolError. */
  call(call: ToolCall): ToolOutput;
}

// ---- toolhost:plugin/sessions (imported) ---------------------------------

export type SessionId = string;

export type StdinMode =
  | { tag: 'closed' }
  | { tag: 'bytes'; val: Uint8Array }
  | { tag: 'open' };

export interface StartRequest {
  command: string;
  cwd?: string;
  env: Array<[string, string]>;
  stdin: StdinMode;
  timeoutMs?: bigint;
  shell?: string;
  toolCallId?: string;
}

export type SessionStatus = 'running' | 'exited' | 'timed-out' | 'killed' | 'failed';

export type EndReason =
  | { tag: 'exited' }
  | { tag: 'timed-out' }
  | { tag: 'killed'; val: string }
  | { tag: 'failed'; val: string };

export interface ExitStatus {
  code?: number;
  signal?: string;
  reason: EndReason;
}

export type OutputStream = 'stdout' | 'stderr';

export interface OutputChunk {
  stream: OutputStream;
  offset: bigint;
  data: Uint8Array;
}

export interface Snapshot {
  id: SessionId;
  command: string;
  status: SessionStatus;
  exit?: ExitStatus;
  pid?: number;
  elapsedMs: bigint;
  outputTail: string;
  outputBytes: bigint;
  truncated: boolean;
  lastSeq: bigint;
  detached: boolean;
  toolCallId?: string;
  outputPath: string;
  sandbox: string;
}

export interface DetachInfo {
  id: SessionId;
  reason: string;
  outputBytes: bigint;
  toolCallId?: string;
}

export interface KillInfo {
  signalled: number;
}

export interface OmittedRange {
  firstSeq: bigint;
  lastSeq: bigint;
  offset: bigint;
}

export type EventKind =
  | { tag: 'started'; val: number }
  | { tag: 'output'; val: OutputChunk }
  | { tag: 'detached'; val: DetachInfo }
  | { tag: 'exited'; val: ExitStatus }
  | { tag: 'omitted'; val: OmittedRange };

export interface SessionEvent {
  seq: bigint;
  atMs: bigint;
  kind: EventKind;
}

export interface OutputRange {
  offset: bigint;
  data: Uint8Array;
  totalBytes: bigint;
  eof: boolean;
}

/** Carried in the `.payload` of what a sessions function throws. */
export type SessionError =
  | { tag: 'unknown-session'; val: SessionId }
  | { tag: 'session-exited'; val: ExitStatus }
  | { tag: 'denied'; val: string }
  | { tag: 'invalid-request'; val: string }
  | { tag: 'resource-limit'; val: string }
  | { tag: 'io'; val: string };

/** Dropping it (`[Symbol.dispose]()`) unsubscribes. */
export declare class Subscription {
  subscribe(): Pollable;
  next(): SessionEvent[];
  [Symbol.dispose](): void;
}

/** The imported interface; each function throws an Error whose `.payload` is a SessionError. */
export declare namespace sessions {
  function start(request: StartRequest): SessionId;
  function check(id: SessionId): Snapshot;
  function subscribe(id: SessionId, fromSeq: bigint): Subscription;
  function detach(id: SessionId, reason: string): DetachInfo;
  function writeStdin(id: SessionId, data: Uint8Array): void;
  function closeStdin(id: SessionId): void;
  function kill(id: SessionId, signal: string | undefined): KillInfo;
  function readOutput(id: SessionId, offset: bigint, maxBytes: number): OutputRange;
  function readNewOutput(id: SessionId, maxBytes: number): OutputRange;
  function list(): Snapshot[];
}

// ---- helpers -------------------------------------------------------------

export declare const PURE: ToolHints;
export declare const READ_ONLY_PROCESS: ToolHints;

/** What runAndWait (or wait) saw. */
export interface Outcome {
  id: SessionId;
  snapshot: Snapshot;
  /** The timeout elapsed first: the process is still running. */
  timedOut: boolean;
  exitCode?: number;
  /** Exited by itself with code 0. */
  success: boolean;
}

export interface StartOptions {
  toolCallId?: string;
  /** Host-side kill after this many ms (number or bigint). */
  timeoutMs?: number | bigint;
  cwd?: string;
  env?: Array<[string, string]>;
  stdin?: StdinMode;
  shell?: string;
}

export declare function startRequest(command: string, options?: StartOptions): StartRequest;
export declare function wait(id: SessionId, timeoutMs: number): Outcome;
export declare function runAndWait(request: StartRequest, timeoutMs: number): Outcome;
export declare function toolSpec(name: string, description: string, inputSchema: object | string, hints?: ToolHints): ToolSpec;
export declare function text(text: string, structured?: object | string): ToolOutput;
export declare function error(text: string, structured?: object | string): ToolOutput;
export declare function invalidArguments(message: string): ToolError;
export declare function unknownTool(name: string): ToolError;
export declare function describeError(err: unknown): string;
