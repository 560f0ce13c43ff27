"""Expand ``${key}`` and ``${section:key}`` references in option values.

``$$`` stands for a literal ``$``. A reference resolves through the same lookup as
``Config.get`` (option names are case-insensitive and [DEFAULT] applies) and the value it finds
is expanded in turn, up to MAX_DEPTH levels, which also stops reference cycles.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .errors import InterpolationError

MAX_DEPTH = 10

_REFERENCE = re.compile(r"\$(?:\$|\{(?P<ref>[^}]*)\})")

Lookup = Callable[[str, str], str]
"""``lookup(section, key)`` returns the raw value or raises LookupError."""


def interpolate(value: str, section: str, lookup: Lookup, depth: int = 0) -> str:
    """Return ``value`` (an option of ``section``) with its references expanded."""
    if depth > MAX_DEPTH:
        raise InterpolationError(
            f"references nest deeper than {MAX_DEPTH} levels in [{section}] (a cycle?)"
        )

    def expand(match: re.Match[str]) -> str:
        ref = match.group("ref")
        if ref is None:
            return "$"
        target, _, key = ref.rpartition(":")
        target = target or section
        try:
            raw = lookup(target, key)
        except LookupError:
            raise InterpolationError(
                f"${{{ref}}} in [{section}]: no option {key!r} in [{target}]"
            ) from None
        return interpolate(raw, target, lookup, depth + 1)

    return _REFERENCE.sub(expand, value)
