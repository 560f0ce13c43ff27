"""Old spellings that still work: a renamed argument, flag or form warns and names the new one.

::

    tasks = renamed_argument("data", data, "tasks", tasks)   # in an env's __init__
    warn_deprecated("--kw", "--env-kwargs")                   # in a command

The warning is an ``AgentGymDeprecationWarning`` (a ``DeprecationWarning``) blamed on the first
caller outside agentgym and Gymnasium: the user's script, or the ``agentgym`` command itself,
whose module is ``__main__``, so Python shows it by default (a ``DeprecationWarning`` blamed on a
library is hidden).
"""

from __future__ import annotations

import sys
import warnings
from typing import TypeVar

from agentgym.core.errors import AgentGymDeprecationWarning, ConfigError

__all__ = ["renamed_argument", "warn_deprecated"]

T = TypeVar("T")

_INSIDE = ("agentgym.", "gymnasium.")


def _outside_stacklevel() -> int:
    """The ``stacklevel`` that blames the first frame outside agentgym and Gymnasium, for a
    ``warnings.warn`` called by the caller of this function."""
    level, frame = 2, sys._getframe(2)
    while frame.f_back is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if not module.startswith(_INSIDE) and module not in ("agentgym", "gymnasium"):
            break
        level, frame = level + 1, frame.f_back
    return level


def warn_deprecated(old: str, new: str) -> None:
    """Warn that ``old`` is deprecated and ``new`` replaces it."""
    message = f"{old} is deprecated and will be removed; use {new}"
    warnings.warn(message, AgentGymDeprecationWarning, stacklevel=_outside_stacklevel())


def renamed_argument(old: str, old_value: T | None, new: str, new_value: T | None) -> T | None:
    """The value of an argument renamed from ``old`` to ``new``: ``new_value``, or with a
    warning ``old_value`` when only the old name was given; both given is a ``ConfigError``."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise ConfigError(old, old_value, f"is the old name of {new}, also given", f"pass {new}")
    warn_deprecated(f"the argument {old}=", f"{new}=")
    return old_value
