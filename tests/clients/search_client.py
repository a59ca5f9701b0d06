#!/usr/bin/env python3
"""Use a toolgate endpoint in search mode with the official Python MCP SDK.

Usage: search_client.py URL QUERY TOOL ARGUMENTS_JSON

Connects over Streamable HTTP (URL ends in `?mode=search`), checks that
tools/list holds the three meta-tools, finds TOOL with search_tools QUERY
(it must be the first result, with its input schema), and runs it through
call_tool with ARGUMENTS_JSON. Prints the tool's structured result as JSON
on the last line; exits non-zero on any failure, naming what failed.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

META = ["search_tools", "describe_tool", "call_tool"]


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


async def run(url: str, query: str, tool: str, arguments: dict) -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            names = [t.name for t in listed.tools]
            check(names[:3] == META, f"tools/list does not start with the meta-tools: {names}")
            check(listed.next_cursor is None, "search mode lists one page")

            found = await session.call_tool("search_tools", {"query": query, "limit": 5})
            check(not found.is_error, f"search_tools failed: {found.content}")
            hits = (found.structured_content or {}).get("tools", [])
            check(bool(hits), f"search_tools found nothing for {query!r}")
            check(hits[0]["name"] == tool, f"first result is {hits[0]['name']}, not {tool}: {hits}")
            check("inputSchema" in hits[0], f"the first result has no input schema: {hits[0]}")

            result = await session.call_tool("call_tool", {"name": tool, "arguments": arguments})
            check(not result.is_error, f"call_tool {tool} failed: {result.content}")
            print(json.dumps(result.structured_content))


def main() -> None:
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    url, query, tool, arguments = sys.argv[1:]
    try:
        asyncio.run(run(url, query, tool, json.loads(arguments)))
    except AssertionError as e:
        sys.exit(f"FAILED: {e}")


if __name__ == "__main__":
    main()
