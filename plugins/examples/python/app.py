"""Example toolhost tool plugin in Python (contract v0.1.0), built by build.sh.

Two tools:
- `greet` (pure): {"name": "Ada"} -> "Hello, Ada!";
- `now`: runs `date -u` through the host's `sessions` and waits for it with a
  timeout (`run_and_wait`). The manifest (example_python.toml) grants exactly
  `date -u`.
"""

import json

import toolhost_sdk as sdk
from toolhost_sdk import Err, ToolCall, ToolError_InvalidArguments, ToolError_UnknownTool

# How long `now` waits for `date` before giving up (ms).
WAIT_MS = 5_000


class Tool(sdk.exports.Tool):
    """componentize-py looks for a class named after the exported interface."""

    def describe(self):
        return [
            sdk.tool_spec(
                "greet",
                "Greets someone by name. Pure: runs nothing.",
                {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            ),
            sdk.tool_spec(
                "now",
                "Runs `date -u` on the host and returns the current UTC time.",
                {"type": "object", "properties": {}},
                hints=sdk.READ_ONLY_PROCESS,
            ),
        ]

    def call(self, call: ToolCall):
        try:
            args = json.loads(call.arguments)
        except ValueError as e:
            raise Err(ToolError_InvalidArguments(str(e)))
        if call.name == "greet":
            name = args.get("name")
            if not isinstance(name, str):
                raise Err(ToolError_InvalidArguments("`name` must be a string"))
            return sdk.text(f"Hello, {name}!", {"greeting": f"Hello, {name}!"})
        if call.name == "now":
            return now(call.tool_call_id)
        raise Err(ToolError_UnknownTool(call.name))


def now(tool_call_id: str):
    request = sdk.start_request("date -u", tool_call_id=tool_call_id)
    try:
        outcome = sdk.run_and_wait(request, WAIT_MS)
    except Err as e:
        # Refused (no exec grant, the policy denied it, nobody approved an
        # `ask`) or another session error: show it to the agent.
        return sdk.error(sdk.describe_error(e))
    if outcome.timed_out:
        sdk.sessions.kill(outcome.id, None)
        return sdk.error(f"`date` did not finish within {WAIT_MS} ms")
    structured = {"exit_code": outcome.exit_code, "session": outcome.id}
    out = outcome.snapshot.output_tail.rstrip()
    return sdk.text(out, structured) if outcome.success else sdk.error(out, structured)
