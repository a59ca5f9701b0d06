#!/usr/bin/env python3
"""List every tool of MCP endpoints with the official Python MCP SDK.

Usage: list_tools.py session|stateless URL...

  session    the initialize handshake at protocol 2025-06-18 (the SDK's own
             choice would be 2025-11-25), over one Mcp-Session-Id session;
             results arrive as SSE events, each held to the SDK's 1 MiB
             event limit.
  stateless  the SDK's default `Client(url)`, which discovers the server's
             2026-07-28 support (`server/discover`) and sends each request
             on its own, without a session.

For each URL, pages through tools/list (following nextCursor) and prints,
as one JSON document on stdout:

  {"results": [{"url": URL, "protocol": VERSION,
                "pages": [[tool, ...], ...]} | {"url": URL, "error": TEXT}]}

Each tool is the SDK's parsed `Tool` dumped back to JSON (by alias,
without unset fields): what the client received, for the caller to
measure. A failing URL is reported and the others still run; the exit
status is 0 unless the arguments are wrong.
"""

import asyncio
import json
import sys
import traceback

import mcp.client.session
from mcp import Client, ClientSession, types
from mcp.client.streamable_http import streamable_http_client

SESSION_PROTOCOL = "2025-06-18"


def dump(tool: types.Tool) -> dict:
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)


async def list_on_session(url: str) -> dict:
    # The SDK always offers its newest handshake version; this is the only
    # way to make it ask for an older one.
    mcp.client.session.LATEST_HANDSHAKE_VERSION = SESSION_PROTOCOL
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            pages = []
            cursor = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                pages.append([dump(t) for t in page.tools])
                cursor = page.next_cursor
                if not cursor:
                    break
            return {"url": url, "protocol": init.protocol_version, "pages": pages}


async def list_stateless(url: str) -> dict:
    async with Client(url) as client:
        pages = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            pages.append([dump(t) for t in page.tools])
            cursor = page.next_cursor
            if not cursor:
                break
        return {"url": url, "protocol": client.protocol_version, "pages": pages}


def describe(error: BaseException) -> str:
    """The innermost errors of `error` (anyio wraps them in groups)."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(e) for e in error.exceptions)
    return "".join(traceback.format_exception_only(type(error), error)).strip()


async def main(mode: str, urls: list[str]) -> None:
    run = {"session": list_on_session, "stateless": list_stateless}[mode]
    results = []
    for url in urls:
        try:
            results.append(await run(url))
        except BaseException as e:  # noqa: BLE001 - reported per URL
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            results.append({"url": url, "error": describe(e)})
    json.dump({"results": results}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("session", "stateless"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
