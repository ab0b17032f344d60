// Drives `toolhost serve` with the official TypeScript SDK v2 client
// (`@modelcontextprotocol/client`, pinned in package.json), for
// tests/all/ts_client.rs. One argument: a JSON object
//   { "transport": "stdio", "command": "...", "args": [...] }
//   or { "transport": "http", "url": "http://127.0.0.1:PORT/mcp" }
//   plus "mode": "legacy" | "auto" | "<version>" (a pin), "steps", and
//   optionally "elicitation": "accept" | "decline" (declares the capability
//   and answers every form so; in the modern era the client answers an
//   input_required result through the same handler and retries).
// Each step is a `tools/call` ({ "tool", "arguments" }) whose result (or
// error) is recorded; `"then"` names a structuredContent field whose value
// is put into the next step's arguments under the same key (a background
// session's `session_id`). Prints one JSON object on stdout:
//   { era, version, tools: [names], results: [{ text, structured, isError,
//     resultType } | { error: { code, message } }], asked: [messages] }
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const spec = JSON.parse(process.argv[2]);
const options = { capabilities: {} };
if (spec.mode === 'auto' || spec.mode === 'legacy') {
  options.versionNegotiation = { mode: spec.mode };
} else if (spec.mode) {
  options.versionNegotiation = { mode: { pin: spec.mode } };
}
if (spec.elicitation) {
  options.capabilities.elicitation = {};
}
const client = new Client({ name: 'toolhost-ts-test', version: '1.0.0' }, options);
// "elicitation": "accept" answers every form with decision allow_once,
// "decline" declines it; the messages asked are reported as `asked`.
const asked = [];
if (spec.elicitation) {
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push(request.params.message);
    return spec.elicitation === 'accept'
      ? { action: 'accept', content: { decision: 'allow_once' } }
      : { action: 'decline' };
  });
}
const transport =
  spec.transport === 'http'
    ? new StreamableHTTPClientTransport(new URL(spec.url))
    : new StdioClientTransport({ command: spec.command, args: spec.args, stderr: 'ignore' });

await client.connect(transport);
const out = {
  era: client.getProtocolEra() ?? null,
  version: client.getNegotiatedProtocolVersion() ?? null,
  tools: [],
  results: [],
};
const listed = await client.listTools();
out.tools = listed.tools.map((t) => t.name);
let carry = {};
for (const step of spec.steps ?? []) {
  const args = { ...step.arguments, ...carry };
  carry = {};
  try {
    const r = await client.callTool({ name: step.tool, arguments: args });
    out.results.push({
      text: r.content?.[0]?.text ?? null,
      structured: r.structuredContent ?? null,
      isError: r.isError ?? false,
      resultType: r.resultType ?? null,
    });
    if (step.then && r.structuredContent) {
      carry[step.then] = r.structuredContent[step.then];
    }
  } catch (e) {
    out.results.push({ error: { code: e.code ?? null, message: String(e.message ?? e) } });
  }
}
out.asked = asked;
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
