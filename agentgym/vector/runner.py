"""One sub-env's calls, isolated: deadlines, the concurrency limit, failures become transitions.

A ``Runner`` never raises for what a sub-env does. A reset or step that raises or runs past its
deadline becomes an ``infra_error`` transition (observation ``()``, reward 0, truncated) and marks
the env as needing a reset; a failed reset rebuilds the env from its factory and retries once.
The transition says whose failure it was (``error_kind``): ``"infra"`` for a deadline, an
``InfraError`` or a lost connection, ``"env"`` for any other exception (the env's own code
raised). Each distinct failure is logged once per process, an env's with its traceback; repeats
are logged at DEBUG, so that an env that always raises does not fill the log.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.core.aio import deadline
from agentgym.core.env import AgentEnv
from agentgym.core.errors import ConfigError, InfraError
from agentgym.core.info import (
    ERROR,
    ERROR_AT,
    ERROR_KIND,
    INFRA_ERROR,
    TRUNCATION_REASON,
    ErrorKind,
    is_infra_error,
)
from agentgym.core.types import Action, Observation

__all__ = ["Runner", "State", "SubEnv", "Transition", "check_agent_env"]

log = logging.getLogger("agentgym.vector")


@dataclass(frozen=True, slots=True)
class Transition:
    """What one sub-env call produced.

    ``kind`` is ``"reset"`` (reward 0, not terminated, not truncated unless it failed) or
    ``"step"``. An infrastructure failure has ``info["infra_error"] is True``, observation ``()``
    and ``truncated=True``.
    """

    index: int
    kind: Literal["reset", "step"]
    observation: Observation
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """Whether the episode ended: the env needs a reset before its next step."""
        return self.terminated or self.truncated

    @property
    def infra_error(self) -> bool:
        return is_infra_error(self.info)


class State(enum.Enum):
    NEW = "new"  # never reset
    READY = "ready"  # mid-episode: may step
    DONE = "done"  # the episode ended (terminated, truncated or a failed step)
    BROKEN = "broken"  # the last reset failed, rebuild included


@dataclass(slots=True)
class SubEnv:
    """One sub-env and the bookkeeping the vector env keeps for it."""

    index: int
    group: int
    factory: Callable[[], AgentEnv]
    env: AgentEnv
    root: int  # the root of the group's seeds (see agentgym.vector.seeds)
    episode: int = -1  # the number of its current episode in the group's sequence (-1: none yet)
    state: State = State.NEW
    busy: bool = False  # a call is in flight
    steps: int = 0  # steps in the current episode
    last: Transition | None = None


def check_agent_env(env: object, index: int) -> AgentEnv:
    """``env`` if it is an ``AgentEnv``; ``ConfigError`` naming the fix otherwise."""
    if not isinstance(env, AgentEnv):
        raise ConfigError(
            f"env_fns[{index}]()",
            type(env).__name__,
            "must return an agentgym AgentEnv (wrappers have no async API)",
            "return gym.make(env_id).unwrapped, or use AgentVectorEnv.from_id(env_id, num_envs)",
        )
    return env


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _kind(error: BaseException) -> ErrorKind:
    """``"infra"`` for failures outside the env's code (a deadline, an ``InfraError``, a lost
    or refused connection), ``"env"`` for any other exception: the env's own code raised."""
    return "infra" if isinstance(error, InfraError | TimeoutError | ConnectionError) else "env"


_LOGGED: set[tuple[str, ...]] = set()
"""The failures logged at WARNING in this process (what failed, where; see ``_log_once``)."""
_MAX_LOGGED = 1000


def _log_once(key: tuple[str, ...], message: str, *args: Any, trace: Any = None) -> None:
    """Log a failure at WARNING (with ``trace``'s traceback) the first time its ``key`` is
    seen in this process, and at DEBUG after that."""
    if key in _LOGGED:
        log.debug(message, *args)
        return
    if len(_LOGGED) < _MAX_LOGGED:
        _LOGGED.add(key)
    log.warning(message, *args, exc_info=trace)


def _failure_key(where: str, error: BaseException) -> tuple[str, ...]:
    """What and where: the env call, the error's type and the line that raised it."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    line = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
    return (where, type(error).__name__, line)


class Runner:
    """Runs sub-env resets and steps under the vector env's limits, turning failures into data."""

    def __init__(
        self,
        *,
        step_timeout: float | None,
        reset_timeout: float | None,
        max_concurrency: int | None,
        max_episode_steps: int | None,
    ) -> None:
        self.step_timeout = step_timeout
        self.reset_timeout = reset_timeout
        self.max_concurrency = max_concurrency
        self.max_episode_steps = max_episode_steps
        self._semaphore: asyncio.Semaphore | None = None
        self._semaphore_loop: asyncio.AbstractEventLoop | None = None

    def _limit(self) -> asyncio.Semaphore | None:
        # A semaphore belongs to the loop it is first used on: make one per running loop.
        if self.max_concurrency is None:
            return None
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore_loop is not loop:
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
            self._semaphore_loop = loop
        return self._semaphore

    async def step(self, sub: SubEnv, action: Action) -> Transition:
        limit = self._limit()
        if limit is None:
            return await self._step(sub, action)
        async with limit:
            return await self._step(sub, action)

    async def reset(
        self, sub: SubEnv, seed: int | None, options: dict[str, Any] | None
    ) -> Transition:
        limit = self._limit()
        if limit is None:
            return await self._reset(sub, seed, options)
        async with limit:
            return await self._reset(sub, seed, options)

    async def _step(self, sub: SubEnv, action: Action) -> Transition:
        try:
            if self.step_timeout is None:
                result = await sub.env.astep(action)
            else:
                async with deadline(self.step_timeout, f"env {sub.index} step"):
                    result = await sub.env.astep(action)
            observation, reward, terminated, truncated, info = result
            reward, terminated, truncated = float(reward), bool(terminated), bool(truncated)
            if not isinstance(info, dict):
                raise TypeError(f"astep returned info of type {type(info).__name__}, not dict")
        except Exception as error:  # isolation: a sub-env's failure is data, not a crash
            return self._fail(sub, "step", error)
        sub.steps += 1
        if self.max_episode_steps is not None and sub.steps >= self.max_episode_steps:
            truncated = True  # as gymnasium's TimeLimit: set even when terminated, no info key
        done = terminated or truncated
        sub.state = State.DONE if done else State.READY
        sub.last = Transition(sub.index, "step", observation, reward, terminated, truncated, info)
        return sub.last

    async def _reset(
        self, sub: SubEnv, seed: int | None, options: dict[str, Any] | None
    ) -> Transition:
        try:
            observation, info = await self._call_reset(sub, seed, options)
        except Exception as first:
            _log_once(
                ("retry", *_failure_key(_where(sub, "reset"), first)),
                "env %d reset failed (%s); rebuilding it and retrying once",
                sub.index,
                _error_text(first),
            )
            try:
                await self._rebuild(sub)
                observation, info = await self._call_reset(sub, seed, options)
            except Exception as error:
                return self._fail(sub, "reset", error)
        sub.state, sub.steps = State.READY, 0
        sub.last = Transition(sub.index, "reset", observation, 0.0, False, False, info)
        return sub.last

    async def _call_reset(
        self, sub: SubEnv, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[Observation, dict[str, Any]]:
        async with deadline(self.reset_timeout, f"env {sub.index} reset"):
            observation, info = await sub.env.areset(seed=seed, options=options)
        if not isinstance(info, dict):
            raise TypeError(f"areset returned info of type {type(info).__name__}, not dict")
        return observation, info

    async def _rebuild(self, sub: SubEnv) -> None:
        old = sub.env
        try:
            if not old.closed:
                async with deadline(self.reset_timeout, f"env {sub.index} close"):
                    await old.aclose()
        except Exception as error:  # best effort: the old env is dropped either way
            log.warning("env %d close before rebuild failed: %s", sub.index, _error_text(error))
        sub.env = check_agent_env(sub.factory(), sub.index)

    def _fail(self, sub: SubEnv, kind: Literal["reset", "step"], error: Exception) -> Transition:
        where, error_kind = _where(sub, kind), _kind(error)
        _log_once(
            _failure_key(where, error),
            "env %d %s failed: %s%s",
            sub.index,
            kind,
            _error_text(error),
            " (raised by the env's own code: a bug to fix)" if error_kind == "env" else "",
            trace=error if error_kind == "env" else None,  # a timeout needs no traceback
        )
        sub.state = State.DONE if kind == "step" else State.BROKEN
        info = {
            INFRA_ERROR: True,
            ERROR: _error_text(error),
            ERROR_KIND: error_kind,
            ERROR_AT: where,
            TRUNCATION_REASON: "infra_error",
        }
        sub.last = Transition(sub.index, kind, (), 0.0, False, True, info)
        return sub.last


def _where(sub: SubEnv, kind: str) -> str:
    """The env call, as ``"MyEnv.step"``."""
    return f"{type(sub.env).__name__}.{kind}"
