"""``agentgym serve-env``: any registered env served over OpenEnv's protocol.

The command itself (arguments, uvicorn) is ``agentgym.vector.serve_env_cli``.

Built on openenv-core's own server (``HTTPEnvServer``), not a copy of its protocol: the routes,
message shapes, per-connection sessions, capacity refusal and idle reaping are OpenEnv's code,
so an ``openenv-core`` client (``GenericEnvClient``, TRL's OpenEnv integration) works unchanged
and follows the protocol as OpenEnv changes it. What agentgym adds is ``ServedEnv``, the OpenEnv
``Environment`` around one agentgym env (its action and observation models are the wire format
of ``agentgym.vector.protocol``), and a ``GET /status`` route with the session count.

Sessions: one per WebSocket connection (``ws://host:port/ws``), each with an env of its own made
by ``gym.make(env_id, **env_kwargs)`` in the session's thread, at most ``--num-envs`` at once
(a connection beyond gets OpenEnv's ``CAPACITY_REACHED`` error). The env's async ``areset`` and
``astep`` run on the server's event loop, each under a deadline (``--reset-timeout``,
``--step-timeout``); a call that fails outside the model (``InfraError``, a deadline) answers an
``infra_error`` observation and the session's next reset makes a fresh env. A session ends when
its client closes or disappears (the connection drops, or pings go unanswered) or stays idle for
``--idle-timeout`` seconds: its env is closed on the loop it ran on, so sandboxes, containers and
browsers are freed (a reaped session's socket stays open and answers ``infra_error``).
OpenEnv's stateless ``POST /reset`` and ``/step`` make a throwaway env per request, which suits
no multi-turn env: use the WebSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
from fastapi import FastAPI
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import (
    Action,
    ConcurrencyConfig,
    EnvironmentMetadata,
    Observation,
    State,
)
from pydantic import Field
from starlette.websockets import WebSocketDisconnect

import agentgym
from agentgym.core.aio import deadline, run_sync
from agentgym.core.env import AgentEnv
from agentgym.core.errors import ConfigError, Error, InfraError
from agentgym.core.info import ERROR, INFRA_ERROR, TASK_ID, TOOLS, TRUNCATION_REASON
from agentgym.core.jsonsafe import json_safe
from agentgym.core.tools import clip
from agentgym.registry import env_info, resolve_id
from agentgym.vector.protocol import STATUS_PATH

__all__ = [
    "AgentAction",
    "AgentObservation",
    "EnvErrors",
    "ServeOptions",
    "ServedEnv",
    "build_app",
    "close_sessions",
    "make_env",
]

CLOSE_TIMEOUT = 60.0
MAX_LOGGED_ERRORS = 20
"""Distinct env errors a server logs with their traceback; later new ones are only counted."""

log = logging.getLogger(__name__)


class AgentAction(Action):
    """One model turn."""

    message: str | dict[str, Any] = Field(
        description="the model's raw text, or an assistant message dict (role, content, "
        "tool_calls)"
    )


class AgentObservation(Observation):
    """What ``reset``/``step`` returned, JSON-safe; ``done`` is terminated or truncated."""

    messages: list[dict[str, Any]] = Field(
        default_factory=list, description="the chat messages the env adds"
    )
    info: dict[str, Any] = Field(default_factory=dict, description="the env's info dict")
    terminated: bool = Field(default=False, description="the episode ended in the env")
    truncated: bool = Field(default=False, description="the episode was cut short")


class ServedEnvError(Error):
    """The served env raised; the message starts with the exception's type name, which is what
    an OpenEnv client receives."""


class EnvErrors:
    """The served env's own exceptions, counted by type and message across the server's
    sessions; the first of each is logged with its traceback and the request it answered (an
    env that raises on every step logs once, not once per step)."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def report(self, request: str, error: BaseException) -> None:
        key = f"{type(error).__name__}: {error}"
        with self._lock:
            count = self.counts[key] = self.counts.get(key, 0) + 1
            distinct = len(self.counts)
        if count > 1 or distinct > MAX_LOGGED_ERRORS + 1:
            return
        if distinct > MAX_LOGGED_ERRORS:
            log.error("%s: more distinct errors; they are counted, not logged", self.env_id)
            return
        log.error(
            "%s raised %s on %s (the client got an error answer; each distinct error is "
            "logged once)",
            self.env_id,
            key,
            request,
            exc_info=error,
        )


@dataclass(frozen=True)
class ServeOptions:
    """What ``agentgym serve-env`` serves and how (the CLI flags of the same names)."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    num_envs: int = 1
    reset_timeout: float | None = 120.0
    step_timeout: float | None = 300.0
    idle_timeout: float | None = 900.0
    workers: Literal["thread", "process"] | None = None

    def __post_init__(self) -> None:
        resolve_id(self.env_id)  # "Did you mean ...?" for an unknown id
        if self.num_envs < 1:
            raise ConfigError("num_envs", self.num_envs, "must be at least 1", "--num-envs 32")
        for name in ("reset_timeout", "step_timeout", "idle_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(name, value, "must be positive seconds", f"--{name} 300")
        calls = [t for t in (self.reset_timeout, self.step_timeout) if t is not None]
        if self.idle_timeout is not None and (not calls or self.idle_timeout <= max(calls)):
            raise ConfigError(
                "idle_timeout",
                self.idle_timeout,
                "must exceed the reset and step timeouts (a session is idle between calls "
                "only, but its clock runs during one)",
                "raise --idle-timeout above --step-timeout, or set both",
            )
        if self.workers not in (None, "thread", "process"):
            raise ConfigError("workers", self.workers, "must be thread or process", "--workers")


def make_env(options: ServeOptions) -> AgentEnv:
    """The env one session plays: ``gym.make(...).unwrapped``, or a ``ProcessEnv`` when the env
    class asks for a process of its own (``worker = "process"``) or ``workers="process"``."""
    spec = gym.spec(options.env_id)
    entry = spec.entry_point
    env_class = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    if options.workers == "process" or (
        options.workers is None and getattr(env_class, "worker", "thread") == "process"
    ):
        from agentgym.vector.process import ProcessEnv

        return ProcessEnv(options.env_id, dict(options.env_kwargs))
    env = gym.make(options.env_id, disable_env_checker=True, **options.env_kwargs).unwrapped
    if not isinstance(env, AgentEnv):
        env.close()
        raise ConfigError(
            "env_id", options.env_id, "is not an agentgym env (AgentEnv)", "serve an agentgym env"
        )
    return env


def _observation(
    messages: Any, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
) -> AgentObservation:
    return AgentObservation(
        messages=json_safe(list(messages)),
        info=json_safe(info),
        terminated=terminated,
        truncated=truncated,
        done=terminated or truncated,
        reward=float(reward),
    )


class ServedEnv(Environment[AgentAction, AgentObservation, State]):
    """One session's agentgym env as an OpenEnv ``Environment`` (async: runs on the server's
    loop; every call under its deadline)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session gets its own env instance

    def __init__(self, options: ServeOptions, errors: EnvErrors | None = None) -> None:
        super().__init__()
        self.options = options
        self.errors = errors or EnvErrors(options.env_id)
        self.env = make_env(options)
        self.max_steps = gym.spec(options.env_id).max_episode_steps
        self._loop: asyncio.AbstractEventLoop | None = None  # where the env's resources live
        self._broken = False
        self._ended = False
        self._episode_id: str | None = None
        self._task_id: Any = None
        self._steps = 0

    async def reset_async(  # type: ignore[override]
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> AgentObservation:
        self._loop = asyncio.get_running_loop()
        if self._ended:
            return self._failed(self._ended_error(), reset=True)
        if self._broken:  # the last call failed outside the model: start from a fresh env
            await self._rebuild()
        self._episode_id = episode_id or uuid.uuid4().hex
        self._steps, self._task_id = 0, None
        try:
            async with deadline(self.options.reset_timeout, f"{self.options.env_id} reset"):
                observation, info = await self.env.areset(seed=seed, options=options)
        except InfraError as e:
            return self._failed(e, reset=True)
        except Exception as e:
            self.errors.report(f"reset(seed={seed!r}, options={clip(repr(options), 200)})", e)
            raise ServedEnvError(f"{type(e).__name__}: {e}") from e
        self._task_id = info.get(TASK_ID)
        return _observation(observation, 0.0, False, False, info)

    async def step_async(  # type: ignore[override]
        self, action: AgentAction, timeout_s: float | None = None, **kwargs: Any
    ) -> AgentObservation:
        if self._ended:
            return self._failed(self._ended_error(), reset=False)
        try:
            async with deadline(self.options.step_timeout, f"{self.options.env_id} step"):
                observation, reward, terminated, truncated, info = await self.env.astep(
                    action.message  # type: ignore[arg-type]  # the env answers a bad message
                )
        except InfraError as e:
            return self._failed(e, reset=False)
        except Exception as e:
            turn = f"step {self._steps + 1} of episode {self._episode_id}"
            self.errors.report(f"{turn}, action {clip(repr(action.message), 200)}", e)
            raise ServedEnvError(f"{type(e).__name__}: {e}") from e
        self._steps += 1
        if self.max_steps is not None and self._steps >= self.max_steps:
            truncated = True  # as gymnasium's TimeLimit, which gym.make would have added
        return _observation(observation, float(reward), bool(terminated), bool(truncated), info)

    def _failed(self, error: InfraError, *, reset: bool) -> AgentObservation:
        """An ``infra_error`` answer, as ``AgentVectorEnv`` gives one; the next reset rebuilds."""
        self._broken = True
        info: dict[str, Any] = {INFRA_ERROR: True, ERROR: f"{type(error).__name__}: {error}"}
        if reset:
            info[TOOLS] = []
        else:
            info[TRUNCATION_REASON] = "infra_error"
        return _observation((), 0.0, False, True, info)

    def _ended_error(self) -> InfraError:
        idle = self.options.idle_timeout
        return InfraError(
            f"this session was closed by the server (idle for over {idle} s?); connect again"
        )

    async def _rebuild(self) -> None:
        old, self._broken = self.env, False
        with contextlib.suppress(Exception):  # best effort: the old env is dropped either way
            async with deadline(CLOSE_TIMEOUT, f"{self.options.env_id} close"):
                await old.aclose()
        self.env = await asyncio.to_thread(make_env, self.options)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        return run_sync(self.reset_async(seed, episode_id, kwargs.get("options")))

    def step(self, action: AgentAction, timeout_s: float | None = None, **kwargs: Any) -> Any:
        return run_sync(self.step_async(action))

    @property
    def state(self) -> State:
        return State(
            episode_id=self._episode_id,
            step_count=self._steps,
            env_id=self.options.env_id,
            task_id=json_safe(self._task_id),
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self.options.env_id,
            description=env_info(self.options.env_id).description or self.options.env_id,
            version=agentgym.__version__,
            documentation_url="https://github.com/agentgym/agentgym/blob/main/docs/remote.md",
        )

    def close(self) -> None:
        """Close the env on the loop its resources live on (OpenEnv calls this from the
        session's thread; its stateless routes from the loop itself)."""
        self._ended = True  # the session is over (closed, or reaped with its socket still open)
        if self.env.closed:
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            self.env.close()
            return
        future = asyncio.run_coroutine_threadsafe(self.env.aclose(), loop)
        if _on_loop_thread(loop):
            return  # runs once this call returns to the loop
        with contextlib.suppress(Exception):  # the env is gone with its session either way
            future.result(CLOSE_TIMEOUT)


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class _QuietDisconnect:
    """ASGI middleware: OpenEnv's WebSocket handler closes a socket its client already closed,
    which raises ``WebSocketDisconnect`` after the session is cleaned up; uvicorn would log each
    as an application error."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


def build_app(options: ServeOptions) -> tuple[FastAPI, HTTPEnvServer]:
    """The FastAPI app serving ``options.env_id``: OpenEnv's routes plus ``GET /status``."""

    errors = EnvErrors(options.env_id)  # one count for all sessions: one log line per cause
    server = HTTPEnvServer(
        functools.partial(ServedEnv, options, errors),  # OpenEnv reads the class's flag
        AgentAction,
        AgentObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=options.num_envs, session_timeout=options.idle_timeout
        ),
    )
    app = FastAPI(title=f"agentgym serve-env {options.env_id}", version=agentgym.__version__)
    server.register_routes(app)
    app.add_middleware(_QuietDisconnect)

    @app.get(STATUS_PATH)
    async def status() -> dict[str, Any]:
        return {
            "env_id": options.env_id,
            "active_sessions": server.active_sessions,
            "max_sessions": server.max_concurrent_envs,
            "idle_timeout": options.idle_timeout,
            "env_errors": sum(errors.counts.values()),
            "agentgym_version": agentgym.__version__,
        }

    return app, server


async def close_sessions(server: HTTPEnvServer) -> None:
    """Close every session's env (at shutdown: no container or browser outlives the server)."""
    for session_id in list(server._sessions):  # OpenEnv keeps no public list of them
        with contextlib.suppress(Exception):
            await server._destroy_session(session_id)
