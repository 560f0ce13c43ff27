"""Step-level credit from anchor states (GiGPO, Feng et al. 2025, "Group-in-Group Policy
Optimization for LLM Agent Training", §3.2).

Episodes of one GRPO group start from the same task, so they keep meeting the same states: the
first observation always, later ones whenever two episodes reach the same situation. Every turn
taken from a state ``s`` is compared with the other turns taken from ``s`` in the group:

    A^S_{i,k} = (G_{i,k} − mean_{(j,l): s_{j,l} = s} G_{j,l}) / F        (eq. 7)

with ``G_{i,k} = Σ_{m ≥ k} γ^{m−k} r_{i,m}`` the discounted return-to-go of turn ``k`` of
episode ``i`` and ``F`` the std of that step group (or 1 with ``scale_by_std=False``). A state met
only once gives 0. The paper adds ``ω · A^S`` to the episode-level group advantage (eq. 8).

What makes two states equal is the caller's choice (``turn_states``): an env's own state id, or
the text of the observation the turn answered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch

from agentgym.core.info import STATE
from agentgym.core.types import Episode
from agentgym.trainers.algorithms.advantages import as_groups
from agentgym.trainers.algorithms.tokens import turn_returns

__all__ = ["STATE_INFO_KEY", "anchor_state_advantages", "turn_states"]

STATE_INFO_KEY = STATE
"""Info key through which an env names its state (equal values: the same situation)."""


def turn_states(episode: Episode) -> list[Hashable]:
    """The state each turn of ``episode`` acted from: ``info["state"]`` of the reset or of the
    previous step when the env gives one, else the text of the observation the turn answered."""
    infos = [episode.reset_info] + [turn.info for turn in episode.turns[:-1]]
    observations = [_reset_observation(episode)] + [turn.observation for turn in episode.turns]
    states: list[Hashable] = []
    for info, observation in zip(infos, observations, strict=False):
        state = info.get(STATE_INFO_KEY)
        states.append(("state", str(state)) if state is not None else ("text", _text(observation)))
    return states


def _reset_observation(episode: Episode) -> object:
    # The messages before the first assistant turn are what reset returned.
    first = []
    for message in episode.messages:
        if message.get("role") == "assistant":
            break
        first.append(message)
    return first


def _text(observation: object) -> str:
    messages = observation if isinstance(observation, list | tuple) else [observation]
    return "\x1e".join(
        str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in messages
    )


@torch.no_grad()
def anchor_state_advantages(
    turn_rewards: Sequence[Sequence[float]],  # per episode (groups contiguous), per turn
    turn_keys: Sequence[Sequence[Hashable]],  # the state each turn acted from
    group_size: int,
    *,
    gamma: float = 1.0,
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> list[list[float]]:
    """GiGPO's step-level advantages ``A^S_{i,k}`` (module docstring), per episode and turn."""
    if len(turn_keys) != len(turn_rewards):
        raise ValueError(f"{len(turn_keys)} key lists for {len(turn_rewards)} episodes")
    as_groups(torch.zeros(len(turn_rewards)), group_size, minimum=1)  # checks the batch shape
    returns = [turn_returns(r, gamma) for r in turn_rewards]
    out = [[0.0] * len(r) for r in returns]
    for start in range(0, len(returns), group_size):
        members: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
        for i in range(start, start + group_size):
            if len(turn_keys[i]) != len(returns[i]):
                raise ValueError(
                    f"episode {i}: {len(turn_keys[i])} state keys for {len(returns[i])} turns"
                )
            for k, key in enumerate(turn_keys[i]):
                members[key].append((i, k))
        for turns in members.values():
            if len(turns) < 2:
                continue
            values = torch.tensor([returns[i][k] for i, k in turns], dtype=torch.float64)
            centred = values - values.mean()
            if scale_by_std:
                centred = centred / (values.std() + eps)
            for (i, k), value in zip(turns, centred.tolist(), strict=True):
                out[i][k] = value
    return out
