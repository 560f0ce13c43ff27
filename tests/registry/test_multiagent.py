"""Registering multi-agent envs: listed apart from single-agent ones, with their roles, the
``multi-agent`` tag and a family, filtered as ``list_envs`` filters."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import pytest

import agentgym
from agentgym.registry import MAKERS
from agentgym.registry.multiagent import _MULTI, MULTI_AGENT, is_multiagent, list_multiagent_envs
from agentgym.registry.multiagent import register as register_multiagent

MINE = "myorg/Duel-Fast-v0"


@pytest.fixture
def duel() -> Iterator[str]:
    register_multiagent(
        MINE,
        "agentgym.envs.tictactoe:TicTacToeEnv",
        roles=("left", "right"),
        tags=("game",),
        extras=("math",),
        description="Two players.",
    )
    yield MINE
    gym.registry.pop(MINE, None)
    _MULTI.pop(MINE, None)
    MAKERS.pop(MINE, None)


def test_a_multiagent_env_is_listed_with_its_roles_tag_and_family(duel):
    (info,) = [info for info in list_multiagent_envs() if info.id == duel]
    assert info.roles == ("left", "right")
    assert info.tags == ("game", MULTI_AGENT)
    assert info.family == "Duel"
    assert info.extras == ("math",)
    assert is_multiagent(duel)
    assert duel not in {env.id for env in agentgym.list_envs()}


def test_listing_filters_by_family_and_tag(duel):
    assert [info.id for info in list_multiagent_envs(family="Duel")] == [duel]
    tagged = {info.id for info in list_multiagent_envs(tag=MULTI_AGENT)}
    assert {duel, "agentgym/TicTacToe-v0", "agentgym/MathSolverJudge-v0"} <= tagged
    assert list_multiagent_envs(tag="grid") == []
