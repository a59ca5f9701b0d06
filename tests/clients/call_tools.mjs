// Call tools with the official TypeScript MCP SDK and print what it
// returned: tests/clients/call_tools.py for the TypeScript SDK, with the
// same arguments and output.
//
// Usage: node call_tools.mjs URL CALLS
//
// Run it from a directory whose node_modules holds @modelcontextprotocol/sdk
// (toolgate_tests::tools::sdk_clients().node_dir, or a copy beside a link to
// its node_modules): Node resolves imports from the script's own directory.
// Lists every tool first, which is what makes the SDK check results against
// each tool's outputSchema.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, callsJson] = process.argv.slice(2);
if (!url || !callsJson) {
  console.error("usage: node call_tools.mjs URL CALLS");
  process.exit(2);
}
const calls = JSON.parse(callsJson);
// Bounds the whole run, so a hung server cannot hang the test.
setTimeout(() => {
  console.error("call_tools.mjs: timed out");
  process.exit(3);
}, 60_000).unref();

const client = new Client({ name: "toolgate-tests", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : undefined);
  tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);

const report = {
  tools: tools.map((t) => ({ name: t.name, outputSchema: t.outputSchema ?? null })),
  calls: [],
};
for (const c of calls) {
  try {
    const result = await client.callTool({ name: c.name, arguments: c.arguments ?? {} });
    report.calls.push({
      name: c.name,
      accepted: true,
      isError: result.isError === true,
      structuredContent: result.structuredContent ?? null,
      text: result.content
        .filter((b) => b.type === "text")
        .map((b) => b.text)
        .join("\n"),
    });
  } catch (e) {
    // What the SDK refused is the finding.
    report.calls.push({ name: c.name, accepted: false, error: String(e) });
  }
}
await client.close();
console.log(JSON.stringify(report));
