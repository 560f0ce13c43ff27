"""Masked reductions over ``[B, T]`` token tensors.

A mask is 1 on the tokens that count (``Episode.loss_mask``: tokens the model sampled) and 0 on
prompt, env and padding tokens. Masks may be bool, int or float; they are cast to the value dtype.
"""

from __future__ import annotations

from torch import Tensor

from agentgym.core.errors import ConfigError

__all__ = ["check_same_shape", "masked_mean", "masked_sum", "masked_whiten"]


def check_same_shape(**tensors: Tensor) -> None:
    """Raise ``ConfigError`` unless every tensor has the shape of the first one."""
    (first_name, first), *rest = tensors.items()
    for name, tensor in rest:
        if tensor.shape != first.shape:
            raise ConfigError(
                f"{name}.shape",
                tuple(tensor.shape),
                f"must equal {first_name}.shape {tuple(first.shape)}",
                "pass tensors aligned token for token, e.g. all [B, T]",
            )


def masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of ``values`` where ``mask`` is 1, over ``dim`` (all dims when None)."""
    masked = values * mask.to(values.dtype)
    return masked.sum() if dim is None else masked.sum(dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``values`` where ``mask`` is 1; 0 (not NaN) where the mask is empty."""
    count = mask.to(values.dtype)
    count = count.sum() if dim is None else count.sum(dim)
    return masked_sum(values, mask, dim) / count.clamp(min=1)


def masked_whiten(values: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """``(x - mean) / (std + eps)`` with the mean and the population std (``1/N``) taken over
    the masked entries; 0 elsewhere.
    """
    mean = masked_mean(values, mask)  # []
    var = masked_mean((values - mean) ** 2, mask)  # []
    return (values - mean) / (var.sqrt() + eps) * mask.to(values.dtype)  # [B, T]
