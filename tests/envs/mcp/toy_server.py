"""A small MCP server for the MCP env's tests: every kind of result, failure and hang.

Run as ``python toy_server.py`` (stdio) or ``python toy_server.py --http PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("toy", log_level="WARNING")
_counter = 0
_arrived = 0
_all_arrived = asyncio.Event()


@server.tool()
async def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
async def add(a: int, b: int) -> dict[str, int]:
    """Add two integers; the result is structured."""
    return {"sum": a + b}


@server.tool()
async def fail(message: str) -> str:
    """Fail with the message."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Wait without blocking the server."""
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
async def freeze(seconds: float) -> str:
    """Block the whole server (a hung server)."""
    time.sleep(seconds)
    return "thawed"


@server.tool()
async def crash() -> str:
    """Kill the server process."""
    os._exit(3)


@server.tool()
async def count() -> int:
    """Count the calls this server process has had."""
    global _counter
    _counter += 1
    return _counter


@server.tool()
async def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
async def barrier(parties: int) -> str:
    """Return "together" once `parties` calls are waiting at once, "alone" after 10 s."""
    global _arrived
    _arrived += 1
    if _arrived >= parties:
        _all_arrived.set()
    try:
        await asyncio.wait_for(_all_arrived.wait(), 10)
    except TimeoutError:
        return "alone"
    return "together"


@server.tool()
async def picture() -> Image:
    """A 1x1 PNG."""
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    return Image(data=png, format="png")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    args = parser.parse_args()
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", port=args.http)
