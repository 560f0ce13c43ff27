"""``OpenEnvTransport``: an env served over OpenEnv's protocol, reached over WebSocket.

One connection is one server session, hence one env on the server: ``start`` opens a fresh one
(closing the last), ``call`` sends OpenEnv's ``reset`` / ``step`` messages and reads the answer
(the wire format: ``agentgym.vector.protocol``). The client is ``websockets`` alone: importing
openenv-core's client takes seconds (it imports its Gradio UI), and a trainer needs four message
types of it.

A server that cannot be reached, refuses a session (at capacity), drops the connection or sends
something that is not JSON raises ``InfraError`` (the connection is dropped); a call cancelled
by its caller's deadline abandons the connection, whose reply may still be in flight. An
exception in the served env raises ``RemoteEnvError`` (``EnvStateError`` for out-of-order
calls). An observation from an OpenEnv server that is not agentgym's becomes one user message
(its one text field, else its JSON), the raw one ``info["observation"]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, cast
from urllib.parse import urlsplit

from agentgym.core.aio import deadline
from agentgym.core.env import StepResult
from agentgym.core.errors import ConfigError, EnvStateError, InfraError
from agentgym.core.info import TOOLS
from agentgym.core.jsonsafe import json_safe
from agentgym.core.types import Observation, user
from agentgym.vector.protocol import ACTION_FIELD, CAPACITY_REACHED, ws_url
from agentgym.vector.proxy import Description, RemoteEnvError

__all__ = ["OpenEnvTransport"]


def _server_error(data: dict[str, Any]) -> Exception:
    code, message = data.get("code", "UNKNOWN"), str(data.get("message", ""))
    if code == CAPACITY_REACHED:
        return InfraError(
            f"the server refused a session: {message}. Fix: start it with a larger --num-envs, "
            "or run fewer envs against it"
        )
    if code in ("EXECUTION_ERROR", "VALIDATION_ERROR", "UNKNOWN_TYPE"):
        if message.startswith("EnvStateError:"):
            return EnvStateError(f"the served env: {message}")
        return RemoteEnvError(f"the served env failed ({code}): {message}")
    return InfraError(f"the server failed ({code}): {message}")


def _text_of(observation: dict[str, Any]) -> str:
    """A foreign server's observation as text: its one string field, else its JSON."""
    texts = [v for v in observation.values() if isinstance(v, str)]
    if len(texts) == 1:
        return texts[0]
    return json.dumps(observation, ensure_ascii=False, sort_keys=True)


def _unpack(payload: dict[str, Any]) -> StepResult:
    obs = payload.get("observation") or {}
    reward = float(payload.get("reward") or 0.0)
    done = bool(payload.get("done"))
    if isinstance(obs.get("messages"), list) and isinstance(obs.get("info"), dict):
        messages = cast(Observation, tuple(dict(m) for m in obs["messages"]))
        terminated = bool(obs.get("terminated", done))
        return messages, reward, terminated, bool(obs.get("truncated", False)), dict(obs["info"])
    # Another OpenEnv server: its observation as one user message, the raw one in info.
    return (user(_text_of(obs)),), reward, done, False, {"observation": obs}


def _message(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    if method == "reset":
        data = {k: v for k, v in kwargs.items() if v is not None}  # seed, options
        return {"type": "reset", "data": json_safe(data)}
    if method == "step":
        (action,) = args
        return {"type": "step", "data": {ACTION_FIELD: json_safe(action)}}
    raise ConfigError("method", method, "is not a call of an OpenEnv session", "call reset or step")


class OpenEnvTransport:
    """A ``Transport`` to the env of one session of the OpenEnv server at ``url``.

    Args:
        url: the server (``http://host:port`` or ``ws://host:port/ws``).
        connect_timeout: seconds to open a connection (and to close one).
        max_message_bytes: largest message accepted from the server.
    """

    def __init__(
        self, url: str, *, connect_timeout: float = 30.0, max_message_bytes: int = 100 * 2**20
    ) -> None:
        self.name = self.url = url
        self.connect_timeout, self.max_message_bytes = connect_timeout, max_message_bytes
        self._ws: Any = None
        self._ws_loop: asyncio.AbstractEventLoop | None = None
        self._closing: set[asyncio.Task[None]] = set()

    async def start(self) -> Description:
        from websockets.exceptions import WebSocketException

        await self.close()
        try:
            await self._connect()
        except (OSError, WebSocketException) as e:
            raise InfraError(f"{type(e).__name__}: {e}") from e
        return {}

    def alive(self) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return self._ws is not None and self._ws_loop is loop

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        from websockets.exceptions import WebSocketException

        try:
            result = _unpack(await self._request(_message(method, args, kwargs)))
        except asyncio.CancelledError:
            self._abandon()
            raise
        except InfraError:
            await self.close()
            raise
        except (OSError, WebSocketException) as e:
            await self.close()
            raise InfraError(f"{type(e).__name__}: {e}") from e
        if method == "step":
            return result
        result[4].setdefault(TOOLS, [])
        return result[0], result[4]

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None and self._ws_loop is asyncio.get_running_loop():
            await self._quiet_close(ws)

    async def _connect(self) -> None:
        from websockets.asyncio.client import connect

        host = urlsplit(self.url).hostname or ""
        loopback = host in ("localhost", "::1") or host.startswith("127.")
        self._ws = await connect(
            ws_url(self.url),
            open_timeout=self.connect_timeout,
            max_size=self.max_message_bytes,
            proxy=None if loopback else True,
        )
        self._ws_loop = asyncio.get_running_loop()

    def _abandon(self) -> None:
        """Drop the connection without waiting (a cancelled call left a reply in flight)."""
        ws, self._ws = self._ws, None
        if ws is not None and self._ws_loop is asyncio.get_running_loop():
            task = asyncio.get_running_loop().create_task(self._quiet_close(ws))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _quiet_close(self, ws: Any) -> None:
        with contextlib.suppress(Exception):
            async with deadline(self.connect_timeout, "closing the session"):
                await ws.send(json.dumps({"type": "close"}))
                await ws.close()

    async def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        if self._ws is None or self._ws_loop is not asyncio.get_running_loop():
            raise InfraError("the connection to the server was lost, and the episode's session")
        from websockets.exceptions import ConnectionClosed

        unsent: ConnectionClosed | None = None
        try:
            await self._ws.send(json.dumps(message, ensure_ascii=False))
        except ConnectionClosed as e:
            # A refused session (capacity) is an error message and a close sent before any
            # request: the close fails the send, and the reason waits unread behind it.
            unsent = e
        try:
            reply = json.loads(await self._ws.recv())
        except ConnectionClosed:
            if unsent is not None:
                raise unsent from None
            raise
        except json.JSONDecodeError as e:
            raise InfraError(f"the server sent something that is not JSON: {e}") from e
        if reply.get("type") == "error":
            raise _server_error(reply.get("data") or {})
        if unsent is not None:
            raise unsent
        return dict(reply.get("data") or {})
