"""Wrappers that show the agent the whole conversation instead of only the new messages.

An agentgym env observes only what it adds each step (see :mod:`agentgym.core.env`). Simple
agents that want the full context use:

- ``FullConversation(env)``: the observation is the tuple of every message so far (the reset
  messages, each action as an assistant message, each step's env messages).
- ``FlatText(env)``: the same conversation rendered as one string (format in ``render_text``).

Both return fresh objects on every call: a caller may keep or mutate any observation.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterable, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import create_empty_array

from agentgym.core.errors import ConfigError
from agentgym.core.spaces import AssistantTurn, Messages, is_valid_message
from agentgym.core.types import ROLES, Action, Message, Observation, assistant

__all__ = ["FlatText", "FullConversation", "String", "render_text"]

MAX_CONVERSATION_MESSAGES = 1_000_000
"""``FullConversation``'s space bound on messages; in practice ``max_episode_steps`` limits it."""

# Sampling alphabet: ASCII letters and digits plus a few multi-byte characters (no surrogates).
_ALPHABET = np.array(
    [*"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n.,!?", *"é中😀"]
)


class String(Space[str]):
    """Any Python ``str`` of at most ``max_length`` characters, any unicode.

    Not ``gymnasium.spaces.Text``, whose 62-character alphabet rejects most real text and which
    ``AsyncVectorEnv`` with shared memory replaces with placeholders. Batched as a tuple by
    ``SyncVectorEnv`` and ``AsyncVectorEnv(shared_memory=False)``.
    """

    def __init__(
        self, max_length: int = 100_000_000, seed: int | np.random.Generator | None = None
    ) -> None:
        if max_length < 0:
            raise ConfigError("max_length", max_length, "must not be negative", "pass 0 or more")
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise ConfigError("mask", mask, "String.sample takes no mask", "call sample()")
        length = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        return "".join(self.np_random.choice(_ALPHABET, size=length))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, String) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash((String, self.max_length))

    def __repr__(self) -> str:
        return f"String(max_length={self.max_length})"

    def to_jsonable(self, sample_n: Sequence[str]) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: list[str]) -> list[str]:
        return list(sample_n)


@create_empty_array.register(String)
def _create_empty_strings(space: String, n: int = 1, fn: Any = np.zeros) -> tuple[str, ...]:
    return tuple("" for _ in range(n))


def _as_message(action: Action | Any) -> Message:
    """The assistant message an action stands for, always a valid one.

    Text becomes the content. A dict keeps its content (when text) and its well-formed
    ``tool_calls``; malformed calls are dropped (the env answered them with error messages).
    """
    if isinstance(action, str):
        return assistant(action)
    if isinstance(action, dict) and action.get("role") == "assistant" and is_valid_message(action):
        return copy.deepcopy(action)  # type: ignore[return-value]
    content = action.get("content") if isinstance(action, dict) else None
    calls = action.get("tool_calls") if isinstance(action, dict) else None
    valid = [
        copy.deepcopy(c)
        for c in (calls if isinstance(calls, list) else [])
        if is_valid_message({"role": "assistant", "content": None, "tool_calls": [c]})
    ]
    return assistant(content if isinstance(content, str) else None, valid or None)


class FullConversation(gym.Wrapper[Observation, Action, Observation, Action]):
    """Observations are the whole conversation so far, as a tuple of chat messages.

    ``reset`` returns the env's reset messages; each ``step`` returns every earlier message, the
    action as an assistant message, and the env's new messages. ``info`` passes through.
    """

    def __init__(self, env: gym.Env[Observation, Action]) -> None:
        super().__init__(env)
        inner = env.observation_space
        action_space = env.action_space
        max_length = max(
            inner.max_length if isinstance(inner, Messages) else 0,
            action_space.max_length if isinstance(action_space, AssistantTurn) else 0,
            1,
        )
        self.observation_space = Messages(
            max_messages=MAX_CONVERSATION_MESSAGES, max_length=max_length, roles=sorted(ROLES)
        )
        self._history: list[Message] = []

    @property
    def conversation(self) -> Observation:
        """A fresh copy of the conversation so far."""
        return copy.deepcopy(tuple(self._history))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._history = copy.deepcopy(list(obs))
        return self.conversation, info

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._history.append(_as_message(action))
        self._history.extend(copy.deepcopy(list(obs)))
        return self.conversation, reward, terminated, truncated, info


def _render_message(message: Message) -> str:
    role = message["role"]
    if role == "tool" and message.get("name"):
        role = f"tool[{message['name']}]"
    lines = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        function = call["function"]
        arguments = function["arguments"]
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError, RecursionError):  # not JSON: shown as the string
                arguments = json.loads(arguments)
        body = json.dumps({"name": function["name"], "arguments": arguments}, ensure_ascii=False)
        lines.append(f"<tool_call>{body}</tool_call>")
    return f"{role}: " + "\n".join(line for line in lines if line)


def render_text(messages: Iterable[Message]) -> str:
    """One string for a conversation: a block per message, blocks separated by a blank line.

    A block is ``"<role>: <content>"``; a tool message's role is written ``tool[<name>]``; an
    assistant's structured tool calls follow its content, one hermes
    ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` per line. For example::

        system: Reach the goal.

        assistant: Going left.
        <tool_call>{"name": "move", "arguments": {"direction": "left"}}</tool_call>

        tool[move]: You moved left.
    """
    return "\n\n".join(_render_message(m) for m in messages)


class FlatText(gym.ObservationWrapper[str, Action, Observation]):
    """Observations are the whole conversation so far as one string (see ``render_text``).

    Wraps ``env`` in ``FullConversation`` first unless it already is one.
    """

    def __init__(self, env: gym.Env[Observation, Action]) -> None:
        if not isinstance(env, FullConversation):
            env = FullConversation(env)
        super().__init__(env)
        self.observation_space = String()

    def observation(self, observation: Observation) -> str:
        return render_text(observation)
