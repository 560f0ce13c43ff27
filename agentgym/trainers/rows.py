"""Episodes whose turns saw contexts of their own (a history window): one model row per context.

Advantages are computed over an episode's flat token sequence (its turns, spans and rewards in
one row), whatever the model saw. With ``Episode.context_starts`` the model saw each turn's
context as a sequence of its own, so the forward passes run one row per context: ``unpack``
cuts the episode rows into context rows, ``pack`` puts per-token results back. An episode that
is one context is one row either way.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode

if TYPE_CHECKING:
    from agentgym.trainers.batch import TrainBatch

__all__ = ["ContextLayout"]


@dataclass(frozen=True)
class ContextLayout:
    """Where each model row lies in the episode rows: ``(episode, start, end)``."""

    pieces: tuple[tuple[int, int, int], ...]
    episode_rows: tuple[tuple[int, ...], ...]
    """Per episode, the model rows of its contexts."""

    @classmethod
    def of(cls, episodes: Sequence[Episode]) -> ContextLayout | None:
        """The layout, or None when every episode is one context (rows are episodes)."""
        if not any(e.context_starts for e in episodes):
            return None
        pieces: list[tuple[int, int, int]] = []
        rows: list[tuple[int, ...]] = []
        for i, episode in enumerate(episodes):
            _check_starts(i, episode)
            first = len(pieces)
            pieces.extend((i, start, end) for start, end in episode.contexts)
            rows.append(tuple(range(first, len(pieces))))
        return cls(tuple(pieces), tuple(rows))

    @property
    def width(self) -> int:
        return max((end - start for _, start, end in self.pieces), default=0)

    def rows_of(self, episodes: Sequence[int]) -> list[int]:
        """The model rows of episodes ``episodes``, in order."""
        return [row for i in episodes for row in self.episode_rows[i]]

    def unpack(self, values: Tensor, *, fill: float | int = 0) -> Tensor:
        """Episode rows ``[E, T, ...]`` cut into context rows ``[R, W, ...]``."""
        shape = (len(self.pieces), self.width, *values.shape[2:])
        out = torch.full(shape, fill, dtype=values.dtype, device=values.device)
        for row, (i, start, end) in enumerate(self.pieces):
            out[row, : end - start] = values[i, start:end]
        return out

    def pack(self, values: Tensor, shape: torch.Size) -> Tensor:  # [R, W] -> [E, T]
        out = torch.zeros(shape, dtype=values.dtype, device=values.device)
        for row, (i, start, end) in enumerate(self.pieces):
            out[i, start:end] = values[row, : end - start]
        return out

    def unpack_batch(self, batch: TrainBatch, pad_token_id: int) -> TrainBatch:
        """Every tensor of ``batch`` in context rows, padded as ``TrainBatch.collate`` pads."""
        fields: dict[str, Tensor | None] = {}
        for f in dataclasses.fields(batch):
            value = getattr(batch, f.name)
            if value is None:
                fields[f.name] = None
            elif f.name == "attention_mask":
                fields[f.name] = self._attention()
            else:
                fill = {"token_ids": pad_token_id, "allowed": -1}.get(f.name, 0)
                fields[f.name] = self.unpack(value, fill=fill)
        return batch.replace(**fields)

    def _attention(self) -> Tensor:
        lengths = torch.tensor([end - start for _, start, end in self.pieces])
        return (torch.arange(self.width)[None, :] < lengths[:, None]).long()


def _check_starts(index: int, episode: Episode) -> None:
    starts = episode.context_starts
    if not starts:  # one context: the whole conversation
        return
    n = len(episode.token_ids)
    ordered = all(a < b for a, b in itertools.pairwise(starts))
    if starts[0] != 0 or not ordered or starts[-1] >= n:
        raise ConfigError(
            f"episodes[{index}].context_starts",
            list(starts),
            f"must start at 0 and increase strictly, each < len(token_ids) = {n}",
            "build windowed episodes with the rollout collector (history_turns)",
        )
    sampled_first = [s for s in starts if episode.loss_mask[s] == 1]
    if sampled_first:
        raise ConfigError(
            f"episodes[{index}].context_starts",
            list(starts),
            f"contexts at {sampled_first} begin with a sampled token (nothing precedes it)",
            "start each context with its prompt tokens (loss_mask 0)",
        )
