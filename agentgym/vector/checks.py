"""Argument checks for ``AgentVectorEnv``: each names the value, the rule and the fix."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from agentgym.core.errors import ConfigError, ConfigTypeError

__all__ = [
    "check_actions",
    "check_autoreset_mode",
    "check_index",
    "check_limits",
    "split_reset_mask",
]


def _is_int(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _check_positive_int(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not _is_int(value) or value < 1:  # type: ignore[operator]
        fix = "pass an int >= 1" + (" or None" if optional else "")
        raise ConfigError(name, value, "must be an int >= 1", fix)


def _check_seconds(name: str, value: object) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(
            name, value, "must be a finite number of seconds > 0", "pass e.g. 30.0 or None"
        )


def check_limits(
    *,
    num_envs: int,
    group_size: int,
    max_concurrency: int | None,
    step_timeout: float | None,
    reset_timeout: float | None,
    max_episode_steps: int | None,
) -> None:
    """Raise ``ConfigError`` for the first argument that breaks its rule."""
    _check_positive_int("num_envs", num_envs, optional=False)
    _check_positive_int("group_size", group_size, optional=False)
    if num_envs % group_size:
        raise ConfigError(
            "group_size",
            group_size,
            f"must divide num_envs={num_envs}",
            f"make num_envs a multiple of group_size, e.g. num_envs="
            f"{group_size * max(1, round(num_envs / group_size))}",
        )
    _check_positive_int("max_concurrency", max_concurrency, optional=True)
    _check_seconds("step_timeout", step_timeout)
    _check_seconds("reset_timeout", reset_timeout)
    _check_positive_int("max_episode_steps", max_episode_steps, optional=True)


def check_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    try:
        return AutoresetMode(mode)
    except ValueError:
        choices = [m.value for m in AutoresetMode]
        raise ConfigError(
            "autoreset_mode", mode, "is not an AutoresetMode", f"use one of {choices}"
        ) from None


def check_index(index: object, num_envs: int) -> int:
    if isinstance(index, Integral) and not isinstance(index, bool) and 0 <= int(index) < num_envs:
        return int(index)
    raise ConfigError(
        "index", index, f"must be an env index in [0, {num_envs})", "pass a valid index"
    )


def check_actions(actions: Any, num_envs: int) -> Sequence[Any] | np.ndarray:
    """``actions`` as a sequence of one action per env."""
    if isinstance(actions, str | Mapping) or not isinstance(actions, Sequence | np.ndarray):
        raise ConfigTypeError(
            "actions",
            type(actions).__name__,
            f"must be a sequence of {num_envs} actions",
            "pass a list or tuple with one action per env",
        )
    if len(actions) != num_envs:
        raise ConfigError(
            "len(actions)",
            len(actions),
            f"must equal num_envs={num_envs}",
            "pass one action per env (finished envs ignore theirs)",
        )
    return actions


def split_reset_mask(
    options: dict[str, Any] | None, num_envs: int
) -> tuple[dict[str, Any] | None, np.ndarray | None]:
    """``(options without "reset_mask", the mask)``; the mask checked as ``SyncVectorEnv`` does,
    with its error types: ``TypeError`` for a wrong type or dtype, ``ValueError`` otherwise."""
    if options is None or "reset_mask" not in options:
        return options, None
    options = dict(options)
    mask = options.pop("reset_mask")
    name, fix = "options['reset_mask']", "pass e.g. terminations | truncations"
    if not isinstance(mask, np.ndarray):
        raise ConfigTypeError(name, mask, f"must be a numpy array, got {type(mask).__name__}", fix)
    if mask.shape != (num_envs,):
        raise ConfigError(name, mask, f"must have shape ({num_envs},), got {mask.shape}", fix)
    if mask.dtype != np.bool_:
        raise ConfigTypeError(name, mask, f"must have dtype=np.bool_, got {mask.dtype}", fix)
    if not mask.any():
        raise ConfigError(
            name, mask, "must select at least one env", "skip the reset when no env needs one"
        )
    return options, mask
