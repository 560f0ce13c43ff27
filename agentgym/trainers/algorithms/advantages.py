"""Advantage estimators.

Token-level estimators (GAE, discounted returns, REINFORCE++) take ``[B, T]`` tensors and a mask
that is 1 exactly on sampled tokens. Env, prompt and padding tokens are *skipped*: they are not
time steps, so the step after a sampled token is the next sampled token, however many env
tokens lie between them, and ``γ`` discounts once per sampled token. Rewards must sit on sampled
tokens (``place_turn_rewards`` puts a turn's reward on its last sampled token); rewards on masked
positions are ignored.

Sequence-level estimators (group-normalised, RLOO) take one scalar reward per episode, ``[B]``,
with the ``B = num_groups * group_size`` episodes of a group stored next to each other; the result
is broadcast to tokens with ``broadcast_to_tokens``.
"""

from __future__ import annotations

from enum import StrEnum

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.trainers.algorithms.masked import check_same_shape, masked_whiten

__all__ = [
    "AdvantageEstimator",
    "as_groups",
    "discounted_returns",
    "gae",
    "group_advantages",
    "reinforce_pp_advantages",
    "rloo_advantages",
]


class AdvantageEstimator(StrEnum):
    GAE = "gae"  # needs a value model (PPO)
    GROUP = "group"  # GRPO / Dr. GRPO / DAPO
    RLOO = "rloo"
    REINFORCE_PP = "reinforce++"


def _check_unit_interval(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfigError(name, value, "must lie in [0, 1]", f"pass a {name} between 0 and 1")


@torch.no_grad()
def gae(
    rewards: Tensor,  # [B, T] reward on the sampled token it follows, 0 elsewhere
    values: Tensor,  # [B, T] V(s_t) for sampled token t
    mask: Tensor,  # [B, T] 1 on sampled tokens
    *,
    gamma: float = 1.0,
    lam: float = 0.95,
    bootstrap: Tensor | None = None,  # [B] value after the last sampled token (truncation)
) -> tuple[Tensor, Tensor]:  # advantages [B, T], returns [B, T]
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over sampled tokens.

    ``δ_t = r_t + γ V(s_{t'}) − V(s_t)`` and ``Â_t = δ_t + γλ Â_{t'}`` where ``t'`` is the next
    sampled token. After the last sampled token ``V = bootstrap`` (0 when None: the episode
    ended). Returns ``Â`` and the value targets ``Â + V``, both 0 off the mask.
    """
    check_same_shape(rewards=rewards, values=values, mask=mask)
    _check_unit_interval("gamma", gamma)
    _check_unit_interval("lam", lam)
    on = mask.bool()  # [B, T]
    batch, length = rewards.shape
    next_value = rewards.new_zeros(batch) if bootstrap is None else bootstrap.to(rewards.dtype)
    next_adv = rewards.new_zeros(batch)  # [B]
    advantages = torch.zeros_like(rewards)  # [B, T]
    for t in reversed(range(length)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # [B]
        adv_t = delta + gamma * lam * next_adv  # [B]
        # An unmasked position passes the next sampled token's value and advantage through.
        next_value = torch.where(on[:, t], values[:, t], next_value)
        next_adv = torch.where(on[:, t], adv_t, next_adv)
        advantages[:, t] = torch.where(on[:, t], adv_t, 0.0)
    returns = (advantages + values) * on.to(values.dtype)  # [B, T]
    return advantages, returns


def discounted_returns(
    rewards: Tensor,  # [B, T]
    mask: Tensor,  # [B, T]
    *,
    gamma: float = 1.0,
) -> Tensor:  # [B, T]
    """Reward-to-go ``G_t = Σ_{s≥t} γ^{k(s)} r_s`` over sampled tokens (k counts sampled tokens
    between t and s): GAE with ``V = 0`` and ``λ = 1``.
    """
    advantages, _ = gae(rewards, torch.zeros_like(rewards), mask, gamma=gamma, lam=1.0)
    return advantages


def as_groups(rewards: Tensor, group_size: int, minimum: int = 1) -> Tensor:  # [G, n]
    """``[B]`` per-episode values as ``[B // group_size, group_size]``, groups contiguous."""
    if rewards.dim() != 1:
        raise ConfigError(
            "rewards.shape",
            tuple(rewards.shape),
            "must be one reward per episode, [B]",
            "sum each episode's turn rewards first (Episode.total_reward)",
        )
    if group_size < minimum or rewards.shape[0] % group_size:
        raise ConfigError(
            "group_size",
            group_size,
            f"must be >= {minimum} and divide the batch of {rewards.shape[0]} episodes",
            "store each group's episodes contiguously and pass their common size",
        )
    return rewards.view(-1, group_size)


@torch.no_grad()
def group_advantages(
    rewards: Tensor,  # [B] one reward per episode, groups contiguous
    group_size: int,
    *,
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> Tensor:  # [B]
    """Group-relative advantages (GRPO, Shao et al. 2024, outcome supervision, §4.1.2).

    ``A_i = (r_i − mean(r_group)) / (std(r_group) + eps)`` with the sample std (``1/(n−1)``, as
    TRL and verl compute it). ``scale_by_std=False`` drops the division (Dr. GRPO, Liu et al.
    2025), which removes the question-level difficulty bias.
    """
    grouped = as_groups(rewards, group_size, minimum=2 if scale_by_std else 1)  # [G, n]
    centred = grouped - grouped.mean(dim=-1, keepdim=True)  # [G, n]
    if scale_by_std:
        centred = centred / (grouped.std(dim=-1, keepdim=True) + eps)
    return centred.reshape(-1)


@torch.no_grad()
def rloo_advantages(
    rewards: Tensor,  # [B] one reward per episode, groups contiguous
    group_size: int,
) -> Tensor:  # [B]
    """REINFORCE leave-one-out (Ahmadian et al. 2024, eq. 6): ``A_i = r_i − 1/(k−1) Σ_{j≠i} r_j``,
    which equals ``k/(k−1) · (r_i − mean(r_group))``.
    """
    grouped = as_groups(rewards, group_size, minimum=2)  # [G, k]
    others = (grouped.sum(dim=-1, keepdim=True) - grouped) / (group_size - 1)  # [G, k]
    return (grouped - others).reshape(-1)


@torch.no_grad()
def reinforce_pp_advantages(
    rewards: Tensor,  # [B, T] token rewards (outcome on the last sampled token, − β·KL per token)
    mask: Tensor,  # [B, T]
    *,
    gamma: float = 1.0,
    eps: float = 1e-8,
) -> Tensor:  # [B, T]
    """REINFORCE++ (Hu 2025): discounted returns ``G_t`` over sampled tokens, normalised over
    every sampled token of the whole batch, ``(G − mean) / (std + eps)`` (population std, as
    OpenRLHF computes it). No critic and no per-prompt baseline.
    """
    returns = discounted_returns(rewards, mask, gamma=gamma)  # [B, T]
    return masked_whiten(returns, mask, eps=eps)
