"""One forward pass per distinct prompt: rows that start with the same tokens share them.

A GRPO group is ``group_size`` completions of one prompt, so a plain forward pass over the batch
runs every prompt ``group_size`` times. Here each distinct prefix (a row's tokens before its last
token ahead of the first sampled one) runs once, its keys and values are repeated for the rows that
continue it, and a last pass runs only the rows' own tokens on top. The distinct prefixes
themselves usually begin alike (one system prompt, then each turn's board or question): that head
runs once too, under all of them::

    head pass     [1, H]      the tokens every prefix begins with
    prefix pass   [U, P - H]  the rest of the U distinct prefixes, right-padded, on the head
    suffix pass   [B, S]      each row from its prefix's end, right-padded, on its prefix

The result is the plain forward pass's, to float rounding: the same tokens at the same positions
see the same keys (padding is masked out wherever it lies in a cache), and gradients from every
row flow back through the repeated keys and values into the one pass that made them (autograd
sums them).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

__all__ = ["SharedPrefixes", "find_shared_prefixes", "shared_prefix_hidden"]

MIN_SAVING = 0.25
"""Share only when it cuts the padded tokens of the forward pass by at least this fraction: a
further pass and the repeated caches cost something."""


class SharedPrefixes(NamedTuple):
    ids: Tensor  # [U, P] the distinct prefixes, right-padded
    mask: Tensor  # [U, P] 1 on their tokens
    owner: Tensor  # [B] the prefix each row continues
    length: Tensor  # [B] its length: the row's suffix starts there
    head: int = 0  # leading tokens every prefix has in common: run once for all of them


def find_shared_prefixes(
    input_ids: Tensor,  # [B, T]
    attention_mask: Tensor,  # [B, T], right-padded
    loss_mask: Tensor,  # [B, T]
) -> SharedPrefixes | None:
    """The distinct prefixes of the rows and the head they all begin with, or None when sharing
    them saves too little.

    A row's prefix is its tokens before ``f - 1``, ``f`` its first sampled token: the logits that
    predict token ``f`` come from position ``f - 1``, which must be in the suffix pass. Rows whose
    prompts differ but begin alike (turns of a history window: the same system prompt, different
    boards) have distinct prefixes with a common head, which runs once.
    """
    lengths = attention_mask.sum(-1).tolist()
    sampled = loss_mask.bool()
    first = torch.where(sampled.any(-1), sampled.int().argmax(-1), attention_mask.sum(-1))
    cut = [max(min(int(f), n) - 1, 0) for f, n in zip(first.tolist(), lengths, strict=True)]
    rows = input_ids.tolist()
    index: dict[tuple[int, ...], int] = {}
    owner = [index.setdefault(tuple(row[:c]), len(index)) for row, c in zip(rows, cut, strict=True)]
    head = _common_length(input_ids, min(cut))  # every prefix is a row's: they share this much
    width = max(cut)
    shared_tokens = _cost(lengths, cut, len(index), head)
    if width == 0 or shared_tokens > (1 - MIN_SAVING) * len(rows) * input_ids.shape[1]:
        return None
    ids = input_ids.new_zeros(len(index), width)
    mask = attention_mask.new_zeros(len(index), width)
    for prefix, u in index.items():
        if prefix:
            ids[u, : len(prefix)] = input_ids.new_tensor(prefix)
            mask[u, : len(prefix)] = 1
    device = input_ids.device
    return SharedPrefixes(
        ids, mask, torch.tensor(owner, device=device), torch.tensor(cut, device=device), head
    )


def _cost(lengths: list[int], cut: list[int], prefixes: int, head: int) -> int:
    """Padded tokens of the three passes: the head, the prefixes after it, then every row from
    its cut."""
    suffix = max(n - c for n, c in zip(lengths, cut, strict=True))
    return head + prefixes * (max(cut) - head) + len(lengths) * suffix


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
    prefixes, width = shared.ids.shape
    head = min(shared.head, width)
    positions_of = torch.arange(width, device=input_ids.device)
    prefix = DynamicCache(config=base_model.config)  # as the model makes its own: the layer kinds
    if head:  # the head, once
        base_model(
            input_ids=shared.ids[:1, :head],
            attention_mask=shared.mask[:1, :head],
            position_ids=positions_of[None, :head],
            use_cache=True,
            **{keyword: prefix},
        )
        if not _keeps_every_key(prefix, DynamicLayer):
            return None
        if head < width or prefixes > 1:  # each prefix's cache starts as the head's
            heads = [
                (layer.keys.expand(prefixes, -1, -1, -1), layer.values.expand(prefixes, -1, -1, -1))
                for layer in prefix.layers
            ]
            prefix = DynamicCache(ddp_cache_data=heads)
    if head < width:  # the rest of each distinct prefix, on the head
        base_model(
            input_ids=shared.ids[:, head:],
            attention_mask=shared.mask,
            position_ids=positions_of[None, head:].expand(prefixes, -1),
            use_cache=True,
            **{keyword: prefix},
        )
    if not _keeps_every_key(prefix, DynamicLayer):
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


def _keeps_every_key(cache: Any, layer_type: type) -> bool:
    return all(type(layer) is layer_type for layer in getattr(cache, "layers", [None]))
