"""Reducing a per-token loss ``[B, T]`` to the scalar that is back-propagated.

The modes differ in how much weight a long sequence gets (B sequences, ``m`` the mask, ``|o_i|``
the number of sampled tokens of sequence ``i``):

- ``token-mean``: ``Σ_i Σ_t l·m / Σ_i |o_i|``. Every token weighs the same (DAPO, Yu et al. 2025,
  eq. 12: a long wrong answer is penalised per token, not diluted).
- ``seq-mean-token-mean``: ``1/B Σ_i (1/|o_i|) Σ_t l·m``. Every sequence weighs the same
  (GRPO, Shao et al. 2024, eq. 3).
- ``seq-mean-token-sum``: ``1/B Σ_i Σ_t l·m``.
- ``seq-mean-token-sum-norm``: ``1/(B·L) Σ_i Σ_t l·m`` with a constant ``L`` (``max_length``,
  e.g. the generation budget), which removes GRPO's length bias (Dr. GRPO, Liu et al. 2025).

Sequences without a single masked token are left out of the ``seq-mean-token-mean`` average.

When a minibatch is split into micro-batches for gradient accumulation, pass ``normalizer``: the
minibatch's token count (``token-mean``) or sequence count (the ``seq-*`` modes). The micro-batch
losses then add up to the minibatch loss exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.trainers.algorithms.masked import check_same_shape, masked_sum

__all__ = ["Aggregation", "aggregate", "as_aggregation"]


class Aggregation(StrEnum):
    TOKEN_MEAN = "token-mean"
    SEQ_MEAN_TOKEN_MEAN = "seq-mean-token-mean"
    SEQ_MEAN_TOKEN_SUM = "seq-mean-token-sum"
    SEQ_MEAN_TOKEN_SUM_NORM = "seq-mean-token-sum-norm"


def _divide(total: Tensor, count: Tensor | float) -> Tensor:
    """``total / count`` with an empty count read as 1 (the loss is then 0, not NaN)."""
    if isinstance(count, Tensor):  # stays on the device: no host sync
        return total / count.clamp(min=1)
    return total / max(float(count), 1.0)


def _token_mean(loss: Tensor, mask: Tensor, normalizer: float | None, _: int | None) -> Tensor:
    count = mask.to(loss.dtype).sum() if normalizer is None else normalizer
    return _divide(masked_sum(loss, mask), count)


def _seq_mean_token_mean(
    loss: Tensor, mask: Tensor, normalizer: float | None, _: int | None
) -> Tensor:
    tokens = mask.to(loss.dtype).sum(-1)  # [B]
    seq_means = masked_sum(loss, mask, dim=-1) / tokens.clamp(min=1)  # [B]
    count = (tokens > 0).to(loss.dtype).sum() if normalizer is None else normalizer
    return _divide(seq_means.sum(), count)


def _seq_mean_token_sum(
    loss: Tensor, mask: Tensor, normalizer: float | None, _: int | None
) -> Tensor:
    count = loss.shape[0] if normalizer is None else normalizer
    return _divide(masked_sum(loss, mask), count)


def _seq_mean_token_sum_norm(
    loss: Tensor, mask: Tensor, normalizer: float | None, max_length: int | None
) -> Tensor:
    if max_length is None or max_length < 1:
        raise ConfigError(
            "max_length",
            max_length,
            "seq-mean-token-sum-norm divides by a constant length and needs an int >= 1",
            "pass max_length (Dr. GRPO uses the generation budget, e.g. max_new_tokens)",
        )
    return _seq_mean_token_sum(loss, mask, normalizer, None) / max_length


_AGGREGATORS: dict[Aggregation, Callable[[Tensor, Tensor, float | None, int | None], Tensor]] = {
    Aggregation.TOKEN_MEAN: _token_mean,
    Aggregation.SEQ_MEAN_TOKEN_MEAN: _seq_mean_token_mean,
    Aggregation.SEQ_MEAN_TOKEN_SUM: _seq_mean_token_sum,
    Aggregation.SEQ_MEAN_TOKEN_SUM_NORM: _seq_mean_token_sum_norm,
}


def as_aggregation(mode: Aggregation | str) -> Aggregation:
    """``mode`` as an ``Aggregation``; ``ConfigError`` naming the choices otherwise."""
    try:
        return Aggregation(mode)
    except ValueError:
        raise ConfigError(
            "aggregation",
            mode,
            "is not a loss aggregation",
            f"use one of {[m.value for m in Aggregation]}",
        ) from None


def aggregate(
    loss: Tensor,  # [B, T] per-token loss
    mask: Tensor,  # [B, T] 1 on sampled tokens
    mode: Aggregation | str = Aggregation.TOKEN_MEAN,
    *,
    max_length: int | None = None,
    normalizer: float | None = None,
) -> Tensor:  # []
    """Reduce a per-token loss to a scalar; see the module docstring for the modes."""
    check_same_shape(loss=loss, mask=mask)
    return _AGGREGATORS[as_aggregation(mode)](loss, mask, normalizer, max_length)
