"""Prefix caching for ``HFEngine``: the KV cache of a finished turn, kept for the next turn.

A multi-turn episode sends ``prompt + sampled tokens + env delta`` as the next prompt. When a row
finishes, its cache holds keys and values for ``prompt + tokens[:-1]`` (the last sampled token was
never fed back); those columns are kept under that token sequence. A later prompt that starts with
a kept sequence prefills only the rest. Such entries are used once (the continuing row stores a
longer one when it finishes). The row's prompt but its last token is kept too, for any number of
later prompts that repeat it or start with it: the same task's first turn played again, or an
env whose prompts show only its current state (FrozenLake's boards with no history: a square
visited again is the same prompt). Entries are evicted least recently used first past a byte
budget, and dropped on a weight update.

Runs on the engine's worker thread only.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Sequence

import torch

__all__ = ["KV", "PrefixCache"]

KV = list[tuple[torch.Tensor, torch.Tensor]]
"""Per-layer ``(keys, values)``, each ``[1, heads, T, dim]`` for one row."""


class PrefixCache:
    """Per-row KV caches keyed by the token ids they encode, within ``max_bytes``.

    Entries are also indexed by their length and last token, so a lookup costs one dictionary
    probe per distinct kept length shorter than the prompt, not a scan of every entry (an engine
    keeps thousands of finished turns, and every joining prompt looks them up).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.reused_tokens = 0
        self._entries: OrderedDict[tuple[int, ...], tuple[KV, int, bool]] = OrderedDict()
        self._by_end: dict[tuple[int, int], set[tuple[int, ...]]] = {}
        self._lengths: list[int] = []  # the distinct lengths kept, ascending
        self._per_length: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, tokens: Sequence[int], kv: KV, *, reusable: bool = False) -> None:
        """Keep ``kv``, the cache of exactly ``tokens`` (``reusable``: not removed when taken);
        the least recently used entries go past the budget."""
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if not tokens or size > self.max_bytes:
            return
        key = tuple(tokens)
        if key in self._entries:
            self._remove(key)
        self._entries[key] = (kv, size, reusable)
        self.bytes += size
        self._by_end.setdefault((len(key), key[-1]), set()).add(key)
        if self._per_length.get(len(key), 0) == 0:
            bisect.insort(self._lengths, len(key))
        self._per_length[len(key)] = self._per_length.get(len(key), 0) + 1
        while self.bytes > self.max_bytes:
            self._remove(next(iter(self._entries)))

    def take(self, prompt: Sequence[int]) -> tuple[int, KV] | None:
        """The longest kept entry that is a proper prefix of ``prompt`` (removed from the cache
        unless reusable) and its length, or None. At least one prompt token is left to
        prefill."""
        shorter = bisect.bisect_left(self._lengths, len(prompt))
        for n in reversed(self._lengths[:shorter]):
            candidates = self._by_end.get((n, prompt[n - 1]))
            if candidates and (key := tuple(prompt[:n])) in candidates:
                kv, _, reusable = self._entries[key]
                if reusable:
                    self._entries.move_to_end(key)
                else:
                    self._remove(key)
                self.hits += 1
                self.reused_tokens += n
                return n, kv
        return None

    def clear(self) -> None:
        self._entries.clear()
        self._by_end.clear()
        self._lengths.clear()
        self._per_length.clear()
        self.bytes = 0

    def _remove(self, key: tuple[int, ...]) -> None:
        _, size, _ = self._entries.pop(key)
        self.bytes -= size
        n = len(key)
        same_end = self._by_end[(n, key[-1])]
        same_end.discard(key)
        if not same_end:
            del self._by_end[(n, key[-1])]
        self._per_length[n] -= 1
        if self._per_length[n] == 0:
            del self._per_length[n]
            self._lengths.pop(bisect.bisect_left(self._lengths, n))
