"""Connections to MCP servers with the official ``mcp`` SDK, every await under a deadline.

``ServerSession`` is one connected ``mcp.Client``. The SDK's client is an anyio context manager
that must be entered and left by the same task, while an env's ``reset``/``step`` each run as a
task of their own (and its calls of one turn as several); so a session runs the client inside an
owner task that enters it, waits to be told to stop, and leaves it. Callers from any task of
the same event loop send requests through it concurrently.

``ServerGroup`` is the env's view: the sessions of all configured servers, their tools merged
under one namespace, calls routed to the right server.

Failures are sorted here. A result with ``isError`` and a protocol error the server answers with
(bad arguments, unknown tool) are the model's business and come back as ``CallOutcome`` with
``error=True``. A server that cannot be reached, closed the connection, crashed, or answers
nothing raises ``ServerFailed`` (an ``InfraError``): the env reports it as ``infra_error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, TextIO

from agentgym.core.aio import deadline
from agentgym.core.errors import DeadlineExceeded, InfraError
from agentgym.core.jsonsafe import json_safe
from agentgym.core.tools import clip
from agentgym.envs.mcp.config import ServerConfig
from agentgym.extras import pip_install

__all__ = [
    "EPISODE_META_KEY",
    "CallOutcome",
    "RemoteTool",
    "ServerFailed",
    "ServerGroup",
    "ServerSession",
    "require_mcp",
]

log = logging.getLogger(__name__)

MCP_INSTALL = pip_install("mcp")
EPISODE_META_KEY = "agentgym/episode"
"""``_meta`` key of every tool call: the episode it belongs to. A server may keep state per
episode under it (the shipped store server does); others ignore it."""

# JSON-RPC codes of answers the server did send: the request was bad, the server is fine.
_CONNECTION_CLOSED = -32000
_NAME_RE = re.compile(r"[^a-zA-Z0-9_-]")


class ServerFailed(InfraError):
    """An MCP server could not be reached, crashed, closed the connection or hung."""


def require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        raise ImportError(f"MCP-v0 needs the mcp SDK. Fix: {MCP_INSTALL}") from e


@dataclass(frozen=True)
class RemoteTool:
    """A tool as a server lists it, under the name the model sees."""

    name: str
    remote_name: str
    server: int
    description: str
    parameters: dict[str, Any]

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json.loads(json.dumps(self.parameters)),
            },
        }


@dataclass(frozen=True)
class CallOutcome:
    """A tool call's answer: text for the model, the structured result, whether it failed."""

    text: str
    structured: Any = None
    error: bool = False


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind}: {getattr(block, 'mime_type', '?')}, about {size} bytes]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[resource: {resource.uri}]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}]"
    return f"[{kind or 'unknown'} content]"


def outcome_of(result: Any, limit: int) -> CallOutcome:
    """A ``CallToolResult`` as text: its content blocks, or its structured content as JSON when
    there are none; clipped to ``limit`` characters."""
    text = "\n".join(_block_text(block) for block in result.content)
    structured = result.structured_content
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, default=json_safe)
    return CallOutcome(clip(text, limit), structured, bool(result.is_error))


def _failure(config: ServerConfig, doing: str, error: BaseException) -> ServerFailed:
    detail = clip(str(error) or type(error).__name__, 300)
    return ServerFailed(f"MCP server {config.name!r} failed while {doing}: {detail}")


class ServerSession:
    """One connected MCP client session, owned by a task of its own (see the module doc).

    Args:
        config: the server.
        connect_timeout: seconds to start the server and finish the handshake.
        close_timeout: seconds to shut it down (the SDK closes stdin, then SIGTERMs and SIGKILLs
            the server's process group; this bounds the whole).
        stderr: where a stdio server's stderr goes (``None``: discarded).
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        connect_timeout: float = 30.0,
        close_timeout: float = 10.0,
        stderr: TextIO | None = None,
    ) -> None:
        self.config = config
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        self._stderr = stderr
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broken = False

    @property
    def alive(self) -> bool:
        owner = self._owner
        return self._client is not None and owner is not None and not owner.done()

    async def start(self) -> None:
        """Start the server (stdio) or connect (HTTP) and finish the handshake."""
        require_mcp()
        self.loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = self.loop.create_future()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp {self.config.name}")
        try:
            async with deadline(self.connect_timeout, f"connecting to {self.config.name!r}"):
                await asyncio.shield(ready)
        except DeadlineExceeded as e:
            await self.close()
            raise ServerFailed(f"MCP server {self.config.name!r}: {e}") from e
        except Exception as e:
            await self.close()
            if isinstance(e, ServerFailed):
                raise
            raise _failure(self.config, "starting", e) from e

    async def _own(self, ready: asyncio.Future[None]) -> None:
        try:
            async with AsyncExitStack() as stack:
                self._client = await stack.enter_async_context(await self._make_client(stack))
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else ServerFailed(repr(e)))
            elif not self._stop.is_set():
                log.warning("MCP server %r: connection ended: %r", self.config.name, e)
            if not isinstance(e, Exception):
                raise
        finally:
            self._client = None

    async def _make_client(self, stack: AsyncExitStack) -> Any:
        from mcp import Client, StdioServerParameters

        config = self.config
        if config.command is not None:
            errlog = self._stderr
            if errlog is None:
                errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env) or None,
                cwd=config.cwd,
            )
            from mcp.client.stdio import stdio_client

            return Client(stdio_client(params, errlog=errlog))
        assert config.url is not None
        if not config.headers:
            return Client(config.url)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = await stack.enter_async_context(create_mcp_http_client(dict(config.headers)))
        return Client(streamable_http_client(config.url, http_client=http))

    def _connected(self) -> Any:
        if not self.alive:
            self.broken = True
            raise ServerFailed(f"MCP server {self.config.name!r} is not connected")
        return self._client

    async def list_tools(self, timeout: float) -> list[Any]:
        """Every tool the server lists (all pages)."""
        client = self._connected()
        tools: list[Any] = []
        cursor: str | None = None
        try:
            async with deadline(timeout, f"listing the tools of {self.config.name!r}"):
                for _ in range(1000):  # a server whose cursor never ends cannot hang us
                    page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except ServerFailed:
            self.broken = True
            raise
        except Exception as e:
            self.broken = True
            raise _failure(self.config, "listing tools", e) from e
        return tools

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float,
        meta: Mapping[str, Any] | None = None,
        limit: int = 16_000,
    ) -> CallOutcome:
        """Call tool ``name``. Raises ``DeadlineExceeded`` past ``timeout`` (the server may be
        fine: see ``responsive``) and ``ServerFailed`` when the connection is gone."""
        from mcp import MCPError

        client = self._connected()
        try:
            async with deadline(timeout, f"tool {name}"):
                result = await client.call_tool(name, dict(arguments), meta=dict(meta or {}))
        except DeadlineExceeded:
            raise
        except MCPError as e:
            if e.code == _CONNECTION_CLOSED or not self.alive:
                self.broken = True
                raise _failure(self.config, f"calling {name}", e) from e
            return CallOutcome(clip(f"{e.message} (MCP error {e.code})"), None, True)
        except Exception as e:  # transport errors, a result that breaks the protocol
            self.broken = True
            raise _failure(self.config, f"calling {name}", e) from e
        return outcome_of(result, limit)

    async def responsive(self, timeout: float) -> bool:
        """Whether the server still answers a request (a tools listing) within ``timeout``."""
        try:
            await self.list_tools(timeout)
        except (ServerFailed, DeadlineExceeded):
            self.broken = True
            return False
        return True

    async def close(self) -> None:
        """Shut the session down (a stdio server's whole process group goes with it)."""
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._stop.set()
        try:
            async with deadline(self.close_timeout, f"closing {self.config.name!r}"):
                await asyncio.shield(owner)
        except DeadlineExceeded:
            log.warning("MCP server %r did not close in time; cancelling", self.config.name)
            owner.cancel()
            with contextlib.suppress(BaseException):
                await owner
        except Exception as e:  # the connection had already failed; nothing left to release
            log.debug("MCP server %r closed with %r", self.config.name, e)


def _model_name(raw: str, prefix: str, taken: set[str]) -> str:
    """A name the chat template and ``Tool`` accept: ``[a-zA-Z0-9_-]{1,64}``, unique."""
    base = _NAME_RE.sub("_", prefix + raw)[:64] or "tool"
    name, k = base, 2
    while name in taken:
        name = f"{base[: 64 - len(str(k)) - 1]}_{k}"
        k += 1
    return name


class ServerGroup:
    """The sessions of all configured servers, started and closed together."""

    def __init__(self, configs: Sequence[ServerConfig], **session_kwargs: Any) -> None:
        self.sessions = [ServerSession(c, **session_kwargs) for c in configs]

    @property
    def broken(self) -> bool:
        return any(s.broken or not s.alive for s in self.sessions)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self.sessions[0].loop

    async def start(self) -> None:
        results = await asyncio.gather(*(s.start() for s in self.sessions), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.close()
            raise errors[0]

    async def list_tools(self, timeout: float) -> tuple[RemoteTool, ...]:
        """Every server's tools, renamed where needed to be valid and unique."""
        listed = await asyncio.gather(*(s.list_tools(timeout) for s in self.sessions))
        tools: list[RemoteTool] = []
        taken: set[str] = set()
        for index, (session, server_tools) in enumerate(zip(self.sessions, listed, strict=True)):
            for tool in server_tools:
                name = _model_name(tool.name, session.config.prefix, taken)
                taken.add(name)
                schema = dict(tool.input_schema or {})
                schema.setdefault("type", "object")
                description = tool.description or tool.title or tool.name
                tools.append(RemoteTool(name, tool.name, index, description, schema))
        return tuple(tools)

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sessions))
