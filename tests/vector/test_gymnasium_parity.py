"""Gymnasium's own vector-env tests, run against ``AgentVectorEnv`` with ``SyncVectorEnv`` as the
reference.

The logic is ported from Gymnasium 1.4.0's ``tests/vector/test_sync_vector_env.py``,
``test_vector_env.py`` and ``test_vector_wrapper.py`` (Farama Foundation, MIT licence) and
rewritten for text envs: where Gymnasium builds CartPole or FrozenLake, these build the toys of
:mod:`tests.vector.gymnasium_toys`, as ``AgentEnv`` s in both styles, and compare them with
``SyncVectorEnv`` over the same logic as a plain ``gymnasium.Env``. Tests parametrized over
``VECTORIZERS`` assert Gymnasium's expectations of ours and of the reference alike.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Text, Tuple
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv, VectorWrapper

from agentgym.core.spaces import AssistantTurn, Messages
from agentgym.error import ConfigError, SpaceMismatchError
from agentgym.vector import AgentVectorEnv

from .compare import assert_same
from .gymnasium_toys import (
    EVERY_VECTORIZER,
    REFERENCE,
    STYLES,
    CustomSpace,
    GenericAgentEnv,
    GenericGymEnv,
    Vectorizer,
    assert_rng_equal,
    counts,
    custom_reset,
    custom_step,
    random_reset,
    random_step,
    space_reset,
    space_step,
)

RANDOM = {"reset_func": random_reset, "step_func": random_step}


@STYLES
def test_create_and_core_attributes(env_cls: type[GenericAgentEnv]) -> None:
    envs = AgentVectorEnv([env_cls] * 8)
    reference = SyncVectorEnv([GenericGymEnv] * 8)
    assert isinstance(envs, VectorEnv)
    assert envs.num_envs == reference.num_envs == 8
    assert envs.unwrapped is envs
    assert envs.spec is None
    assert repr(envs) == repr(reference).replace("SyncVectorEnv", "AgentVectorEnv")
    assert envs.single_observation_space == reference.single_observation_space == Messages()
    assert envs.single_action_space == reference.single_action_space == AssistantTurn()
    assert envs.observation_space == reference.observation_space
    assert envs.action_space == reference.action_space
    assert isinstance(envs.observation_space, Tuple)
    envs.close()
    assert envs.closed
    assert all(e.closed for e in envs.envs)
    envs.close()  # a second close does nothing


@STYLES
def test_metadata_is_a_copy_holding_the_autoreset_mode(env_cls: type[GenericAgentEnv]) -> None:
    envs_1 = AgentVectorEnv([env_cls], autoreset_mode=AutoresetMode.NEXT_STEP)
    envs_2 = AgentVectorEnv([env_cls], autoreset_mode=AutoresetMode.SAME_STEP)
    assert envs_1.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert envs_2.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert "autoreset_mode" not in envs_1.envs[0].metadata
    assert "autoreset_mode" not in env_cls.metadata
    assert envs_1.metadata == SyncVectorEnv([env_cls]).metadata


@STYLES
def test_reset_batches_like_sync_vector_env(env_cls: type[GenericAgentEnv]) -> None:
    envs = AgentVectorEnv([functools.partial(env_cls, **RANDOM)] * 8)
    reference = REFERENCE([RANDOM] * 8)
    observations, infos = envs.reset(seed=3)
    assert isinstance(observations, tuple)
    assert len(observations) == 8
    assert observations in envs.observation_space
    assert_same((observations, infos), reference.reset(seed=3))
    assert infos["_task"].all()


@STYLES
@pytest.mark.parametrize("use_single_action_space", [True, False])
def test_step_takes_single_or_batched_samples(
    env_cls: type[GenericAgentEnv], use_single_action_space: bool
) -> None:
    envs = AgentVectorEnv([functools.partial(env_cls, **RANDOM)] * 8)
    reference = REFERENCE([RANDOM] * 8)
    envs.reset(seed=0)
    reference.reset(seed=0)
    assert isinstance(envs.single_action_space, AssistantTurn)
    assert isinstance(envs.action_space, Tuple)
    if use_single_action_space:
        actions: Any = [envs.single_action_space.sample() for _ in range(8)]
    else:
        actions = envs.action_space.sample()
    result = envs.step(actions)
    assert_same(result, reference.step(actions))
    observations, rewards, terminations, truncations, _ = result
    assert observations in envs.observation_space
    assert isinstance(rewards, np.ndarray)
    assert (rewards.dtype, rewards.shape) == (np.float64, (8,))
    for flags in (terminations, truncations):
        assert isinstance(flags, np.ndarray)
        assert (flags.dtype, flags.shape) == (np.bool_, (8,))


@STYLES
def test_render(env_cls: type[GenericAgentEnv]) -> None:
    envs = AgentVectorEnv([functools.partial(env_cls, render_mode="ansi")] * 3)
    reference = REFERENCE([{"render_mode": "ansi"}] * 3)
    assert envs.render_mode == reference.render_mode == "ansi"
    envs.reset(seed=5)
    reference.reset(seed=5)
    frames = envs.render()
    assert isinstance(frames, tuple)
    assert len(frames) == envs.num_envs
    assert frames == reference.render() == ("[user]\ncount 5", "[user]\ncount 6", "[user]\ncount 7")
    assert AgentVectorEnv([env_cls] * 3).render_mode is None


@STYLES
def test_call_methods_and_attributes(env_cls: type[GenericAgentEnv]) -> None:
    envs = AgentVectorEnv([functools.partial(env_cls, render_mode="ansi")] * 4)
    reference = REFERENCE([{"render_mode": "ansi"}] * 4)
    envs.reset(seed=1)
    reference.reset(seed=1)
    images = envs.call("render")
    assert isinstance(images, tuple)
    assert images == reference.call("render") == tuple(f"[user]\ncount {i}" for i in (1, 2, 3, 4))
    assert envs.call("max_count") == reference.call("max_count") == (3, 3, 3, 3)


@STYLES
def test_set_attr_and_get_attr(env_cls: type[GenericAgentEnv]) -> None:
    envs = AgentVectorEnv([env_cls] * 4)
    envs.set_attr("max_count", [9, 3, 7, 1])
    assert envs.get_attr("max_count") == (9, 3, 7, 1)
    assert [e.max_count for e in envs.envs] == [9, 3, 7, 1]
    envs.set_attr("max_count", 5)  # one value for all
    assert envs.get_attr("max_count") == (5, 5, 5, 5)
    for vector_env in (envs, REFERENCE([{}] * 4)):
        with pytest.raises(ValueError, match="4"):
            vector_env.set_attr("max_count", [1, 2])
    with pytest.raises(ConfigError, match="Fix:"):
        envs.set_attr("max_count", [1, 2])


@pytest.mark.parametrize(
    "other",
    [
        {"observation_space": Messages(max_messages=2)},
        {"action_space": AssistantTurn(max_length=9)},
    ],
    ids=["observation_space", "action_space"],
)
@STYLES
def test_sub_envs_with_different_spaces_raise_runtime_error(
    env_cls: type[GenericAgentEnv], other: dict[str, Any]
) -> None:
    with pytest.raises(RuntimeError):
        REFERENCE([{}, {}, other])
    with pytest.raises(RuntimeError, match=next(iter(other))) as caught:
        AgentVectorEnv([env_cls, env_cls, functools.partial(env_cls, **other)])
    assert isinstance(caught.value, SpaceMismatchError)
    assert "Fix:" in str(caught.value)


@STYLES
def test_custom_spaces(env_cls: type[GenericAgentEnv]) -> None:
    custom = {
        "reset_func": custom_reset,
        "step_func": custom_step,
        "observation_space": CustomSpace(),
        "action_space": CustomSpace(),
    }
    envs = AgentVectorEnv([functools.partial(env_cls, **copy.deepcopy(custom)) for _ in range(4)])
    reference = REFERENCE([copy.deepcopy(custom) for _ in range(4)])
    reset_observations, _ = envs.reset()
    assert isinstance(envs.single_action_space, CustomSpace)
    assert isinstance(envs.action_space, Tuple)
    assert isinstance(envs.single_observation_space, CustomSpace)
    assert isinstance(envs.observation_space, Tuple)
    assert reset_observations == ("reset",) * 4
    actions = ("action-2", "action-3", "action-5", "action-7")
    step_observations, *_ = envs.step(actions)
    assert step_observations == tuple(f"step({a})" for a in actions)
    assert_same(reference.reset(), (reset_observations, {}))
    assert reference.step(actions)[0] == step_observations


@STYLES
def test_action_space_seeded_like_sync_vector_env(env_cls: type[GenericAgentEnv]) -> None:
    def seeded(cls: type[Any]) -> Any:
        env = cls()
        env.action_space.seed(123)
        env.reset(seed=123)
        return env

    envs = AgentVectorEnv([functools.partial(seeded, env_cls)] * 3)
    again = AgentVectorEnv([functools.partial(seeded, env_cls)] * 3)
    reference = SyncVectorEnv([functools.partial(seeded, GenericGymEnv)] * 3)
    single = seeded(env_cls)
    assert_rng_equal(single.action_space.np_random, envs.action_space.np_random)
    assert_rng_equal(envs.action_space.np_random, again.action_space.np_random)
    samples = [envs.action_space.sample() for _ in range(100)]
    assert len(set(samples)) > 90  # the samples vary...
    assert samples == [again.action_space.sample() for _ in range(100)]  # ...deterministically
    assert samples == [reference.action_space.sample() for _ in range(100)]


@STYLES
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_equal_to_sync_vector_env_over_100_random_steps(
    env_cls: type[GenericAgentEnv], mode: AutoresetMode
) -> None:
    envs = AgentVectorEnv([functools.partial(env_cls, **RANDOM)] * 4, autoreset_mode=mode)
    reference = REFERENCE([RANDOM] * 4, autoreset_mode=mode)
    assert envs.observation_space == reference.observation_space
    assert envs.action_space == reference.action_space
    assert_same(envs.reset(seed=0), reference.reset(seed=0), "reset")
    endings = 0
    for t in range(100):
        actions = envs.action_space.sample()
        assert actions in reference.action_space
        got = envs.step(actions)
        assert_same(got, reference.step(actions), f"step {t}")
        done = got[2] | got[3]
        endings += int(done.sum())
        if mode is AutoresetMode.DISABLED and done.any():
            mask = {"reset_mask": done}
            assert_same(envs.reset(options=dict(mask)), reference.reset(options=dict(mask)))
    assert endings > 50


SPACES = [
    Box(low=-1.0, high=1.0, shape=(3,), dtype=np.float64),
    Discrete(5, start=-2),
    MultiDiscrete([11, 13, 17]),
    MultiBinary(6),
    Tuple((Discrete(7), Box(low=0.0, high=1.0, shape=(2,), dtype=np.float64))),
    Dict({"position": Discrete(23), "velocity": Box(0.0, 1.0, (1,), dtype=np.float64)}),
    Dict({"inner": Dict({"x": Discrete(3)}), "pair": Tuple((Discrete(2), MultiBinary(2)))}),
    Text(12),
    CustomSpace(),
    Messages(),
]


@STYLES
@pytest.mark.parametrize("space", SPACES, ids=[type(s).__name__ for s in SPACES])
def test_observation_and_action_spaces_batch_like_sync_vector_env(
    env_cls: type[GenericAgentEnv], space: gym.Space[Any]
) -> None:
    def kwargs(i: int) -> dict[str, Any]:
        return {
            "reset_func": space_reset,
            "step_func": space_step,
            "observation_space": copy.deepcopy(space),
            "action_space": copy.deepcopy(space),
            "space_seed": i,
        }

    envs = AgentVectorEnv([functools.partial(env_cls, **kwargs(i)) for i in range(3)])
    reference = REFERENCE([kwargs(i) for i in range(3)])
    assert envs.observation_space == envs.action_space == reference.observation_space
    observations, _ = envs.reset()
    assert observations in envs.observation_space
    assert_same((observations,), (reference.reset()[0],))
    envs.action_space.seed(7)
    actions = envs.action_space.sample()
    result = envs.step(actions)
    assert result[0] in envs.observation_space
    assert_same(result, reference.step(actions))


@EVERY_VECTORIZER
def test_final_observation_and_info_under_next_step(build: Vectorizer) -> None:
    def reset_func(env: Any, seed: int | None, options: Any) -> tuple[Any, dict[str, Any]]:
        return ({"role": "user", "content": "0"},), {"reset": True}

    def step_func(env: Any, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        shown = ({"role": "user", "content": action if int(action) < 3 else "0"},)
        return shown, 0.0, int(action) >= 3, False, {"action": action}

    envs = build([{"reset_func": reset_func, "step_func": step_func}])
    observations, info = envs.reset()
    assert counts(observations) == [0]
    assert_same(info, {"reset": np.array([True]), "_reset": np.array([True])})
    for action in ("1", "2"):
        observations, _, terminations, _, info = envs.step([action])
        assert counts(observations) == [int(action)]
        assert terminations.tolist() == [False]
        assert_same(info, {"action": np.array([action], dtype=object), "_action": np.array([True])})
    observations, _, terminations, _, info = envs.step(["3"])
    assert counts(observations) == [0]
    assert terminations.tolist() == [True]
    assert_same(info, {"action": np.array(["3"], dtype=object), "_action": np.array([True])})
    observations, _, terminations, _, info = envs.step(["4"])  # ignored: the env resets
    assert counts(observations) == [0]
    assert terminations.tolist() == [False]
    assert_same(info, {"reset": np.array([True]), "_reset": np.array([True])})
    envs.close()


class CountingWrapper(VectorWrapper):
    """Gymnasium's ``DummyVectorWrapper``: counts the resets that pass through it."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.counter = 0

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        self.counter += 1
        return super().reset(seed=seed, options=options)


@STYLES
def test_vector_wrappers_forward_to_agent_vector_env(env_cls: type[GenericAgentEnv]) -> None:
    envs = AgentVectorEnv([env_cls] * 3)
    wrapped = CountingWrapper(AgentVectorEnv([env_cls] * 3))
    wrapped.reset(seed=4)
    assert wrapped.counter == 1
    assert wrapped.np_random_seed == (4, 5, 6)
    assert wrapped.unwrapped is wrapped.env
    assert wrapped.env.call("max_count") == envs.call("max_count")
    envs.set_attr("max_count", [7, 8, 9])
    wrapped.env.set_attr("max_count", [7, 8, 9])
    assert wrapped.env.get_attr("max_count") == envs.get_attr("max_count") == (7, 8, 9)
    assert envs.metadata == wrapped.metadata
    envs.metadata = {"render_modes": ["ansi"]}
    assert envs.metadata != wrapped.metadata
