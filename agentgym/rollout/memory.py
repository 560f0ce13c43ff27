"""The memory scaffold: the system messages, a short memory of the episode, the latest turns.

Each turn is a context of its own (a history window, ``Episode.context_starts``): the system
messages, then one user message holding the *memory* of the turns before the window, then the
window's turns verbatim (``history_turns``; ``0``: the latest observation only). The memory is
written deterministically from the episode's turns (no model call): one line per turn, the
action as written and its outcome (the first line the env answered, whether the env found the
action invalid, a non-zero reward), the oldest turns folded into a count, then the env's own
summary where it offers one (``info["summary"]``, a ``str``, of the latest remembered step).

The memory is a pure function of the turns the collector already holds for each episode
(``memory_messages(turns)``): a scaffold keeps no per-episode state, so episodes played at once
never share a memory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentgym.core.errors import ConfigError
from agentgym.core.types import Action, Observation, Turn, message_text, user

__all__ = ["SUMMARY", "EpisodeMemory", "MemoryScaffold"]

SUMMARY = "summary"
"""The optional step ``info`` key of an env's own summary of the episode so far (a ``str``)."""

MEMORY_HEADING = "Earlier in this episode:"
"""The first line of the memory message."""

_SPACE_RE = re.compile(r"\s+")


@runtime_checkable
class EpisodeMemory(Protocol):
    """A scaffold that shows a memory of the turns before its history window.

    The collector calls ``memory_messages`` with the episode's turns before the window (oldest
    first) and puts the messages between the system messages and the window; only scaffolds
    with a window (``history_turns`` not None) are asked."""

    def memory_messages(self, turns: Sequence[Turn]) -> Observation:
        """The messages that stand for ``turns`` (``()``: nothing to remember)."""
        ...


@dataclass(frozen=True)
class MemoryScaffold:
    """The env's messages as they are and the reply as the action (as ``ChatScaffold``), each
    turn a new context: system messages, a memory of the earlier turns, the latest
    ``history_turns`` turns verbatim.

    - ``history_turns`` (default ``0``): the memory already holds every earlier action and what
      it did, and the latest observation holds the present, so a context stays the same short
      size however long the episode (``1`` also shows the model its own last reply verbatim).
    - ``max_entries`` (default 8): turns listed one per line; older ones are folded into one
      line with their count, invalid actions and reward.
    - ``excerpt_chars`` (default 80): an action or outcome longer than this is cut, with "...".
    """

    history_turns: int = 0
    max_entries: int = 8
    excerpt_chars: int = 80

    def __post_init__(self) -> None:
        _check_int("history_turns", self.history_turns, 0, "(0: the latest observation)")
        _check_int("max_entries", self.max_entries, 0, "(0: only a count of the turns)")
        _check_int("excerpt_chars", self.excerpt_chars, 8, "(e.g. 80)")

    def reset_messages(self, observation: Observation, info: Mapping[str, Any]) -> Observation:
        return observation

    def step_messages(self, observation: Observation, info: Mapping[str, Any]) -> Observation:
        return observation

    def action(self, text: str) -> Action:
        return text

    def memory_messages(self, turns: Sequence[Turn]) -> Observation:
        if not turns:
            return ()
        listed = turns[max(0, len(turns) - self.max_entries) :] if self.max_entries else []
        folded = turns[: len(turns) - len(listed)]
        lines = [MEMORY_HEADING]
        if folded:
            invalid = sum(_invalid(t) for t in folded)
            reward = sum(t.reward for t in folded)
            span = "turn 1" if len(folded) == 1 else f"turns 1-{len(folded)}"
            lines.append(f"{span}: {_count(len(folded), 'action')}, {invalid} invalid, "
                         f"reward {reward:g}")  # fmt: skip
        first = len(folded) + 1
        lines += [f"{first + i}. {self._entry(t)}" for i, t in enumerate(listed)]
        summary = turns[-1].info.get(SUMMARY)
        if isinstance(summary, str) and summary.strip():
            lines.append(f"Summary: {summary.strip()}")
        return (user("\n".join(lines)),)

    def _entry(self, turn: Turn) -> str:
        """``<action> -> <outcome>``, e.g. ``right -> You moved right.``"""
        action = self._excerpt(message_text(turn.action)) or "(empty reply)"
        said = [message_text(m).strip() for m in turn.observation]
        lines = [line for text in said for line in text.splitlines() if line.strip()]
        outcome = self._excerpt(lines[0]) if lines else "(no answer)"
        if _invalid(turn) and "invalid" not in outcome.lower():
            outcome = f"invalid action: {outcome}"
        if turn.reward:
            outcome += f" (reward {turn.reward:g})"
        return f"{action} -> {outcome}"

    def _excerpt(self, text: str) -> str:
        text = _SPACE_RE.sub(" ", text).strip()
        if len(text) <= self.excerpt_chars:
            return text
        return text[: self.excerpt_chars - 3].rstrip() + "..."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _invalid(turn: Turn) -> bool:
    return turn.info.get("invalid_action") is True


def _check_int(name: str, value: object, least: int, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(
            name, value, f"must be an int >= {least}", f"pass an int >= {least} {hint}"
        )
