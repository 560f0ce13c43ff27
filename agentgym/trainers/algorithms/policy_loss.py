"""The clipped surrogate policy loss (PPO, Schulman et al. 2017, eq. 7) with DAPO's decoupled
clip range (Yu et al. 2025, eq. 8, "clip-higher") and dual clip (Ye et al. 2020).

Per sampled token, with ``ρ = π_θ / π_old`` and advantage ``A``::

    l = max(−A·ρ, −A·clip(ρ, 1 − ε_low, 1 + ε_high))          # −(eq. 7), minimised
    l = min(l, −c·A)   where A < 0 and dual clip c > 1 is on   # bounds ρ for negative advantages

``ε_high > ε_low`` lets unlikely tokens with positive advantage grow further, which keeps entropy
from collapsing (DAPO §3.1). Dual clip stops a huge ratio on a negative-advantage token from
dominating the update.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.trainers.algorithms.aggregation import Aggregation, aggregate
from agentgym.trainers.algorithms.kl import kl_estimate
from agentgym.trainers.algorithms.masked import check_same_shape, masked_mean

__all__ = ["PolicyLoss", "clipped_policy_loss"]


class PolicyLoss(NamedTuple):
    loss: Tensor  # [] aggregated, differentiable
    per_token: Tensor  # [B, T] before aggregation (0 off the mask)
    clip_fraction: Tensor  # [] share of sampled tokens whose ratio was clipped (low + high)
    clip_fraction_low: Tensor  # [] clipped at 1 − ε_low (A < 0)
    clip_fraction_high: Tensor  # [] clipped at 1 + ε_high (A > 0)
    dual_clip_fraction: Tensor  # [] bounded by −c·A (A < 0)
    approx_kl: Tensor  # [] k3 estimate of KL[π_old ‖ π_θ] over sampled tokens, to monitor


def _check_clip(eps_low: float, eps_high: float, dual_clip: float | None) -> None:
    if not 0.0 < eps_low < 1.0:
        raise ConfigError("eps_low", eps_low, "must lie in (0, 1)", "use e.g. 0.2 (PPO, GRPO)")
    if eps_high <= 0.0:
        raise ConfigError("eps_high", eps_high, "must be > 0", "use e.g. 0.28 (DAPO) or 0.2")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ConfigError(
            "dual_clip", dual_clip, "must be > 1 (it bounds ρ from above)", "use 3.0, or None"
        )


def clipped_policy_loss(
    logprobs: Tensor,  # [B, T] log π_θ of the sampled tokens (differentiable)
    old_logprobs: Tensor,  # [B, T] log π_old, from the policy that collected the batch
    advantages: Tensor,  # [B, T]
    mask: Tensor,  # [B, T] 1 on sampled tokens
    *,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    dual_clip: float | None = None,
    weights: Tensor | None = None,  # [B, T] e.g. truncated IS weights; not differentiated
    aggregation: Aggregation | str = Aggregation.TOKEN_MEAN,
    max_length: int | None = None,
    normalizer: float | None = None,
) -> PolicyLoss:
    """The clipped surrogate loss and its clip statistics; ``eps_high`` defaults to ``eps_low``."""
    eps_high = eps_low if eps_high is None else eps_high
    _check_clip(eps_low, eps_high, dual_clip)
    check_same_shape(logprobs=logprobs, old_logprobs=old_logprobs, advantages=advantages, mask=mask)
    advantages = advantages.detach()
    log_ratio = logprobs - old_logprobs.detach()  # [B, T]
    ratio = torch.exp(log_ratio)  # [B, T]
    unclipped = -advantages * ratio  # [B, T]
    clipped = -advantages * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)  # [B, T]
    per_token = torch.maximum(unclipped, clipped)  # [B, T]
    negative = advantages < 0  # [B, T]
    if dual_clip is not None:
        per_token = torch.where(
            negative, torch.minimum(per_token, -dual_clip * advantages), per_token
        )
    if weights is not None:
        per_token = per_token * weights.detach()
    per_token = per_token * mask.to(per_token.dtype)
    loss = aggregate(per_token, mask, aggregation, max_length=max_length, normalizer=normalizer)
    with torch.no_grad():
        low = negative & (ratio < 1.0 - eps_low)  # [B, T]
        high = (advantages > 0) & (ratio > 1.0 + eps_high)  # [B, T]
        dual = negative & (ratio > dual_clip) if dual_clip is not None else torch.zeros_like(low)
        as_float = ratio.dtype
        return PolicyLoss(
            loss=loss,
            per_token=per_token,
            clip_fraction=masked_mean((low | high).to(as_float), mask),
            clip_fraction_low=masked_mean(low.to(as_float), mask),
            clip_fraction_high=masked_mean(high.to(as_float), mask),
            dual_clip_fraction=masked_mean(dual.to(as_float), mask),
            approx_kl=masked_mean(kl_estimate(old_logprobs, logprobs, "k3"), mask),
        )
