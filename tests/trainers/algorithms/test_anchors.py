"""GiGPO step-level credit: turns taken from the same state are compared with each other."""

from __future__ import annotations

import math

import pytest
import torch

from agentgym.core.types import Episode, Turn
from agentgym.error import ConfigError
from agentgym.trainers.algorithms import anchor_state_advantages, turn_states
from agentgym.trainers.config import make_config
from agentgym.trainers.losses import _sequence_advantages


def test_hand_computed_without_std() -> None:
    # γ = 0.5. Returns-to-go: e0 [0.25, 0.5, 1], e1 [0, 0], e2 [0.5, 1].
    # State s (every first turn): 0.25, 0, 0.5 → mean 0.25 → 0, −0.25, +0.25.
    # State y (e0's third, e2's second turn): 1 and 1 → 0. States x, z are met once → 0.
    got = anchor_state_advantages(
        [[0, 0, 1], [0, 0], [0, 1]],
        [["s", "x", "y"], ["s", "z"], ["s", "y"]],
        group_size=3,
        gamma=0.5,
        scale_by_std=False,
    )
    assert got == [[0.0, 0.0, 0.0], [-0.25, 0.0], [0.25, 0.0]]


def test_hand_computed_with_std_and_two_groups() -> None:
    # Group 1: both act from s, returns 1 and 0 → ±0.5 / (sample std √0.5).
    # Group 2 uses the same key "s" but is another group: never compared with group 1.
    got = anchor_state_advantages([[1.0], [0.0], [1.0], [1.0]], [["s"], ["s"], ["s"], ["s"]], 2)
    s = math.sqrt(0.5) + 1e-6
    assert got[0] == pytest.approx([0.5 / s])
    assert got[1] == pytest.approx([-0.5 / s])
    assert got[2:] == [[0.0], [0.0]]


def test_repeated_state_inside_one_episode_is_compared_too() -> None:
    # One episode bumps into a wall (stays in s) and then succeeds; the other falls in at once.
    # s: returns 1, 1 (episode 0, turns 0 and 1) and 0 (episode 1) → mean 2/3.
    got = anchor_state_advantages([[0, 1], [0]], [["s", "s"], ["s"]], 2, scale_by_std=False)
    assert got[0] == pytest.approx([1 / 3, 1 / 3])
    assert got[1] == pytest.approx([-2 / 3])


def test_mismatched_keys_are_rejected() -> None:
    with pytest.raises(ValueError, match="state keys"):
        anchor_state_advantages([[0, 1], [0]], [["s"], ["s"]], 2)


def _episode(states: list[str], rewards: list[float]) -> Episode:
    turns = [
        Turn(
            action={"role": "assistant", "content": "x"},
            observation=({"role": "user", "content": f"obs {k}"},),
            reward=r,
            terminated=k == len(rewards) - 1,
            truncated=False,
            info={"state": states[k + 1]} if k + 1 < len(states) else {},
        )
        for k, r in enumerate(rewards)
    ]
    return Episode(env_id=None, reset_info={"state": states[0]}, turns=turns)


def test_turn_states_use_the_env_state_before_each_turn() -> None:
    episode = _episode(["a", "b", "c"], [0.0, 0.0, 1.0])
    assert turn_states(episode) == [("state", "a"), ("state", "b"), ("state", "c")]


def test_turn_states_fall_back_to_the_observation_text() -> None:
    episode = _episode(["a"], [0.0, 1.0])
    episode.reset_info = {}
    episode.messages = [{"role": "user", "content": "start"}, {"role": "assistant", "content": "x"}]
    assert turn_states(episode) == [("text", "start"), ("text", "obs 0")]


def test_step_credit_adds_to_the_episode_advantage_per_turn() -> None:
    config = make_config("grpo", group_size=2, scale_by_std=False, step_credit=0.5, gamma=1.0)
    rewards = [[0.0, 1.0], [0.0]]
    states = [[("state", "s"), ("state", "t")], [("state", "s")]]
    mask = torch.ones(2, 4)
    spans = [[(0, 2), (2, 4)], [(0, 4)]]
    got = _sequence_advantages(config, rewards, spans, mask, states)
    # Episode level: ±0.5. Step level at s: returns 1 and 0 → ±0.5, times ω = 0.5.
    assert got[0].tolist() == pytest.approx([0.75, 0.75, 0.5, 0.5])
    assert got[1].tolist() == pytest.approx([-0.75] * 4)


def test_episode_credit_weights_the_episode_term() -> None:
    rewards = [[0.0, 1.0], [0.0]]
    states = [[("state", "s"), ("state", "t")], [("state", "s")]]
    mask = torch.ones(2, 4)
    spans = [[(0, 2), (2, 4)], [(0, 4)]]
    base = {"group_size": 2, "scale_by_std": False, "step_credit": 1.0, "gamma": 1.0}
    only_steps = make_config("grpo", **base, episode_credit=0.0)
    got = _sequence_advantages(only_steps, rewards, spans, mask, states)
    # Only the step term: ±0.5 at s; state t is met once, so its turn gets 0.
    assert got[0].tolist() == pytest.approx([0.5, 0.5, 0.0, 0.0])
    assert got[1].tolist() == pytest.approx([-0.5] * 4)
    half = make_config("grpo", **base, episode_credit=0.5)
    got = _sequence_advantages(half, rewards, spans, mask, states)
    assert got[0].tolist() == pytest.approx([0.75, 0.75, 0.25, 0.25])


def test_episode_credit_needs_step_credit() -> None:
    with pytest.raises(ConfigError, match="episode_credit") as caught:
        make_config("grpo", episode_credit=0.0)
    assert "step_credit" in str(caught.value)
    with pytest.raises(ConfigError, match="episode_credit"):
        make_config("grpo", step_credit=1.0, episode_credit=-0.5)


def test_step_credit_needs_a_group_estimator() -> None:
    with pytest.raises(ConfigError, match="step_credit"):
        make_config("ppo", step_credit=1.0)
    with pytest.raises(ConfigError, match="step_credit"):
        make_config("grpo", step_credit=-1.0)
