"""Scaffolds: how an env's observations become the model's prompt, and its text the env's action.

A scaffold sits between the collector and the env. It decides

- which messages the model sees for the env's reset (``reset_messages``) and for each step
  (``step_messages``): the env's own messages (the default), or a rewrite of them (ReAct's
  ``Observation: ...`` turns, a format instruction);
- how much of the conversation each turn sees (``history_turns``: the whole conversation, or a
  window of the last turns, each turn then a context of its own);
- what the env receives for a turn the model wrote (``action``): its text (the default), the
  part of it that is the action (ReAct's ``Action:`` line), or an assistant message with a
  structured tool call (``ReActScaffold(tool_calls=True)``).

A scaffold only rewrites *messages*; the collector keeps the token ids. The messages are
rendered by the chat template (``ChatRenderer``): the first prompt once, each later turn as an
env delta after the ids the model sampled, which are appended as sampled and never re-tokenized.
So every scaffold is token-exact by construction: ``loss_mask`` is 1 exactly on sampled ids and
``logprobs`` are their sampling logprobs, whatever the scaffold writes around them.

``Episode.messages`` records the conversation as the model saw it (the scaffold's messages);
``Episode.turns[i].observation`` is what the env returned, unchanged.

Scaffolds are small frozen dataclasses: one instance serves every episode of a collect call, so
a scaffold keeps no per-episode state. A scaffold with a memory of the episode
(``MemoryScaffold``, ``agentgym.rollout.memory``) derives it from the episode's turns, which the
collector hands it per episode (``EpisodeMemory.memory_messages``) under its history window.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentgym.core.errors import ConfigError
from agentgym.core.parsing import parse_pythonic
from agentgym.core.types import Action, Observation, message_text, system, user
from agentgym.rollout.memory import EpisodeMemory, MemoryScaffold

__all__ = [
    "SCAFFOLDS",
    "ChatScaffold",
    "EpisodeMemory",
    "MemoryScaffold",
    "ReActScaffold",
    "Scaffold",
    "history_window",
    "make_scaffold",
]


@runtime_checkable
class Scaffold(Protocol):
    """How observations become the prompt and completions become actions (module docstring)."""

    @property
    def history_turns(self) -> int | None:
        """``None``: each turn sees the whole conversation. ``k``: the system messages, the
        observation ``k`` turns back and the turns since (``0``: the latest observation)."""
        ...

    def reset_messages(self, observation: Observation, info: Mapping[str, Any]) -> Observation:
        """The messages the model sees for the env's reset ``observation``."""
        ...

    def step_messages(self, observation: Observation, info: Mapping[str, Any]) -> Observation:
        """The messages the model sees for a step's ``observation`` (``info``: the step's)."""
        ...

    def action(self, text: str) -> Action:
        """What the env receives for a turn whose decoded text is ``text``."""
        ...


@dataclass(frozen=True)
class ChatScaffold:
    """Today's collector: the env's messages as they are, the model's text as the action.

    ``ChatScaffold()`` shows the whole conversation; ``ChatScaffold(history_turns=k)`` (or
    ``history_window(k)``) shows a window of the last ``k`` turns.
    """

    history_turns: int | None = None

    def __post_init__(self) -> None:
        _check_window(self.history_turns)

    def reset_messages(self, observation: Observation, info: Mapping[str, Any]) -> Observation:
        return observation

    def step_messages(self, observation: Observation, info: Mapping[str, Any]) -> Observation:
        return observation

    def action(self, text: str) -> Action:
        return text


def history_window(turns: int | None) -> ChatScaffold:
    """The default scaffold with a history window of ``turns`` (``None``: no window)."""
    return ChatScaffold(history_turns=turns)


REACT_INSTRUCTIONS = (
    "Work in steps. Each reply has two lines:\n"
    "Thought: what you know so far and what to do next\n"
    "Action: the action to take, in the format the task asks for\n"
    "After each action you get an Observation: what happened."
)
"""The format instruction ``ReActScaffold`` adds to the system prompt."""

_ACTION_RE = re.compile(r"^[ \t]*Action[ \t]*:", re.MULTILINE)
_OBSERVATION_RE = re.compile(r"^[ \t]*Observation[ \t]*:", re.MULTILINE)
_CALL_RE = re.compile(r"[A-Za-z_][\w.-]*\(.*\)", re.DOTALL)


@dataclass(frozen=True)
class ReActScaffold:
    """ReAct (Yao et al., 2023): the model writes ``Thought: ...`` then ``Action: ...``; the env
    receives only the action, and what it answers comes back as ``Observation: ...``.

    - Reset: ``instructions`` is appended to the first system message (a system message of its
      own when the env sends none); the env's user messages are kept as they are.
    - Action: the text after the last line that starts with ``Action:``, up to a line that
      starts with ``Observation:`` (a model that goes on to imagine the env's answer), stripped.
      A reply without an ``Action:`` line gives the env the empty string: the env answers it as
      the invalid action it is (the thought is never read as an action).
    - Step: the env's messages (user or tool; tool messages lose their call ids, as the model's
      action was text) become one user message ``Observation: <their texts>``.
    - ``tool_calls=True``: an action written as a call, ``name(key=value, ...)`` (literal
      values), reaches the env as an assistant message with that structured tool call (which
      every env accepts, whatever its text tool-call parser), so a model can call the env's
      tools in ReAct's text format; any other action still reaches the env as text.
    """

    history_turns: int | None = None
    instructions: str = REACT_INSTRUCTIONS
    tool_calls: bool = False

    def __post_init__(self) -> None:
        _check_window(self.history_turns)

    def reset_messages(self, observation: Observation, info: Mapping[str, Any]) -> Observation:
        messages = list(observation)
        if messages and messages[0].get("role") == "system":
            first = messages[0]
            messages[0] = system(f"{message_text(first)}\n\n{self.instructions}")
        else:
            messages.insert(0, system(self.instructions))
        return tuple(messages)

    def step_messages(self, observation: Observation, info: Mapping[str, Any]) -> Observation:
        texts = [message_text(m) for m in observation]
        return (user("Observation: " + "\n".join(t for t in texts if t)),)

    def action(self, text: str) -> Action:
        found = list(_ACTION_RE.finditer(text))
        if not found:
            return ""
        rest = text[found[-1].end() :]
        imagined = _OBSERVATION_RE.search(rest)
        if imagined is not None:
            rest = rest[: imagined.start()]
        action = rest.strip()
        if self.tool_calls and _CALL_RE.fullmatch(action):
            parsed = parse_pythonic(f"[{action}]", "react_call_")
            if len(parsed.calls) == 1 and not parsed.malformed:
                return parsed.message()
        return action


SCAFFOLDS = {"default": ChatScaffold, "react": ReActScaffold, "memory": MemoryScaffold}
"""The scaffolds ``agentgym train --scaffold NAME`` knows."""


def make_scaffold(name: str, history_turns: int | None = None) -> Scaffold:
    """The scaffold called ``name`` in ``SCAFFOLDS``, with a history window of
    ``history_turns`` (``None``: the scaffold's default, the whole conversation but for
    ``memory``, whose default window is 0)."""
    if name not in SCAFFOLDS:
        raise ConfigError(
            "scaffold", name, f"is not one of {sorted(SCAFFOLDS)}", "pass default, react or memory"
        )
    if name == "memory" and history_turns is None:
        return MemoryScaffold()
    scaffold: Scaffold = SCAFFOLDS[name](history_turns=history_turns)
    return scaffold


def _check_window(turns: object) -> None:
    if turns is None:
        return
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
        raise ConfigError(
            "history_turns",
            turns,
            "must be an int >= 0",
            "pass None (the whole conversation) or an int >= 0 (0: the latest observation)",
        )
