"""Env-declared difficulty: how an env says which levels it has and how to play one.

An env with levels declares them as a ``difficulty_levels`` attribute (or property): a non-empty
tuple of distinct JSON-able values, easiest first (FrozenLake with ``sizes=(3, 4, 5, 6)``: the map
sizes). ``reset(options={"difficulty": level})`` plays a task at that level (with
``"task_id"``, that task at that level), and reset's ``info["difficulty"]`` reports the level
played. Curricula (``agentgym.rollout.curriculum``) read the levels with ``difficulty_levels``
and draw tasks with those options; an env without levels has one, ``None``, and is reset
without the option.

Declared today: FrozenLake-v0 (``sizes``). Future: SWE-v0 (its instances' easy/medium/hard),
MiniWoB (its task names), Math-v0 (its generators' difficulty knobs).
"""

from __future__ import annotations

from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.core.info import DIFFICULTY

__all__ = ["DIFFICULTY", "difficulty_levels"]

# DIFFICULTY ("difficulty"): the reset option that picks a level, and the reset info key
# (agentgym.core.info) that reports it.


def difficulty_levels(env: Any) -> tuple[Any, ...] | None:
    """The levels ``env`` (or the env it wraps) declares, easiest first; None: none declared."""
    levels = getattr(getattr(env, "unwrapped", env), "difficulty_levels", None)
    if levels is None:
        return None
    if isinstance(levels, str) or not isinstance(levels, tuple | list) or not levels:
        raise ConfigError(
            "difficulty_levels",
            levels,
            "must be a non-empty tuple of levels, easiest first",
            "declare e.g. difficulty_levels = (3, 4, 5, 6) on the env",
        )
    if len(set(map(repr, levels))) != len(levels):
        raise ConfigError(
            "difficulty_levels", levels, "repeats a level", "declare each level once"
        )
    return tuple(levels)
