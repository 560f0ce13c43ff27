"""Gymnasium's autoreset and info tests, run against ``AgentVectorEnv`` with ``SyncVectorEnv`` as
the reference.

The logic is ported from Gymnasium 1.4.0's ``tests/vector/test_autoreset_mode.py`` and
``test_vector_env_info.py`` (Farama Foundation, MIT licence) and rewritten for text envs (see
:mod:`tests.vector.gymnasium_toys`): every test parametrized over ``VECTORIZERS`` asserts
Gymnasium's expected values of ``AgentVectorEnv`` (both env styles) and of ``SyncVectorEnv``.
The last tests hold the vector env's step limit to Gymnasium's ``TimeLimit``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Box, Dict, Discrete, MultiDiscrete, Text, Tuple
from gymnasium.vector import AutoresetMode

import agentgym
from agentgym.core.spaces import Messages
from agentgym.registry import _ENVS
from agentgym.vector import AgentVectorEnv

from .compare import assert_same
from .gymnasium_toys import (
    EVERY_VECTORIZER,
    CustomSpace,
    GenericAgentEnv,
    Vectorizer,
    counts,
    random_reset,
    random_step,
    returning,
)

RANDOM_ID = "vectorparity/Random-v0"


Plain = tuple[list[int], list[float], list[bool], list[bool], Any]


def step(envs: Any, actions: list[str]) -> Plain:
    """One step, as plain lists: (counts, rewards, terminations, truncations, info)."""
    observations, rewards, terminations, truncations, info = envs.step(actions)
    return counts(observations), rewards.tolist(), terminations.tolist(), truncations.tolist(), info


def final_counts(info: dict[str, Any]) -> list[int | None]:
    """The count of each env's ``final_obs`` (``None`` where the mask says there is none)."""
    mask = info["_final_obs"]
    return [counts([o])[0] if m else None for o, m in zip(info["final_obs"], mask, strict=True)]


ACTIONS = ["a", "bb", "ccc"]  # rewards 1, 2, 3, as Gymnasium's actions [1, 2, 3]


@EVERY_VECTORIZER
def test_autoreset_next_step(build: Vectorizer) -> None:
    envs = build([{}] * 3, autoreset_mode=AutoresetMode.NEXT_STEP)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    envs.set_attr("max_count", [2, 3, 3])
    observations, info = envs.reset()
    assert (counts(observations), info) == ([0, 0, 0], {})
    F, T = False, True
    assert step(envs, ACTIONS) == ([1, 1, 1], [1, 2, 3], [F, F, F], [F, F, F], {})
    assert step(envs, ACTIONS) == ([2, 2, 2], [1, 2, 3], [T, F, F], [F, F, F], {})
    assert step(envs, ACTIONS) == ([0, 3, 3], [0, 2, 3], [F, T, T], [F, F, F], {})
    assert step(envs, ACTIONS) == ([1, 0, 0], [1, 0, 0], [F, F, F], [F, F, F], {})
    envs.close()


@EVERY_VECTORIZER
def test_autoreset_same_step(build: Vectorizer) -> None:
    envs = build([{}] * 3, autoreset_mode=AutoresetMode.SAME_STEP)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    envs.set_attr("max_count", [2, 3, 3])
    observations, info = envs.reset()
    assert (counts(observations), info) == ([0, 0, 0], {})
    F, T = False, True
    assert step(envs, ACTIONS) == ([1, 1, 1], [1, 2, 3], [F, F, F], [F, F, F], {})
    expected = [
        ([0, 2, 2], [T, F, F], [2, None, None]),
        ([1, 0, 0], [F, T, T], [None, 3, 3]),
        ([0, 1, 1], [T, F, F], [2, None, None]),
    ]
    for shown, terminations, finals in expected:
        got_counts, rewards, got_terminations, truncations, info = step(envs, ACTIONS)
        assert (got_counts, rewards, got_terminations) == (shown, [1, 2, 3], terminations)
        assert truncations == [F, F, F]
        assert set(info) == {"final_obs", "_final_obs", "final_info", "_final_info"}
        assert final_counts(info) == finals
        assert info["_final_obs"].tolist() == info["_final_info"].tolist() == terminations
        assert info["final_info"] == {}
    envs.close()


@EVERY_VECTORIZER
def test_autoreset_disabled(build: Vectorizer) -> None:
    envs = build([{}] * 3, autoreset_mode=AutoresetMode.DISABLED)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    envs.set_attr("max_count", [2, 3, 3])
    observations, info = envs.reset()
    assert (counts(observations), info) == ([0, 0, 0], {})
    F, T = False, True
    assert step(envs, ACTIONS) == ([1, 1, 1], [1, 2, 3], [F, F, F], [F, F, F], {})
    assert step(envs, ACTIONS) == ([2, 2, 2], [1, 2, 3], [T, F, F], [F, F, F], {})
    observations, info = envs.reset(options={"reset_mask": np.array([T, F, F])})
    assert (counts(observations), info) == ([0, 2, 2], {})
    assert step(envs, ACTIONS) == ([1, 3, 3], [1, 2, 3], [F, T, T], [F, F, F], {})
    observations, info = envs.reset(options={"reset_mask": np.array([F, T, T])})
    assert (counts(observations), info) == ([1, 0, 0], {})
    assert step(envs, ACTIONS) == ([2, 1, 1], [1, 2, 3], [T, F, F], [F, F, F], {})
    envs.close()


@EVERY_VECTORIZER
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_autoreset_mode_in_metadata_from_the_enum_or_its_value(
    build: Vectorizer, mode: AutoresetMode
) -> None:
    for given in (mode, mode.value):
        envs = build([{}, {}], autoreset_mode=given)
        assert envs.metadata["autoreset_mode"] is mode
        envs.close()


@pytest.fixture(scope="module")
def random_id() -> Iterator[str]:
    """Registers RANDOM_ID (the random toy, Gymnasium-style) for this module's tests."""
    agentgym.register(
        RANDOM_ID,
        f"{GenericAgentEnv.__module__}:GenericAgentEnv",
        kwargs={"reset_func": random_reset, "step_func": random_step},
    )
    yield RANDOM_ID
    gym.registry.pop(RANDOM_ID, None)
    _ENVS.pop(RANDOM_ID, None)


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_make_vec_takes_the_autoreset_mode(random_id: str, mode: AutoresetMode) -> None:
    for given in (mode, mode.value):
        envs = gym.make_vec(
            random_id, num_envs=2, vectorization_mode="vector_entry_point", autoreset_mode=given
        )
        assert isinstance(envs, AgentVectorEnv)
        assert envs.metadata["autoreset_mode"] is mode
        assert repr(envs) == f"AgentVectorEnv({random_id}, num_envs=2)"
        envs.close()
        vector_kwargs = {"autoreset_mode": given}
        sync = gym.make_vec(random_id, 2, vectorization_mode="sync", vector_kwargs=vector_kwargs)
        assert sync.metadata["autoreset_mode"] is mode
        sync.close()


FINAL_SPACES = [
    Box(low=-1.0, high=1.0, shape=(2,), dtype=np.float64),
    Discrete(5),
    MultiDiscrete([3, 4]),
    Tuple((Discrete(3), Box(0.0, 1.0, (2,), dtype=np.float64))),
    Dict({"a": Discrete(3), "b": Box(0.0, 1.0, (1,), dtype=np.float64)}),
    Text(6),
    CustomSpace(),
    Messages(),
]


@EVERY_VECTORIZER
@pytest.mark.parametrize("space", FINAL_SPACES, ids=[type(s).__name__ for s in FINAL_SPACES])
def test_same_step_final_observations_are_in_the_single_space(
    build: Vectorizer, space: gym.Space[Any]
) -> None:
    def reset_func(env: Any, seed: int | None, options: Any) -> tuple[Any, dict[str, Any]]:
        env.count = 0
        return env.observation_space.sample(), {}

    def step_func(env: Any, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        env.count += 1
        return env.observation_space.sample(), 0.0, env.count == env.max_count, False, {}

    envs = build(
        [
            {"reset_func": reset_func, "step_func": step_func, "space_seed": i,
             "observation_space": copy.deepcopy(space)}
            for i in range(3)
        ],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )  # fmt: skip
    envs.set_attr("max_count", [2, 3, 3])
    envs.reset()
    envs.step(ACTIONS)
    *_, info = envs.step(ACTIONS)
    assert info["_final_obs"].tolist() == [True, False, False]
    assert info["final_obs"][0] in envs.single_observation_space
    *_, info = envs.step(ACTIONS)
    assert info["_final_obs"].tolist() == [False, True, True]
    assert info["final_obs"][1] in envs.single_observation_space
    assert info["final_obs"][2] in envs.single_observation_space


@EVERY_VECTORIZER
def test_infos_are_batched_with_masks(build: Vectorizer) -> None:
    envs = build(
        [
            returning({"a": 1}, {"c": np.array([1, 2])}),
            returning({"a": 2, "b": 3}, {"c": np.array([3, 4])}),
        ]
    )
    _, info = envs.reset()
    expected = {
        "a": np.array([1, 2]),
        "b": np.array([0, 3]),
        "_a": np.array([True, True]),
        "_b": np.array([False, True]),
    }
    assert_same(info, expected)
    *_, info = envs.step(["x", "y"])
    assert_same(info, {"c": np.array([[1, 2], [3, 4]]), "_c": np.array([True, True])})


@EVERY_VECTORIZER
def test_nested_infos_are_batched_recursively(build: Vectorizer) -> None:
    envs = build(
        [
            returning({"episode": {"a": 1, "b": 1.0}}, {}),
            returning({"episode": {"a": 2, "b": 2.0}, "a": 1}, {}),
            returning({"a": 2}, {}),
        ]
    )
    _, info = envs.reset()
    expected = {
        "episode": {
            "a": np.array([1, 2, 0]),
            "b": np.array([1.0, 2.0, 0.0]),
            "_a": np.array([True, True, False]),
            "_b": np.array([True, True, False]),
        },
        "_episode": np.array([True, True, False]),
        "a": np.array([0, 1, 2]),
        "_a": np.array([False, True, True]),
    }
    assert_same(info, expected)


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_step_limit_infos_equal_time_limits(random_id: str, mode: AutoresetMode) -> None:
    """``max_episode_steps`` truncates as ``TimeLimit`` does and adds no info key, so the vector
    env's infos equal those of ``SyncVectorEnv`` over ``gym.make(..., max_episode_steps=2)``."""
    ours = AgentVectorEnv.from_id(random_id, num_envs=4, max_episode_steps=2, autoreset_mode=mode)
    reference = gym.make_vec(
        random_id, 4, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode},
        max_episode_steps=2,
    )  # fmt: skip
    assert_same(ours.reset(seed=3), reference.reset(seed=3))
    by_limit = 0
    for t in range(30):
        got = ours.step(["abc"] * 4)
        assert_same(got, reference.step(["abc"] * 4), f"step {t}")
        by_limit += int((got[3] & ~got[2]).sum())
        assert "truncation_reason" not in got[4]
        if mode is AutoresetMode.DISABLED and (done := got[2] | got[3]).any():
            mask = {"reset_mask": done}
            assert_same(ours.reset(options=dict(mask)), reference.reset(options=dict(mask)))
    assert by_limit > 5


def unbatch(info: dict[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s own info from a batched info (the inverse of ``VectorEnv._add_info``)."""
    return {
        key: unbatch(value, i) if isinstance(value, dict) else value[i]
        for key, value in info.items()
        if not key.startswith("_") and info[f"_{key}"][i]
    }


def test_a_truncated_step_has_the_info_of_the_single_env(random_id: str) -> None:
    single = gym.make(random_id, max_episode_steps=1)
    vector = AgentVectorEnv.from_id(random_id, num_envs=1, max_episode_steps=1)
    terminated_too = 0
    for seed in range(20):
        assert unbatch(vector.reset(seed=seed)[1], 0) == single.reset(seed=seed)[1]
        _, _, terminated, truncated, info = single.step("x")
        *_, terminations, truncations, vector_info = vector.step(["x"])
        assert (terminated, truncated) == (terminations[0], truncations[0]) == (terminated, True)
        assert unbatch(vector_info, 0) == info
        assert "truncation_reason" not in info
        terminated_too += terminated
    assert 0 < terminated_too < 20  # both kinds of ends were compared
