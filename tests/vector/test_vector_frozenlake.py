"""AgentVectorEnv on agentgym/FrozenLake-v0, built the way users build it: ``gym.make_vec``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from agentgym.vector import AgentVectorEnv

from .compare import run_both

ENV_ID = "agentgym/FrozenLake-v0"
DIRECTIONS = ("right", "down", "left", "up")


def lake_actions(t: int, n: int) -> list[str]:
    """Cycling directions in fenced blocks, and now and then an invalid turn."""
    return [
        "no idea" if (t + i) % 7 == 6 else f"```\n{DIRECTIONS[(t * 3 + i) % 4]}\n```"
        for i in range(n)
    ]


def test_make_vec_vector_entry_point_builds_an_agent_vector_env() -> None:
    venv = gym.make_vec(ENV_ID, num_envs=4, vectorization_mode="vector_entry_point")
    assert isinstance(venv, AgentVectorEnv)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    obs, infos = venv.reset(seed=0)
    assert obs in venv.observation_space
    assert infos["_tools"].all()
    obs, rewards, *_ = venv.step(lake_actions(0, 4))
    assert obs in venv.observation_space
    assert rewards.dtype == np.float64
    venv.close()


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_matches_gymnasium_sync_vector_env_on_frozenlake(mode: AutoresetMode) -> None:
    kwargs = {"size": 3, "max_turns": 6}  # small maps: many episodes end within the run
    ours = gym.make_vec(
        ENV_ID, num_envs=5, vectorization_mode="vector_entry_point", autoreset_mode=mode, **kwargs
    )
    theirs = gym.make_vec(
        ENV_ID, num_envs=5, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode},
        **kwargs,
    )  # fmt: skip
    endings = run_both(ours, theirs, steps=40, mode=mode, seed=3, actions=lake_actions)
    assert endings >= 10
    ours.close()
    theirs.close()


def test_groups_play_the_same_lake() -> None:
    venv = gym.make_vec(ENV_ID, num_envs=6, vectorization_mode="vector_entry_point", group_size=3)
    _, infos = venv.reset()
    maps = infos["map"].tolist()
    assert maps[0] == maps[1] == maps[2]
    assert maps[3] == maps[4] == maps[5]
