"""Episodes in, token tensors out: admission, reward shaping, and how rows are dealt to ranks and
micro-batches.

Every rank receives the same global batch and computes the same plan, so ranks agree on the
number of forward and backward passes (ZeRO-2/3 communicate in each) without talking.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.inference.sampling import choice_next_tokens
from agentgym.trainers.algorithms import collate_episodes, overlong_penalty

__all__ = [
    "Admitted",
    "Sample",
    "TrainBatch",
    "admit",
    "allowed_tokens",
    "plan_micro_batches",
    "shape_rewards",
    "split_minibatches",
]


@dataclass(frozen=True)
class Sample:
    """An episode and its per-turn rewards after shaping (what advantages are computed from)."""

    episode: Episode
    turn_rewards: tuple[float, ...]

    @property
    def reward(self) -> float:
        return float(sum(self.turn_rewards))


class Admitted(NamedTuple):
    groups: list[list[Episode]]  # complete groups of trainable episodes
    dropped_episodes: int  # infra errors and untrainable episodes
    dropped_groups: int  # groups left out because one of their episodes was dropped


def _check_episode(i: int, episode: Episode) -> None:
    if episode.loss_mask[:1] == [1]:
        raise ConfigError(
            f"episodes[{i}].loss_mask[0]",
            1,
            "the first token cannot be sampled (nothing precedes it)",
            "start each episode with its prompt tokens (loss_mask 0)",
        )


def admit(episodes: Sequence[Episode], group_size: int) -> Admitted:
    """Split ``episodes`` (groups contiguous) into groups and drop every group holding an
    episode with ``infra_error`` or ``trainable=False``: a group's baseline needs all of it."""
    if len(episodes) % group_size:
        raise ConfigError(
            "len(episodes)",
            len(episodes),
            f"must be a multiple of group_size={group_size}",
            "pass whole groups, each group's episodes next to each other",
        )
    kept, dropped_episodes, dropped_groups = [], 0, 0
    for start in range(0, len(episodes), group_size):
        group = list(episodes[start : start + group_size])
        bad = sum(1 for e in group if e.infra_error or not e.trainable)
        if bad:
            dropped_episodes += bad
            dropped_groups += 1
            continue
        for offset, episode in enumerate(group):
            _check_episode(start + offset, episode)
        kept.append(group)
    return Admitted(kept, dropped_episodes, dropped_groups)


def _turn_lengths(episode: Episode) -> list[int]:
    """Sampled tokens per turn (``turn_spans``), or one length for a span-less episode."""
    if len(episode.turn_spans) == len(episode.turns):
        return [sum(episode.loss_mask[s:e]) for s, e in episode.turn_spans]
    if len(episode.turns) == 1:
        return [sum(episode.loss_mask)]
    raise ConfigError(
        "episode.turn_spans",
        episode.turn_spans,
        f"must hold one span per turn ({len(episode.turns)})",
        "build episodes with the rollout collector, which records turn_spans",
    )


def shape_rewards(
    episodes: Sequence[Episode], config: Any
) -> tuple[list[Sample], Tensor | None]:  # samples, [B] summed penalty | None
    """Per-turn rewards with DAPO's overlong punishment added to each turn, when the config
    turns it on (``overlong_shaping``). The budget is per turn, like ``max_new_tokens``."""
    if not getattr(config, "overlong_shaping", False):
        return [Sample(e, tuple(e.rewards)) for e in episodes], None
    samples, totals = [], []
    for episode in episodes:
        lengths = torch.tensor(_turn_lengths(episode), dtype=torch.float64)
        penalty = overlong_penalty(
            lengths,
            max_length=config.overlong_length,
            cache_length=config.overlong_cache_length,
            factor=config.overlong_penalty_factor,
        ).tolist()
        samples.append(
            Sample(episode, tuple(r + p for r, p in zip(episode.rewards, penalty, strict=True)))
        )
        totals.append(sum(penalty))
    return samples, torch.tensor(totals, dtype=torch.float64)


@dataclass(frozen=True)
class TrainBatch:
    """Token tensors ``[B, T]`` of the rows being trained, and what the trainer adds to them."""

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
    """``[B, T, K]``: the ids each constrained token was sampled among (-1 padded; a row of
    -1 is unconstrained); None when no episode was constrained (``Episode.turn_choices``)."""

    @classmethod
    def collate(cls, episodes: Sequence[Episode], pad_token_id: int) -> TrainBatch:
        tokens = collate_episodes(episodes, pad_token_id=pad_token_id)
        return cls(
            tokens.token_ids,
            tokens.attention_mask,
            tokens.loss_mask,
            tokens.logprobs,
            allowed=allowed_tokens(episodes, tokens.token_ids.shape[1]),
        )

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
            fields[f.name] = None if value is None else value[index, :length].to(device)
        if dummy:
            fields["loss_mask"] = torch.zeros_like(fields["loss_mask"])
        return TrainBatch(**fields)


def allowed_tokens(episodes: Sequence[Episode], length: int) -> Tensor | None:
    """``TrainBatch.allowed`` of ``episodes`` padded to ``length``: for each sampled token of a
    constrained turn, the ids its turn's choices allowed there (what the engine masked to)."""
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
) -> list[list[int]]:
    """This rank's micro-batches of ``rows``: rows are dealt to ranks longest first, round
    robin, then cut so that rows x longest length stays within ``token_budget``. Every rank gets
    the same number of micro-batches; empty ones (``[]``) stand for dummy passes.

    With ``parts`` > 1 (a backend that runs that many micro-batches at once), a rank's rows are
    first cut into ``parts`` runs of about equal tokens (fewer when there are fewer rows), and
    each run is cut within ``token_budget // parts``, so the micro-batches in flight together
    stay within the budget."""
    order = sorted(rows, key=lambda i: (-lengths[i], i))
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
