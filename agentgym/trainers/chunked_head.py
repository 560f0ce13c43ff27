"""Log-probs and entropy from the last hidden states, the output layer run a chunk of positions
at a time: the update never holds the whole ``[tokens × vocab]`` logits.

With a real vocabulary the logits are most of an update's memory: 64 × 1,024 tokens of a
151,936-token vocabulary are ~40 GB in fp32, and the log-softmax's backward keeps as much
again. ``head_logprobs`` runs ``lm_head`` → log-softmax → gather and entropy on
``chunk`` positions at a time; with gradients each chunk runs under
``torch.utils.checkpoint`` (non-reentrant), which keeps only its inputs (``[chunk, H]``
hidden states) and recomputes the chunk's logits in the backward pass. Peak memory of the head
is then one chunk's logits and their gradient, whatever the number of tokens; the cost is one
more ``lm_head`` matmul per token in the backward.

The rule (``logits_chunk``): ``None`` picks ``LOGITS_BUDGET // vocab`` positions per chunk
(2^25 logits, 128 MiB in fp32: 220 positions of a 151,936-token vocabulary), so that small
vocabularies (the tiny policy's 1,264 tokens: 26,546 positions) keep the one-pass path; an int
sets the positions per chunk; 0 turns chunking off.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from agentgym.trainers.logprobs import LogprobEntropy, restrict_logits

__all__ = ["LOGITS_BUDGET", "chunk_size", "head_logprobs"]

LOGITS_BUDGET = 2**25
"""Logits of one chunk (positions × vocab) under the automatic rule: 128 MiB in fp32."""


def chunk_size(setting: int | None, vocab: int, positions: int) -> int | None:
    """Positions per chunk for ``positions`` next-token positions over a ``vocab``-sized
    output layer; None: all at once (they fit one chunk, or chunking is off)."""
    if setting == 0:
        return None
    size = max(1, LOGITS_BUDGET // max(vocab, 1)) if setting is None else setting
    return size if positions > size else None


def _score(
    head: nn.Module,
    hidden: Tensor,  # [n, H]
    targets: Tensor,  # [n]
    allowed: Tensor | None,  # [n, K]
    temperature: float,
    with_entropy: bool,
) -> tuple[Tensor, Tensor]:  # [n], [n]
    logits = head(hidden)  # [n, V]
    scaled = logits.float() if temperature == 1 else logits.float() / temperature
    if allowed is not None:
        scaled = restrict_logits(scaled, allowed)
    out: tuple[Tensor, Tensor] = LogprobEntropy.apply(
        scaled, targets, with_entropy, allowed is not None
    )
    return out


def head_logprobs(
    hidden: Tensor,  # [N, H] the last hidden states at the next-token positions
    head: nn.Module,  # the output layer: [N, H] -> [N, V]
    targets: Tensor,  # [N] the tokens they predict
    temperature: float,
    *,
    allowed: Tensor | None = None,  # [N, K] ids each token was restricted to, -1 padded
    with_entropy: bool = True,
    chunk: int | None = None,  # positions per chunk; None: all at once
) -> tuple[Tensor, Tensor]:  # [N], [N] (entropy 0 without ``with_entropy``)
    """``log softmax(head(hidden) / temperature)[targets]`` and the entropy, ``chunk``
    positions at a time (see the module docstring); the results and gradients are those of
    the one-pass computation (each row's softmax is its own)."""
    args: tuple[Any, ...] = (temperature, with_entropy)
    if chunk is None or hidden.shape[0] <= chunk:
        return _score(head, hidden, targets, allowed, *args)
    grad = torch.is_grad_enabled()
    chosen, entropy = [], []
    for start in range(0, hidden.shape[0], chunk):
        part = slice(start, start + chunk)
        rows = None if allowed is None else allowed[part]
        if grad:
            c, e = checkpoint(
                _score, head, hidden[part], targets[part], rows, *args, use_reentrant=False
            )
        else:
            c, e = _score(head, hidden[part], targets[part], rows, *args)
        chosen.append(c)
        entropy.append(e)
    return torch.cat(chosen), torch.cat(entropy)
