"""Reset seeds: Gymnasium's for single envs, shared within groups (for GRPO).

With ``group_size == 1`` seeds follow ``SyncVectorEnv``: ``reset(seed=s)`` gives env ``i`` the seed
``s + i``, and every reset without a seed (autoreset, ``reset_mask``, ``submit_reset``) passes
``seed=None`` so the env goes on with its own RNG.

With ``group_size == G > 1``, envs ``[kG, (k+1)G)`` form group ``k``. Each env counts the episodes
it starts, and the ``n``-th episode of every member of group ``k`` gets the same seed, so members
that finish at different times still share the task of their ``n``-th episode:

- ``reset(seed=s)``: episode 0 of group ``k`` gets seed ``s + k``; the group's root becomes ``s``.
- ``reset(seed=None)`` of every env: a fresh random root ``r`` per group; episode 0 uses
  ``derive(r, k, 0)``.
- any other reset without a seed (autoreset, ``reset_mask``, ``submit_reset``) starts the env's
  episode ``n + 1`` with seed ``derive(root, k, n + 1)``; ``submit_reset_group`` moves every
  member to one episode past the furthest member's.
- an explicit per-env seed ``v`` (a list, or ``submit_reset(i, seed=v)``) is used as is and
  becomes the root of the following episodes.

``derive`` mixes ``(root, k, n)`` through ``numpy.random.SeedSequence`` into a 32-bit seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import numpy as np

from agentgym.core.errors import ConfigError, ConfigTypeError
from agentgym.vector.runner import SubEnv

__all__ = ["check_seed", "derive", "lockstep_seeds", "next_seed", "pin_seed", "random_root"]

Seed = int | None


def random_root() -> int:
    """Fresh OS entropy (128 bits) to derive a group's seeds from."""
    return int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]


def derive(root: int, group: int, episode: int) -> int:
    """The seed of episode ``episode`` of group ``group`` under ``root``."""
    return int(np.random.SeedSequence([root, group, episode]).generate_state(1)[0])


def check_seed(seed: object, name: str = "seed") -> Seed:
    """``seed`` as an ``int`` (or ``None``); ``ConfigTypeError`` unless it is an int,
    ``ConfigError`` if it is negative."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise ConfigTypeError(name, seed, "must be None or an int >= 0", "pass e.g. seed=0")
    if seed < 0:
        raise ConfigError(name, seed, "must be None or an int >= 0", "pass e.g. seed=0")
    return int(seed)


def next_seed(sub: SubEnv, group_size: int) -> Seed:
    """The seed of ``sub``'s next episode when the caller gives none."""
    if group_size == 1:
        return None
    sub.episode += 1
    return derive(sub.root, sub.group, sub.episode)


def pin_seed(sub: SubEnv, seed: int, root: int | None = None) -> int:
    """Start ``sub``'s episode 0 with ``seed``; later seedless episodes derive from ``root``."""
    sub.root = seed if root is None else root
    sub.episode = 0
    return seed


def _per_env(seed: Seed | Sequence[Seed], num_envs: int, group_size: int) -> list[Seed]:
    if seed is None or isinstance(seed, Integral):
        base = check_seed(seed)
        if base is None:
            return [None] * num_envs
        return [base + i // group_size for i in range(num_envs)]
    rule = f"must be None, an int, or a list of {num_envs} seeds (one per env)"
    if isinstance(seed, str) or not isinstance(seed, Sequence):
        raise ConfigTypeError("seed", seed, rule, "pass seed=0 or seed=[s0, s1, ...]")
    if len(seed) != num_envs:
        raise ConfigError("seed", seed, rule, "pass seed=0 or seed=[s0, s1, ...]")
    seeds = [check_seed(s, f"seed[{i}]") for i, s in enumerate(seed)]
    for start in range(0, num_envs, group_size):
        if len(set(seeds[start : start + group_size])) > 1:
            raise ConfigError(
                f"seed[{start}:{start + group_size}]",
                seeds[start : start + group_size],
                "envs of one group must share a seed",
                "give every env of a group the same seed, or pass one int",
            )
    return seeds


def lockstep_seeds(
    seed: Seed | Sequence[Seed],
    subs: Sequence[SubEnv],
    group_size: int,
    mask: Sequence[bool] | np.ndarray | None = None,
) -> list[Seed]:
    """Per-env seeds for ``reset(seed=seed)`` of the envs ``mask`` selects (all when ``None``),
    updating their group bookkeeping; ``None`` for the envs not reset."""
    per_env = _per_env(seed, len(subs), group_size)
    if group_size == 1:
        return per_env
    root = check_seed(seed) if seed is None or isinstance(seed, Integral) else None
    fresh: dict[int, int] = {}
    seeds: list[Seed] = []
    for i, (sub, value) in enumerate(zip(subs, per_env, strict=True)):
        if mask is not None and not mask[i]:
            seeds.append(None)
        elif value is not None:
            seeds.append(pin_seed(sub, value, root))
        elif mask is not None:  # a partial reset starts each env's next episode
            seeds.append(next_seed(sub, group_size))
        else:
            if sub.group not in fresh:
                fresh[sub.group] = random_root()
            seeds.append(pin_seed(sub, derive(fresh[sub.group], sub.group, 0), fresh[sub.group]))
    return seeds
