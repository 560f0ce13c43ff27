import math

import pytest
import torch

from agentgym.core.types import Episode
from agentgym.error import ConfigError
from agentgym.trainers.algorithms import (
    broadcast_to_tokens,
    collate_episodes,
    gae,
    group_advantages,
    per_turn_group_advantages,
    place_turn_rewards,
    turn_returns,
    turn_values_to_tokens,
)

F64 = torch.float64


def episode(token_ids: list[int], loss_mask: list[int], logprobs: list[float]) -> Episode:
    return Episode(env_id=None, token_ids=token_ids, loss_mask=loss_mask, logprobs=logprobs)


def test_collate_right_pads() -> None:
    batch = collate_episodes(
        [
            episode([5, 6, 7, 8], [0, 1, 1, 0], [0, -0.5, -0.25, 0]),
            episode([9, 10], [0, 1], [0, -1]),
        ],
        pad_token_id=-1,
        dtype=F64,
    )
    assert batch.token_ids.tolist() == [[5, 6, 7, 8], [9, 10, -1, -1]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch.loss_mask.tolist() == [[0, 1, 1, 0], [0, 1, 0, 0]]
    assert batch.logprobs.tolist() == [[0, -0.5, -0.25, 0], [0, -1, 0, 0]]
    assert batch.logprobs.dtype == F64


def test_collate_rejects_misaligned_episodes() -> None:
    with pytest.raises(ConfigError, match=r"episodes\[0\] lengths=\(2, 1, 2\)"):
        collate_episodes([episode([1, 2], [1], [0.0, 0.0])])


def test_broadcast_episode_advantage_to_sampled_tokens() -> None:
    mask = torch.tensor([[0, 1, 0, 1], [1, 1, 0, 0]])
    got = broadcast_to_tokens(torch.tensor([2.0, -1.0], dtype=F64), mask)
    assert got.tolist() == [[0, 2, 0, 2], [-1, -1, 0, 0]]
    with pytest.raises(ConfigError, match=r"values\.shape"):
        broadcast_to_tokens(torch.zeros(3), mask)


# One two-turn episode: prompt, turn 1 sampled at [1, 3), env tokens 3–4, turn 2 at [5, 7), pad.
MASK = torch.tensor([[0, 1, 1, 0, 0, 1, 1, 0]], dtype=F64)
SPANS = [[(1, 3), (5, 7)]]


def test_turn_values_to_tokens() -> None:
    got = turn_values_to_tokens([[0.5, -0.5]], SPANS, MASK)
    assert got.tolist() == [[0, 0.5, 0.5, 0, 0, -0.5, -0.5, 0]]


def test_place_turn_rewards_on_each_turns_last_token() -> None:
    got = place_turn_rewards([[0.25, 1.0]], SPANS, MASK)
    assert got.tolist() == [[0, 0, 0.25, 0, 0, 0, 1.0, 0]]


def test_turn_rewards_skip_forced_tokens_at_the_end_of_a_turn() -> None:
    # Constrained decoding: turn 1 [1, 4) sampled only token 2 (1 and 3 forced); turn 2 [5, 7)
    # sampled nothing (one choice), so its reward goes to turn 1's decision too; a reward
    # before any sampled token has nothing to credit.
    mask = torch.tensor([[0, 0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 0, 0]], dtype=F64)
    spans = [[(1, 4), (5, 7)], [(1, 4), (5, 7)]]
    got = place_turn_rewards([[0.25, 1.0], [0.5, -1.0]], spans, mask)
    assert got.tolist() == [[0, 0, 1.25, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, -1.0, 0, 0]]


def test_multi_turn_gae_from_turn_rewards() -> None:
    rewards = place_turn_rewards([[0.0, 1.0]], SPANS, MASK)
    values = torch.zeros(1, 8, dtype=F64)
    adv, _ = gae(rewards, values, MASK, gamma=0.5, lam=1.0)
    # V = 0, λ = 1: discounted reward-to-go over the 4 sampled tokens 1, 2, 5, 6:
    # 0.5³, 0.5², 0.5, 1 — the env tokens 3 and 4 are not time steps.
    assert adv.tolist() == [[0, 0.125, 0.25, 0, 0, 0.5, 1.0, 0]]


def test_turn_spans_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"turn_spans\[0\]"):
        turn_values_to_tokens([[1.0]], SPANS, MASK)  # 2 spans, 1 value
    with pytest.raises(ConfigError, match=r"turn_spans\[0\]"):
        place_turn_rewards([[1.0]], [[(6, 9)]], MASK)  # past T = 8
    with pytest.raises(ConfigError, match="batch size 1"):
        place_turn_rewards([[1.0], [2.0]], SPANS * 2, MASK)


def test_turn_returns_hand_computed() -> None:
    # γ = 0.5: G2 = 2;  G1 = 0 + 0.5·2 = 1;  G0 = 1 + 0.5·1 = 1.5
    assert turn_returns([1.0, 0.0, 2.0], gamma=0.5) == [1.5, 1.0, 2.0]
    assert turn_returns([]) == []


def test_per_turn_credit_hand_computed() -> None:
    # Group of 2. A earns 0.5 in each turn, B nothing (γ = 1):
    # G_A = [1, 0.5], G_B = [0, 0]; episode returns 1, 0 → mean 0.5, sample std √0.5.
    s = math.sqrt(0.5) + 1e-6
    got = per_turn_group_advantages([[0.5, 0.5], [0.0, 0.0]], group_size=2)
    # A's second turn returns 0.5 = the group mean: no credit for the reward it did not earn.
    expected = [[0.5 / s, 0.0], [-0.5 / s, -0.5 / s]]
    for row, want in zip(got, expected, strict=True):
        assert row == pytest.approx(want, abs=1e-12)
    plain = per_turn_group_advantages([[0.5, 0.5], [0.0, 0.0]], group_size=2, scale_by_std=False)
    assert plain == [[0.5, 0.0], [-0.5, -0.5]]


def test_per_turn_credit_with_one_final_reward_equals_episode_credit() -> None:
    turn_rewards = [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0]]
    got = per_turn_group_advantages(turn_rewards, group_size=4)
    totals = torch.tensor([sum(r) for r in turn_rewards], dtype=F64)
    episode_level = group_advantages(totals, group_size=4).tolist()
    for turns, want in zip(got, episode_level, strict=True):
        assert turns == pytest.approx([want] * len(turns), abs=1e-12)
