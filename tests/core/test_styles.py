"""Both env styles: async (areset/astep) and Gymnasium (reset/step), seeding, threads, vectors."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from agentgym.core import AgentEnv, Observation, StepResult, user
from agentgym.error import EnvStateError
from agentgym.utils import check_env
from agentgym.vector import AgentVectorEnv


class AsyncSeedsThroughReset(AgentEnv):
    """Async, seeding the Gymnasium way from inside ``areset`` (this used to hang forever)."""

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        self.task = int(self.np_random.integers(1_000_000))
        return (user(f"task {self.task}"),), {"tools": []}

    async def astep(self, action: Any) -> StepResult:
        await asyncio.sleep(0)
        return (user(f"echo {self.task}"),), 1.0, True, False, {"success": True}


class SyncCounter(AgentEnv):
    """Gymnasium style: synchronous reset/step, seeded through ``super().reset(seed=seed)``."""

    def __init__(self, barrier: threading.Barrier | None = None, hang: bool = False) -> None:
        super().__init__()
        self.barrier, self.hang, self.closes = barrier, hang, 0
        self.threads: set[str] = set()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        self.task, self.count = int(self.np_random.integers(1_000_000)), 0
        return (user(f"count for task {self.task}"),), {"tools": []}

    def step(self, action: Any) -> StepResult:
        self.threads.add(threading.current_thread().name)
        if self.hang:
            threading.Event().wait(30)
        if self.barrier is not None:
            self.barrier.wait(timeout=10)  # fails unless every env steps at the same time
        self.count += 1
        done = self.count >= 3
        return (user(f"{self.count}"),), float(done), done, False, {"success": done}

    def close(self) -> None:
        self.closes += 1
        super().close()


def test_super_reset_inside_areset_seeds_and_returns() -> None:
    env = AsyncSeedsThroughReset()
    first = env.reset(seed=3)
    assert env.reset(seed=3) == first
    assert env.np_random_seed == 3
    assert len({env.reset(seed=s)[0][0]["content"] for s in range(6)}) == 6
    assert asyncio.run(env.areset(seed=3)) == first


def test_sync_env_works_through_the_async_api_on_its_own_thread() -> None:
    env = SyncCounter()
    obs, _ = asyncio.run(env.areset(seed=5))
    assert obs == env.reset(seed=5)[0]
    assert obs[0]["content"].startswith("count for task")

    async def steps() -> list[StepResult]:
        return [await env.astep("x") for _ in range(3)]

    results = asyncio.run(steps())
    assert [r[1] for r in results] == [0.0, 0.0, 1.0]
    assert env.threads == {"agentgym-env-SyncCounter"}
    assert env.render() == "[user]\n3"


@pytest.mark.parametrize("env_class", [AsyncSeedsThroughReset, SyncCounter])
def test_both_styles_pass_both_checkers(env_class: type[AgentEnv]) -> None:
    gym.register("test-styles/Env-v0", entry_point=env_class)
    try:
        gym_check_env(gym.make("test-styles/Env-v0").unwrapped, skip_render_check=True)
        report = check_env(gym.make("test-styles/Env-v0"))
    finally:
        gym.registry.pop("test-styles/Env-v0")
    assert "determinism" in report.checks


def test_sync_envs_step_side_by_side_in_a_vector_env() -> None:
    barrier = threading.Barrier(8)
    venv = AgentVectorEnv([lambda: SyncCounter(barrier)] * 8, step_timeout=20)
    obs, _ = venv.reset(seed=0)
    assert all(o and o[0]["content"].startswith("count for task") for o in obs)
    assert len({o[0]["content"] for o in obs}) == 8  # seeds 0..7: different tasks
    _, rewards, terminated, truncated, infos = venv.step(["x"] * 8)
    assert "infra_error" not in infos
    assert not truncated.any()
    assert not terminated.any()
    assert not rewards.any()
    envs = venv.envs
    venv.close()
    assert [e.closes for e in envs] == [1] * 8


def test_a_hung_sync_step_is_that_envs_infra_error_only() -> None:
    venv = AgentVectorEnv(
        [lambda: SyncCounter(hang=True), SyncCounter], step_timeout=0.5, reset_timeout=5
    )
    venv.reset(seed=0)
    _, _, _, truncated, infos = venv.step(["x", "x"])
    assert truncated.tolist() == [True, False]
    assert infos["infra_error"].tolist() == [True, False]
    assert "did not finish" in infos["error"][0]


class SyncOverAsync(AsyncSeedsThroughReset):
    """A Gymnasium-style subclass of an async env: its ``reset`` must win, in every API."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return (*obs, user("and one more line")), info


def test_a_sync_override_of_an_async_env_is_used_by_the_vector_env() -> None:
    direct = SyncOverAsync().reset(seed=1)
    assert direct[0][-1]["content"] == "and one more line"
    venv = AgentVectorEnv([SyncOverAsync] * 2)
    obs, _ = venv.reset(seed=1)
    assert obs[0] == direct[0]
    venv.close()


class AsyncOverAsync(AsyncSeedsThroughReset):
    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)  # the parent's reset is async: this cannot run it from here
        return (), {}


def test_sync_super_reset_into_an_async_parent_raises_naming_the_fix() -> None:
    with pytest.raises(EnvStateError, match=r"await super\(\).areset"):
        asyncio.run(AsyncOverAsync().areset(seed=0))


def test_np_random_is_seeded_identically_in_both_styles() -> None:
    a, s = AsyncSeedsThroughReset(), SyncCounter()
    a.reset(seed=11)
    s.reset(seed=11)
    assert a.task == s.task == int(np.random.default_rng(11).integers(1_000_000))
