"""Episodes in: which ones a step trains on (``admit``) and why the others are dropped
(``drop_cause``), their rewards after shaping (``shape_rewards``: DAPO's overlong punishment),
and what they say about the policy (``episode_metrics``, ``flat_groups``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.core.info import (
    ERROR,
    ERROR_AT,
    OUTCOMES,
    TRUNCATION_REASON,
    error_kind,
    is_infra_error,
)
from agentgym.core.types import Episode
from agentgym.trainers.algorithms import overlong_penalty
from agentgym.trainers.config import AlgorithmConfig, DAPOConfig

__all__ = [
    "DROP_KINDS",
    "Admitted",
    "Sample",
    "admit",
    "drop_cause",
    "dropped_by_kind",
    "episode_metrics",
    "flat_groups",
    "masked_by_outcome",
    "oldest_version",
    "outcome_rates",
    "shape_rewards",
]

DROP_KINDS = ("infra", "env", "untrainable")
"""Why ``admit`` drops an episode: an infrastructure failure (``error_kind`` "infra"), an
exception from the env's own code ("env"), or an episode not fit to train on."""


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
    stale_groups: int = 0  # groups left out because one episode was older than min_version


def oldest_version(episode: Episode) -> int | None:
    """The policy version of the episode's oldest turn; None when a turn's is unknown (or the
    episode records none)."""
    versions = episode.weight_versions
    if not versions or any(v is None for v in versions):
        return None
    return min(v for v in versions if v is not None)


def _stale(episode: Episode, min_version: int | None) -> bool:
    if min_version is None:
        return False
    oldest = oldest_version(episode)
    return oldest is None or oldest < min_version


def _check_episode(i: int, episode: Episode) -> None:
    if episode.loss_mask[:1] == [1]:
        raise ConfigError(
            f"episodes[{i}].loss_mask[0]",
            1,
            "the first token cannot be sampled (nothing precedes it)",
            "start each episode with its prompt tokens (loss_mask 0)",
        )


def drop_cause(episode: Episode) -> tuple[str, str] | None:
    """``(kind, what)`` of why ``admit`` drops ``episode`` (kind one of ``DROP_KINDS``; what:
    the error and the env call that raised it), or None when it is trainable."""
    if episode.infra_error:
        infos = [episode.reset_info, *(t.info for t in episode.turns)]
        info = next(i for i in infos if is_infra_error(i))
        kind = error_kind(info) or "infra"
        what = str(info.get(ERROR) or "no error text")
        where = info.get(ERROR_AT)
        return kind, f"{where} raised {what}" if where else what
    if episode.trainable:
        return None
    reason = episode.reset_info.get(TRUNCATION_REASON)
    if reason is not None and not episode.turns:
        return "untrainable", f"ended before its first turn ({reason})"
    return "untrainable", "a turn the engine marked untrainable"


def dropped_by_kind(episodes: Sequence[Episode]) -> dict[str, float]:
    """``dropped/<kind>``: how many of ``episodes`` ``admit`` drops for each kind of cause
    (kinds with none left out)."""
    counts: dict[str, float] = {}
    for episode in episodes:
        cause = drop_cause(episode)
        if cause is not None:
            counts[f"dropped/{cause[0]}"] = counts.get(f"dropped/{cause[0]}", 0.0) + 1.0
    return counts


def outcome_rates(episodes: Sequence[Episode]) -> dict[str, float]:
    """``outcome/<class>``: the fraction of ``episodes`` (before ``admit`` drops any) that ended
    in each class of :data:`agentgym.core.info.OUTCOMES`, every class present (0.0 included)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for episode in episodes:
        counts[episode.outcome] += 1
    total = max(len(episodes), 1)
    return {f"outcome/{name}": count / total for name, count in counts.items()}


def admit(episodes: Sequence[Episode], group_size: int, min_version: int | None = None) -> Admitted:
    """Split ``episodes`` (groups contiguous) into groups and drop every group holding an
    episode with ``infra_error`` or ``trainable=False``: a group's baseline needs all of it.
    With ``min_version`` (asynchronous training) a group is also dropped, as stale, when one of
    its episodes has a turn sampled by an older policy version or one it does not know."""
    if len(episodes) % group_size:
        raise ConfigError(
            "len(episodes)",
            len(episodes),
            f"must be a multiple of group_size={group_size}",
            "pass whole groups, each group's episodes next to each other",
        )
    kept, dropped_episodes, dropped_groups, stale_groups = [], 0, 0, 0
    for start in range(0, len(episodes), group_size):
        group = list(episodes[start : start + group_size])
        bad = sum(1 for e in group if e.infra_error or not e.trainable)
        if bad:
            dropped_episodes += bad
            dropped_groups += 1
            continue
        if any(_stale(e, min_version) for e in group):
            stale_groups += 1
            continue
        for offset, episode in enumerate(group):
            _check_episode(start + offset, episode)
        kept.append(group)
    return Admitted(kept, dropped_episodes, dropped_groups, stale_groups)


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
    episodes: Sequence[Episode], config: AlgorithmConfig
) -> tuple[list[Sample], Tensor | None]:  # samples, [B] summed penalty | None
    """Per-turn rewards with DAPO's overlong punishment added to each turn, when the config
    is a ``DAPOConfig`` that turns it on (``overlong_shaping``). The budget is per turn, like
    ``max_new_tokens``."""
    if not (isinstance(config, DAPOConfig) and config.overlong_shaping):
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


def masked_by_outcome(samples: Sequence[Sample], outcomes: Sequence[str]) -> list[int]:
    """Indices of the ``samples`` whose episode ended in one of ``outcomes`` (compact
    filtering, ``AlgorithmConfig.mask_outcomes``): the update zeroes their loss mask after the
    advantages are computed, so their rewards still count in their groups' baselines."""
    if not outcomes:
        return []
    return [i for i, s in enumerate(samples) if s.episode.outcome in outcomes]


def flat_groups(groups: Sequence[Sequence[Sample]]) -> int:
    """Groups whose (shaped) rewards are all equal: every group-relative advantage in them is
    0, so they teach the policy nothing."""
    return sum(1 for g in groups if g and max(s.reward for s in g) == min(s.reward for s in g))


def episode_metrics(samples: Sequence[Sample]) -> dict[str, float]:
    """Reward (as the env gave it), success where the last turn's info says, lengths."""
    rewards = [s.episode.total_reward for s in samples]
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    metrics = {
        "episodes": float(len(samples)),
        "reward_mean": mean,
        "reward_std": std,
        "shaped_reward_mean": sum(s.reward for s in samples) / len(samples),
        "turns_mean": sum(len(s.episode.turns) for s in samples) / len(samples),
        "response_tokens_mean": sum(sum(s.episode.loss_mask) for s in samples) / len(samples),
    }
    outcomes = [s.episode.success for s in samples if s.episode.success is not None]
    if outcomes:
        metrics["success_rate"] = sum(outcomes) / len(outcomes)
    return metrics
