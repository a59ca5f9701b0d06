#!/usr/bin/env python3
"""Drive a running `toolgate demo` with the official Python MCP SDK.

Usage: python_client.py http://127.0.0.1:PORT/mcp

Connects over Streamable HTTP, initializes, lists every tool (following
pagination), and calls the demo's pet store tools, checking each result.
Exits non-zero on any failure, naming what failed.
"""

import asyncio
import base64
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


async def run(url: str) -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            print(
                f"initialized: {init.server_info.name} {init.server_info.version}, "
                f"protocol {init.protocol_version}"
            )
            check(init.capabilities.tools is not None, "server does not advertise tools")

            tools: list[types.Tool] = []
            cursor = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            names = sorted(t.name for t in tools)
            print(f"tools/list: {names}")
            check("pets__fetch_pet" in names, f"pets__fetch_pet missing from {names}")
            fetch = next(t for t in tools if t.name == "pets__fetch_pet")
            check(
                "petId" in fetch.input_schema.get("properties", {}),
                f"pets__fetch_pet input schema lacks petId: {fetch.input_schema}",
            )

            result = await session.call_tool("pets__fetch_pet", {"petId": 1})
            check(not result.is_error, f"pets__fetch_pet failed: {result.content}")
            pet = result.structured_content
            check(
                isinstance(pet, dict) and pet.get("id") == 1 and pet.get("name") == "Rex",
                f"unexpected pet: {pet}",
            )
            print(f"tools/call pets__fetch_pet: {pet}")

            result = await session.call_tool("pets__fetch_pet", {"petId": 999})
            check(bool(result.is_error), "a missing pet is not an error")
            text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
            check("Pet not found" in text, f"404 result lacks the problem title: {text}")
            print("tools/call pets__fetch_pet (missing): isError, carries the title")

            result = await session.call_tool("pets__fetch_pet", {"petId": 0})
            check(bool(result.is_error), "petId 0 (below minimum) was accepted")
            print("tools/call pets__fetch_pet (invalid): isError")

            result = await session.call_tool("pets__get_pet_photo", {"petId": 1})
            check(not result.is_error, f"pets__get_pet_photo failed: {result.content}")
            images = [c for c in result.content if isinstance(c, types.ImageContent)]
            check(len(images) == 1, f"expected one image, got {result.content}")
            check(images[0].mime_type == "image/png", f"mimeType {images[0].mime_type}")
            check(
                base64.b64decode(images[0].data).startswith(PNG_SIGNATURE),
                "the image is not a PNG",
            )
            print("tools/call pets__get_pet_photo: image/png")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        asyncio.run(asyncio.wait_for(run(sys.argv[1]), timeout=60))
    except BaseException as e:  # noqa: BLE001 - any failure fails the check
        print(f"python MCP client: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("python MCP client: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
