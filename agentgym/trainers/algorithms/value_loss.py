"""The clipped value loss of PPO (Schulman et al. 2017, the ``L^VF`` term of eq. 9, clipped as in
OpenAI baselines' ``ppo2``).

Per sampled token, with targets ``R`` (GAE returns) and the values ``V_old`` at collection time::

    V_clip = V_old + clip(V − V_old, −ε, ε)
    l = ½ · max((V − R)², (V_clip − R)²)

so one update cannot move the value estimate more than ``ε`` away from ``V_old`` to chase a
target. ``clip_range=None`` gives the plain ``½ (V − R)²``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.trainers.algorithms.aggregation import Aggregation, aggregate
from agentgym.trainers.algorithms.masked import check_same_shape, masked_mean

__all__ = ["ValueLoss", "clipped_value_loss"]


class ValueLoss(NamedTuple):
    loss: Tensor  # [] aggregated, differentiable
    per_token: Tensor  # [B, T] before aggregation (0 off the mask)
    clip_fraction: Tensor  # [] share of sampled tokens where the clipped term was the larger


def clipped_value_loss(
    values: Tensor,  # [B, T] V from the value model being trained (differentiable)
    old_values: Tensor,  # [B, T] V_old at collection time
    returns: Tensor,  # [B, T] targets, e.g. GAE returns
    mask: Tensor,  # [B, T] 1 on sampled tokens
    *,
    clip_range: float | None = 0.2,
    aggregation: Aggregation | str = Aggregation.TOKEN_MEAN,
    max_length: int | None = None,
    normalizer: float | None = None,
) -> ValueLoss:
    """Clipped squared error between values and returns; see the module docstring."""
    if clip_range is not None and clip_range <= 0:
        raise ConfigError("clip_range", clip_range, "must be > 0", "use e.g. 0.2, or None")
    check_same_shape(values=values, old_values=old_values, returns=returns, mask=mask)
    returns, old_values = returns.detach(), old_values.detach()
    unclipped = (values - returns) ** 2  # [B, T]
    if clip_range is None:
        squared, clipped_more = unclipped, torch.zeros_like(unclipped, dtype=torch.bool)
    else:
        v_clip = old_values + torch.clamp(values - old_values, -clip_range, clip_range)  # [B, T]
        clipped = (v_clip - returns) ** 2  # [B, T]
        squared, clipped_more = torch.maximum(unclipped, clipped), clipped > unclipped
    per_token = 0.5 * squared * mask.to(squared.dtype)  # [B, T]
    loss = aggregate(per_token, mask, aggregation, max_length=max_length, normalizer=normalizer)
    clip_fraction = masked_mean(clipped_more.detach().to(values.dtype), mask)
    return ValueLoss(loss=loss, per_token=per_token, clip_fraction=clip_fraction)
