"""AgentVectorEnv's lockstep API: Gymnasium's contract, SyncVectorEnv parity, make_vec, errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

import agentgym
from agentgym.core.spaces import AssistantTurn, Messages
from agentgym.error import ConfigError, EnvStateError, UnknownEnvError
from agentgym.registry import _ENVS
from agentgym.vector import AgentVectorEnv

from .compare import assert_same, run_both
from .vector_toys import CountEnv, FaultyEnv, SleepEnv

COUNT_ID = "vectortest/Count-v0"
LIMITED_ID = "vectortest/CountLimited-v0"  # max_episode_steps=2


@pytest.fixture(scope="module")
def count_ids() -> Iterator[None]:
    """Registers COUNT_ID and LIMITED_ID for this module's tests, and removes them afterwards."""
    for env_id, steps in ((COUNT_ID, None), (LIMITED_ID, 2)):
        agentgym.register(env_id, f"{CountEnv.__module__}:CountEnv", max_episode_steps=steps)
    yield
    for env_id in (COUNT_ID, LIMITED_ID):
        gym.registry.pop(env_id, None)
        _ENVS.pop(env_id, None)


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_matches_sync_vector_env_in_every_autoreset_mode(mode: AutoresetMode) -> None:
    ours = AgentVectorEnv([CountEnv] * 6, autoreset_mode=mode)
    theirs = SyncVectorEnv([CountEnv] * 6, autoreset_mode=mode)
    assert ours.metadata["autoreset_mode"] is mode
    endings = run_both(ours, theirs, steps=60, mode=mode)
    assert endings > 30  # autoresets happened many times
    ours.close()
    theirs.close()


def test_matches_sync_vector_env_with_seed_list_and_reseeding() -> None:
    ours, theirs = AgentVectorEnv([CountEnv] * 3), SyncVectorEnv([CountEnv] * 3)
    assert_same(ours.reset(seed=[5, 6, 9]), theirs.reset(seed=[5, 6, 9]))
    assert_same(ours.reset(seed=11), theirs.reset(seed=11))
    for t in range(10):
        assert_same(ours.step(["a"] * 3), theirs.step(["a"] * 3), f"step {t}")


def test_spaces_and_attributes() -> None:
    venv = AgentVectorEnv([CountEnv] * 3)
    assert isinstance(venv, VectorEnv)
    assert venv.num_envs == 3
    assert venv.single_observation_space == Messages()
    assert isinstance(venv.single_action_space, AssistantTurn)
    assert venv.observation_space == gym.vector.utils.batch_space(Messages(), 3)
    assert [type(e) for e in venv.envs] == [CountEnv] * 3
    obs, _ = venv.reset(seed=0)
    assert obs in venv.observation_space
    obs, rewards, terminations, truncations, _ = venv.step(["x", "y", "z"])
    assert obs in venv.observation_space
    assert (rewards.dtype, rewards.shape) == (np.float64, (3,))
    assert terminations.dtype == truncations.dtype == np.bool_


def test_async_twins_run_on_the_callers_loop() -> None:
    async def main() -> tuple[Any, ...]:
        venv = AgentVectorEnv([CountEnv] * 2)
        await venv.areset(seed=3)
        return await venv.astep(["a", "b"])

    sync = AgentVectorEnv([CountEnv] * 2)
    sync.reset(seed=3)
    assert_same(asyncio.run(main()), sync.step(["a", "b"]))


def test_one_batch_runs_all_envs_concurrently() -> None:
    SleepEnv.reset_counters()
    venv = AgentVectorEnv([SleepEnv] * 64)
    venv.reset(seed=0)
    venv.step(["go"] * 64)
    assert SleepEnv.most_inside == 64


def test_max_concurrency_caps_calls_in_flight() -> None:
    SleepEnv.reset_counters()
    venv = AgentVectorEnv([lambda: SleepEnv(0.01)] * 64, max_concurrency=8)
    venv.reset(seed=0)
    for _ in range(3):
        venv.step(["go"] * 64)
    assert SleepEnv.most_inside == 8


@pytest.mark.usefixtures("count_ids")
def test_max_episode_steps_truncates_like_time_limit() -> None:
    ours = gym.make_vec(LIMITED_ID, num_envs=4, vectorization_mode="vector_entry_point")
    theirs = gym.make_vec(LIMITED_ID, num_envs=4, vectorization_mode="sync")
    assert_same(ours.reset(seed=1), theirs.reset(seed=1))
    truncated_by_limit = 0
    for t in range(12):
        got, want = ours.step(["a"] * 4), theirs.step(["a"] * 4)
        assert_same(got, want, f"step {t}")  # infos included: the limit adds no key
        truncated_by_limit += int((got[3] & ~got[2]).sum())
    assert truncated_by_limit > 0


@pytest.mark.usefixtures("count_ids")
def test_make_vec_builds_an_agent_vector_env() -> None:
    venv = gym.make_vec(
        COUNT_ID, num_envs=4, vectorization_mode="vector_entry_point", group_size=2, step_timeout=5
    )
    assert isinstance(venv, AgentVectorEnv)
    assert (venv.num_envs, venv.group_size) == (4, 2)
    assert venv.spec is not None
    assert venv.spec.id == COUNT_ID
    assert isinstance(venv.metadata["autoreset_mode"], AutoresetMode)
    venv.reset(seed=0)
    venv.step(["a"] * 4)
    again = gym.make_vec(venv.spec)  # the spec is enough to build it again
    assert isinstance(again, AgentVectorEnv)
    assert again.group_size == 2


@pytest.mark.usefixtures("count_ids")
def test_from_id_suggests_the_id_you_meant() -> None:
    with pytest.raises(UnknownEnvError, match="Did you mean 'vectortest/Count-v0'"):
        AgentVectorEnv.from_id("vectortest/Cuont-v0", num_envs=2)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"group_size": 3}, "group_size"),
        ({"group_size": 0}, "group_size"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"step_timeout": 0}, "step_timeout"),
        ({"step_timeout": -1.0}, "step_timeout"),
        ({"reset_timeout": float("nan")}, "reset_timeout"),
        ({"reset_timeout": "5"}, "reset_timeout"),
        ({"autoreset_mode": "sometimes"}, "autoreset_mode"),
        ({"max_episode_steps": 0}, "max_episode_steps"),
    ],
)
@pytest.mark.usefixtures("count_ids")
def test_bad_arguments_name_the_value_and_the_fix(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match="Fix:") as caught:
        AgentVectorEnv([CountEnv] * 4, **kwargs)
    assert caught.value.name == name
    with pytest.raises(ConfigError):
        AgentVectorEnv.from_id(COUNT_ID, num_envs=4, **kwargs)


@pytest.mark.usefixtures("count_ids")
def test_bad_construction_and_calls_raise() -> None:
    with pytest.raises(ConfigError, match="num_envs"):
        AgentVectorEnv([])
    with pytest.raises(ConfigError, match="num_envs"):
        AgentVectorEnv.from_id(COUNT_ID, num_envs=0)
    with pytest.raises(ConfigError, match="AgentEnv"):
        AgentVectorEnv([lambda: gym.make(COUNT_ID)])  # a wrapper, not the AgentEnv
    with pytest.raises(ConfigError, match="observation_space"):
        AgentVectorEnv([CountEnv, lambda: _with_space(CountEnv(), Messages(max_messages=2))])
    venv = AgentVectorEnv([CountEnv] * 2)
    with pytest.raises(EnvStateError, match="never reset"):
        venv.step(["a", "b"])
    venv.reset()
    with pytest.raises(ConfigError, match="len\\(actions\\)"):
        venv.step(["only one"])
    with pytest.raises(ConfigError, match="actions"):
        venv.step("a string is not a batch")
    with pytest.raises(ConfigError, match="seed"):
        venv.reset(seed=-1)
    with pytest.raises(ConfigError, match="seed"):
        venv.reset(seed=[1, 2, 3])
    with pytest.raises(ConfigError, match="reset_mask"):
        venv.reset(options={"reset_mask": [True, False]})
    with pytest.raises(ConfigError, match="reset_mask"):
        venv.reset(options={"reset_mask": np.zeros(2, dtype=bool)})


def _with_space(env: CountEnv, space: Messages) -> CountEnv:
    env.observation_space = space
    return env


def test_disabled_mode_refuses_to_step_a_finished_env() -> None:
    venv = AgentVectorEnv([CountEnv] * 2, autoreset_mode="Disabled")
    venv.reset(seed=0)
    _, _, terminations, _, _ = venv.step(["stop", "go"])
    assert terminations.tolist() == [True, False]
    with pytest.raises(EnvStateError, match="reset_mask"):
        venv.step(["a", "b"])
    obs, infos = venv.reset(options={"reset_mask": np.array([True, False])})
    assert infos["_task"].tolist() == [True, False]
    assert obs[1][0]["content"].startswith("step 1")  # env 1 kept its last observation
    venv.step(["a", "b"])


def test_call_get_attr_set_attr_render() -> None:
    venv = AgentVectorEnv([lambda: SleepEnv(0.0)] * 3)
    venv.set_attr("delay", [0.0, 0.001, 0.002])
    assert venv.get_attr("delay") == (0.0, 0.001, 0.002)
    venv.set_attr("episode_length", 5)
    assert venv.get_attr("episode_length") == (5, 5, 5)
    venv.reset()
    assert venv.call("tool_schemas") == ([], [], [])
    assert len(venv.render()) == 3
    with pytest.raises(ConfigError):
        venv.set_attr("delay", [1, 2])


def test_close_closes_every_env_even_when_one_fails() -> None:
    class BadClose(FaultyEnv):
        async def aclose(self) -> None:
            raise OSError("cannot close")

    FaultyEnv.closed_count = 0
    venv = AgentVectorEnv([FaultyEnv, BadClose, FaultyEnv])
    venv.close()
    venv.close()  # idempotent
    assert FaultyEnv.closed_count == 2
    assert venv.closed
    with pytest.raises(EnvStateError, match="closed"):
        venv.reset()


def test_gymnasium_sync_and_async_vector_envs_run_agent_envs() -> None:
    sync = SyncVectorEnv([CountEnv] * 3)
    other = AsyncVectorEnv([CountEnv] * 3, shared_memory=False)
    try:
        assert_same(sync.reset(seed=2), other.reset(seed=2))
        for t in range(8):
            actions = (f"a{t}", "b", "c" * t)
            assert_same(sync.step(actions), other.step(actions), f"step {t}")
    finally:
        sync.close()
        other.close()
