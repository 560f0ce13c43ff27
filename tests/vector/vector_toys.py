"""Toy ``AgentEnv``s for the vector tests (a helper module, not a test module)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from agentgym.core import AgentEnv, user
from agentgym.core.env import StepResult
from agentgym.core.types import Action, Message, Observation


class CountEnv(AgentEnv):
    """Deterministic given its seeds: episode length, rewards and infos come from ``np_random``.

    The action ``"stop"`` ends the episode. Records the seed of every reset in ``seeds``.
    """

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        self.seeds: list[int | None] = []
        self.count = 0
        self.length = 0

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        self.seeds.append(seed)
        self.count = 0
        self.length = int(self.np_random.integers(1, 6))
        task = int(self.np_random.integers(0, 1000))
        return (user(f"task {task}, length {self.length}"),), {"task": task, "length": self.length}

    async def astep(self, action: Action) -> StepResult:
        self.count += 1
        text = action if isinstance(action, str) else action["content"] or ""
        reward = float(self.np_random.random()) + len(text)
        terminated = self.count >= self.length or text == "stop"
        truncated = not terminated and self.count >= 4
        info: dict[str, Any] = {"count": self.count}
        if terminated:
            info["outcome"] = {"won": bool(self.np_random.random() < 0.5), "text": text}
        obs = (user(f"step {self.count}: {text}"),)
        return obs, reward, terminated, truncated, info


class SleepEnv(AgentEnv):
    """Each step sleeps ``delay`` seconds; the class counts how many envs are inside a step."""

    inside: ClassVar[int] = 0
    most_inside: ClassVar[int] = 0

    def __init__(self, delay: float = 0.05, episode_length: int = 1000) -> None:
        super().__init__()
        self.delay = delay
        self.episode_length = episode_length
        self.steps = 0

    @classmethod
    def reset_counters(cls) -> None:
        cls.inside = cls.most_inside = 0

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        self.steps = 0
        return (user(f"sleep {self.delay}"),), {}

    async def astep(self, action: Action) -> StepResult:
        cls = type(self)
        cls.inside += 1
        cls.most_inside = max(cls.most_inside, cls.inside)
        try:
            await asyncio.sleep(self.delay)
        finally:
            cls.inside -= 1
        self.steps += 1
        return (user(f"slept {self.delay}"),), 1.0, False, self.steps >= self.episode_length, {}


class FaultyEnv(AgentEnv):
    """Fails its first ``faults`` calls of kind ``fault_on`` ("step" or "reset") by raising
    (``fault="raise"``) or awaiting forever (``fault="hang"``); works normally afterwards."""

    closed_count: ClassVar[int] = 0

    def __init__(self, fault: str | None = None, fault_on: str = "step", faults: int = 1) -> None:
        super().__init__()
        self.fault, self.fault_on, self.faults = fault, fault_on, faults
        self.steps = 0

    @staticmethod
    def ready() -> Message:
        """The message of a successful reset."""
        return user("ready")

    @staticmethod
    def ok(step: int) -> Message:
        """The message of successful step number ``step``."""
        return user(f"ok {step}")

    async def _maybe_fail(self, kind: str) -> None:
        if self.fault is None or kind != self.fault_on or self.faults <= 0:
            return
        self.faults -= 1
        if self.fault == "raise":
            raise RuntimeError(f"{kind} exploded")
        await asyncio.Event().wait()  # hang

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        await self._maybe_fail("reset")
        self.steps = 0
        return (self.ready(),), {}

    async def astep(self, action: Action) -> StepResult:
        await asyncio.sleep(0)
        await self._maybe_fail("step")
        self.steps += 1
        return (self.ok(self.steps),), 1.0, self.steps >= 3, False, {}

    async def aclose(self) -> None:
        type(self).closed_count += 1
        await super().aclose()
