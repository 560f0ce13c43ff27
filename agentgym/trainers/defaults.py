"""Per-env training defaults: what ``agentgym train --env X`` uses when nothing else is said.

The algorithm presets follow the papers (learning rate 1e-6 for billion-parameter models); a
tiny policy on a small env needs other numbers. Values here were chosen by experiment (see
the README's FrozenLake section); flags and config files override each of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["TrainingDefaults", "training_defaults"]


@dataclass(frozen=True)
class TrainingDefaults:
    config: dict[str, Any] = field(default_factory=dict)
    """Overrides of the algorithm preset's fields."""
    steps: int = 100
    max_turns: int | None = None
    """Most turns per training episode; None: the env's own limit."""
    micro_batch_tokens: int | None = None
    history_turns: int | None = None
    """The policy's history window (see ``agentgym.rollout.acollect``); None: the whole
    conversation."""
    action_choices: bool = False
    """Constrained decoding among the env's ``info["action_choices"]``
    (``agentgym.rollout.acollect``)."""
    init: str = "format"
    """The tiny policy's starting weights when no model is given: ``format`` (the shipped
    format-only weights) or ``random`` (initialised from the run's seed)."""


_FROZENLAKE_COMMON: dict[str, Any] = {
    "learning_rate": 1e-3,
    "group_size": 8,
    "batch_size": 64,
    "max_new_tokens": 8,  # a move is ```down``` plus the end-of-turn token: 4 tokens
    "temperature": 1.0,
}

# Overlong shaping per turn: a move is 4 tokens, so only longer (garbage) turns are punished,
# at most as much as the env's invalid-action penalty.
_FROZENLAKE_DAPO: dict[str, Any] = {
    **_FROZENLAKE_COMMON,
    "scale_by_std": False,
    "overlong_cache_length": 4,
    "overlong_penalty_factor": 0.1,
}

# Training episodes get the env's own 32 turns, as evaluation does: cut at 8 turns (contexts
# 4x shorter) the random start succeeds 1% of the time instead of 5% and learning stalled near
# 0.2; HFEngine's prefix cache keeps long episodes cheap. The micro-batch budget cut the update
# time about 2x against one padded batch of 64 episodes.
#
# History window 0: FrozenLake is Markov (each observation shows the whole board), so each turn
# sees the system prompt and the latest board only (~260 tokens instead of a conversation that
# grows to thousands). The tiny model learns to read the board from such short prompts several
# times faster under supervision (scripts/frozenlake_reading_sft.py: safe-move mass 0.85 after
# 100 steps, against 0.69 with four earlier turns in context), and an update takes ~5 s
# instead of ~8 s.
_FROZENLAKE_RUN: dict[str, Any] = {
    "steps": 60,
    "max_turns": None,
    "micro_batch_tokens": 8192,
    "history_turns": 0,
    "action_choices": True,
    "init": "random",
}

# GiGPO step credit: episodes of a group share the map, so turns taken from the same square are
# compared directly (a move into a hole against the moves that went on from there).
_STEP_CREDIT: dict[str, Any] = {"step_credit": 1.0, "gamma": 0.95}

_DEFAULTS: dict[tuple[str, str], TrainingDefaults] = {
    # Dividing by the group's std turned groups whose only spread was the -0.1 format penalty
    # into full-size advantages and broke the format at lr 2e-3; mean-only (Dr. GRPO) learns.
    ("agentgym/FrozenLake-v0", "grpo"): TrainingDefaults(
        config={**_FROZENLAKE_COMMON, **_STEP_CREDIT, "kl_beta": 0.0, "scale_by_std": False},
        **_FROZENLAKE_RUN,
    ),
    ("agentgym/FrozenLake-v0", "dapo"): TrainingDefaults(
        config={**_FROZENLAKE_DAPO, **_STEP_CREDIT},
        **_FROZENLAKE_RUN,
    ),
    ("agentgym/FrozenLake-v0", "ppo"): TrainingDefaults(
        config={**_FROZENLAKE_COMMON}, **_FROZENLAKE_RUN
    ),
}


def training_defaults(env: str, algo: str) -> TrainingDefaults:
    """The defaults for ``env`` trained with ``algo``; the preset's own for unknown pairs."""
    return _DEFAULTS.get((env, algo), TrainingDefaults())
