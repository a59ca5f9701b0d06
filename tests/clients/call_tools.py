#!/usr/bin/env python3
"""Call tools with the official Python MCP SDK and print what it returned.

Usage: call_tools.py URL CALLS

URL is a Streamable HTTP endpoint; CALLS is a JSON list of
{"name": ..., "arguments": {...}}. Lists every tool first (following
pagination), so the SDK knows each tool's outputSchema and checks results
against it, then makes the calls in order. Prints one JSON object:

  {"tools": [{"name": ..., "outputSchema": {...} | null}, ...],
   "calls": [{"name": ..., "accepted": true, "isError": bool,
              "structuredContent": ... | null, "text": "..."}
             | {"name": ..., "accepted": false, "error": "..."}, ...]}

"accepted": false means the SDK raised instead of returning the result
(for instance a result without the structuredContent its outputSchema
promises). Exits non-zero only when the session itself fails.
tests/clients/call_tools.mjs is the same for the TypeScript SDK.
"""

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


async def run(url: str, calls: list) -> dict:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools: list[types.Tool] = []
            cursor = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            report = {
                "tools": [{"name": t.name, "outputSchema": t.output_schema} for t in tools],
                "calls": [],
            }
            for c in calls:
                try:
                    result = await session.call_tool(c["name"], c.get("arguments") or {})
                except Exception as e:  # noqa: BLE001 - what the SDK refused is the finding
                    report["calls"].append(
                        {"name": c["name"], "accepted": False, "error": f"{type(e).__name__}: {e}"}
                    )
                    continue
                text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
                report["calls"].append(
                    {
                        "name": c["name"],
                        "accepted": True,
                        "isError": bool(result.is_error),
                        "structuredContent": result.structured_content,
                        "text": text,
                    }
                )
            return report


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    report = asyncio.run(asyncio.wait_for(run(sys.argv[1], json.loads(sys.argv[2])), timeout=60))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
