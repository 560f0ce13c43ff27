"""Constructor-argument checks shared by the envs: each raises ``ConfigError`` naming the value,
the rule it breaks and the fix."""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np

from agentgym.core.errors import ConfigError

__all__ = ["choice", "integer", "real", "seconds"]


def choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        options = " or ".join(repr(a) for a in allowed)
        raise ConfigError(name, value, f"must be {options}", f"pass {name}={allowed[0]!r}")


def integer(name: str, value: object, minimum: int = 1, fix: str | None = None) -> int:
    fix = fix or f"pass an int >= {minimum}"
    if isinstance(value, bool | np.bool_):
        raise ConfigError(name, value, "must be an int, not a bool", fix)
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ConfigError(name, value, "must be an int", fix) from None
    if number < minimum:
        raise ConfigError(name, value, f"must be >= {minimum}", fix)
    return number


def real(name: str, value: object, fix: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ConfigError(name, value, "must be a number", fix)
    number = float(value)
    if not math.isfinite(number):
        raise ConfigError(name, value, "must be finite", fix)
    return number


def seconds(name: str, value: object) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    if not ok or not (0 < float(value) < math.inf):  # type: ignore[arg-type]
        raise ConfigError(name, value, "must be a finite number of seconds > 0", f"{name}=10")
    return float(value)  # type: ignore[arg-type]
