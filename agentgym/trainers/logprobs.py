"""Per-token log-probabilities and entropies of sampled tokens, from logits (fp32 throughout,
under autocast too), and the restriction of logits to allowed ids (constrained decoding).

Positions follow ``Episode``: token ``t`` is predicted from the logits at ``t - 1``, so every
per-token output is ``[B, T]`` aligned with ``token_ids`` and 0 at position 0 (never sampled).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["LogprobEntropy", "place", "restrict_logits", "shift", "token_logprobs"]


def shift(x: Tensor) -> Tensor:  # [B, T-1] → [B, T], 0 at position 0
    return torch.cat([x.new_zeros(x.shape[0], 1), x], dim=1)


def token_logprobs(
    logits: Tensor,  # [B, T, V] or [N, V] at the selected positions
    token_ids: Tensor,  # [B, T]
    temperature: float,
    *,
    with_entropy: bool = True,
    positions: Tensor | None = None,  # [B, T-1] bool: the next-token positions ``logits`` hold
    allowed: Tensor | None = None,  # [B, T, K] ids token t was restricted to, -1 padded
    entropy_grad: bool = False,
) -> tuple[Tensor, Tensor | None]:  # [B, T], [B, T] | None
    """``log softmax(logits / temperature)`` of each next token, and the entropy of that
    distribution: what the sampler drew from (before top-k / top-p).

    With ``positions``, ``logits`` hold only those next-token positions (``[N, V]``); the other
    entries of the results are 0. With ``allowed`` (constrained decoding,
    ``TrainBatch.allowed``), a token whose row of ``allowed`` holds ids is scored under the
    softmax over those ids only, as the engine sampled it; a row of -1 means the whole
    vocabulary. ``entropy_grad``: the entropy keeps its graph (an entropy bonus).
    """
    if positions is None:
        positions = torch.ones(token_ids[:, 1:].shape, dtype=torch.bool, device=token_ids.device)
        logits = logits[:, :-1][positions]  # [N, V]
    scaled = logits.float() if temperature == 1 else logits.float() / temperature  # x / 1 == x
    if allowed is not None:
        scaled = restrict_logits(scaled, allowed[:, 1:][positions])
    targets = token_ids[:, 1:][positions]  # [N]
    chosen, chosen_entropy = LogprobEntropy.apply(
        scaled, targets, with_entropy, allowed is not None
    )
    return place(chosen, chosen_entropy, positions, with_entropy, entropy_grad)


def place(
    chosen: Tensor,  # [N]
    chosen_entropy: Tensor,  # [N]
    positions: Tensor,  # [B, T-1] bool
    with_entropy: bool,
    entropy_grad: bool,
) -> tuple[Tensor, Tensor | None]:  # [B, T], [B, T] | None
    """The per-position results written into ``[B, T]`` (0 elsewhere and at position 0)."""
    picked = chosen.new_zeros(positions.shape)  # [B, T-1]
    picked[positions] = chosen
    entropy = None
    if with_entropy:
        if not entropy_grad:
            chosen_entropy = chosen_entropy.detach()
        entropy = picked.new_zeros(positions.shape)
        entropy[positions] = chosen_entropy
        entropy = shift(entropy)
    return shift(picked), entropy


class LogprobEntropy(torch.autograd.Function):
    """``log_softmax(s)[target]`` and the entropy of ``softmax(s)``, row by row (``s``
    ``[N, V]``), in fewer passes over ``[N, V]`` than the composed ops (log-softmax, gather,
    ``−Σ p·log p`` and their backwards). Only the log-softmax is kept for the backward, as
    log-softmax's own backward keeps it, and the backward writes the gradient in one pass.

    With ``log p = log_softmax(s)`` and ``H = −Σ p·log p``: ∂logprob/∂s = onehot − p and
    ∂H/∂s = −p·(log p + H). ``masked``: ``s`` may hold -inf (a restriction); there p = 0 and
    the entropy's term 0 · log 0 is taken as 0.
    """

    @staticmethod
    def forward(ctx: Any, s: Tensor, targets: Tensor, with_entropy: bool, masked: bool) -> Any:
        # fp32 throughout, under autocast too: bf16 would run the entropy's bmm in bf16 and
        # round the log-probs the ratio is taken of (``s`` is fp32 already).
        with torch.autocast(s.device.type, enabled=False):
            return LogprobEntropy._forward(ctx, s, targets, with_entropy, masked)

    @staticmethod
    def _forward(ctx: Any, s: Tensor, targets: Tensor, with_entropy: bool, masked: bool) -> Any:
        logp = torch.log_softmax(s, dim=-1)  # [N, V]
        chosen = logp.gather(-1, targets[:, None])[:, 0]
        entropy = chosen.new_zeros(chosen.shape)
        if with_entropy:
            finite = logp.masked_fill(logp.isinf(), 0.0) if masked else logp
            entropy = -torch.bmm(logp.exp()[:, None, :], finite[:, :, None])[:, 0, 0]
        ctx.save_for_backward(logp, targets, entropy)
        ctx.masked = masked
        ctx.set_materialize_grads(False)
        return chosen, entropy

    @staticmethod
    def backward(ctx: Any, grad_chosen: Tensor | None, grad_entropy: Tensor | None) -> Any:
        logp, targets, entropy = ctx.saved_tensors
        with torch.autocast(logp.device.type, enabled=False):
            return LogprobEntropy._backward(ctx, logp, targets, entropy, grad_chosen, grad_entropy)

    @staticmethod
    def _backward(
        ctx: Any,
        logp: Tensor,
        targets: Tensor,
        entropy: Tensor,
        grad_chosen: Tensor | None,
        grad_entropy: Tensor | None,
    ) -> Any:
        if grad_chosen is None and grad_entropy is None:
            return None, None, None, None
        grad = logp.exp()  # p; 0 where s is -inf
        if grad_entropy is None:
            grad.mul_(-grad_chosen[:, None])
        else:
            finite = logp.masked_fill(logp.isinf(), 0.0) if ctx.masked else logp
            weight = (finite + entropy[:, None]).mul_(-grad_entropy[:, None])
            if grad_chosen is not None:
                weight -= grad_chosen[:, None]
            grad.mul_(weight)
        if grad_chosen is not None:
            grad.scatter_add_(-1, targets[:, None], grad_chosen[:, None])
        return grad, None, None, None


def restrict_logits(
    scaled: Tensor,  # [N, V]
    allowed: Tensor,  # [N, K] allowed ids, sorted, -1 padded; all -1: unrestricted
) -> Tensor:  # [N, V]
    """``scaled`` with -inf on every id a restricted row does not allow."""
    keep = allowed >= 0
    restricted = keep.any(-1)
    if not bool(restricted.any()):
        return scaled
    # Padding points at the row's first id (or 0), so it only ever writes True again.
    index = torch.where(keep, allowed, allowed[:, :1].clamp(min=0))
    mask = torch.zeros(scaled.shape, dtype=torch.bool, device=scaled.device)
    mask.scatter_(-1, index, True)
    mask |= ~restricted[:, None]
    return scaled.masked_fill(~mask, float("-inf"))
