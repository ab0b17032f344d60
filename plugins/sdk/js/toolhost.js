// Guest SDK for toolhost tool plugins written in JavaScript (contract v0.1.0).
//
// Build with componentize-js (0.23), without the HTTP features toolhost does
// not link (the component would import wasi:http and be refused):
//
//   componentize-js --wit wit/v0.1.0 -n tool-plugin -d http -d fetch-event -o app.wasm app.js
//
// with this file beside app.js (`import ... from './toolhost.js'`). Types for
// editors: toolhost.d.ts. The helpers every plugin would otherwise write:
//
// - runAndWait(request, timeoutMs): start a command through `sessions`, wait
//   for it with a timeout (wasi:io/poll on the session's pollable plus a
//   monotonic-clock timer, no busy loop), then `check` it;
// - startRequest(command, {...}): a StartRequest with the contract's defaults;
// - toolSpec, text, error, invalidArguments, unknownTool, describeError.
//
// Conventions of the bindings: record fields are camelCase (`toolCallId`);
// u64 values are BigInt (`timeoutMs: 5000n`); option<T> is the value or
// undefined; variants are `{ tag: 'kebab-name', val }`; enums are strings
// ('running', 'timed-out'); a failed call throws `{ tag: 'invalid-arguments',
// val: '...' }`; an import's error is thrown as an Error whose `.payload` is
// the variant; resources are released with `[Symbol.dispose]()`.
// See plugins/README.md.

import * as sessions from 'toolhost:plugin/sessions@0.1.0';
import { poll } from 'wasi:io/poll@0.2.12';
import { subscribeDuration } from 'wasi:clocks/monotonic-clock@0.2.12';

export { sessions };

/** Hints for a tool that changes nothing and touches no outside world. */
export const PURE = { readOnly: true, destructive: false, idempotent: true, openWorld: false };
/** Hints for a tool that runs processes but changes nothing. */
export const READ_ONLY_PROCESS = { readOnly: true, destructive: false, idempotent: false, openWorld: true };

/** A tool spec; `inputSchema` may be an object or JSON text. */
export function toolSpec(name, description, inputSchema, hints = PURE) {
  const schema = typeof inputSchema === 'string' ? inputSchema : JSON.stringify(inputSchema);
  return { name, description, inputSchema: schema, hints };
}

function json(value) {
  return value === undefined || typeof value === 'string' ? value : JSON.stringify(value);
}

/** A successful result; `structured` (an object) becomes structuredContent. */
export function text(text, structured) {
  return { text, structured: json(structured), isError: false };
}

/** A result the agent should see as a failure (MCP isError). */
export function error(text, structured) {
  return { text, structured: json(structured), isError: true };
}

/** The value to throw when the arguments do not fit the schema. */
export function invalidArguments(message) {
  return { tag: 'invalid-arguments', val: message };
}

/** The value to throw for a tool name this plugin does not have. */
export function unknownTool(name) {
  return { tag: 'unknown-tool', val: name };
}

/**
 * A StartRequest for `command` with the contract's defaults: the workspace
 * root, no extra env, stdin closed, no host timeout, /bin/sh, and a background
 * session unless `toolCallId` makes it a foreground run of the call.
 */
export function startRequest(command, { toolCallId, timeoutMs, cwd, env, stdin, shell } = {}) {
  return {
    command,
    cwd,
    env: env ?? [],
    stdin: stdin ?? { tag: 'closed' },
    timeoutMs: timeoutMs === undefined ? undefined : BigInt(timeoutMs),
    shell,
    toolCallId,
  };
}

function ended(events) {
  return events.some((e) => e.kind.tag === 'exited');
}

function outcome(id, timedOut) {
  const snapshot = sessions.check(id);
  const exitCode = snapshot.exit?.code;
  return {
    id,
    snapshot,
    timedOut,
    exitCode,
    success: snapshot.status === 'exited' && exitCode === 0,
  };
}

/** Waits at most `timeoutMs` for session `id` to end, then checks it. */
export function wait(id, timeoutMs) {
  const sub = sessions.subscribe(id, 1n);
  const ready = sub.subscribe();
  const timer = subscribeDuration(BigInt(timeoutMs) * 1_000_000n);
  try {
    for (;;) {
      const events = sub.next();
      if (ended(events)) return outcome(id, false);
      if (events.length === 0 && ready.ready()) {
        // Ready with nothing to return: the session ended and every event
        // was returned.
        if (sessions.check(id).status !== 'running') return outcome(id, false);
        // An event raced in; back off briefly instead of spinning.
        const pause = subscribeDuration(10_000_000n);
        pause.block();
        pause[Symbol.dispose]();
      }
      if (Array.from(poll([ready, timer])).includes(1)) {
        return outcome(id, !ended(sub.next()));
      }
    }
  } finally {
    timer[Symbol.dispose]();
    ready[Symbol.dispose]();
    sub[Symbol.dispose]();
  }
}

/**
 * Starts `request` and waits at most `timeoutMs` for it to end: start,
 * subscribe, poll the subscription's pollable with a monotonic-clock timer,
 * then check. A refused start throws (`.payload` is `{ tag: 'denied', val }`).
 */
export function runAndWait(request, timeoutMs) {
  return wait(sessions.start(request), timeoutMs);
}

/** A one-line description of a thrown session error (or the variant itself). */
export function describeError(err) {
  const v = err && err.payload !== undefined ? err.payload : err;
  if (v && typeof v.tag === 'string') {
    const val = typeof v.val === 'string' ? v.val : JSON.stringify(v.val, (_, x) => (typeof x === 'bigint' ? Number(x) : x));
    return `${v.tag}: ${val}`;
  }
  return String(err);
}
