"""register / list_envs / make: id grammar, metadata, "did you mean", serialisable specs."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.envs.registration import EnvSpec

import agentgym
from agentgym.core import AgentEnv, Observation, StepResult, user
from agentgym.error import RegistryError, UnknownEnvError
from agentgym.registry import _ENVS, EnvInfo, env_info, list_envs, resolve_id


class Tiny(AgentEnv):
    def __init__(self, greeting: str = "hello", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.greeting = greeting

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        return (user(self.greeting),), {"tools": []}

    async def astep(self, action: Any) -> StepResult:
        return (user("bye"),), 1.0, True, False, {}


ENTRY_POINT = f"{__name__}:Tiny"
Register = Callable[..., EnvInfo]


@pytest.fixture
def register() -> Iterator[Register]:
    """``agentgym.register`` that removes what it registered afterwards."""
    ids: list[str] = []

    def _register(env_id: str, entry_point: str = ENTRY_POINT, **kwargs: Any) -> EnvInfo:
        ids.append(env_id)
        return agentgym.register(env_id, entry_point, **kwargs)

    yield _register
    for env_id in ids:
        gym.registry.pop(env_id, None)
        _ENVS.pop(env_id, None)


@pytest.mark.parametrize(
    "env_id",
    [
        "agentgym/lowercase-v0",
        "agentgym/NoVersion",
        "agentgym/Under_Score-v0",
        "agentgym/Trailing-",
        "agentgym/Bad-v0-v1",
        "has spaces/Env-v0",
        "a/b/Env-v0",
        "",
        "myorg/Env-vX!",
    ],
)
def test_register_rejects_ids_that_break_the_grammar(register: Register, env_id: str) -> None:
    with pytest.raises(RegistryError, match="breaks the id grammar"):
        register(env_id)
    assert env_id not in gym.registry


@pytest.mark.parametrize(
    "env_id",
    [
        "agentgym/TestOnly-v0",
        "agentgym/TestOnly-Hard-v12",
        "myorg/my_env-v0",
        "Plain-v3",
        "myorg/Unversioned",
    ],
)
def test_register_accepts_ids_that_follow_the_grammar(register: Register, env_id: str) -> None:
    register(env_id)
    assert env_id in gym.registry


def test_register_rejects_an_entry_point_that_is_not_a_string_path(register: Register) -> None:
    with pytest.raises(RegistryError, match="'module:attribute'"):
        register("testns/Tiny-v0", entry_point="tests.Tiny")


def test_register_rejects_an_inverted_reward_range(register: Register) -> None:
    with pytest.raises(RegistryError, match="min > max"):
        register("testns/Tiny-v0", reward_range=(1.0, 0.0))


def test_register_records_metadata(register: Register) -> None:
    info = register(
        "testns/Tiny-Hard-v2",
        tags=["multi-turn", "tools"],
        extras=["code"],
        reward_range=(-1, 2),
        description="A test env.",
        max_episode_steps=5,
        kwargs={"greeting": "hi"},
    )
    assert info == EnvInfo(
        id="testns/Tiny-Hard-v2",
        entry_point=ENTRY_POINT,
        family="Tiny",  # the name before the first "-"
        tags=("multi-turn", "tools"),
        extras=("code",),
        reward_range=(-1.0, 2.0),
        description="A test env.",
        kwargs={"greeting": "hi"},
    )
    assert env_info("testns/Tiny-Hard-v2") is info
    spec = info.spec
    assert (spec.max_episode_steps, spec.kwargs) == (5, {"greeting": "hi"})
    assert spec.vector_entry_point == "agentgym.vector.entry:testns/Tiny-Hard-v2"
    assert register("testns/Other-v0", family="Custom").family == "Custom"


def test_made_env_gets_the_registered_kwargs_and_overrides(register: Register) -> None:
    register("testns/Tiny-v0", kwargs={"greeting": "hi"})
    assert gym.make("testns/Tiny-v0").reset()[0] == (user("hi"),)
    assert agentgym.make("testns/Tiny-v0", greeting="yo").reset()[0] == (user("yo"),)


def test_list_envs_filters_by_family_and_tag(register: Register) -> None:
    register("testns/Alpha-v0", tags=["grid"])
    register("testns/Alpha-Hard-v0", tags=["grid", "hard"])
    register("testns/Beta-v0", tags=["hard"])
    ours = {"testns/Alpha-v0", "testns/Alpha-Hard-v0", "testns/Beta-v0"}
    listed = [i.id for i in list_envs()]
    assert ours <= set(listed)
    assert listed == sorted(listed)
    assert [i.id for i in list_envs(family="Alpha")] == ["testns/Alpha-Hard-v0", "testns/Alpha-v0"]
    assert {i.id for i in list_envs(tag="hard")} & ours == {
        "testns/Alpha-Hard-v0",
        "testns/Beta-v0",
    }
    assert [i.id for i in list_envs(family="Alpha", tag="hard")] == ["testns/Alpha-Hard-v0"]
    assert list_envs(family="NoSuchFamily") == []


def test_list_envs_leaves_out_plain_gymnasium_envs() -> None:
    assert "CartPole-v1" in gym.registry
    assert "CartPole-v1" not in {i.id for i in list_envs()}


def test_builtin_frozenlake_is_registered_with_metadata() -> None:
    info = env_info("agentgym/FrozenLake-v0")
    assert info.family == "FrozenLake"
    assert "tools" in info.tags
    assert info.entry_point == "agentgym.envs.frozenlake:FrozenLakeEnv"


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("agentgym/frozenlake-v0", "agentgym/FrozenLake-v0"),  # case
        ("agentgym/FrozenLake", "agentgym/FrozenLake-v0"),  # no version
        ("agentgym/FrozenLak-v0", "agentgym/FrozenLake-v0"),  # typo
        ("CartPol-v1", "CartPole-v1"),  # Gymnasium's own ids when nothing of ours is close
    ],
)
def test_unknown_ids_get_a_did_you_mean(typo: str, suggestion: str) -> None:
    for lookup in (resolve_id, agentgym.make):
        with pytest.raises(UnknownEnvError, match=f"Did you mean '{suggestion}'") as caught:
            lookup(typo)
        assert caught.value.env_id == typo


def test_an_id_far_from_everything_has_no_suggestion() -> None:
    with pytest.raises(UnknownEnvError) as caught:
        resolve_id("zzzz/Qqqqqqqqq-v9")
    assert "Did you mean" not in str(caught.value)


def test_env_info_rejects_ids_not_registered_through_agentgym() -> None:
    with pytest.raises(UnknownEnvError):
        env_info("CartPole-v1")


def test_spec_is_json_serialisable_and_picklable(register: Register) -> None:
    register("testns/Tiny-v0", max_episode_steps=3, kwargs={"greeting": "hi"})
    spec = gym.spec("testns/Tiny-v0")
    assert EnvSpec.from_json(spec.to_json()) == spec
    assert json.loads(spec.to_json())["kwargs"] == {"greeting": "hi"}
    assert pickle.loads(pickle.dumps(spec)) == spec
    made = gym.make("testns/Tiny-v0")
    assert pickle.loads(pickle.dumps(made.spec)) == made.spec
    made.spec.to_json()


def test_env_info_pickles(register: Register) -> None:
    info = register("testns/Tiny-v0", tags=["a"])
    assert pickle.loads(pickle.dumps(info)) == info


def test_heavy_layers_load_lazily_on_first_attribute_access() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentgym\n"
        "assert 'torch' not in sys.modules, 'import agentgym must not import torch'\n"
        "assert callable(agentgym.trainers.make)\n"
        "assert 'torch' in sys.modules\n"
        "try:\n"
        "    agentgym.nonexistent\n"
        "except AttributeError as e:\n"
        "    assert 'nonexistent' in str(e)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
