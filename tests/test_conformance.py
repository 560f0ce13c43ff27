"""The contract test: every registered agentgym env passes Gymnasium's and agentgym's checkers.

The ids are collected after ``import agentgym``, so built-in envs and installed plugins are all
checked. A missing dependency makes an env fail here, never skip. Every info key an env emits
during the checks is either a key of the contract (``agentgym.core.info``, validated by
``check_env``) or named in the env class docstring's "Reset info keys" / "Step info keys".
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

import agentgym
from agentgym.core import info as contract
from agentgym.utils import check_env

ENV_IDS = [info.id for info in agentgym.list_envs()]

# Whoever registers a new env bumps this: a count that drops means an env failed to register
# (e.g. its dependency is missing in CI) and would otherwise go unchecked.
EXPECTED_ENV_COUNT = 11


class RecordKeys(gym.Wrapper[Any, Any, Any, Any]):
    """Collects the info keys of every reset and step."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.keys: dict[str, set[str]] = {"reset": set(), "step": set()}

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self.keys["reset"].update(info)
        return obs, info

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        self.keys["step"].update(result[4])
        return result


def documented_keys(env_class: type, where: str) -> set[str]:
    """The ``names`` in the docstring's "Reset info keys:" or "Step info keys:" paragraph."""
    doc = " ".join((env_class.__doc__ or "").split())
    match = re.search(rf"{where.capitalize()} info keys: (.*?)(?:\. [A-Z][a-z]+ info keys|$)", doc)
    return set(re.findall(r"``(\w+)``", match.group(1))) if match else set()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env_passes_both_checkers(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            gymnasium_check_env(env.unwrapped)
    finally:
        env.close()
    recorder = RecordKeys(gym.make(env_id))
    check_env(recorder)
    env_class = type(recorder.unwrapped)
    for where, emitted in recorder.keys.items():
        undocumented = emitted - set(contract.KEYS) - documented_keys(env_class, where)
        assert not undocumented, (
            f"{env_id} emits {where} info keys {sorted(undocumented)} that neither "
            f"agentgym.core.info defines nor {env_class.__name__}'s docstring names"
        )


def test_every_registered_env_is_checked() -> None:
    agentgym_ids = [env_id for env_id in ENV_IDS if env_id.startswith("agentgym/")]
    assert len(agentgym_ids) == EXPECTED_ENV_COUNT, agentgym_ids


MALFORMED_CALL = "<tool_call>{not json</tool_call>"


@pytest.mark.parametrize("env_id", [e for e in ENV_IDS if e.startswith("agentgym/")])
def test_a_format_error_is_a_scored_invalid_action(env_id: str) -> None:
    """Every family flags the model's format errors (``invalid_action``, the ``invalid``
    outcome of an episode of nothing else): a malformed tool call where the env offers tools,
    text that is no action where it does not. Never an ``infra_error``."""
    env = gym.make(env_id)
    try:
        _, info = env.reset(seed=0)
        action = MALFORMED_CALL if info["tools"] else "Hmm, let me think about it."
        *_, truncated, step_info = env.step(action)
    finally:
        env.close()
    assert step_info.get("infra_error") is not True, step_info.get("error")
    assert step_info.get("invalid_action") is True, (action, step_info)
    assert contract.outcome_of(info, [step_info], truncated=truncated) in ("invalid", "truncated")
