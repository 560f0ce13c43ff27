"""DAPO's data-side techniques (Yu et al. 2025): dynamic sampling (eq. 11) and overlong reward
shaping (eq. 13). The clip-higher and token-mean parts live in ``policy_loss`` and ``aggregation``.

Dynamic sampling: a group whose rewards are all equal has zero group-normalised advantage, so it
contributes no gradient and only shrinks the effective batch. Such groups are dropped and more
groups are sampled until the batch is full again::

    sampler = DynamicSampler(target_groups=16, max_rounds=10)
    batch = None
    while batch is None:
        groups = collect_groups()                       # e.g. 16 tasks × group_size episodes
        batch = sampler.add(groups, rewards_of(groups))  # [num_groups, group_size]

``add`` raises ``DynamicSamplingExhausted`` when ``max_rounds`` rounds did not fill the batch;
with ``partial=True`` it returns the groups it kept instead (a smaller batch), unless it kept none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError, DynamicSamplingExhausted

__all__ = ["DynamicSampler", "informative_groups", "overlong_penalty"]

G = TypeVar("G")


def overlong_penalty(
    lengths: Tensor,  # [B] number of tokens each response sampled
    *,
    max_length: int,
    cache_length: int,
    factor: float = 1.0,
) -> Tensor:  # [B] in [−factor, 0], added to the task reward
    """Soft overlong punishment (DAPO eq. 13), with ``L_max = max_length`` and
    ``L_cache = cache_length``::

        0                                   |y| ≤ L_max − L_cache
        ((L_max − L_cache) − |y|) / L_cache   L_max − L_cache < |y| ≤ L_max
        −1                                  L_max < |y|

    scaled by ``factor`` (1 in the paper).
    """
    if not 0 < cache_length <= max_length:
        raise ConfigError(
            "cache_length",
            cache_length,
            f"must lie in (0, max_length={max_length}]",
            "use a fraction of the budget (DAPO: 4096 of 20480)",
        )
    if not lengths.is_floating_point():
        lengths = lengths.to(torch.get_default_dtype())
    expected = max_length - cache_length
    ramp = (expected - lengths) / cache_length  # [B], ≤ 0 past the expected length
    penalty = torch.where(lengths <= expected, torch.zeros_like(ramp), ramp)
    penalty = torch.where(lengths > max_length, torch.full_like(ramp, -1.0), penalty)
    return factor * penalty


def informative_groups(
    rewards: Tensor,  # [G, n] the rewards of each group's episodes
    *,
    atol: float = 0.0,
) -> Tensor:  # [G] bool
    """True for the groups whose rewards are not all equal (more than ``atol`` apart): the
    groups DAPO keeps (eq. 11: ``0 < |{o_i : correct}| < G``, generalised to any reward).
    """
    if rewards.dim() != 2:
        raise ConfigError(
            "rewards.shape",
            tuple(rewards.shape),
            "must be [num_groups, group_size]",
            "reshape the per-episode rewards, e.g. rewards.view(-1, group_size)",
        )
    spread = rewards.max(dim=-1).values - rewards.min(dim=-1).values  # [G]
    return spread > atol


class DynamicSampler(Generic[G]):
    """Accumulates informative groups over sampling rounds until ``target_groups`` are kept.

    Groups are opaque (lists of episodes, indices, ...); their rewards come alongside. Surplus
    groups of the last round are dropped, as in DAPO. After a full batch is returned, or the cap
    is hit, the sampler starts over for the next training step.
    """

    def __init__(
        self, target_groups: int, max_rounds: int, *, atol: float = 0.0, partial: bool = False
    ) -> None:
        if target_groups < 1:
            raise ConfigError("target_groups", target_groups, "must be >= 1", "pass B / n")
        if max_rounds < 1:
            raise ConfigError("max_rounds", max_rounds, "must be >= 1", "use e.g. 10")
        self.target_groups, self.max_rounds, self.atol = target_groups, max_rounds, atol
        self.partial = partial
        self._kept: list[G] = []
        self._seen: list[G] = []  # every group of this step's rounds, kept or not
        self._last_seen: list[G] = []
        self.rounds = 0
        self.last_stats: dict[str, float] = {}

    def add(self, groups: Sequence[G], rewards: Tensor) -> list[G] | None:
        """Keep the informative ones of ``groups`` (``rewards``: ``[len(groups), n]``).

        Returns the batch of exactly ``target_groups`` groups once enough were kept, else None.
        When this was round ``max_rounds`` and the batch is still short, returns the groups kept
        so far if the sampler is ``partial`` (an empty list when it kept none: every group's
        rewards were equal, nothing to learn from), else raises ``DynamicSamplingExhausted``.
        """
        if rewards.shape[0] != len(groups):
            raise ConfigError(
                "rewards.shape[0]",
                rewards.shape[0],
                f"must equal len(groups)={len(groups)}",
                "pass one row of rewards per group",
            )
        keep = informative_groups(rewards, atol=self.atol).tolist()
        self._seen.extend(groups)
        self._kept.extend(g for g, k in zip(groups, keep, strict=True) if k)
        self.rounds += 1
        if len(self._kept) >= self.target_groups:
            batch = self._kept[: self.target_groups]
            self._finish()
            return batch
        if self.rounds >= self.max_rounds:
            kept, rounds, seen = list(self._kept), self.rounds, len(self._seen)
            self._finish()
            if self.partial:
                return kept
            raise DynamicSamplingExhausted(len(kept), self.target_groups, rounds, seen)
        return None

    def take_seen(self) -> list[G]:
        """Every group of the rounds behind the last batch returned, kept or not (once: the
        sampler lets go of them, so checkpoints do not carry them)."""
        seen, self._last_seen = self._last_seen, []
        return seen

    def _finish(self) -> None:
        seen = len(self._seen)
        self.last_stats = {
            "dynamic_sampling/rounds": float(self.rounds),
            "dynamic_sampling/groups_seen": float(seen),
            "dynamic_sampling/informative_fraction": len(self._kept) / max(seen, 1),
            "dynamic_sampling/groups_kept": float(min(len(self._kept), self.target_groups)),
        }
        self._last_seen = self._seen
        self._kept, self._seen, self.rounds = [], [], 0
