"""Toys for the ports of Gymnasium's vector tests (a helper module, not a test module).

One logic, three classes, as Gymnasium's ``tests/testing_env.GenericTestEnv``: an env runs the
``reset_func``/``step_func`` it is given. ``GenericAgentEnv`` is an ``AgentEnv`` in the Gymnasium
style (``reset``/``step``), ``AsyncGenericAgentEnv`` one in the async style, and
``GenericGymEnv`` a plain ``gymnasium.Env``: the sub-env of the reference ``SyncVectorEnv``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv, VectorEnv

from agentgym.core import AgentEnv, user
from agentgym.core.env import StepResult
from agentgym.core.spaces import AssistantTurn, Messages
from agentgym.core.types import Observation
from agentgym.vector import AgentVectorEnv

ResetFunc = Callable[[Any, "int | None", "dict[str, Any] | None"], tuple[Any, dict[str, Any]]]
StepFunc = Callable[[Any, Any], tuple[Any, float, bool, bool, dict[str, Any]]]


def text_of(action: Any) -> str:
    return action if isinstance(action, str) else action["content"] or ""


def count_reset(env: Any, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
    """Gymnasium's ``count_reset`` in text: the count starts at the seed (0 without one)."""
    env.count = seed if seed is not None else 0
    return (user(f"count {env.count}"),), {}


def count_step(env: Any, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """Gymnasium's ``count_step`` in text: reward = the action's length; ends at ``max_count``."""
    env.count += 1
    reward, terminated = float(len(text_of(action))), env.count == env.max_count
    return (user(f"count {env.count}"),), reward, terminated, False, {}


def random_reset(env: Any, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
    """A seeded task: observation and info drawn from ``np_random``."""
    env.count = 0
    task = int(env.np_random.integers(0, 1000))
    return (user(f"task {task}"),), {"task": task, "seed": seed}


def random_step(env: Any, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """Rewards, ends and infos drawn from ``np_random``; the action's length adds to the reward."""
    env.count += 1
    text = text_of(action)
    terminated = bool(env.np_random.random() < 0.25)
    truncated = not terminated and env.count >= 5
    info: dict[str, Any] = {"count": env.count, "length": len(text)}
    if terminated:
        info["outcome"] = {"won": bool(env.np_random.random() < 0.5)}
    reward = float(env.np_random.random()) + len(text)
    return (user(f"step {env.count}: {text[:20]}"),), reward, terminated, truncated, info


def space_reset(env: Any, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
    return env.observation_space.sample(), {}


def space_step(env: Any, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """Gymnasium's ``debug_step_func``: the action must be in the space; a sampled observation."""
    if action not in env.action_space:
        raise AssertionError(f"{action!r} not in {env.action_space}")
    return env.observation_space.sample(), 0.0, False, False, {}


class _Generic:
    """What the three classes share: the functions, the spaces, the counter, ``render``."""

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]

    def _setup(
        self,
        reset_func: ResetFunc,
        step_func: StepFunc,
        observation_space: gym.Space[Any] | None,
        action_space: gym.Space[Any] | None,
        space_seed: int | None,
    ) -> None:
        self.reset_func, self.step_func = reset_func, step_func
        if observation_space is not None:
            self.observation_space = observation_space
        if action_space is not None:
            self.action_space = action_space
        if space_seed is not None:
            self.observation_space.seed(space_seed)
            self.action_space.seed(space_seed)
        self.count = 0
        self.max_count = 3


class GenericAgentEnv(_Generic, AgentEnv):
    """An ``AgentEnv`` written the Gymnasium way (``reset``/``step``)."""

    def __init__(
        self,
        reset_func: ResetFunc = count_reset,
        step_func: StepFunc = count_step,
        observation_space: gym.Space[Any] | None = None,
        action_space: gym.Space[Any] | None = None,
        render_mode: str | None = None,
        space_seed: int | None = None,
    ) -> None:
        super().__init__(render_mode=render_mode)
        self._setup(reset_func, step_func, observation_space, action_space, space_seed)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed, options=options)
        return self.reset_func(self, seed, options)

    def step(self, action: Any) -> StepResult:
        return self.step_func(self, action)


class AsyncGenericAgentEnv(_Generic, AgentEnv):
    """An ``AgentEnv`` written the async way (``areset``/``astep``)."""

    def __init__(
        self,
        reset_func: ResetFunc = count_reset,
        step_func: StepFunc = count_step,
        observation_space: gym.Space[Any] | None = None,
        action_space: gym.Space[Any] | None = None,
        render_mode: str | None = None,
        space_seed: int | None = None,
    ) -> None:
        super().__init__(render_mode=render_mode)
        self._setup(reset_func, step_func, observation_space, action_space, space_seed)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        return self.reset_func(self, seed, options)

    async def astep(self, action: Any) -> StepResult:
        return self.step_func(self, action)


class GenericGymEnv(_Generic, gym.Env[Any, Any]):
    """The same logic as a plain ``gymnasium.Env`` (no agentgym base): the reference."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        reset_func: ResetFunc = count_reset,
        step_func: StepFunc = count_step,
        observation_space: gym.Space[Any] | None = None,
        action_space: gym.Space[Any] | None = None,
        render_mode: str | None = None,
        space_seed: int | None = None,
    ) -> None:
        self.render_mode = render_mode
        self.observation_space, self.action_space = Messages(), AssistantTurn()
        self._setup(reset_func, step_func, observation_space, action_space, space_seed)
        self._last: Any = ()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed, options=options)
        self._last, info = self.reset_func(self, seed, options)
        return self._last, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        result = self.step_func(self, action)
        self._last = result[0]
        return result

    def render(self) -> str:  # type: ignore[override]
        return "\n\n".join(f"[{m['role']}]\n{m.get('content') or ''}" for m in self._last)


AGENT_STYLES = {"gymnasium-style": GenericAgentEnv, "async-style": AsyncGenericAgentEnv}
"""The two ``AgentEnv`` styles, for ``pytest.mark.parametrize``."""


class CustomSpace(gym.Space[Any]):
    """Gymnasium's minimal custom space (``tests/vector/testing_utils.CustomSpace``)."""

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        return self.np_random.integers(0, 10, ())

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) or 0 <= x <= 10

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CustomSpace)


def custom_reset(env: Any, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
    return "reset", {}


def custom_step(env: Any, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    return f"step({action:s})", 0.0, False, False, {}


def returning(reset_info: dict[str, Any], step_info: dict[str, Any]) -> dict[str, Any]:
    """Gymnasium's ``ReturnInfoEnv`` as arguments: reset and step return the given infos."""

    def reset(env: Any, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
        return (user("ready"),), dict(reset_info)

    def step(env: Any, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return (user("done"),), 0.0, True, False, dict(step_info)

    return {"reset_func": reset, "step_func": step}


def counts(observations: Any) -> list[int]:
    """The count each env's ``count_reset``/``count_step`` observation shows."""
    return [int(obs[0]["content"].split()[-1]) for obs in observations]


def assert_rng_equal(a: np.random.Generator, b: np.random.Generator) -> None:
    assert a.bit_generator.state == b.bit_generator.state


@dataclasses.dataclass(frozen=True)
class Vectorizer:
    """A vector env class and the sub-env class it gets: ``build(env_kwargs, **vector_kwargs)``
    makes one sub-env per kwargs dict."""

    vector_cls: type[VectorEnv]
    env_cls: type[Any]

    def __call__(self, env_kwargs: list[dict[str, Any]], **vector_kwargs: Any) -> Any:
        factories = [functools.partial(self.env_cls, **kw) for kw in env_kwargs]
        return self.vector_cls(factories, **vector_kwargs)


VECTORIZERS: dict[str, Vectorizer] = {
    "AgentVectorEnv-gymnasium-style": Vectorizer(AgentVectorEnv, GenericAgentEnv),
    "AgentVectorEnv-async-style": Vectorizer(AgentVectorEnv, AsyncGenericAgentEnv),
    "SyncVectorEnv-reference": Vectorizer(SyncVectorEnv, GenericGymEnv),
}
"""Every test parametrized over these asserts the same expectations of ours and the reference."""

REFERENCE = VECTORIZERS["SyncVectorEnv-reference"]

STYLES = pytest.mark.parametrize("env_cls", list(AGENT_STYLES.values()), ids=list(AGENT_STYLES))
"""Parametrizes a test over the two ``AgentEnv`` styles (argument ``env_cls``)."""

EVERY_VECTORIZER = pytest.mark.parametrize(
    "build", list(VECTORIZERS.values()), ids=list(VECTORIZERS)
)
"""Parametrizes a test over ``VECTORIZERS`` (argument ``build``)."""
