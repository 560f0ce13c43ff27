"""The algorithm, composed from ``agentgym.trainers.algorithms`` as a config says.

``compute_advantages`` turns a batch's rewards into per-token advantages (and value targets for
PPO); ``micro_batch_loss`` turns a forward pass into the scalar to back-propagate, normalised by
the whole minibatch (``minibatch_normalizer``) so that micro-batches and ranks add up exactly.
Nothing here knows about devices or distribution.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple, TypedDict, TypeVar

import torch
from torch import Tensor

from agentgym.core.errors import Error
from agentgym.trainers.algorithms import (
    AdvantageEstimator,
    Aggregation,
    KLPlacement,
    aggregate,
    broadcast_to_tokens,
    clipped_policy_loss,
    clipped_value_loss,
    gae,
    group_advantages,
    kl_estimate,
    kl_loss,
    kl_penalized_rewards,
    masked_sum,
    masked_whiten,
    per_turn_group_advantages,
    place_turn_rewards,
    reinforce_pp_advantages,
    rloo_advantages,
    truncated_importance_weights,
    turn_values_to_tokens,
)
from agentgym.trainers.algorithms.anchors import anchor_state_advantages, turn_states
from agentgym.trainers.batch import TrainBatch
from agentgym.trainers.config import AlgorithmConfig, PPOConfig
from agentgym.trainers.episodes import Sample
from agentgym.trainers.modules import PolicyOutput

__all__ = [
    "TOKEN_MEAN_STATS",
    "Advantages",
    "compute_advantages",
    "entropy_coefficient",
    "kl_in_loss",
    "kl_in_reward",
    "micro_batch_loss",
    "minibatch_normalizer",
]

T = TypeVar("T")
Spans = list[tuple[int, int]]

TOKEN_MEAN_STATS = frozenset(
    {
        "approx_kl",
        "clip_fraction",
        "clip_fraction_high",
        "clip_fraction_low",
        "dual_clip_fraction",
        "entropy",
        "kl",
        "tis_truncated_fraction",
        "value_clip_fraction",
    }
)
"""Stats that ``micro_batch_loss`` returns as sums over sampled tokens (divide by ``tokens``);
the others (the loss terms) are already shares of the minibatch mean and just add up."""


class _Aggregate(TypedDict):
    """How every loss term is reduced: the same way, over the same minibatch."""

    aggregation: Aggregation
    max_length: int
    normalizer: float


class Advantages(NamedTuple):
    advantages: Tensor  # [B, T], 0 off the mask
    returns: Tensor | None  # [B, T] value targets (GAE only)


def kl_in_reward(config: AlgorithmConfig) -> bool:
    return config.kl_beta > 0 and config.kl_placement == KLPlacement.REWARD


def kl_in_loss(config: AlgorithmConfig) -> bool:
    return config.kl_beta > 0 and config.kl_placement == KLPlacement.LOSS


def _need(value: T | None, what: str) -> T:
    if value is None:  # the trainer computes these before calling; a bug if missing
        raise Error(f"internal: {what} was not computed for this batch")
    return value


def _critic(config: AlgorithmConfig) -> PPOConfig:
    """The critic's settings, read by type: a config that trains a critic is a ``PPOConfig``
    (``AlgorithmConfig`` refuses one that is not)."""
    if not isinstance(config, PPOConfig):
        raise Error(f"internal: {type(config).__name__} has a value model but no critic settings")
    return config


def _spans(sample: Sample, length: int) -> Spans:
    """The turn spans, or one span over the row for a span-less single-turn episode."""
    spans = list(sample.episode.turn_spans)
    return spans if len(spans) == len(sample.turn_rewards) else [(0, length)]


def _turn_sums(per_token: Tensor, spans: Sequence[Spans]) -> list[list[float]]:
    rows = per_token.tolist()  # [B][T]
    return [[sum(row[s:e]) for s, e in sp] for row, sp in zip(rows, spans, strict=True)]


def _sequence_advantages(
    config: AlgorithmConfig,
    turn_rewards: list[list[float]],
    spans: list[Spans],
    mask: Tensor,
    states: list[list[Hashable]] | None = None,
) -> Tensor:  # [B, T]
    if config.per_turn_credit:
        per_turn = per_turn_group_advantages(
            turn_rewards, config.group_size, gamma=config.gamma, scale_by_std=config.scale_by_std
        )
        return turn_values_to_tokens(per_turn, spans, mask)
    rewards = torch.tensor([sum(r) for r in turn_rewards], dtype=mask.dtype)  # [B]
    if config.advantage_estimator == AdvantageEstimator.RLOO:
        values = rloo_advantages(rewards, config.group_size)
    else:
        values = group_advantages(rewards, config.group_size, scale_by_std=config.scale_by_std)
    if not config.step_credit or states is None:
        return broadcast_to_tokens(values, mask)
    steps = anchor_state_advantages(
        turn_rewards,
        states,
        config.group_size,
        gamma=config.gamma,
        scale_by_std=config.scale_by_std,
    )
    per_turn = [
        [config.episode_credit * episode + config.step_credit * step for step in turns]
        for episode, turns in zip(values.tolist(), steps, strict=True)
    ]
    return turn_values_to_tokens(per_turn, spans, mask)


@torch.no_grad()
def compute_advantages(
    config: AlgorithmConfig, samples: Sequence[Sample], batch: TrainBatch
) -> Advantages:
    """Per-token advantages (and PPO's value targets) in ``batch``'s rows; ``samples`` in
    episode order, groups contiguous.

    Advantages are defined over an episode's whole token sequence, so with a history window
    (``batch.rows.windowed``) they are computed on the episode rows and put back into the
    model's rows; nowhere else does the update look at episode rows.
    """
    rows = batch.rows

    def episode_rows(value: Tensor | None) -> Tensor | None:
        return None if value is None else rows.to_episodes(value)

    episodes = _EpisodeTokens(
        rows.to_episodes(batch.loss_mask),
        episode_rows(batch.old_logprobs),
        episode_rows(batch.ref_logprobs),
        episode_rows(batch.old_values),
    )
    found = _episode_advantages(config, samples, episodes)
    returns = None if found.returns is None else rows.to_rows(found.returns)
    return Advantages(rows.to_rows(found.advantages), returns)


class _EpisodeTokens(NamedTuple):
    """What advantages read, in episode rows ``[E, T]``."""

    loss_mask: Tensor
    old_logprobs: Tensor | None
    ref_logprobs: Tensor | None
    old_values: Tensor | None


def _episode_advantages(
    config: AlgorithmConfig, samples: Sequence[Sample], batch: _EpisodeTokens
) -> Advantages:
    """``compute_advantages`` on episode rows ``[E, T]``.

    Sequence-level estimators (group, RLOO) give every sampled token of an episode its
    episode's advantage, or each turn its own with ``per_turn_credit``. A KL penalty in the
    reward needs ``batch.old_logprobs`` and ``ref_logprobs``: per token for GAE and
    REINFORCE++, summed per turn for the sequence-level estimators. GAE needs ``old_values``.
    """
    mask = batch.loss_mask
    turn_rewards = [list(s.turn_rewards) for s in samples]
    spans = [_spans(s, mask.shape[1]) for s in samples]
    estimator = config.advantage_estimator
    if estimator in (AdvantageEstimator.GAE, AdvantageEstimator.REINFORCE_PP):
        rewards = place_turn_rewards(turn_rewards, spans, mask)  # [B, T]
        if kl_in_reward(config):
            rewards = kl_penalized_rewards(
                rewards,
                _need(batch.old_logprobs, "old_logprobs"),
                _need(batch.ref_logprobs, "ref_logprobs"),
                mask,
                beta=config.kl_beta,
                estimator=config.kl_estimator,
            )
        if estimator == AdvantageEstimator.REINFORCE_PP:
            return Advantages(reinforce_pp_advantages(rewards, mask, gamma=config.gamma), None)
        values = _need(batch.old_values, "old_values")
        critic = _critic(config)
        advantages, returns = gae(rewards, values, mask, gamma=config.gamma, lam=critic.lam)
        if critic.whiten_advantages:
            advantages = masked_whiten(advantages, mask)
        return Advantages(advantages, returns)
    if kl_in_reward(config):
        kl = kl_estimate(
            _need(batch.old_logprobs, "old_logprobs"),
            _need(batch.ref_logprobs, "ref_logprobs"),
            config.kl_estimator,
        )
        turn_kl = _turn_sums(kl * mask, spans)
        turn_rewards = [
            [r - config.kl_beta * k for r, k in zip(rs, ks, strict=True)]
            for rs, ks in zip(turn_rewards, turn_kl, strict=True)
        ]
    states = [turn_states(s.episode) for s in samples] if config.step_credit else None
    if states is not None and any(len(st) != len(sp) for st, sp in zip(states, spans, strict=True)):
        states = None  # single-turn rows without turn spans: nothing to anchor
    return Advantages(_sequence_advantages(config, turn_rewards, spans, mask, states), None)


def minibatch_normalizer(config: AlgorithmConfig, loss_mask: Tensor) -> float:
    """What ``aggregate(normalizer=...)`` divides by for the whole minibatch ``loss_mask``."""
    if config.aggregation == Aggregation.TOKEN_MEAN:
        return float(loss_mask.sum())
    if config.aggregation == Aggregation.SEQ_MEAN_TOKEN_MEAN:
        return float((loss_mask.sum(-1) > 0).sum())
    return float(loss_mask.shape[0])


def entropy_coefficient(config: AlgorithmConfig, step: int) -> float:
    """The entropy bonus's weight at update ``step`` (0-based): ``entropy_coef``, falling
    linearly to 0 over ``entropy_decay_steps`` updates when that is set."""
    if not config.entropy_decay_steps:
        return config.entropy_coef
    return config.entropy_coef * max(0.0, 1.0 - step / config.entropy_decay_steps)


def micro_batch_loss(
    config: AlgorithmConfig,
    out: PolicyOutput,
    micro: TrainBatch,
    normalizer: float,
    entropy_coef: float,
) -> tuple[Tensor, dict[str, Tensor]]:
    """This micro-batch's share of the minibatch loss, and its stats (see
    ``TOKEN_MEAN_STATS``). ``micro.old_logprobs`` None: on-policy, π_old = π_θ detached.
    ``entropy_coef``: the bonus's weight at this update, ``entropy_coefficient(config, step)``
    (required: ``config.entropy_coef`` alone would skip its decay)."""
    mask = micro.loss_mask
    tokens = mask.sum()
    old = micro.old_logprobs if micro.old_logprobs is not None else out.logprobs.detach()
    stats: dict[str, Tensor] = {"tokens": tokens}
    weights = None
    if config.tis_cap is not None:
        tis = truncated_importance_weights(old, micro.sampling_logprobs, mask, cap=config.tis_cap)
        weights, stats["tis_truncated_fraction"] = tis.weights, tis.truncated_fraction * tokens
    common = _Aggregate(
        aggregation=config.aggregation,
        max_length=config.aggregation_length,
        normalizer=normalizer,
    )
    policy = clipped_policy_loss(
        out.logprobs,
        old,
        _need(micro.advantages, "advantages"),
        mask,
        eps_low=config.clip_eps_low,
        eps_high=config.clip_eps_high,
        dual_clip=config.dual_clip,
        weights=weights,
        **common,
    )
    loss = policy.loss
    stats["policy_loss"] = policy.loss.detach()
    for name in ("clip_fraction", "clip_fraction_low", "clip_fraction_high", "dual_clip_fraction"):
        stats[name] = getattr(policy, name) * tokens
    stats["approx_kl"] = policy.approx_kl * tokens
    if out.entropy is not None:
        stats["entropy"] = masked_sum(out.entropy.detach(), mask)
    if entropy_coef > 0:
        bonus = aggregate(
            _need(out.entropy, "entropy"),
            mask,
            config.aggregation,
            max_length=config.aggregation_length,
            normalizer=normalizer,
        )
        loss = loss - entropy_coef * bonus
        stats["entropy_loss"] = -entropy_coef * bonus.detach()
    if micro.ref_logprobs is not None:
        kl = kl_estimate(out.logprobs.detach(), micro.ref_logprobs, config.kl_estimator)
        stats["kl"] = masked_sum(kl, mask)
    if kl_in_loss(config):
        term = kl_loss(
            out.logprobs,
            _need(micro.ref_logprobs, "ref_logprobs"),
            mask,
            beta=config.kl_beta,
            estimator=config.kl_estimator,
            **common,
        )
        loss = loss + term
        stats["kl_loss"] = term.detach()
    if out.values is not None:
        value = clipped_value_loss(
            out.values,
            _need(micro.old_values, "old_values"),
            _need(micro.returns, "returns"),
            mask,
            clip_range=_critic(config).value_clip,
            **common,
        )
        loss = loss + _critic(config).vf_coef * value.loss
        stats["value_loss"] = value.loss.detach()
        stats["value_clip_fraction"] = value.clip_fraction * tokens
    stats["loss"] = loss.detach()
    return loss, stats
