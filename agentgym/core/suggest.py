""" "Did you mean ...?": how agentgym answers a name it does not know, everywhere.

::

    did_you_mean("sise", ["size", "slippery"], kind="arguments")
    # "Did you mean 'size'? Valid arguments: size, slippery"
    suggestion(close_matches("frozenlake-v0", ids))  # "Did you mean 'FrozenLake-v0'?"

Unknown env ids, env arguments, config fields and choices, tool-call parsers and trainer
backends all use these, so every refusal reads the same way.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

__all__ = ["close_matches", "did_you_mean", "suggestion"]


def close_matches(word: str, choices: Iterable[str], n: int = 1) -> list[str]:
    """The (at most ``n``) choices closest to ``word``, best first: a choice equal to it but
    for case, then ``difflib``'s close matches, compared without case."""
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    lowered = word.lower()
    found = [by_lower[lowered]] if lowered in by_lower else []
    found += [by_lower[c] for c in difflib.get_close_matches(lowered, by_lower, n=n, cutoff=0.6)]
    return list(dict.fromkeys(found))[:n]


def suggestion(matches: Sequence[str]) -> str:
    """``"Did you mean 'x'?"`` for the first of ``matches``; ``""`` when there is none."""
    return f"Did you mean {matches[0]!r}?" if matches else ""


def did_you_mean(word: str, choices: Iterable[str], *, kind: str = "choices") -> str:
    """A fix for an unknown ``word``: the closest choice, when one is close, then every choice
    (``"Did you mean 'size'? Valid arguments: size, slippery"``)."""
    choices = list(choices)
    hint = suggestion(close_matches(word, choices))
    listing = f"Valid {kind}: {', '.join(choices)}" if choices else f"There are no valid {kind}"
    return f"{hint} {listing}" if hint else listing
