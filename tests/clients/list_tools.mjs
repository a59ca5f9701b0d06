// List every tool of MCP endpoints with the official TypeScript MCP SDK.
//
// Usage: node list_tools.mjs URL...
//
// Run it from a copy in the directory whose node_modules holds
// @modelcontextprotocol/sdk (toolgate_tests::tools::sdk_clients().node_dir):
// ES modules resolve packages from the script's own location.
//
// For each URL: connects over Streamable HTTP with the SDK's defaults (the
// initialize handshake, one session), pages through tools/list following
// nextCursor, and prints one JSON document on stdout:
//
//   {"results": [{"url": URL, "protocol": VERSION, "pages": [[tool, ...], ...]}
//                | {"url": URL, "error": TEXT}]}
//
// Each tool is as the SDK parsed it. A failing URL is reported and the
// others still run; the exit status is 0 unless the arguments are wrong.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

async function listAll(url) {
  const client = new Client({ name: "toolgate-list-tools", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  try {
    const pages = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined);
      pages.push(page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return { url, protocol: transport.protocolVersion ?? null, pages };
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
}

const urls = process.argv.slice(2);
if (urls.length === 0) {
  console.error("usage: node list_tools.mjs URL...");
  process.exit(2);
}
const results = [];
for (const url of urls) {
  try {
    results.push(await listAll(url));
  } catch (e) {
    results.push({ url, error: String(e?.stack ?? e) });
  }
}
process.stdout.write(JSON.stringify({ results }));
