import math

import pytest
import torch

from agentgym.error import ConfigError
from agentgym.trainers.algorithms import clipped_policy_loss

F64 = torch.float64

# Row 0: token a (ρ = 1.5, A = +1), token b (ρ = 0.5, A = −1), an env token (ρ = 10, A = 5).
# Row 1: token c (ρ = 1.1, A = +2), token d (ρ = 4, A = −1), padding.
RATIOS = [[1.5, 0.5, 10.0], [1.1, 4.0, 1.0]]
ADV = torch.tensor([[1.0, -1.0, 5.0], [2.0, -1.0, 0.0]], dtype=F64)  # [2, 3]
MASK = torch.tensor([[1, 1, 0], [1, 1, 0]])  # [2, 3]
OLD = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -3.0, -1.0]], dtype=F64)  # [2, 3]


def new_logprobs(ratios: list[list[float]] = RATIOS) -> torch.Tensor:
    log_ratio = torch.tensor(ratios, dtype=F64).log()
    return (OLD + log_ratio).requires_grad_()


def test_clip_higher_and_dual_clip_hand_computed() -> None:
    logprobs = new_logprobs()
    out = clipped_policy_loss(logprobs, OLD, ADV, MASK, eps_low=0.2, eps_high=0.28, dual_clip=3.0)
    # a: max(−1·1.5, −1·clip(1.5, 0.8, 1.28)) = max(−1.5, −1.28) = −1.28   (high clip)
    # b: max(1·0.5, 1·clip(0.5, 0.8, 1.28))   = max(0.5, 0.8)   =  0.8    (low clip)
    # c: max(−2·1.1, −2·1.1)                                     = −2.2
    # d: max(1·4, 1·1.28) = 4, dual clip min(4, 3·1)             =  3      (dual clip)
    # token-mean over 4 sampled tokens: (−1.28 + 0.8 − 2.2 + 3) / 4 = 0.08
    assert out.loss.item() == pytest.approx(0.08, abs=1e-12)
    torch.testing.assert_close(
        out.per_token,
        torch.tensor([[-1.28, 0.8, 0], [-2.2, 3.0, 0]], dtype=F64),
        atol=1e-12,
        rtol=0,
    )
    assert out.clip_fraction_high.item() == 0.25  # a
    assert out.clip_fraction_low.item() == 0.25  # b
    assert out.clip_fraction.item() == 0.5
    assert out.dual_clip_fraction.item() == 0.25  # d
    out.loss.backward()
    # Only c is unclipped: ∂(−A·ρ)/∂log π = −A·ρ = −2.2, divided by 4 tokens.
    expected_grad = torch.tensor([[0, 0, 0], [-0.55, 0, 0]], dtype=F64)
    torch.testing.assert_close(logprobs.grad, expected_grad, atol=1e-12, rtol=0)


def test_without_dual_clip_a_large_ratio_on_a_negative_advantage_counts_fully() -> None:
    logprobs = new_logprobs()
    out = clipped_policy_loss(logprobs, OLD, ADV, MASK, eps_low=0.2, eps_high=0.28)
    # d now contributes 4: (−1.28 + 0.8 − 2.2 + 4) / 4 = 0.33
    assert out.loss.item() == pytest.approx(0.33, abs=1e-12)
    assert out.dual_clip_fraction.item() == 0.0
    out.loss.backward()
    # d's gradient: −A·ρ / 4 = 4 / 4 = 1
    assert logprobs.grad[1, 1].item() == pytest.approx(1.0, abs=1e-12)


def test_symmetric_clip_by_default() -> None:
    logprobs = new_logprobs()
    out = clipped_policy_loss(logprobs, OLD, ADV, MASK, eps_low=0.2)
    # a is now clipped at 1.2: (−1.2 + 0.8 − 2.2 + 4) / 4 = 0.35
    assert out.loss.item() == pytest.approx(0.35, abs=1e-12)


def test_ratio_one_equals_the_unclipped_surrogate() -> None:
    gen = torch.Generator().manual_seed(0)
    old = torch.randn(3, 7, generator=gen, dtype=F64)
    adv = torch.randn(3, 7, generator=gen, dtype=F64)
    mask = (torch.rand(3, 7, generator=gen) < 0.7).long()
    logprobs = old.clone().requires_grad_()
    out = clipped_policy_loss(logprobs, old, adv, mask, eps_low=0.1, eps_high=0.3, dual_clip=2.0)
    n = mask.sum()
    assert out.loss.item() == pytest.approx((-(adv * mask).sum() / n).item(), abs=1e-12)
    assert out.clip_fraction.item() == 0.0
    assert out.approx_kl.item() == 0.0
    out.loss.backward()
    torch.testing.assert_close(logprobs.grad, -adv * mask / n, atol=1e-12, rtol=0)


def test_importance_weights_scale_each_token() -> None:
    weights = torch.tensor([[2.0, 1.0, 1.0], [0.5, 1.0, 1.0]], dtype=F64)
    out = clipped_policy_loss(
        new_logprobs(), OLD, ADV, MASK, eps_low=0.2, eps_high=0.28, weights=weights
    )
    # (2·(−1.28) + 0.8 + 0.5·(−2.2) + 4) / 4 = 1.14 / 4
    assert out.loss.item() == pytest.approx(1.14 / 4, abs=1e-12)


def test_approx_kl_is_k3_of_old_versus_new() -> None:
    ratios = [[2.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    out = clipped_policy_loss(new_logprobs(ratios), OLD, ADV, MASK)
    # k3 with r = π_θ/π_old = 2 on one of 4 tokens: ((2 − 1) − log 2) / 4
    assert out.approx_kl.item() == pytest.approx((1 - math.log(2)) / 4, abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"eps_low": 0.0}, "eps_low=0.0"),
        ({"eps_low": 0.2, "eps_high": -0.1}, "eps_high=-0.1"),
        ({"dual_clip": 1.0}, "dual_clip=1.0"),
    ],
)
def test_bad_clip_settings_raise(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        clipped_policy_loss(new_logprobs(), OLD, ADV, MASK, **kwargs)
