"""Episodes to token tensors in the model's rows (``TrainBatch``), and how those rows are dealt to
minibatches, ranks and micro-batches.

Every rank receives the same global batch and computes the same plan, so ranks agree on the
number of forward and backward passes (ZeRO-2/3 communicate in each) without talking.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.inference.sampling import choice_next_tokens
from agentgym.trainers.algorithms import collate_episodes
from agentgym.trainers.rows import RowLayout

__all__ = ["TrainBatch", "allowed_tokens", "plan_micro_batches", "split_minibatches"]


@dataclass(frozen=True)
class TrainBatch:
    """Token tensors ``[R, W]`` in the model's rows (``layout``), and what the update adds to
    them: the no-gradient pass's logprobs and values, then advantages and returns."""

    token_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    sampling_logprobs: Tensor
    advantages: Tensor | None = None
    returns: Tensor | None = None
    old_logprobs: Tensor | None = None
    ref_logprobs: Tensor | None = None
    old_values: Tensor | None = None
    allowed: Tensor | None = None
    """``[R, W, K]``: the ids each constrained token was sampled among (-1 padded; a row of
    -1 is unconstrained); None when no episode was constrained (``Episode.turn_choices``)."""
    layout: RowLayout | None = field(default=None, compare=False)
    """Which episode slice each row holds; None for a micro-batch (``select``)."""

    @classmethod
    def collate(cls, episodes: Sequence[Episode], pad_token_id: int) -> TrainBatch:
        """``episodes`` in the model's rows: a row per episode, or per context with a history
        window (``RowLayout``), right-padded."""
        layout = RowLayout.of(episodes)
        tokens = collate_episodes(episodes, pad_token_id=pad_token_id)
        allowed = allowed_tokens(episodes, tokens.token_ids.shape[1])
        return cls(
            layout.to_rows(tokens.token_ids, fill=pad_token_id),
            layout.attention_mask(),
            layout.to_rows(tokens.loss_mask),
            layout.to_rows(tokens.logprobs),
            allowed=None if allowed is None else layout.to_rows(allowed, fill=-1),
            layout=layout,
        )

    @property
    def rows(self) -> RowLayout:
        if self.layout is None:
            raise ConfigError(
                "batch.layout", None, "is needed here", "use a batch from TrainBatch.collate"
            )
        return self.layout

    @property
    def lengths(self) -> list[int]:
        return [int(n) for n in self.attention_mask.sum(-1).tolist()]

    def replace(self, **tensors: Any) -> TrainBatch:
        return dataclasses.replace(self, **tensors)

    def select(self, rows: Sequence[int], device: torch.device) -> TrainBatch:
        """Rows ``rows``, trimmed to their longest sequence, on ``device``. No rows: a dummy
        row with an empty loss mask (a rank with nothing to do still joins the collectives)."""
        dummy = not rows
        index = torch.tensor(list(rows) or [0])
        length = max(max(self.lengths[i] for i in index.tolist()), 1)
        fields: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "layout" or value is None:
                continue
            fields[f.name] = value[index, :length].to(device)
        if dummy:
            fields["loss_mask"] = torch.zeros_like(fields["loss_mask"])
        return TrainBatch(**fields)


def allowed_tokens(episodes: Sequence[Episode], length: int) -> Tensor | None:
    """``[E, length, K]``: for each sampled token of a constrained turn of each episode, the ids
    its turn's choices allowed there (what the engine masked to); -1 padded."""
    found: dict[tuple[int, int], list[int]] = {}
    for i, episode in enumerate(episodes):
        if not episode.turn_choices:
            continue
        if len(episode.turn_choices) != len(episode.turn_spans):
            raise ConfigError(
                f"episodes[{i}].turn_choices",
                f"{len(episode.turn_choices)} entries",
                f"must hold one entry per turn span ({len(episode.turn_spans)})",
                "build constrained episodes with the rollout collector (action_choices)",
            )
        for (start, end), choices in zip(episode.turn_spans, episode.turn_choices, strict=True):
            if choices:
                found.update(_turn_allowed(i, episode, start, end, choices))
    if not found:
        return None
    width = max(len(ids) for ids in found.values())
    allowed = torch.full((len(episodes), length, width), -1, dtype=torch.long)
    for (i, position), ids in found.items():
        allowed[i, position, : len(ids)] = torch.tensor(ids)
    return allowed


def _turn_allowed(
    index: int, episode: Episode, start: int, end: int, choices: Sequence[Sequence[int]]
) -> dict[tuple[int, int], list[int]]:
    found = {}
    for position in range(start, end):
        if not episode.loss_mask[position]:
            continue
        ids = choice_next_tokens(choices, episode.token_ids[start:position])
        if episode.token_ids[position] not in ids:
            raise ConfigError(
                f"episodes[{index}].token_ids[{position}]",
                episode.token_ids[position],
                f"is not a continuation its turn's choices allow ({ids})",
                "keep turn_choices as the collector recorded them",
            )
        found[index, position] = ids
    return found


def split_minibatches(rows: int, count: int) -> list[list[int]]:
    """``range(rows)`` cut into ``count`` contiguous, near-equal minibatches (in group order, so
    a group stays together when ``count`` divides the number of groups)."""
    bounds = [round(k * rows / count) for k in range(count + 1)]
    return [list(range(bounds[k], bounds[k + 1])) for k in range(count)]


def _by_budget(rows: list[int], lengths: Sequence[int], budget: int | None) -> list[list[int]]:
    if budget is None:
        return [rows] if rows else []
    micro: list[list[int]] = []
    for row in rows:  # longest first: a micro-batch's padded size is its first row's length
        if micro and (len(micro[-1]) + 1) * lengths[micro[-1][0]] <= budget:
            micro[-1].append(row)
        else:
            micro.append([row])
    return micro


def _balanced(rows: list[int], lengths: Sequence[int], parts: int) -> list[list[int]]:
    """``rows`` in at most ``parts`` contiguous, non-empty runs of about equal tokens."""
    parts = min(parts, len(rows))
    if parts <= 1:
        return [rows] if rows else []
    total = sum(lengths[r] for r in rows)
    cuts, seen = [0], 0
    for i, row in enumerate(rows):
        seen += lengths[row]
        k = len(cuts)  # the cut being looked for: after about k / parts of the tokens
        if k < parts and (seen * parts >= k * total or len(rows) - (i + 1) == parts - k):
            cuts.append(i + 1)
    cuts.append(len(rows))
    return [rows[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def plan_micro_batches(
    rows: Sequence[int],
    lengths: Sequence[int],
    *,
    world_size: int,
    rank: int,
    token_budget: int | None,
    parts: int = 1,
    keys: Sequence[Any] | None = None,
) -> list[list[int]]:
    """This rank's micro-batches of ``rows``: rows are dealt to ranks longest first, round
    robin, then cut so that rows x longest length stays within ``token_budget``. Every rank gets
    the same number of micro-batches; empty ones (``[]``) stand for dummy passes.

    ``keys`` (per row, e.g. its token ids) order rows of equal length: rows with the same
    tokens sit next to each other, so a micro-batch holds a prompt's rows together and prefix
    sharing (``agentgym.trainers.prefix_sharing``) runs it once for them.

    With ``parts`` > 1 (a backend that runs that many micro-batches at once), a rank's rows are
    first cut into ``parts`` runs of about equal tokens (fewer when there are fewer rows), and
    each run is cut within ``token_budget // parts``, so the micro-batches in flight together
    stay within the budget."""
    if keys is None:
        order = sorted(rows, key=lambda i: (-lengths[i], i))
    else:
        order = sorted(rows, key=lambda i: (-lengths[i], keys[i], i))
    budget = token_budget if token_budget is None else max(1, token_budget // max(parts, 1))
    plans = [
        [
            micro
            for run in _balanced(order[r::world_size], lengths, parts)
            for micro in _by_budget(run, lengths, budget)
        ]
        for r in range(world_size)
    ]
    count = max(1, *(len(p) for p in plans))
    mine = plans[rank]
    return mine + [[] for _ in range(count - len(mine))]
