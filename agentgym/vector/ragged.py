"""The ragged API of ``AgentVectorEnv``: step one env when its action is ready, receive
transitions in completion order.

Nothing resets by itself here: a finished env (terminated, truncated or failed) must be reset
explicitly, and using an env that is finished or busy raises ``EnvStateError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError, EnvStateError
from agentgym.core.types import Action
from agentgym.vector.checks import check_index
from agentgym.vector.inbox import Inbox
from agentgym.vector.runner import Runner, State, SubEnv, Transition
from agentgym.vector.seeds import check_seed, derive, next_seed, pin_seed

__all__ = ["RaggedAPI"]


class RaggedAPI:
    """Mixin of ``AgentVectorEnv``: per-env submission and completion-order receipt."""

    num_envs: int
    group_size: int
    closed: bool
    _subs: list[SubEnv]
    _runner: Runner
    _inbox: Inbox

    def submit_step(self, index: int, action: Action) -> None:
        """Start stepping env ``index``; its transition comes from ``arecv``/``recv``."""
        sub = self._stepable(index)
        self._inbox.check_loop()
        self._claim([sub])
        self._inbox.submit(lambda: self._then_release(sub, self._runner.step(sub, action)))

    def submit_reset(
        self, index: int, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start resetting env ``index``; without a seed, a grouped env starts its group's
        next task (see :mod:`agentgym.vector.seeds`)."""
        sub = self._subs[check_index(index, self.num_envs)]
        seed = check_seed(seed)
        self._inbox.check_loop()
        self._claim([sub])
        self._inbox.submit(self._reset_job(sub, self._seed_for(sub, seed), options))

    def submit_reset_group(
        self, group: int, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start resetting every env of group ``group`` onto one task: ``seed`` for all, or
        without it the group's next task (one past the furthest member's episode count)."""
        members = self._group(group)
        seed = check_seed(seed)
        self._inbox.check_loop()
        self._claim(members)
        seeds: list[int | None]
        if seed is not None:
            seeds = [pin_seed(m, seed) for m in members]
        elif self.group_size == 1:
            seeds = [None]
        else:
            root, episode = members[0].root, max(m.episode for m in members) + 1
            for m in members:
                m.root, m.episode = root, episode
            seeds = [derive(root, group, episode)] * len(members)
        for m, member_seed in zip(members, seeds, strict=True):
            self._inbox.submit(self._reset_job(m, member_seed, options))

    async def arecv(self) -> Transition:
        """The next finished submitted transition, in completion order."""
        return await self._inbox.get()

    def recv(self) -> Transition:
        """``arecv`` for synchronous code. Submitted calls progress only while a ``recv`` runs,
        but their deadlines count wall time: call it promptly, or use the async API."""
        return run_sync(self.arecv())

    async def transitions(self) -> AsyncIterator[Transition]:
        """Every submitted transition in completion order, until none is pending; work
        submitted while iterating is included."""
        while len(self._inbox):
            yield await self._inbox.get()

    @property
    def pending(self) -> int:
        """Submitted transitions not yet received."""
        return len(self._inbox)

    async def astep_one(self, index: int, action: Action) -> Transition:
        """Step env ``index`` and return its transition (bypasses ``arecv``)."""
        sub = self._stepable(index)
        self._claim([sub])
        return await self._then_release(sub, self._runner.step(sub, action))

    async def areset_one(
        self, index: int, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> Transition:
        """Reset env ``index`` and return its transition (bypasses ``arecv``)."""
        sub = self._subs[check_index(index, self.num_envs)]
        seed = check_seed(seed)
        self._claim([sub])
        return await self._reset_job(sub, self._seed_for(sub, seed), options)()

    def step_one(self, index: int, action: Action) -> Transition:
        return run_sync(self.astep_one(index, action))

    def reset_one(
        self, index: int, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> Transition:
        return run_sync(self.areset_one(index, seed=seed, options=options))

    def _reset_job(
        self, sub: SubEnv, seed: int | None, options: dict[str, Any] | None
    ) -> Callable[[], Coroutine[Any, Any, Transition]]:
        return lambda: self._then_release(sub, self._runner.reset(sub, seed, options))

    def _seed_for(self, sub: SubEnv, seed: int | None) -> int | None:
        if seed is None:
            return next_seed(sub, self.group_size)
        return pin_seed(sub, seed)

    def _stepable(self, index: int) -> SubEnv:
        sub = self._subs[check_index(index, self.num_envs)]
        self._check_free([sub])
        if sub.state is not State.READY:
            why = {
                State.NEW: "was never reset",
                State.BROKEN: "failed its last reset (see the reset's info['error'])",
            }.get(sub.state, "finished its episode")
            raise EnvStateError(f"env {index} {why}: reset it (submit_reset) before stepping")
        return sub

    def _group(self, group: int) -> list[SubEnv]:
        num_groups = self.num_envs // self.group_size
        if isinstance(group, bool) or not isinstance(group, int) or not 0 <= group < num_groups:
            raise ConfigError(
                "group", group, f"must be a group index in [0, {num_groups})", "pass a valid group"
            )
        start = group * self.group_size
        return self._subs[start : start + self.group_size]

    @staticmethod
    async def _then_release(sub: SubEnv, call: Awaitable[Transition]) -> Transition:
        try:
            return await call
        finally:
            sub.busy = False

    def _claim(self, subs: Sequence[SubEnv]) -> None:
        """Mark ``subs`` busy, or raise ``EnvStateError`` if one is (or the vector env closed)."""
        self._check_free(subs)
        for sub in subs:
            sub.busy = True

    def _check_free(self, subs: Sequence[SubEnv]) -> None:
        if self.closed:
            raise EnvStateError("the vector env is closed")
        for sub in subs:
            if sub.busy:
                raise EnvStateError(
                    f"env {sub.index} is busy: receive its pending transition before using it again"
                )

    @staticmethod
    def _release(subs: Sequence[SubEnv]) -> None:
        for sub in subs:
            sub.busy = False
