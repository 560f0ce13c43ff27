"""Where each episode's tokens lie in the rows the model runs on: decided once per batch.

An episode is one flat token sequence (its turns, spans and rewards). The model saw it either
as one sequence (a row per episode) or, with a history window (``Episode.context_starts``), as
one sequence per turn's context (a row per context). ``RowLayout`` records which slice of which
episode each model row holds. The batch is collated into model rows once, and every stage
after it (the no-gradient pass, minibatches, losses) works on those rows; only advantages,
defined over an episode's whole sequence, look at the episode rows (``to_episodes`` and back).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode

__all__ = ["RowLayout"]


@dataclass(frozen=True)
class RowLayout:
    """Model row ``r`` holds tokens ``[start, end)`` of episode ``e``: ``pieces[r] = (e, start,
    end)``, the rows of an episode next to each other and in order."""

    pieces: tuple[tuple[int, int, int], ...]
    episode_rows: tuple[tuple[int, ...], ...]
    """Per episode, its model rows."""
    episode_lengths: tuple[int, ...]
    """Per episode, the length of its flat token sequence."""

    @classmethod
    def of(cls, episodes: Sequence[Episode]) -> RowLayout:
        """A row per context of each episode (one per episode without a history window)."""
        pieces: list[tuple[int, int, int]] = []
        rows: list[tuple[int, ...]] = []
        for i, episode in enumerate(episodes):
            _check_starts(i, episode)
            first = len(pieces)
            pieces.extend((i, start, end) for start, end in episode.contexts)
            rows.append(tuple(range(first, len(pieces))))
        lengths = tuple(len(e.token_ids) for e in episodes)
        return cls(tuple(pieces), tuple(rows), lengths)

    @property
    def windowed(self) -> bool:
        """Some episode spans several rows (else row ``i`` is episode ``i``, whole)."""
        return len(self.pieces) != len(self.episode_rows)

    @property
    def width(self) -> int:
        """The longest row."""
        return max((end - start for _, start, end in self.pieces), default=0)

    @property
    def lengths(self) -> list[int]:
        """Each row's number of tokens."""
        return [end - start for _, start, end in self.pieces]

    def rows_of(self, episodes: Sequence[int]) -> list[int]:
        """The model rows of episodes ``episodes``, in order."""
        return [row for i in episodes for row in self.episode_rows[i]]

    def to_rows(self, values: Tensor, *, fill: float | int = 0) -> Tensor:
        """Episode rows ``[E, T, ...]`` -> model rows ``[R, W, ...]`` (``fill`` past a row's
        end)."""
        if not self.windowed and values.shape[1] == self.width:
            return values
        shape = (len(self.pieces), self.width, *values.shape[2:])
        out = torch.full(shape, fill, dtype=values.dtype, device=values.device)
        for row, (i, start, end) in enumerate(self.pieces):
            out[row, : end - start] = values[i, start:end]
        return out

    def to_episodes(self, values: Tensor) -> Tensor:
        """Model rows ``[R, W]`` -> episode rows ``[E, T]`` (0 past an episode's end)."""
        length = max(self.episode_lengths, default=0)
        if not self.windowed and values.shape[1] == length:
            return values
        shape = (len(self.episode_rows), length, *values.shape[2:])
        out = torch.zeros(shape, dtype=values.dtype, device=values.device)
        for row, (i, start, end) in enumerate(self.pieces):
            out[i, start:end] = values[row, : end - start]
        return out

    def attention_mask(self) -> Tensor:  # [R, W] long, 1 on each row's tokens
        lengths = torch.tensor(self.lengths, dtype=torch.long)
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
