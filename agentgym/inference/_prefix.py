"""Prefix caching for ``HFEngine``: the KV cache of a finished turn, kept for the next turn.

A multi-turn episode sends ``prompt + sampled tokens + env delta`` as the next prompt. When a row
finishes, its cache holds keys and values for ``prompt + tokens[:-1]`` (the last sampled token was
never fed back); those columns are kept under that token sequence. A later prompt that starts with
a kept sequence prefills only the rest. Entries are used once (the continuing row stores a longer
one when it finishes), evicted oldest first past a byte budget, and dropped on a weight update.

Runs on the engine's worker thread only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch

__all__ = ["KV", "PrefixCache"]

KV = list[tuple[torch.Tensor, torch.Tensor]]
"""Per-layer ``(keys, values)``, each ``[1, heads, T, dim]`` for one row."""


class PrefixCache:
    """Per-row KV caches keyed by the token ids they encode, within ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.reused_tokens = 0
        self._entries: OrderedDict[tuple[int, ...], tuple[KV, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, tokens: Sequence[int], kv: KV) -> None:
        """Keep ``kv``, the cache of exactly ``tokens``; the oldest entries go past the budget."""
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if not tokens or size > self.max_bytes:
            return
        key = tuple(tokens)
        if key in self._entries:
            self.bytes -= self._entries.pop(key)[1]
        self._entries[key] = (kv, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.bytes -= evicted

    def take(self, prompt: Sequence[int]) -> tuple[int, KV] | None:
        """The longest kept entry that is a proper prefix of ``prompt`` (removed from the cache)
        and its length, or None. At least one prompt token is left to prefill."""
        best: tuple[int, ...] | None = None
        for key in self._entries:
            n = len(key)
            if n < len(prompt) and (best is None or n > len(best)) and _starts_with(prompt, key):
                best = key
        if best is None:
            return None
        kv, size = self._entries.pop(best)
        self.bytes -= size
        self.hits += 1
        self.reused_tokens += len(best)
        return len(best), kv

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0


def _starts_with(prompt: Sequence[int], key: tuple[int, ...]) -> bool:
    # Cheap rejections first: most entries belong to other episodes and differ near their end.
    n = len(key)
    return prompt[n - 1] == key[-1] and tuple(prompt[:n]) == key
