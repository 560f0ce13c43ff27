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
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Env arguments for training and evaluation (under the run's own ``env_kwargs``)."""
    train_env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Env arguments of training episodes only (under the run's own ``train_env_kwargs``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Trainer options (``TrainOptions``; under the run's own ``options``)."""


# FrozenLake: the policy samples only among the env's four moves (action choices), so it needs
# no output format and starts from random weights: format pre-training made the answer
# position's state the same for every board, and RL could not make it read the board again
# (see the README). What RL learns is which move.
#
# Entropy bonus 0.1, falling linearly to 0 over the 150 updates: without it the policy collapses
# onto "down" within ~10 updates, before it reads anything (the bandit in
# scripts/frozenlake_reading_sft.py shows the same); at a constant 0.05 it collapsed later, at
# success 0.3-0.6; at a constant 0.1 it ended at 0.82 (temperature 1), held at ~0.3 nats. Letting
# it fall at a constant lr 1e-3 reached 0.90 at update 100 and collapsed at 103; with the learning
# rate falling too (to 0.1 of its peak over the run's 600 optimizer steps) it ended at 0.91-0.93.
# Four optimizer steps per batch (num_minibatches=4): reading took ~80 Adam steps in the bandit,
# and collecting is half of an update's time.
_FROZENLAKE_COMMON: dict[str, Any] = {
    "learning_rate": 1e-3,
    "group_size": 8,
    "batch_size": 64,
    "num_minibatches": 4,
    "max_new_tokens": 8,  # a move is ```down``` plus the end-of-turn token: 4 tokens
    "temperature": 1.0,
    "entropy_coef": 0.1,
    "entropy_decay_steps": 150,
}

# Overlong shaping per turn: a move is 4 tokens, so it never applies with action choices; kept
# for runs without them (--no-action-choices), at most the env's invalid-action penalty.
# Dynamic sampling: once the policy wins most maps, most groups have equal rewards (about 60% by
# update 100) and the paper's rule, sample until the batch is full, stopped a run at update 80
# with DynamicSamplingExhausted after 10 rounds. Here each update samples at most 3 rounds and
# trains on the informative groups they gave (partial_batches), usually all 8; when they gave none
# (a CI run at update 139, every group won all 8 episodes) the update takes no optimizer step.
_FROZENLAKE_DAPO: dict[str, Any] = {
    **_FROZENLAKE_COMMON,
    "scale_by_std": False,
    "overlong_cache_length": 4,
    "overlong_penalty_factor": 0.1,
    "max_sampling_rounds": 3,
    "partial_batches": True,
}

# Training episodes get the env's own 32 turns, as evaluation does. History window 0: FrozenLake
# is Markov (each observation shows the whole board), so each turn sees the system prompt and the
# latest board only. Text moves only (tool=False, in training and evaluation): with action
# choices the policy never calls the tool, and its schema would be ~140 of every prompt's ~255
# tokens. Training episodes punish a move into a hole (-1) or into the edge (-0.5); evaluation
# plays the env's own rewards (success is what is measured). With a hole penalty alone the policy
# learned to stay in the start corner, walking into the edge; with neither it stayed near 0.4.
_FROZENLAKE_RUN: dict[str, Any] = {
    "steps": 150,
    "max_turns": None,
    "micro_batch_tokens": 8192,
    "history_turns": 0,
    "action_choices": True,
    "init": "random",
    "env_kwargs": {"tool": False},
    "train_env_kwargs": {"hole_reward": -1.0, "edge_reward": -0.5},
    # optimizer steps: 150 updates x 4 minibatches
    "options": {"decay_steps": 600, "min_lr_ratio": 0.1},
}

# GiGPO step credit: episodes of a group share the map, so turns taken from the same square are
# compared directly (a move into a hole against the moves that went on from there).
_STEP_CREDIT: dict[str, Any] = {"step_credit": 1.0, "gamma": 0.95}

_DEFAULTS: dict[tuple[str, str], TrainingDefaults] = {
    # Mean-only group advantages (Dr. GRPO), no KL. The entropy bonus reaches 0 at update 100,
    # so the last 50 updates sharpen the policy at the falling learning rate: 0.949 and 0.967
    # at the end (seeds 0 and 1, 256 and 512 episodes) against 0.914-0.938 with the bonus
    # falling over all 150. DAPO and PPO keep 150: with 100, DAPO's informative groups fell
    # from ~45% to none in 3 sampling rounds at update 58 (DynamicSamplingExhausted), and PPO
    # ended at 0.941, as before.
    ("agentgym/FrozenLake-v0", "grpo"): TrainingDefaults(
        config={
            **_FROZENLAKE_COMMON,
            **_STEP_CREDIT,
            "kl_beta": 0.0,
            "scale_by_std": False,
            "entropy_decay_steps": 100,
        },
        **_FROZENLAKE_RUN,
    ),
    ("agentgym/FrozenLake-v0", "dapo"): TrainingDefaults(
        config={**_FROZENLAKE_DAPO, **_STEP_CREDIT},
        **_FROZENLAKE_RUN,
    ),
    # Two epochs over each batch (8 optimizer steps) and half the entropy bonus: with the common
    # settings PPO's critic-based advantages moved the policy less than GiGPO's step credit
    # (approx_kl ~3x smaller mid-run), its entropy stayed at ~0.35 nats and it ended at 0.76
    # (value_clip off, a 3x critic learning rate or lam=1 changed little; two epochs alone, 0.8
    # by update 60).
    # Advantages not whitened: whitened (the preset's default), the end success ranged 0.76-0.95
    # over nine runs, three of them below 0.9, and the policy turned nearly deterministic on maps
    # it was still losing (0.05-0.1 nats by update 30-50). Whitening rescales the advantages to
    # std 1 however well the critic already predicts the returns, so its leftover error moves
    # the policy as much as a real signal; unwhitened, updates shrink as the critic fits. Ended
    # at 0.975, 0.994 and 0.945 (seeds 0-2, 512 episodes; 0.95, 0.99, 0.91 on unseen maps).
    ("agentgym/FrozenLake-v0", "ppo"): TrainingDefaults(
        config={
            **_FROZENLAKE_COMMON,
            "gamma": 0.95,
            "ppo_epochs": 2,
            "entropy_coef": 0.05,
            "whiten_advantages": False,
        },
        # optimizer steps: 150 updates x 4 minibatches x 2 epochs
        **{**_FROZENLAKE_RUN, "options": {**_FROZENLAKE_RUN["options"], "decay_steps": 1200}},
    ),
}


def training_defaults(env: str, algo: str) -> TrainingDefaults:
    """The defaults for ``env`` trained with ``algo``; the preset's own for unknown pairs."""
    return _DEFAULTS.get((env, algo), TrainingDefaults())
