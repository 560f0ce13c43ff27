"""The contract test: every registered agentgym env passes Gymnasium's and agentgym's checkers.

The ids are collected after ``import agentgym``, so built-in envs and installed plugins are all
checked. A missing dependency makes an env fail here, never skip.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

import agentgym
from agentgym.utils import check_env

ENV_IDS = [info.id for info in agentgym.list_envs()]

# Whoever registers a new env bumps this: a count that drops means an env failed to register
# (e.g. its dependency is missing in CI) and would otherwise go unchecked.
EXPECTED_ENV_COUNT = 7


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env_passes_both_checkers(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            gymnasium_check_env(env.unwrapped)
    finally:
        env.close()
    check_env(gym.make(env_id))


def test_every_registered_env_is_checked() -> None:
    agentgym_ids = [env_id for env_id in ENV_IDS if env_id.startswith("agentgym/")]
    assert len(agentgym_ids) == EXPECTED_ENV_COUNT, agentgym_ids
