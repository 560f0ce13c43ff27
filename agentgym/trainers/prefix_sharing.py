"""One forward pass per distinct prompt: rows that start with the same tokens share them.

A GRPO group is ``group_size`` completions of one prompt, so a plain forward pass over the batch
runs every prompt ``group_size`` times. Here each distinct prefix (a row's tokens before its last
token ahead of the first sampled one) runs once, its keys and values are repeated for the rows that
continue it, and a second pass runs only the rows' own tokens on top::

    prefix pass   [U, P]   the U distinct prefixes, left-padded
    suffix pass   [B, S]   each row from its prefix's end, right-padded, attending to the prefix

The result is the plain forward pass's, to float rounding: the same tokens at the same positions
see the same keys, and gradients from every row flow back through the repeated keys and values
into the one prefix pass (autograd sums them).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

__all__ = ["SharedPrefixes", "find_shared_prefixes", "shared_prefix_hidden"]

MIN_SAVING = 0.25
"""Share only when it cuts the padded tokens of the forward pass by at least this fraction: a
second pass and the repeated caches cost something."""


class SharedPrefixes(NamedTuple):
    ids: Tensor  # [U, P] the distinct prefixes, left-padded
    mask: Tensor  # [U, P] 1 on their tokens
    owner: Tensor  # [B] the prefix each row continues
    length: Tensor  # [B] its length: the row's suffix starts there


def find_shared_prefixes(
    input_ids: Tensor,  # [B, T]
    attention_mask: Tensor,  # [B, T], right-padded
    loss_mask: Tensor,  # [B, T]
) -> SharedPrefixes | None:
    """The distinct prefixes of the rows, or None when sharing them saves too little.

    A row's prefix is its tokens before ``f - 1``, ``f`` its first sampled token: the logits that
    predict token ``f`` come from position ``f - 1``, which must be in the suffix pass. When the
    rows' prompts differ but all begin alike (turns of a history window: the same system prompt,
    different boards), the one prefix they have in common is shared instead, if that saves more.
    """
    lengths = attention_mask.sum(-1).tolist()
    sampled = loss_mask.bool()
    first = torch.where(sampled.any(-1), sampled.int().argmax(-1), attention_mask.sum(-1))
    cut = [max(min(int(f), n) - 1, 0) for f, n in zip(first.tolist(), lengths, strict=True)]
    rows = input_ids.tolist()
    index: dict[tuple[int, ...], int] = {}
    owner = [index.setdefault(tuple(row[:c]), len(index)) for row, c in zip(rows, cut, strict=True)]
    common = _common_length(input_ids, min(cut))
    if _cost(lengths, [common] * len(rows), 1) < _cost(lengths, cut, len(index)):
        index = {tuple(rows[0][:common]): 0}
        owner, cut = [0] * len(rows), [common] * len(rows)
    width = max(cut)
    shared_tokens = _cost(lengths, cut, len(index))
    if width == 0 or shared_tokens > (1 - MIN_SAVING) * len(rows) * input_ids.shape[1]:
        return None
    ids = input_ids.new_zeros(len(index), width)
    mask = attention_mask.new_zeros(len(index), width)
    for prefix, u in index.items():
        if prefix:
            ids[u, width - len(prefix) :] = input_ids.new_tensor(prefix)
            mask[u, width - len(prefix) :] = 1
    device = input_ids.device
    return SharedPrefixes(
        ids, mask, torch.tensor(owner, device=device), torch.tensor(cut, device=device)
    )


def _cost(lengths: list[int], cut: list[int], prefixes: int) -> int:
    """Padded tokens of the two passes: the prefixes, then every row from its cut."""
    suffix = max(n - c for n, c in zip(lengths, cut, strict=True))
    return prefixes * max(cut) + len(lengths) * suffix


def _common_length(input_ids: Tensor, most: int) -> int:
    """How many leading tokens every row has in common, at most ``most``."""
    if most <= 0:
        return 0
    same = (input_ids[:, :most] == input_ids[:1, :most]).all(0)  # [most]
    return int(same.int().cumprod(0).sum())


def shared_prefix_hidden(
    base_model: Any,  # a transformers decoder (``CausalLM.base_model``) that takes a KV cache
    input_ids: Tensor,  # [B, T]
    attention_mask: Tensor,  # [B, T], right-padded
    shared: SharedPrefixes,
    positions: Tensor,  # [B, T-1] bool: the next-token positions wanted
) -> Tensor | None:  # [N, H]: the last hidden state at ``positions``, row-major
    """The decoder's last hidden state at ``positions`` (as ``hidden[positions]``), computed with
    shared prefixes; None when the model's cache does not keep every key and value."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    from agentgym.inference.kvcache import cache_keyword

    keyword = cache_keyword(base_model)
    prefix_positions = (shared.mask.cumsum(-1) - 1).clamp(min=0)
    prefix = DynamicCache(config=base_model.config)  # as the model makes its own: the layer kinds
    base_model(
        input_ids=shared.ids,
        attention_mask=shared.mask,
        position_ids=prefix_positions,
        use_cache=True,
        **{keyword: prefix},
    )
    if not all(type(layer) is DynamicLayer for layer in getattr(prefix, "layers", [None])):
        return None  # sliding windows, linear attention, ...: not a cache of every key
    layers = [(layer.keys[shared.owner], layer.values[shared.owner]) for layer in prefix.layers]
    lengths = attention_mask.sum(-1)  # [B]
    width = int((lengths - shared.length).max())
    columns = shared.length[:, None] + torch.arange(width, device=input_ids.device)  # [B, S]
    real = columns < lengths[:, None]
    columns = columns.clamp(max=input_ids.shape[1] - 1)  # padding: keep positions in range
    ids = input_ids.gather(1, columns).masked_fill(~real, 0)
    mask = torch.cat([shared.mask[shared.owner], real.to(shared.mask.dtype)], dim=1)
    hidden = base_model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=columns,
        use_cache=True,
        **{keyword: DynamicCache(ddp_cache_data=layers)},
    ).last_hidden_state  # [B, S, H]
    rows, cols = positions.nonzero(as_tuple=True)
    return hidden[rows, cols - shared.length[rows]]
