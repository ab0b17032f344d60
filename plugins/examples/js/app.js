// Example toolhost tool plugin in JavaScript (contract v0.1.0), built by build.sh.
//
// Two tools:
// - `greet` (pure): {"name": "Ada"} -> "Hello, Ada!";
// - `now`: runs `date -u` through the host's `sessions` and waits for it with
//   a timeout (`runAndWait`). The manifest (example_js.toml) grants exactly
//   `date -u`.

import {
  READ_ONLY_PROCESS,
  describeError,
  error,
  invalidArguments,
  runAndWait,
  sessions,
  startRequest,
  text,
  toolSpec,
  unknownTool,
} from './toolhost.js';

// How long `now` waits for `date` before giving up (ms).
const WAIT_MS = 5000;

function now(toolCallId) {
  let outcome;
  try {
    outcome = runAndWait(startRequest('date -u', { toolCallId }), WAIT_MS);
  } catch (e) {
    // Refused (no exec grant, the policy denied it, nobody approved an `ask`)
    // or another session error: show it to the agent.
    return error(describeError(e));
  }
  if (outcome.timedOut) {
    sessions.kill(outcome.id, undefined);
    return error(`\`date\` did not finish within ${WAIT_MS} ms`);
  }
  const structured = { exit_code: outcome.exitCode ?? null, session: outcome.id };
  const out = outcome.snapshot.outputTail.trimEnd();
  return outcome.success ? text(out, structured) : error(out, structured);
}

// The exported `tool` interface: an object with the interface's functions.
export const tool = {
  describe() {
    return [
      toolSpec('greet', 'Greets someone by name. Pure: runs nothing.', {
        type: 'object',
        properties: { name: { type: 'string' } },
        required: ['name'],
      }),
      toolSpec(
        'now',
        'Runs `date -u` on the host and returns the current UTC time.',
        { type: 'object', properties: {} },
        READ_ONLY_PROCESS,
      ),
    ];
  },

  call(call) {
    let args;
    try {
      args = JSON.parse(call.arguments);
    } catch (e) {
      throw invalidArguments(String(e));
    }
    switch (call.name) {
      case 'greet':
        if (typeof args.name !== 'string') throw invalidArguments('`name` must be a string');
        return text(`Hello, ${args.name}!`, { greeting: `Hello, ${args.name}!` });
      case 'now':
        return now(call.toolCallId);
      default:
        throw unknownTool(call.name);
    }
  },
};
