"""FrozenLake with several map sizes: its declared difficulty levels and the reset options."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.core.difficulty import difficulty_levels
from agentgym.core.errors import ConfigError
from agentgym.envs.frozenlake import FrozenLakeEnv
from agentgym.envs.frozenlake.maps import format_map, generate_map


def test_sizes_are_the_difficulty_levels_smallest_first():
    assert difficulty_levels(FrozenLakeEnv(sizes=[6, 3, 4, 5])) == (3, 4, 5, 6)
    assert difficulty_levels(FrozenLakeEnv(size=5)) == (5,)
    assert difficulty_levels(object()) is None


def test_reset_draws_a_size_per_seed_and_the_options_pin_it():
    env = FrozenLakeEnv(sizes=(3, 4, 5, 6))
    drawn = {env.reset(seed=s)[1]["size"] for s in range(40)}
    assert drawn == {3, 4, 5, 6}
    assert env.reset(seed=1)[1]["map"] == env.reset(seed=1)[1]["map"]
    for key in ("size", "difficulty"):
        _, info = env.reset(seed=2, options={key: 5, "task_id": 11})
        assert (info["size"], info["difficulty"], info["task_id"]) == (5, 5, 11)
        assert info["map"] == format_map(generate_map(11, 5, 0.2))
        assert info["max_turns"] == 50
    sizes = {env.reset(seed=s, options={"difficulty": 3})[1]["size"] for s in range(10)}
    assert sizes == {3}


def test_without_sizes_seeds_pick_the_maps_they_always_did():
    plain, sized = FrozenLakeEnv(), FrozenLakeEnv(size=4, sizes=None)
    for seed in range(5):
        a, b = plain.reset(seed=seed)[1], sized.reset(seed=seed)[1]
        assert a["map"] == b["map"]
        assert a["difficulty"] == 4


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"size": 7}, "not one of the env's sizes"),
        ({"size": 3, "difficulty": 4}, "apart"),
        ({"map": "SF/FG", "size": 3}, "map alone"),
        ({"level": 3}, "unknown keys"),
    ],
)
def test_bad_options_name_the_fix(options, match):
    env = FrozenLakeEnv(sizes=(3, 4))
    with pytest.raises(ConfigError, match=match):
        env.reset(seed=0, options=options)


@pytest.mark.parametrize("sizes", [[], [3, 3], [1, 4], "34"])
def test_bad_sizes_are_refused(sizes):
    with pytest.raises(ConfigError, match="sizes"):
        FrozenLakeEnv(sizes=sizes)


def test_made_with_sizes_passes_the_checker():
    env = gym.make("agentgym/FrozenLake-v0", sizes=[3, 4, 5, 6], tool=False)
    _, info = env.reset(seed=0)
    assert info["difficulty"] in (3, 4, 5, 6)
    env.close()
