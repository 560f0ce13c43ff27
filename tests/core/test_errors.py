"""The error hierarchy: what each error is, what it says, and that one root catches them all."""

from __future__ import annotations

import gymnasium
import pytest

import agentgym.error
from agentgym.core import errors

CLASSES = [getattr(errors, name) for name in errors.__all__]
ERRORS = [c for c in CLASSES if not issubclass(c, Warning)]
WARNINGS = [c for c in CLASSES if issubclass(c, Warning)]


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_is_an_agentgym_and_a_gymnasium_error(cls: type) -> None:
    assert issubclass(cls, errors.Error)
    assert issubclass(cls, gymnasium.error.Error)


@pytest.mark.parametrize("cls", WARNINGS, ids=lambda c: c.__name__)
def test_every_warning_is_an_agentgym_warning(cls: type) -> None:
    assert issubclass(cls, errors.AgentGymWarning)
    assert issubclass(cls, UserWarning)


@pytest.mark.parametrize("name", errors.__all__)
def test_agentgym_error_reexports_the_hierarchy(name: str) -> None:
    assert getattr(agentgym.error, name) is getattr(errors, name)


@pytest.mark.parametrize("name", errors.__all__)
def test_module_docstring_draws_every_class(name: str) -> None:
    assert name in errors.__doc__


def test_config_error_names_value_rule_and_fix_and_is_a_value_error() -> None:
    error = errors.ConfigError("num_envs", 0, "must be at least 1", "pass 1 or more")
    assert isinstance(error, ValueError)
    assert str(error) == "num_envs=0: must be at least 1. Fix: pass 1 or more"
    assert (error.name, error.value) == ("num_envs", 0)


def test_unknown_env_error_suggests_the_first_candidate_unquoted() -> None:
    error = errors.UnknownEnvError("agentgym/FrozenLak-v0", ["agentgym/FrozenLake-v0", "other"])
    assert isinstance(error, KeyError)
    assert str(error) == (
        "No env registered with id 'agentgym/FrozenLak-v0'. "
        "Did you mean 'agentgym/FrozenLake-v0'? `agentgym list` shows all."
    )
    assert error.suggestions == ("agentgym/FrozenLake-v0", "other")
    assert "Did you mean" not in str(errors.UnknownEnvError("x", []))


def test_unknown_parser_error_is_a_key_error_with_a_readable_message() -> None:
    error = errors.UnknownParserError("no parser 'x'")
    assert isinstance(error, KeyError)
    assert str(error) == "no parser 'x'"


def test_env_check_error_lists_every_failure_and_is_an_assertion_error() -> None:
    error = errors.EnvCheckError("my/Env-v0", ["first", "second"])
    assert isinstance(error, AssertionError)
    assert error.failures == ["first", "second"]
    assert str(error) == "my/Env-v0 fails 2 agentgym env check(s):\n  - first\n  - second"


def test_deadline_exceeded_is_an_infra_error_and_a_timeout_error() -> None:
    error = errors.DeadlineExceeded("tool move", 2.5)
    assert isinstance(error, errors.InfraError)
    assert isinstance(error, TimeoutError)
    assert (error.what, error.seconds) == ("tool move", 2.5)
    assert str(error) == "tool move did not finish within its 2.5 s deadline"


def test_env_state_error_is_a_runtime_error() -> None:
    assert issubclass(errors.EnvStateError, RuntimeError)
