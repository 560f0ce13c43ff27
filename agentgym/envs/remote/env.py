"""``RemoteEnv`` (``agentgym/Remote-v0``): play an env that another process or machine serves."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import threading
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast
from urllib.parse import urlsplit

from agentgym.core.aio import deadline
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.errors import ConfigError, EnvStateError, Error, InfraError
from agentgym.core.info import ERROR, INFRA_ERROR, TOOLS, TRUNCATION_REASON
from agentgym.core.types import Action, Observation, user
from agentgym.envs.remote.launch import LocalServer, server_status, start_server
from agentgym.envs.remote.protocol import ACTION_FIELD, CAPACITY_REACHED, jsonable, ws_url
from agentgym.envs.validate import choice, seconds
from agentgym.extras import pip_install

__all__ = ["DEFAULT_ENV_ID", "RemoteEnv", "RemoteEnvError"]

DEFAULT_ENV_ID = "agentgym/FrozenLake-v0"
LOCAL_SESSIONS = 256
INSTALL = pip_install("openenv")


class RemoteEnvError(Error):
    """The served env raised an exception (a bug or a bad argument there, not a failure of the
    connection); the message is the server's."""


@dataclass
class _Episode:
    over: bool = False
    error: str | None = None  # the reset failed outside the model


_LOCAL: dict[str, LocalServer] = {}
_LOCAL_LOCK = threading.Lock()


def _local_server(env_id: str, env_kwargs: dict[str, Any]) -> LocalServer:
    """The server of ``env_id`` this process started, shared by its Remote-v0 envs."""
    key = json.dumps([env_id, jsonable(env_kwargs)], sort_keys=True)
    with _LOCAL_LOCK:
        server = _LOCAL.get(key)
        if server is None or server.process.poll() is not None:
            server = start_server(env_id, num_envs=LOCAL_SESSIONS, env_kwargs=env_kwargs)
            _LOCAL[key] = server
        return server


@atexit.register
def _stop_local_servers() -> None:
    with _LOCAL_LOCK:
        for server in _LOCAL.values():
            server.close()
        _LOCAL.clear()


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


def _infra_info(error: str) -> dict[str, Any]:
    return {INFRA_ERROR: True, ERROR: error, TRUNCATION_REASON: "infra_error"}


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class RemoteEnv(AgentEnv):
    """An env served by ``agentgym serve-env`` (or any OpenEnv server), played over WebSocket.

    Description:
        Browsers and containers can live on other machines than the trainer: ``agentgym
        serve-env ENV_ID`` serves a registered env over OpenEnv's protocol
        (``agentgym.vector.serve_env``), and this env plays it, one server session per episode
        by default. With ``url=None`` the env starts such a server for ``env_id`` itself, in a
        child process on a free loopback port, shared by every Remote-v0 of this process with
        the same ``env_id`` and ``env_kwargs`` and stopped when the process exits.
        ``reset(seed=s)`` plays what the served env plays for ``s``; a ``reset()`` without a
        seed sends one drawn from this env's generator (with ``session="episode"``), so
        ``reset(seed=s)`` followed by ``reset()`` repeats too. The client
        speaks the protocol with ``websockets`` directly: importing openenv-core's client takes
        seconds (it imports its Gradio UI), and a trainer needs four message types of it.

    Observation:
        What the served env returns: its chat messages, unchanged. Infos cross as JSON: a
        tuple arrives as a list, a numpy number as a Python one, a non-finite float as None.
        From an OpenEnv server that is not agentgym's, the observation becomes one user message
        (its one text field, else its JSON) and the raw observation is ``info["observation"]``.

    Action:
        The model's text or an assistant message dict, sent as ``{"message": action}`` (the
        field OpenEnv's text envs read).

    Tools:
        The served env's, declared in ``info["tools"]`` on reset (``[]`` from a foreign
        server); the action space names none, so its samples are plain text.

    Reward:
        The served env's reward, unchanged.

    Episode end:
        As the served env's, including its step limit. A server that cannot be reached, refuses
        a session (at capacity), drops the connection or misses a deadline gives that episode
        ``info["infra_error"]`` True: a failed reset returns ``()`` with it (its ``error`` says
        why) and the next step ends the episode truncated with it; a failed step ends the
        episode truncated (``truncation_reason == "infra_error"``). The next reset connects
        afresh. An exception in the served env raises ``RemoteEnvError`` (``EnvStateError`` for
        out-of-order calls). Stepping an ended episode raises ``EnvStateError``.

    Sandbox: what is isolated and what is not:
        Whatever the served env isolates, on the server's machine. The connection is plain
        WebSocket without authentication: serve on loopback or a private network.

    Arguments:
        url: the server (``http://host:port`` or ``ws://host:port/ws``); ``None`` starts one.
        env_id: the env to serve when ``url`` is None (default ``agentgym/FrozenLake-v0``);
            with a ``url``, checked against the server's ``/status`` when it has one.
        env_kwargs: constructor arguments of the served env (only without ``url``).
        session: ``"episode"`` (a fresh server session, hence a fresh env, every reset) or
            ``"env"`` (one session for as long as it works).
        connect_timeout: seconds to open a connection. reset_timeout, step_timeout: seconds a
            reset (connecting included) or step may take, beyond the server's own deadlines.
        max_message_mb: largest message accepted from the server.
        render_mode: ``"ansi"`` / ``"human"``.

    Reset info keys: ``tools``, ``infra_error`` and ``error`` when the reset failed, and the
    served env's (see its docstring; FrozenLake-v0's by default: ``task_id``, ``map``,
    ``size``, ``max_turns``, ``state``, ``action_choices``); ``observation`` from a foreign
    server.
    Step info keys: the served env's (FrozenLake-v0's by default: ``success``,
    ``invalid_action``, ``reward_components``, ``position``, ``turn``, ``task_id``, ``state``,
    ``action_choices``, ``truncation_reason``); ``observation`` from a foreign server.

    Version history:
        v0: first version.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}  # type: ignore[misc]

    def __init__(
        self,
        *,
        url: str | None = None,
        env_id: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        session: Literal["episode", "env"] = "episode",
        connect_timeout: float = 30.0,
        reset_timeout: float = 180.0,
        step_timeout: float = 360.0,
        max_message_mb: float = 100.0,
        render_mode: str | None = None,
    ) -> None:
        try:
            import websockets  # noqa: F401
        except ImportError as e:
            raise ImportError(f"Remote-v0 needs the websockets package. Fix: {INSTALL}") from e
        super().__init__(render_mode=render_mode)
        choice("session", session, ("episode", "env"))
        self.session = session
        self.connect_timeout = seconds("connect_timeout", connect_timeout)
        self.reset_timeout = seconds("reset_timeout", reset_timeout)
        self.step_timeout = seconds("step_timeout", step_timeout)
        self.max_message_bytes = int(seconds("max_message_mb", max_message_mb) * 2**20)
        self.env_id: str | None
        if url is None:
            self.env_id = env_id or DEFAULT_ENV_ID
            self.url = _local_server(self.env_id, dict(env_kwargs or {})).url
        else:
            if env_kwargs:
                fix = "pass them to `agentgym serve-env --env-kwargs`, or drop url"
                raise ConfigError("env_kwargs", env_kwargs, "are the server's with a url", fix)
            self.env_id, self.url = env_id, url
            self._check_served(url, env_id)
        self._ws: Any = None
        self._ws_loop: asyncio.AbstractEventLoop | None = None
        self._episode: _Episode | None = None
        self._closing: set[asyncio.Task[None]] = set()

    def _check_served(self, url: str, env_id: str | None) -> None:
        if not url.startswith(("http://", "https://", "ws://", "wss://")):
            fix = "url='http://host:8000'"
            raise ConfigError("url", url, "is not an http(s):// or ws(s):// URL", fix)
        if env_id is None:
            return
        try:
            status = server_status(url, self.connect_timeout)
        except OSError:  # not up (yet): each episode's infra_error tells
            return
        served = (status or {}).get("env_id", env_id)
        if served != env_id:
            fix = f"pass env_id={served!r}, or the URL of a server of {env_id}"
            raise ConfigError("env_id", env_id, f"the server at {url} serves {served!r}", fix)

    # --- the connection ---------------------------------------------------------------------

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

    async def _disconnect(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None and self._ws_loop is asyncio.get_running_loop():
            await self._quiet_close(ws)

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

    async def _call(self, message: dict[str, Any], timeout: float, connect: bool) -> StepResult:
        """One request under ``timeout``; a failure outside the served env raises
        ``InfraError`` after dropping the connection."""
        from websockets.exceptions import WebSocketException

        try:
            async with deadline(timeout, f"{message['type']} at {self.url}"):
                if connect:
                    await self._disconnect()
                    await self._connect()
                return _unpack(await self._request(message))
        except asyncio.CancelledError:
            self._abandon()
            raise
        except (InfraError, OSError, WebSocketException) as e:
            await self._disconnect()
            raise InfraError(_describe(e)) from e

    # --- the env ----------------------------------------------------------------------------

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        self._episode = episode = _Episode()
        if seed is None and self.session == "episode":
            # A fresh server env per episode would draw from an unseeded generator: continue
            # this env's own seeded stream instead (reset(seed=s) then reset() repeats).
            seed = int(self.np_random.integers(2**31 - 1))
        data = {k: v for k, v in (("seed", seed), ("options", options)) if v is not None}
        fresh = (
            self.session == "episode"
            or self._ws is None
            or self._ws_loop is not asyncio.get_running_loop()
        )
        try:
            result = await self._call(
                {"type": "reset", "data": jsonable(data)}, self.reset_timeout, connect=fresh
            )
        except InfraError as e:
            episode.error = str(e)
            return (), {TOOLS: [], INFRA_ERROR: True, ERROR: episode.error}
        observation, info = result[0], result[4]
        info.setdefault(TOOLS, [])
        if info.get(INFRA_ERROR):  # the served env failed: its episode too; reconnect next time
            episode.error = str(info.get(ERROR, "the served env's reset failed"))
            await self._disconnect()
        return observation, info

    async def astep(self, action: Action) -> StepResult:
        episode = self._episode
        if episode is None or episode.over:
            when = "before reset()" if episode is None else "after the episode ended"
            raise EnvStateError(f"RemoteEnv.step() called {when}; call reset() first")
        if episode.error is not None:
            episode.over = True
            return (), 0.0, False, True, _infra_info(episode.error)
        message = {"type": "step", "data": {ACTION_FIELD: jsonable(action)}}
        try:
            result = await self._call(message, self.step_timeout, connect=False)
        except InfraError as e:
            episode.over = True
            return (), 0.0, False, True, _infra_info(str(e))
        except BaseException:
            episode.over = True
            raise
        episode.over = bool(result[2] or result[3])
        if result[4].get(INFRA_ERROR):  # the served env failed: the next reset reconnects
            await self._disconnect()
        return result

    async def aclose(self) -> None:
        try:
            await self._disconnect()
        finally:
            await super().aclose()
