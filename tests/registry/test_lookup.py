"""The commands' env lookup: ``module:Env-v0`` and imports reach the user's own envs; an unknown
id or argument is refused with "did you mean" before anything is made."""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import pytest

import agentgym
from agentgym.core.errors import ConfigError, UnknownEnvError
from agentgym.registry import resolve_id, split_module
from agentgym.registry.lookup import (
    OWN_ENV_HINT,
    check_env_kwargs,
    env_arguments,
    find_env,
    prepare_env,
)


def test_module_colon_id_imports_the_module_then_finds_the_id(user_envs) -> None:
    module, env_id = user_envs
    assert split_module(f"{module}:{env_id}") == (module, env_id)
    assert split_module("agentgym/FrozenLake-v0") == (None, "agentgym/FrozenLake-v0")
    assert find_env(f"{module}:{env_id}") == env_id
    assert gym.make(env_id).unwrapped.size == 2  # registered by the module's import


def test_an_import_registers_the_id_before_it_is_looked_up(user_envs) -> None:
    module, env_id = user_envs
    with pytest.raises(UnknownEnvError):
        find_env(env_id)
    assert find_env(env_id, imports=[module]) == env_id


def test_the_library_resolves_the_module_form_as_gym_make_does(user_envs) -> None:
    module, env_id = user_envs
    sys.path.insert(0, os.getcwd())  # as a script's folder is (the fixture restores sys.path)
    assert resolve_id(f"{module}:{env_id}") == env_id
    env = agentgym.make(f"{module}:{env_id}")
    assert env.unwrapped.size == 2
    env.close()


def test_an_unknown_id_says_did_you_mean_and_how_to_reach_your_own() -> None:
    with pytest.raises(UnknownEnvError) as caught:
        find_env("agentgym/FrozenLke-v0")
    message = str(caught.value)
    assert "Did you mean 'agentgym/FrozenLake-v0'?" in message
    assert OWN_ENV_HINT in message
    assert "yourmodule:MyEnv-v0" in message


@pytest.mark.parametrize(
    ("env_id", "imports", "flag"),
    [("no_such_module_xyz:My-v0", [], "--env"), ("agentgym/FrozenLake-v0", ["no.such"], "--import"),
     ("agentgym/FrozenLake-v0", ["not a module"], "--import")],
)  # fmt: skip
def test_a_module_that_cannot_be_imported_is_a_config_error(env_id, imports, flag) -> None:
    with pytest.raises(ConfigError, match=f"^{flag}="):
        find_env(env_id, imports)


def test_an_unknown_argument_names_the_closest_and_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        prepare_env("agentgym/FrozenLake-v0", {"size": 3, "sise": 5})
    message = str(caught.value)
    assert message.startswith("--env-kwargs sise=5: is not an argument of agentgym/FrozenLake-v0")
    assert "Did you mean 'size'?" in message
    assert "Valid arguments: size, sizes, hole_prob, slippery" in message


def test_arguments_of_the_constructor_and_of_gym_make_are_valid() -> None:
    valid = env_arguments("agentgym/FrozenLake-v0")
    assert valid is not None
    assert {"size", "slippery", "render_mode", "max_episode_steps"} <= set(valid)
    check_env_kwargs("agentgym/FrozenLake-v0", {"size": 3, "max_episode_steps": 4})


def test_an_env_that_takes_any_keyword_is_not_checked() -> None:
    class Anything(gym.Env):  # type: ignore[type-arg]
        def __init__(self, **kwargs: object) -> None:
            self.kwargs = kwargs

    gym.register("lookuptest/Anything-v0", entry_point=Anything)
    try:
        assert env_arguments("lookuptest/Anything-v0") is None
        check_env_kwargs("lookuptest/Anything-v0", {"whatever": 1})
    finally:
        gym.registry.pop("lookuptest/Anything-v0")

