import math

import pytest
import torch

from agentgym.error import ConfigError
from agentgym.trainers.algorithms import (
    discounted_returns,
    gae,
    group_advantages,
    reinforce_pp_advantages,
    rloo_advantages,
)

F64 = torch.float64


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=F64)


# ---- GAE ---------------------------------------------------------------------------------


def test_gae_hand_computed_skips_env_tokens_and_bootstraps() -> None:
    # Row 0: sampled, sampled, env, env, sampled, pad. Values 9. sit on unmasked positions.
    # Row 1: three sampled tokens, then pad; truncated, so V after the last token is 4.
    rewards = t([[0, 0, 0, 0, 1, 0], [0, 0, 0.5, 0, 0, 0]])
    values = t([[0.5, 0.6, 9, 9, 0.8, 9], [1, 2, 3, 9, 9, 9]])
    mask = torch.tensor([[1, 1, 0, 0, 1, 0], [1, 1, 1, 0, 0, 0]])
    adv, ret = gae(
        rewards, values, mask, gamma=0.9, lam=0.8, bootstrap=torch.tensor([0.0, 4.0], dtype=F64)
    )
    # Row 0 (γλ = 0.72); the step after token 1 is token 4:
    #   t=4: δ = 1 + 0.9·0 − 0.8 = 0.2                        Â = 0.2
    #   t=1: δ = 0 + 0.9·0.8 − 0.6 = 0.12                     Â = 0.12 + 0.72·0.2 = 0.264
    #   t=0: δ = 0 + 0.9·0.6 − 0.5 = 0.04                     Â = 0.04 + 0.72·0.264 = 0.23008
    # Row 1:
    #   t=2: δ = 0.5 + 0.9·4 − 3 = 1.1                        Â = 1.1
    #   t=1: δ = 0 + 0.9·3 − 2 = 0.7                          Â = 0.7 + 0.72·1.1 = 1.492
    #   t=0: δ = 0 + 0.9·2 − 1 = 0.8                          Â = 0.8 + 0.72·1.492 = 1.87424
    expected_adv = t([[0.23008, 0.264, 0, 0, 0.2, 0], [1.87424, 1.492, 1.1, 0, 0, 0]])
    # returns = Â + V on sampled tokens: 0.73008, 0.864, 1.0 and 2.87424, 3.492, 4.1
    expected_ret = t([[0.73008, 0.864, 0, 0, 1.0, 0], [2.87424, 3.492, 4.1, 0, 0, 0]])
    torch.testing.assert_close(adv, expected_adv, atol=1e-12, rtol=0)
    torch.testing.assert_close(ret, expected_ret, atol=1e-12, rtol=0)


def test_gae_lambda_one_gamma_one_is_reward_to_go_minus_value() -> None:
    gen = torch.Generator().manual_seed(0)
    rewards = torch.randn(4, 9, generator=gen, dtype=F64)
    values = torch.randn(4, 9, generator=gen, dtype=F64)
    mask = (torch.rand(4, 9, generator=gen) < 0.6).long()
    adv, _ = gae(rewards, values, mask, gamma=1.0, lam=1.0)
    on_rewards = rewards * mask
    to_go = on_rewards.flip(-1).cumsum(-1).flip(-1)  # Σ_{s≥t} r_s over sampled tokens
    torch.testing.assert_close(adv, (to_go - values) * mask, atol=1e-12, rtol=0)


def test_gae_is_unchanged_by_env_tokens_between_sampled_tokens() -> None:
    gen = torch.Generator().manual_seed(1)
    rewards = torch.randn(2, 5, generator=gen, dtype=F64)
    values = torch.randn(2, 5, generator=gen, dtype=F64)
    compact, _ = gae(rewards, values, torch.ones(2, 5), gamma=0.95, lam=0.9)
    # Insert three env tokens (arbitrary rewards / values) after position 2.
    junk = torch.full((2, 3), 123.0, dtype=F64)
    spread_r = torch.cat([rewards[:, :3], junk, rewards[:, 3:]], dim=1)  # [2, 8]
    spread_v = torch.cat([values[:, :3], junk, values[:, 3:]], dim=1)  # [2, 8]
    mask = torch.tensor([[1, 1, 1, 0, 0, 0, 1, 1]] * 2)
    spread, _ = gae(spread_r, spread_v, mask, gamma=0.95, lam=0.9)
    torch.testing.assert_close(spread[:, [0, 1, 2, 6, 7]], compact, atol=1e-12, rtol=0)
    assert (spread[:, 3:6] == 0).all()


def test_gae_rejects_a_discount_outside_the_unit_interval() -> None:
    with pytest.raises(ConfigError, match=r"gamma=1\.5"):
        gae(t([[0.0]]), t([[0.0]]), torch.ones(1, 1), gamma=1.5)


def test_discounted_returns_hand_computed() -> None:
    # rewards 0, 1, (env 7: ignored), 2 with γ = 0.5:
    #   G3 = 2;  G1 = 1 + 0.5·2 = 2;  G0 = 0 + 0.5·2 = 1
    got = discounted_returns(t([[0, 1, 7, 2]]), torch.tensor([[1, 1, 0, 1]]), gamma=0.5)
    assert got.tolist() == [[1.0, 2.0, 0.0, 2.0]]


# ---- group-normalised (GRPO / Dr. GRPO) --------------------------------------------------

REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 5.0], dtype=F64)  # 2 groups of 4


def test_group_advantages_hand_computed_with_std() -> None:
    # Group 1: mean 0.5, sample var (4 · 0.25) / 3 = 1/3  → A = ±0.5 / (√(1/3) + 1e-6)
    # Group 2: mean 2.75, deviations −0.75 ×3, 2.25; sample var (3·0.5625 + 5.0625) / 3 = 2.25,
    #          std 1.5 → A = −0.75 / 1.500001, 2.25 / 1.500001
    s1, s2 = math.sqrt(1 / 3) + 1e-6, 1.5 + 1e-6
    expected = [
        0.5 / s1,
        -0.5 / s1,
        -0.5 / s1,
        0.5 / s1,
        -0.75 / s2,
        -0.75 / s2,
        -0.75 / s2,
        2.25 / s2,
    ]
    got = group_advantages(REWARDS, group_size=4)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=F64), atol=1e-12, rtol=0)


def test_group_advantages_without_std_dr_grpo() -> None:
    got = group_advantages(REWARDS, group_size=4, scale_by_std=False)  # r − group mean
    expected = [0.5, -0.5, -0.5, 0.5, -0.75, -0.75, -0.75, 2.25]
    torch.testing.assert_close(got, torch.tensor(expected, dtype=F64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("scale_by_std", [True, False])
def test_group_advantages_have_zero_mean_per_group(scale_by_std: bool) -> None:
    rewards = torch.rand(6 * 5, generator=torch.Generator().manual_seed(2), dtype=F64)
    got = group_advantages(rewards, group_size=5, scale_by_std=scale_by_std).view(6, 5)
    torch.testing.assert_close(got.mean(-1), torch.zeros(6, dtype=F64), atol=1e-12, rtol=0)


def test_group_with_equal_rewards_gets_zero_advantage_not_nan() -> None:
    got = group_advantages(torch.ones(4, dtype=F64), group_size=4)
    assert got.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_group_size_must_divide_the_batch() -> None:
    with pytest.raises(ConfigError, match="group_size=3"):
        group_advantages(REWARDS, group_size=3)
    with pytest.raises(ConfigError, match="group_size=1"):
        group_advantages(REWARDS, group_size=1)  # a sample std needs two episodes


# ---- RLOO ---------------------------------------------------------------------------------


def test_rloo_hand_computed() -> None:
    # Group 1 (1, 0, 0, 1): 1 − (0+0+1)/3 = 2/3;  0 − (1+0+1)/3 = −2/3
    # Group 2 (2, 2, 2, 5): 2 − (2+2+5)/3 = −1;   5 − (2+2+2)/3 = 3
    expected = [2 / 3, -2 / 3, -2 / 3, 2 / 3, -1.0, -1.0, -1.0, 3.0]
    got = rloo_advantages(REWARDS, group_size=4)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=F64), atol=1e-12, rtol=0)


def test_rloo_is_a_rescaled_mean_baseline() -> None:
    # k/(k−1) · (r − mean)
    expected = group_advantages(REWARDS, group_size=4, scale_by_std=False) * 4 / 3
    torch.testing.assert_close(rloo_advantages(REWARDS, 4), expected, atol=1e-12, rtol=0)


# ---- REINFORCE++ --------------------------------------------------------------------------


def test_reinforce_pp_hand_computed() -> None:
    # Row 0 returns (γ = 1): 1, 1, 1.  Row 1: the 5 sits on an env token and is ignored:
    # returns −1, (masked), −1.  Over the 5 sampled tokens: mean (3 − 2)/5 = 0.2,
    # population var (3·0.8² + 2·1.2²)/5 = 0.96 → A = 0.8/√0.96, −1.2/√0.96
    rewards = t([[0, 0, 1], [0, 5, -1]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 1]])
    std = math.sqrt(0.96) + 1e-8
    hi, lo = 0.8 / std, -1.2 / std
    got = reinforce_pp_advantages(rewards, mask)
    torch.testing.assert_close(got, t([[hi, hi, hi], [lo, 0, lo]]), atol=1e-12, rtol=0)
