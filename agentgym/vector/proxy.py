"""``ProxyEnv``: an ``AgentEnv`` whose env runs somewhere else, reached through a ``Transport``.

Where an env runs is a transport behind this one proxy, as an HTTP client's requests go through
``httpx``'s ``Transport.handle_request``::

    ProxyEnv ── Transport ──┬── InProcessTransport   the env itself, in this process (tests)
                            ├── PipeTransport        a worker process, over a pipe (ProcessEnv)
                            ├── RayTransport         a Ray actor, anywhere on a cluster (RayEnv)
                            └── OpenEnvTransport     an OpenEnv server, over WebSocket (Remote-v0)

A transport owns how its env is reached: starting and killing what holds it, reconnecting,
placement. The proxy owns everything they share: forwarding reset and step, the spaces and
metadata of the remote env's description, its own deadlines, and turning a transport failure
into an ``infra_error`` result. A step before reset, after the episode ended or after close is
refused (``EnvStateError``) by ``AgentEnv``, as for every env.

Failures, and what the proxy makes of them:

- the transport failed (``InfraError``: a dead process, actor or server, a dropped connection, a
  deadline): a reset returns ``()`` with ``info["infra_error"]`` True (and ``error``), and the
  step after it ends the episode truncated with the same infra info; a failed step ends the
  episode truncated (``truncation_reason="infra_error"``). The next reset starts a fresh env.
  So does any reset after an env that reported ``infra_error`` itself, or a call cancelled by its
  caller (the vector env's deadline): the transport cleans up (kills the process, cancels the
  call in the actor, drops the connection) and the cancellation goes on.
- the env raised where it runs: the transport raises ``RemoteEnvError`` (``EnvStateError`` when
  the env was used out of order) with the env's exception type and message; it reaches the
  caller (the vector env counts it as the env's own failure, not the infrastructure's).
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from agentgym.core.aio import deadline
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.errors import EnvStateError, Error, InfraError
from agentgym.core.info import ERROR, INFRA_ERROR, TOOLS, TRUNCATION_REASON
from agentgym.core.types import Action, Observation

__all__ = [
    "CLOSE_TIMEOUT",
    "Description",
    "Failure",
    "ProxyEnv",
    "RemoteEnvError",
    "Transport",
    "describe",
    "failure_of",
    "remote_error",
]

CLOSE_TIMEOUT = 10.0
Failure = Literal["infra", "state", "env"]
"""Whose failure a remote call's exception was: the infrastructure's (an ``InfraError`` there),
the caller's (``EnvStateError``: out of order) or the env's own code's (anything else)."""


class RemoteEnvError(Error):
    """The env raised where it runs (a bug or a bad argument there, not a failure of the
    transport); the message names the exception's type and repeats its message."""


class Description(TypedDict, total=False):
    """What a proxy mirrors of the env it forwards to; a transport gives what it knows."""

    observation_space: Any
    action_space: Any
    metadata: dict[str, Any]
    render_mode: str | None
    tools: Any  # a tuple of ``Tool``: their schemas reach the model through info["tools"]
    tool_parser: str


def describe(env: AgentEnv) -> Description:
    """The ``Description`` of an env (made where it runs; it crosses pipes and Ray pickled)."""
    return {
        "observation_space": env.observation_space,
        "action_space": env.action_space,
        "metadata": env.metadata,
        "render_mode": env.render_mode,
        "tools": env.tools,
        "tool_parser": env.tool_parser,
    }


def failure_of(error: BaseException) -> Failure:
    """Classify an exception of the env where it runs, for the trip back to the proxy."""
    if isinstance(error, InfraError):
        return "infra"
    return "state" if isinstance(error, EnvStateError) else "env"


def remote_error(failure: str, what: str, text: str) -> Error:
    """The exception a transport raises for a remote call that failed with ``text`` (the
    exception's ``"Type: message"``); ``what``: the call, e.g. ``"x/Y-v0 step in its worker
    process"``."""
    if failure == "infra":
        return InfraError(f"{what} failed: {text}")
    if failure == "state":
        return EnvStateError(f"{what}: {text}")
    return RemoteEnvError(f"{what} raised {text}")


@runtime_checkable
class Transport(Protocol):
    """How a ``ProxyEnv`` reaches its env. One transport serves one env at a time.

    Failures outside the env raise ``InfraError`` (after the transport cleaned up); an
    exception of the env raises ``RemoteEnvError`` or ``EnvStateError`` (``remote_error``); a
    cancelled call cleans up and lets the cancellation through.
    """

    name: str
    """The env or where it is (an env id, a URL), for messages."""

    async def start(self) -> Description:
        """Make the env (a fresh one: the previous env, if any, is closed) and describe it.
        The first start, from the proxy's constructor, runs on an event loop of its own."""
        ...

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``reset`` or ``step`` (Gymnasium's names and arguments) of the env; its result."""
        ...

    def alive(self) -> bool:
        """Whether the env of the last ``start`` can still be called."""
        ...

    async def close(self) -> None:
        """Close the env and free what the transport holds (best effort; the proxy bounds it
        with ``CLOSE_TIMEOUT``)."""
        ...


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _infra_step(error: str) -> StepResult:
    return (), 0.0, False, True, {INFRA_ERROR: True, ERROR: error, TRUNCATION_REASON: "infra_error"}


def _start_now(transport: Transport) -> Description:
    """``transport.start()`` from a constructor, which may run inside an event loop (the vector
    env calls its factories there): on a thread and loop of its own, so it never waits on the
    loop it blocks."""
    with ThreadPoolExecutor(1, thread_name_prefix="agentgym-proxy-start") as pool:
        return pool.submit(asyncio.run, transport.start()).result()  # type: ignore[arg-type]


class _Episode:
    def __init__(self) -> None:
        self.error: str | None = None  # the reset failed outside the env


class ProxyEnv(AgentEnv):
    """An ``AgentEnv`` that forwards ``reset``, ``step`` and ``close`` to an env reached through
    ``transport`` (see the module docstring for what becomes of failures).

    Args:
        transport: how the env is reached.
        description: what to mirror of the env; ``None`` starts the env now and takes its own
            (a transport that connects at the first reset passes what it knows, e.g. ``{}``).
        fresh_env_per_reset: start a fresh env at every reset (a new server session per
            episode), not only after a failure.
        reset_timeout, step_timeout: seconds a reset (starting a fresh env included) or a step
            may take before it is an infra failure; ``None``: no deadline of the proxy's own.
        close_timeout: seconds the env's close may take.
        render_mode: used when the description has none.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        description: Description | None = None,
        fresh_env_per_reset: bool = False,
        reset_timeout: float | None = None,
        step_timeout: float | None = None,
        close_timeout: float = CLOSE_TIMEOUT,
        render_mode: str | None = None,
    ) -> None:
        self.transport = transport
        self.fresh_env_per_reset = fresh_env_per_reset
        self.reset_timeout, self.step_timeout = reset_timeout, step_timeout
        self.close_timeout = close_timeout
        self._episode: _Episode | None = None
        self._stale = False  # the env failed or was interrupted: the next reset starts afresh
        if description is None:
            description = _start_now(transport)
        super().__init__(
            tools=description.get("tools", ()),
            tool_parser=description.get("tool_parser", "hermes"),
            render_mode=description.get("render_mode", render_mode),
        )
        for key in ("observation_space", "action_space", "metadata"):
            if key in description:
                setattr(self, key, description[key])  # type: ignore[literal-required]

    def _refuse(self, what: str) -> EnvStateError:
        return EnvStateError(f"{type(self).__name__}({self.transport.name!r}) {what}")

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        if self.closed:
            raise self._refuse("was closed; make a new env")
        await super().areset(seed=seed, options=options)
        self._episode = episode = _Episode()
        fresh = self.fresh_env_per_reset or self._stale or not self.transport.alive()
        if seed is None and fresh:
            # A fresh env would draw from an unseeded generator: continue this env's own seeded
            # stream instead (reset(seed=s) then reset() repeats).
            seed = int(self.np_random.integers(2**31 - 1))
        try:
            async with deadline(self.reset_timeout, f"{self.transport.name} reset"):
                if fresh:
                    self._stale = True  # until the fresh env has answered a reset
                    await self.transport.start()
                observation, info = await self.transport.call("reset", seed=seed, options=options)
        except InfraError as error:
            self._stale = True
            episode.error = _text(error)
            return (), {TOOLS: [], INFRA_ERROR: True, ERROR: episode.error}
        except BaseException:
            self._stale = True
            raise
        self._stale = False
        if info.get(INFRA_ERROR):  # the env failed outside the model: its episode too
            episode.error = str(info.get(ERROR, "the env's reset failed"))
            self._stale = True
        return observation, info

    async def astep(self, action: Action) -> StepResult:
        episode = self._episode
        assert episode is not None  # AgentEnv refuses a step before a reset and after close
        if episode.error is not None:
            return _infra_step(episode.error)
        try:
            async with deadline(self.step_timeout, f"{self.transport.name} step"):
                result = await self.transport.call("step", action)
        except InfraError as error:
            self._stale = True
            return _infra_step(_text(error))
        except asyncio.CancelledError:  # the caller's deadline: the transport cut the call off
            self._stale = True
            raise
        if result[4].get(INFRA_ERROR):
            self._stale = True
        return result  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        try:
            with contextlib.suppress(Exception):  # best effort: the transport frees what it holds
                async with deadline(self.close_timeout, f"{self.transport.name} close"):
                    await self.transport.close()
        finally:
            await super().aclose()
