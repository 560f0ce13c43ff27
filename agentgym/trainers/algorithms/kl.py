"""KL estimators between the policy and a reference policy, per sampled token.

With ``x ~ π_θ`` and ``r = π_ref(x) / π_θ(x)``, Schulman's approximations of ``KL[π_θ ‖ π_ref]``
("Approximating KL Divergence", 2020) are

- ``k1 = −log r``: unbiased, high variance, can be negative;
- ``k2 = ½ (log r)²``: biased, low variance, always ≥ 0;
- ``k3 = (r − 1) − log r``: unbiased, low variance, always ≥ 0 — GRPO's estimator
  (Shao et al. 2024, eq. 4).

The penalty goes either into the reward (``kl_penalized_rewards``: ``r_t − β·k_t`` per token,
no gradient, as in InstructGPT-style PPO and REINFORCE++) or into the loss (``kl_loss``:
``β · aggregate(k)``, differentiated, as in GRPO eq. 3).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.trainers.algorithms.aggregation import Aggregation, aggregate
from agentgym.trainers.algorithms.masked import check_same_shape

__all__ = ["KLEstimator", "KLPlacement", "kl_estimate", "kl_loss", "kl_penalized_rewards"]


class KLEstimator(StrEnum):
    K1 = "k1"
    K2 = "k2"
    K3 = "k3"


class KLPlacement(StrEnum):
    REWARD = "reward"  # per-token penalty subtracted from the rewards
    LOSS = "loss"  # β · KL added to the policy loss


def _k1(log_ratio: Tensor) -> Tensor:
    return -log_ratio


def _k2(log_ratio: Tensor) -> Tensor:
    return 0.5 * log_ratio**2


def _k3(log_ratio: Tensor) -> Tensor:
    return torch.expm1(log_ratio) - log_ratio  # (r − 1) − log r, exact near r = 1


_ESTIMATORS: dict[KLEstimator, Callable[[Tensor], Tensor]] = {
    KLEstimator.K1: _k1,
    KLEstimator.K2: _k2,
    KLEstimator.K3: _k3,
}


def kl_estimate(
    logprobs: Tensor,  # [B, T] log π_θ of the sampled tokens
    ref_logprobs: Tensor,  # [B, T] log π_ref of the same tokens
    estimator: KLEstimator | str = KLEstimator.K3,
) -> Tensor:  # [B, T], not masked
    """Per-token estimate of ``KL[π_θ ‖ π_ref]``; see the module docstring."""
    check_same_shape(logprobs=logprobs, ref_logprobs=ref_logprobs)
    try:
        fn = _ESTIMATORS[KLEstimator(estimator)]
    except ValueError:
        raise ConfigError(
            "kl_estimator",
            estimator,
            "is not a KL estimator",
            f"use one of {[m.value for m in KLEstimator]}",
        ) from None
    return fn(ref_logprobs - logprobs)  # log r = log π_ref − log π_θ


@torch.no_grad()
def kl_penalized_rewards(
    rewards: Tensor,  # [B, T] token rewards
    logprobs: Tensor,  # [B, T]
    ref_logprobs: Tensor,  # [B, T]
    mask: Tensor,  # [B, T]
    *,
    beta: float,
    estimator: KLEstimator | str = KLEstimator.K1,
) -> Tensor:  # [B, T]
    """``r_t − β·k_t`` on sampled tokens (``r_t`` elsewhere): the KL penalty in the reward."""
    kl = kl_estimate(logprobs, ref_logprobs, estimator)  # [B, T]
    return rewards - beta * kl * mask.to(kl.dtype)


def kl_loss(
    logprobs: Tensor,  # [B, T]
    ref_logprobs: Tensor,  # [B, T]
    mask: Tensor,  # [B, T]
    *,
    beta: float,
    estimator: KLEstimator | str = KLEstimator.K3,
    aggregation: Aggregation | str = Aggregation.TOKEN_MEAN,
    max_length: int | None = None,
    normalizer: float | None = None,
) -> Tensor:  # []
    """``β · aggregate(k)``: the KL term of the loss, aggregated like the policy loss (GRPO eq. 3
    puts it inside the same ``1/|o_i| Σ_t``).
    """
    kl = kl_estimate(logprobs, ref_logprobs, estimator)  # [B, T]
    return beta * aggregate(kl, mask, aggregation, max_length=max_length, normalizer=normalizer)
