"""Gymnasium's vector-env tests of seeding, partial resets and bad arguments, run against
``AgentVectorEnv`` with ``SyncVectorEnv`` as the reference.

The logic is ported from Gymnasium 1.4.0's ``tests/vector/test_vector_env.py`` (Farama
Foundation, MIT licence) and rewritten for text envs (see :mod:`tests.vector.gymnasium_toys`):
tests parametrized over ``VECTORIZERS`` assert Gymnasium's expectations of ``AgentVectorEnv``
(both env styles) and of ``SyncVectorEnv`` alike. Where ours raises, it raises Gymnasium's error
type and is also an agentgym ``ConfigError`` naming the value and the fix.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Discrete
from gymnasium.vector import AutoresetMode

from agentgym.core.spaces import AssistantTurn
from agentgym.error import ConfigError
from agentgym.vector import AgentVectorEnv

from .gymnasium_toys import (
    EVERY_VECTORIZER,
    REFERENCE,
    STYLES,
    GenericAgentEnv,
    Vectorizer,
    counts,
    space_step,
)


@pytest.mark.parametrize("group_size", [1, 2])
@STYLES
def test_np_random_seed_comes_from_the_sub_envs(
    env_cls: type[GenericAgentEnv], group_size: int
) -> None:
    envs = AgentVectorEnv([env_cls] * 4, group_size=group_size)
    envs.reset(seed=42)
    expected = (42, 43, 44, 45) if group_size == 1 else (42, 42, 43, 43)
    assert envs.np_random_seed == expected
    assert envs.np_random_seed == tuple(e.np_random_seed for e in envs.envs)
    assert all(a is e.np_random for a, e in zip(envs.np_random, envs.envs, strict=True))
    if group_size == 1:
        reference = REFERENCE([{}] * 4)
        reference.reset(seed=42)
        assert envs.np_random_seed == reference.np_random_seed
        assert [g.bit_generator.state for g in envs.np_random] == [
            g.bit_generator.state for g in reference.np_random
        ]
    envs.reset(seed=None)  # a reset without a seed keeps the generators
    if group_size == 1:
        assert envs.np_random_seed == expected


@EVERY_VECTORIZER
def test_seeds_set_in_the_factories_are_read_back(build: Vectorizer) -> None:
    def seeded(seed: int) -> Any:
        env = build.env_cls()
        env.reset(seed=seed)
        return env

    envs = build.vector_cls([functools.partial(seeded, i) for i in range(4)])
    assert envs.np_random_seed == (0, 1, 2, 3)


@EVERY_VECTORIZER
def test_partial_reset(build: Vectorizer) -> None:
    envs = build([{}] * 3, autoreset_mode=AutoresetMode.DISABLED)
    envs.set_attr("max_count", 100)
    reset_observations, _ = envs.reset(seed=[0, 1, 2])
    for _ in range(3):
        step_observations, *_ = envs.step(["a", "b", "c"])
    assert counts(step_observations) == [3, 4, 5]
    mask = np.array([True, True, False])
    observations, _ = envs.reset(seed=[0, 1, 0], options={"reset_mask": mask})
    assert observations[:2] == reset_observations[:2]
    assert observations[2] == step_observations[2]
    assert counts(observations) == [0, 1, 5]


BAD_MASKS = [
    (np.array([True]), ValueError, "got (1,)"),
    (np.array([True, True, False, False]), ValueError, "got (4,)"),
    (np.array([[True, True, True]]), ValueError, "got (1, 3)"),
    (np.array([False, False, False]), ValueError, "at least one"),
    (np.array([1, 1, 0]), TypeError, "got int64"),
    (np.array([1.0, 1.0, 0.0]), TypeError, "got float64"),
    ([True, True, False], TypeError, "numpy array"),
]


@EVERY_VECTORIZER
@pytest.mark.parametrize(("mask", "error", "says"), BAD_MASKS)
def test_bad_reset_masks_raise_gymnasiums_error_types(
    build: Vectorizer, mask: Any, error: type[Exception], says: str
) -> None:
    envs = build([{}] * 3, autoreset_mode=AutoresetMode.DISABLED)
    envs.reset(options={"reset_mask": np.array([True, True, True])})
    with pytest.raises(error, match=re.escape(says)) as caught:
        envs.reset(options={"reset_mask": mask})
    if isinstance(envs, AgentVectorEnv):  # and ours names the value and the fix
        assert isinstance(caught.value, ConfigError)
        assert "options['reset_mask']=" in str(caught.value)
        assert "Fix:" in str(caught.value)


@pytest.mark.parametrize("action_space", [Discrete(5), AssistantTurn()], ids=["Discrete", "text"])
@EVERY_VECTORIZER
def test_the_number_and_type_of_actions_are_checked(
    build: Vectorizer, action_space: gym.Space[Any]
) -> None:
    envs = build([{"action_space": copy.deepcopy(action_space), "step_func": space_step}] * 4)
    envs.reset()
    actions = envs.action_space.sample()
    assert len(actions) == 4
    observations, rewards, terminations, truncations, _ = envs.step(actions)
    assert len(observations) == len(rewards) == len(terminations) == len(truncations) == 4
    too_many = [*actions, actions[0]] if isinstance(actions, tuple) else np.append(actions, 1)
    for wrong in (actions[:3], too_many):
        with pytest.raises(ValueError):  # noqa: PT011 (Gymnasium's message is the zip's)
            envs.step(wrong)
    if isinstance(envs, AgentVectorEnv) or isinstance(action_space, Discrete):
        with pytest.raises(TypeError):  # SyncVectorEnv over text raises CustomSpaceError here
            envs.step(0)
