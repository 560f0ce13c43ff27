"""From episodes to token tensors, and from episode- or turn-level values to tokens.

Multi-turn credit: by default an episode's advantage covers every token the model sampled in it
(``broadcast_to_tokens``). With per-turn credit, turn ``k`` of episode ``i`` gets its own value,
written over its ``turn_spans`` slice (``turn_values_to_tokens``); ``per_turn_group_advantages``
is one such value: the turn's discounted return-to-go against its group's baseline.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.trainers.algorithms.advantages import as_groups

__all__ = [
    "EpisodeBatch",
    "broadcast_to_tokens",
    "collate_episodes",
    "per_turn_group_advantages",
    "place_turn_rewards",
    "turn_returns",
    "turn_values_to_tokens",
]

Spans = Sequence[tuple[int, int]]


class EpisodeBatch(NamedTuple):
    token_ids: Tensor  # [B, T] long, right-padded with pad_token_id
    attention_mask: Tensor  # [B, T] long, 1 on real tokens
    loss_mask: Tensor  # [B, T] float, 1 on sampled tokens
    logprobs: Tensor  # [B, T] float, sampling logprobs on sampled tokens, 0 elsewhere


def collate_episodes(
    episodes: Sequence[Episode],
    *,
    pad_token_id: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> EpisodeBatch:
    """Right-pad the episodes' flat token sequences into ``[B, T]`` tensors."""
    length = max((len(e.token_ids) for e in episodes), default=0)
    batch = len(episodes)
    token_ids = torch.full((batch, length), pad_token_id, dtype=torch.long, device=device)
    attention = torch.zeros((batch, length), dtype=torch.long, device=device)
    loss_mask = torch.zeros((batch, length), dtype=dtype, device=device)
    logprobs = torch.zeros((batch, length), dtype=dtype, device=device)
    for i, e in enumerate(episodes):
        if not len(e.token_ids) == len(e.loss_mask) == len(e.logprobs):
            raise ConfigError(
                f"episodes[{i}] lengths",
                (len(e.token_ids), len(e.loss_mask), len(e.logprobs)),
                "token_ids, loss_mask and logprobs must be aligned",
                "build episodes with the rollout collector, which keeps them aligned",
            )
        n = len(e.token_ids)
        token_ids[i, :n] = torch.tensor(e.token_ids, dtype=torch.long)
        attention[i, :n] = 1
        loss_mask[i, :n] = torch.tensor(e.loss_mask, dtype=dtype)
        logprobs[i, :n] = torch.tensor(e.logprobs, dtype=dtype)
    return EpisodeBatch(token_ids, attention, loss_mask, logprobs)


def broadcast_to_tokens(
    values: Tensor,  # [B] one value per episode (e.g. a group-normalised advantage)
    mask: Tensor,  # [B, T]
) -> Tensor:  # [B, T]
    """Every sampled token of episode ``i`` gets ``values[i]``; other tokens get 0."""
    if values.shape != mask.shape[:1]:
        raise ConfigError(
            "values.shape",
            tuple(values.shape),
            f"must be [B] = ({mask.shape[0]},) to match mask {tuple(mask.shape)}",
            "pass one value per episode",
        )
    return values[:, None] * mask.to(values.dtype)


def _check_turns(
    turn_values: Sequence[Sequence[float]], turn_spans: Sequence[Spans], mask: Tensor
) -> None:
    if len(turn_values) != len(turn_spans) or len(turn_spans) != mask.shape[0]:
        raise ConfigError(
            "len(turn_values), len(turn_spans)",
            (len(turn_values), len(turn_spans)),
            f"must both equal the batch size {mask.shape[0]}",
            "pass one list per episode, in batch order",
        )
    for i, (values, spans) in enumerate(zip(turn_values, turn_spans, strict=True)):
        bad = [s for s in spans if not 0 <= s[0] < s[1] <= mask.shape[1]]
        if len(values) != len(spans) or bad:
            raise ConfigError(
                f"turn_spans[{i}]",
                list(spans),
                f"must hold one non-empty [start, end) within T={mask.shape[1]} per turn "
                f"value ({len(values)})",
                "use Episode.turn_spans with Episode.rewards (one per assistant turn)",
            )


def _zeros_float(mask: Tensor) -> Tensor:
    dtype = mask.dtype if mask.is_floating_point() else torch.get_default_dtype()
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device)


def turn_values_to_tokens(
    turn_values: Sequence[Sequence[float]],  # per episode, one value per assistant turn
    turn_spans: Sequence[Spans],  # per episode, Episode.turn_spans
    mask: Tensor,  # [B, T]
) -> Tensor:  # [B, T]
    """Write turn ``k``'s value over the sampled tokens of its span; 0 elsewhere."""
    _check_turns(turn_values, turn_spans, mask)
    out = _zeros_float(mask)  # [B, T]
    for i, (values, spans) in enumerate(zip(turn_values, turn_spans, strict=True)):
        for value, (start, end) in zip(values, spans, strict=True):
            out[i, start:end] = value
    return out * mask.to(out.dtype)


def place_turn_rewards(
    turn_rewards: Sequence[Sequence[float]],  # per episode, Episode.rewards
    turn_spans: Sequence[Spans],  # per episode, Episode.turn_spans
    mask: Tensor,  # [B, T]
) -> Tensor:  # [B, T]
    """Token rewards for GAE / REINFORCE++: turn ``k``'s reward on the last token it sampled.

    A turn's span may end in tokens that were not sampled (constrained decoding forces the
    closing tokens: loss mask 0); the reward goes on the last sampled token at or before the
    span's end, so a turn with no sampled token credits the decisions before it. A reward
    with no sampled token before it has nothing to credit and is dropped."""
    _check_turns(turn_rewards, turn_spans, mask)
    out = _zeros_float(mask)  # [B, T]
    sampled = mask.bool()
    for i, (rewards, spans) in enumerate(zip(turn_rewards, turn_spans, strict=True)):
        row = sampled[i].nonzero()[:, 0].tolist()  # sampled positions, ascending
        for reward, (_, end) in zip(rewards, spans, strict=True):
            at = bisect.bisect_left(row, end) - 1  # the last sampled position < end
            if at >= 0:
                out[i, row[at]] += reward
    return out


def turn_returns(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """Discounted return-to-go per turn: ``G_k = Σ_{j≥k} γ^{j−k} r_j``."""
    out, running = [0.0] * len(rewards), 0.0
    for k in reversed(range(len(rewards))):
        running = rewards[k] + gamma * running
        out[k] = running
    return out


def per_turn_group_advantages(
    turn_rewards: Sequence[Sequence[float]],  # per episode (groups contiguous), Episode.rewards
    group_size: int,
    *,
    gamma: float = 1.0,
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> list[list[float]]:
    """Per-turn credit: ``A_{i,k} = (G_{i,k} − mean_j G_{j,0}) / (std_j G_{j,0} + eps)``, where
    ``G_{i,k}`` is the return-to-go of turn ``k`` of episode ``i`` and the statistics are those of
    the whole-episode returns of ``i``'s group (sample std, as in ``group_advantages``).

    With a single outcome reward on the last turn and ``γ = 1`` every turn gets the episode's
    group-normalised advantage; otherwise a turn is not credited for rewards earned before it.
    """
    returns = [turn_returns(r, gamma) for r in turn_rewards]
    first = torch.tensor([g[0] if g else 0.0 for g in returns], dtype=torch.float64)  # [B]
    groups = as_groups(first, group_size, minimum=2 if scale_by_std else 1)  # [G, n]
    mean = groups.mean(dim=-1, keepdim=True).expand_as(groups).reshape(-1).tolist()  # [B]
    scale = groups.std(dim=-1, keepdim=True) + eps if scale_by_std else torch.ones_like(groups)
    scale_list = scale.expand_as(groups).reshape(-1).tolist()  # [B]
    return [
        [(g - m) / s for g in episode_returns]
        for episode_returns, m, s in zip(returns, mean, scale_list, strict=True)
    ]
