"""``agentgym.register`` side by side with ``gymnasium.register``: each option behaves the same."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.envs.registration import WrapperSpec

import agentgym
from agentgym.core import AgentEnv, Observation, StepResult, user
from agentgym.error import RegistryError, UnknownEnvError
from agentgym.registry import _ENVS


class Counter(AgentEnv):
    """Ends after ``length`` steps; the greeting comes from the constructor."""

    def __init__(self, greeting: str = "hello", length: int = 100) -> None:
        super().__init__()
        self.greeting, self.length = greeting, length

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        self.count = 0
        return (user(self.greeting),), {"tools": []}

    def step(self, action: Any) -> StepResult:
        self.count += 1
        done = self.count >= self.length
        return (user(str(self.count)),), 0.0, done, False, {"count": self.count}


def make_counter(**kwargs: Any) -> Counter:
    """A factory function as entry point (Gymnasium accepts any callable)."""
    return Counter(**kwargs)


class Tagged(gym.Wrapper[Any, Any, Any, Any]):
    """A wrapper for ``additional_wrappers``."""

    def __init__(self, env: gym.Env[Any, Any], tag: str = "t") -> None:
        super().__init__(env)
        self.tag = tag


Both = Callable[..., tuple[gym.Env[Any, Any], gym.Env[Any, Any]]]


@pytest.fixture
def both() -> Iterator[Both]:
    """Register one env with each function under two ids; make both with the same kwargs."""
    made: list[str] = []

    def _both(
        entry_point: Any = Counter, make_kwargs: dict[str, Any] | None = None, **options: Any
    ) -> tuple[gym.Env[Any, Any], gym.Env[Any, Any]]:
        gym.register("gymref/Counter-v0", entry_point=entry_point, **options)
        agentgym.register("agentref/Counter-v0", entry_point, **options)
        made.extend(["gymref/Counter-v0", "agentref/Counter-v0"])
        kwargs = make_kwargs or {}
        return gym.make("gymref/Counter-v0", **kwargs), gym.make("agentref/Counter-v0", **kwargs)

    yield _both
    for env_id in made:
        gym.registry.pop(env_id, None)
        _ENVS.pop(env_id, None)


def wrapper_chain(env: gym.Env[Any, Any]) -> list[type]:
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(type(env))
        env = env.env
    return [*chain, type(env)]


def run(env: gym.Env[Any, Any], steps: int) -> list[Any]:
    out: list[Any] = [env.reset(seed=0)]
    for _ in range(steps):
        out.append(env.step("x"))
        if out[-1][2] or out[-1][3]:
            break
    return out


def spec_fields(env: gym.Env[Any, Any]) -> dict[str, Any]:
    spec = env.spec
    assert spec is not None
    fields = dict(vars(spec))
    for key in ("id", "name", "namespace", "vector_entry_point"):
        fields.pop(key)
    return fields


@pytest.mark.parametrize("entry_point", [Counter, make_counter, f"{__name__}:Counter"])
def test_entry_points_string_class_or_factory(both: Both, entry_point: Any) -> None:
    ref, ours = both(entry_point, kwargs={"greeting": "hi"})
    assert run(ref, 2) == run(ours, 2)
    assert ours.unwrapped.greeting == "hi"
    assert wrapper_chain(ref) == wrapper_chain(ours)
    assert spec_fields(ref) == spec_fields(ours)


def test_kwargs_are_defaults_that_make_overrides(both: Both) -> None:
    ref, ours = both(kwargs={"greeting": "hi"}, make_kwargs={"greeting": "yo"})
    assert ref.reset()[0] == ours.reset()[0] == (user("yo"),)
    assert ours.spec.kwargs == ref.spec.kwargs == {"greeting": "yo"}


def test_max_episode_steps_truncates_the_same(both: Both) -> None:
    ref, ours = both(max_episode_steps=3)
    ref_run, our_run = run(ref, 10), run(ours, 10)
    assert ref_run == our_run
    assert len(our_run) == 4
    assert our_run[-1][3] is True
    assert gym.wrappers.TimeLimit in wrapper_chain(ours)


@pytest.mark.parametrize(
    "options",
    [
        {"disable_env_checker": True},
        {"order_enforce": False},
        {"disable_env_checker": True, "order_enforce": False},
        {"additional_wrappers": (WrapperSpec("Tagged", f"{__name__}:Tagged", {"tag": "z"}),)},
        {"reward_threshold": 0.5, "nondeterministic": True},
    ],
)
def test_wrapper_options_give_the_same_stack(both: Both, options: dict[str, Any]) -> None:
    ref, ours = both(**options)
    assert wrapper_chain(ref) == wrapper_chain(ours)
    assert spec_fields(ref) == spec_fields(ours)
    assert run(ref, 2) == run(ours, 2)


def test_order_enforce_refuses_a_step_before_reset_in_both(both: Both) -> None:
    ref, ours = both()
    for env in (ref, ours):
        with pytest.raises(gym.error.ResetNeeded):
            env.step("x")


def test_registering_an_id_again_warns_as_gymnasium_does(both: Both) -> None:
    both()
    for register, env_id in (
        (gym.register, "gymref/Counter-v0"),
        (agentgym.register, "agentref/Counter-v0"),
    ):
        with pytest.warns(UserWarning, match=f"Overriding environment {env_id}"):
            register(env_id, entry_point=Counter, kwargs={"greeting": "again"})
    assert gym.make("agentref/Counter-v0").reset()[0] == (user("again"),)
    assert agentgym.registry.env_info("agentref/Counter-v0").kwargs == {"greeting": "again"}


def test_a_first_registration_does_not_warn(both: Both) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both()


def test_callable_entry_points_list_by_name(both: Both) -> None:
    both(make_counter)
    info = agentgym.registry.env_info("agentref/Counter-v0")
    assert info.entry_point_name == f"{__name__}:make_counter"


def test_unknown_ids_are_gymnasiums_unregistered_env_error() -> None:
    with pytest.raises(gym.error.UnregisteredEnv, match="Did you mean 'agentgym/FrozenLake-v0'"):
        agentgym.make("agentgym/FrozenLak-v0")
    with pytest.raises(UnknownEnvError):
        agentgym.make("agentgym/FrozenLak-v0")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"entry_point": None}, "neither an entry_point nor a vector_entry_point"),
        ({"entry_point": 42}, "neither a 'module:attribute' string nor callable"),
        ({"entry_point": Counter, "kwargs": [("greeting", "hi")]}, "is not a dict"),
    ],
)
def test_bad_registrations_name_the_fix(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(RegistryError, match=match):
        agentgym.register("agentref/Bad-v0", **kwargs)
    assert "agentref/Bad-v0" not in gym.registry
