"""Truncated importance sampling for the gap between the inference engine and the trainer
(Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training").

The engine (SGLang, vLLM, another precision or kernel) samples from ``π_sampler`` while the
trainer's recomputed old-policy logprobs describe ``π_old``; they differ even for the same weights.
Each token's loss is weighted by ``min(π_old / π_sampler, C)``: the correction for sampling from the
wrong distribution, truncated at ``C`` so that a token the engine found unlikely cannot blow up
the gradient. Pass the weights to ``clipped_policy_loss(weights=...)``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.trainers.algorithms.masked import check_same_shape, masked_mean

__all__ = ["ImportanceWeights", "truncated_importance_weights"]


class ImportanceWeights(NamedTuple):
    weights: Tensor  # [B, T] min(exp(old − sampling), C) on sampled tokens, 0 elsewhere
    truncated_fraction: Tensor  # [] share of sampled tokens whose weight was capped at C


@torch.no_grad()
def truncated_importance_weights(
    old_logprobs: Tensor,  # [B, T] trainer's log π_old of the sampled tokens
    sampling_logprobs: Tensor,  # [B, T] engine's log π_sampler (Episode.logprobs)
    mask: Tensor,  # [B, T] 1 on sampled tokens
    *,
    cap: float = 2.0,
) -> ImportanceWeights:
    """TIS weights ``min(exp(log π_old − log π_sampler), C)``; no gradient flows through them."""
    if cap < 1.0:
        raise ConfigError(
            "cap", cap, "must be >= 1 (below 1 it shrinks even on-policy tokens)", "use e.g. 2.0"
        )
    check_same_shape(old_logprobs=old_logprobs, sampling_logprobs=sampling_logprobs, mask=mask)
    ratio = torch.exp(old_logprobs - sampling_logprobs)  # [B, T]
    on = mask.to(ratio.dtype)  # [B, T]
    weights = torch.clamp(ratio, max=cap) * on
    return ImportanceWeights(weights, masked_mean((ratio > cap).to(ratio.dtype), mask))
