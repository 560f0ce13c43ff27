"""Spaces for chat observations and assistant actions.

Never ``gymnasium.spaces.Text`` for these: its alphabet is 62 characters, and ``AsyncVectorEnv``
with shared memory silently returns placeholder strings for it. These spaces hold Python strings
and message dicts of any unicode, and register with Gymnasium's vector utilities so that
``SyncVectorEnv`` and ``AsyncVectorEnv(shared_memory=False)`` batch them as tuples.
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import create_empty_array

from agentgym.core.errors import ConfigError
from agentgym.core.types import MESSAGE_KEYS, ROLES, Action, Message, Observation

__all__ = ["AssistantTurn", "Messages", "is_valid_message"]

# Sampling alphabet: printable ASCII plus a few multi-byte characters, so that samples exercise
# unicode without producing lone surrogates (which are not valid text).
_ALPHABET = np.array(
    list(string.ascii_letters + string.digits + " \n\t.,;:!?'\"()[]{}<>/\\-_=+*")
    + list("éßπλ中文日本語😀→∑")
)


def _is_valid_tool_call(call: Any) -> bool:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        return False
    function = call.get("function")
    return (
        call.get("type", "function") == "function"
        and isinstance(function, dict)
        and isinstance(function.get("name"), str)
        and isinstance(function.get("arguments"), str | dict)
    )


def is_valid_message(message: Any, *, max_length: int | None = None) -> bool:
    """Whether ``message`` is a well-formed OpenAI-shaped chat message dict."""
    if not isinstance(message, dict) or not set(message) <= MESSAGE_KEYS:
        return False
    role, content = message.get("role"), message.get("content")
    if role not in ROLES:
        return False
    if not (isinstance(content, str) or (content is None and role == "assistant")):
        return False
    if max_length is not None and content is not None and len(content) > max_length:
        return False
    calls = message.get("tool_calls")
    if calls is not None and (role != "assistant" or not isinstance(calls, list)):
        return False
    if calls is not None and not all(_is_valid_tool_call(c) for c in calls):
        return False
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return False
    return isinstance(message.get("name", ""), str)


def _sample_text(rng: np.random.Generator, max_length: int) -> str:
    length = int(rng.integers(0, max(1, min(max_length, 64)) + 1))
    return "".join(rng.choice(_ALPHABET, size=length))


class Messages(Space[Observation]):
    """A tuple of chat messages: what an agentgym env observes.

    Args:
        max_messages: most messages one observation may hold.
        max_length: most characters one message's content may hold.
        roles: the roles an observation may contain (an env adds system, user and tool messages).
    """

    def __init__(
        self,
        max_messages: int = 256,
        max_length: int = 4_000_000,
        roles: Sequence[str] = ("system", "user", "tool"),
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if max_messages < 1:
            raise ConfigError("max_messages", max_messages, "must be at least 1", "pass 1 or more")
        unknown = set(roles) - ROLES
        if unknown:
            raise ConfigError(
                "roles", roles, f"unknown roles {sorted(unknown)}", f"use {sorted(ROLES)}"
            )
        self.max_messages = max_messages
        self.max_length = max_length
        self.roles = tuple(roles)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, tuple)
            and len(x) <= self.max_messages
            and all(
                is_valid_message(m, max_length=self.max_length) and m["role"] in self.roles
                for m in x
            )
        )

    def sample(self, mask: Any = None, probability: Any = None) -> Observation:
        if mask is not None or probability is not None:
            raise ConfigError("mask", mask, "Messages.sample takes no mask", "call sample()")
        rng = self.np_random
        messages: list[Message] = []
        for i in range(int(rng.integers(1, min(3, self.max_messages) + 1))):
            role = str(rng.choice(self.roles))
            message: Message = {"role": role, "content": _sample_text(rng, self.max_length)}  # type: ignore[typeddict-item]
            if role == "tool":
                message["tool_call_id"] = f"call_{i}"
            messages.append(message)
        return tuple(messages)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Messages) and (self.max_messages, self.max_length, self.roles) == (
            other.max_messages,
            other.max_length,
            other.roles,
        )

    def __hash__(self) -> int:
        return hash((Messages, self.max_messages, self.max_length, self.roles))

    def __repr__(self) -> str:
        return f"Messages(max_messages={self.max_messages}, roles={self.roles})"

    def to_jsonable(self, sample_n: Sequence[Observation]) -> list[list[Message]]:
        return [list(obs) for obs in sample_n]

    def from_jsonable(self, sample_n: list[list[Message]]) -> list[Observation]:
        return [tuple(obs) for obs in sample_n]


class AssistantTurn(Space[Action]):
    """One assistant turn: the model's raw text, or an assistant message dict.

    ``sample()`` draws random text and, when ``tool_names`` are given, sometimes a hermes
    ``<tool_call>`` block naming one of them with random arguments: fuzz input, not good play.

    Args:
        max_length: most characters of text an action may hold.
        tool_names: names of the env's tools, used by ``sample``.
    """

    def __init__(
        self,
        max_length: int = 4_000_000,
        tool_names: Sequence[str] = (),
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if max_length < 1:
            raise ConfigError("max_length", max_length, "must be at least 1", "pass 1 or more")
        self.max_length = max_length
        self.tool_names = tuple(tool_names)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return len(x) <= self.max_length
        return (
            isinstance(x, dict)
            and x.get("role") == "assistant"
            and is_valid_message(x, max_length=self.max_length)
        )

    def sample(self, mask: Any = None, probability: Any = None) -> Action:
        if mask is not None or probability is not None:
            raise ConfigError("mask", mask, "AssistantTurn.sample takes no mask", "call sample()")
        rng = self.np_random
        text = _sample_text(rng, self.max_length)
        if self.tool_names and rng.random() < 0.5:
            name = str(rng.choice(self.tool_names))
            arguments = {_sample_text(rng, 8) or "x": _sample_text(rng, 16)}
            call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
            text = f"{text}<tool_call>{call}</tool_call>"
        return text[: self.max_length]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AssistantTurn) and (self.max_length, self.tool_names) == (
            other.max_length,
            other.tool_names,
        )

    def __hash__(self) -> int:
        return hash((AssistantTurn, self.max_length, self.tool_names))

    def __repr__(self) -> str:
        return f"AssistantTurn(max_length={self.max_length}, tool_names={self.tool_names})"

    def to_jsonable(self, sample_n: Sequence[Action]) -> list[Action]:
        return list(sample_n)

    def from_jsonable(self, sample_n: list[Action]) -> list[Action]:
        return list(sample_n)


@create_empty_array.register(Messages)
@create_empty_array.register(AssistantTurn)
def _create_empty(space: Space[Any], n: int = 1, fn: Any = np.zeros) -> tuple[Any, ...]:
    # Gymnasium's vector envs pre-allocate an output buffer; ours is a tuple of placeholders
    # that ``concatenate`` replaces wholesale.
    empty: Any = () if isinstance(space, Messages) else ""
    return tuple(empty for _ in range(n))
