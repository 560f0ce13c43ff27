import math

import pytest
import torch

from agentgym.error import ConfigError
from agentgym.trainers.algorithms import kl_estimate, kl_loss, kl_penalized_rewards

F64 = torch.float64
LN2 = math.log(2)
# token 0: π_θ = 0.5, π_ref = 0.25 → log r = log(π_ref/π_θ) = −ln 2
# token 1: π_θ = 0.2, π_ref = 0.4  → log r = +ln 2
LOGP = torch.tensor([[0.5, 0.2]], dtype=F64).log()
REF = torch.tensor([[0.25, 0.4]], dtype=F64).log()


@pytest.mark.parametrize(
    ("estimator", "expected"),
    [
        ("k1", [LN2, -LN2]),  # −log r
        ("k2", [LN2**2 / 2, LN2**2 / 2]),  # ½ (log r)²
        ("k3", [(0.5 - 1) + LN2, (2 - 1) - LN2]),  # (r − 1) − log r
    ],
)
def test_estimators_hand_computed(estimator: str, expected: list[float]) -> None:
    got = kl_estimate(LOGP, REF, estimator)
    torch.testing.assert_close(got, torch.tensor([expected], dtype=F64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_unbiased_estimators_average_to_the_exact_kl(estimator: str) -> None:
    p = torch.tensor([0.5, 0.3, 0.2], dtype=F64)  # π_θ, the sampling distribution
    q = torch.tensor([0.2, 0.2, 0.6], dtype=F64)  # π_ref
    exact = (p * (p / q).log()).sum()
    expectation = (p * kl_estimate(p.log(), q.log(), estimator)).sum()
    assert expectation.item() == pytest.approx(exact.item(), abs=1e-12)


def test_k2_and_k3_are_non_negative_and_zero_on_equal_policies() -> None:
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 50, generator=gen, dtype=F64)
    for estimator in ("k2", "k3"):
        assert (kl_estimate(a, b, estimator) >= 0).all()
        assert (kl_estimate(a, a, estimator) == 0).all()


def test_kl_in_the_reward() -> None:
    rewards = torch.tensor([[0.0, 1.0, 3.0]], dtype=F64)
    logp = torch.cat([LOGP, torch.zeros(1, 1, dtype=F64)], dim=1)
    ref = torch.cat([REF, torch.full((1, 1), -5.0, dtype=F64)], dim=1)
    mask = torch.tensor([[1, 1, 0]])
    got = kl_penalized_rewards(rewards, logp, ref, mask, beta=0.1, estimator="k1")
    # r − 0.1·k1 on sampled tokens: 0 − 0.1·ln2, 1 + 0.1·ln2; the env token keeps its 3
    expected = torch.tensor([[-0.1 * LN2, 1 + 0.1 * LN2, 3.0]], dtype=F64)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


def test_k3_kl_in_the_loss_value_and_gradient() -> None:
    logp = LOGP.clone().requires_grad_()
    loss = kl_loss(logp, REF, torch.ones(1, 2), beta=0.04, estimator="k3")
    # 0.04 · token-mean of k3 = 0.04 · ((−0.5 + ln2) + (1 − ln2)) / 2 = 0.04 · 0.25
    assert loss.item() == pytest.approx(0.01, abs=1e-12)
    loss.backward()
    # ∂k3/∂log π_θ = 1 − r: token 0: 1 − 0.5, token 1: 1 − 2; times 0.04 / 2
    expected = torch.tensor([[0.02 * 0.5, 0.02 * -1.0]], dtype=F64)
    torch.testing.assert_close(logp.grad, expected, atol=1e-12, rtol=0)


def test_unknown_estimator() -> None:
    with pytest.raises(ConfigError, match="'k4'"):
        kl_estimate(LOGP, REF, "k4")
