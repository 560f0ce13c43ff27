"""Chat messages, tool calls, turns and episodes.

Messages are plain dicts in the OpenAI chat shape so that they pickle, cross process boundaries
(``AsyncVectorEnv``) and feed any chat template unchanged. ``Turn`` and ``Episode`` are dataclasses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from agentgym.core.info import ERROR, Outcome, is_infra_error, outcome_of, success_of

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class Message(TypedDict):
    role: Role
    content: str | None
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]


MESSAGE_KEYS: frozenset[str] = frozenset(Message.__annotations__)

Observation = tuple[Message, ...]
"""What ``reset``/``step`` return: only the messages the env adds."""

Action = str | Message
"""What ``step`` accepts: the model's raw text or an assistant message dict."""


def system(content: str) -> Message:
    return {"role": "system", "content": content}


def user(content: str) -> Message:
    return {"role": "user", "content": content}


def assistant(content: str | None, tool_calls: list[ToolCall] | None = None) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def tool_message(content: str, tool_call_id: str, name: str) -> Message:
    return {"role": "tool", "content": content, "tool_call_id": tool_call_id, "name": name}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> ToolCall:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def as_assistant_message(action: Action) -> Message:
    """The assistant message an action stands for (a string becomes its ``content``)."""
    if isinstance(action, str):
        return assistant(action)
    return action


def is_turn(action: object) -> bool:
    """Whether ``action`` is a model turn: text, or an assistant message dict (a dict without
    ``role`` counts as one). Anything else is garbage an env answers as a malformed action."""
    if isinstance(action, str):
        return True
    return isinstance(action, dict) and action.get("role", "assistant") == "assistant"


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: its ``content`` when a string, the text parts of a content list joined,
    ``""`` for none (``None``, only ``tool_calls``)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def action_text(action: object) -> str:
    """The text of an action, the one reading every env and scaffold uses: a string itself, an
    assistant message's ``message_text``, ``""`` for anything that is not a turn."""
    if isinstance(action, str):
        return action
    return message_text(action) if isinstance(action, dict) and is_turn(action) else ""


@dataclass
class Turn:
    """One agent step: what the model did and what the env answered."""

    action: Message
    observation: Observation
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Episode:
    """A whole episode: the conversation, the per-turn outcomes, and (when a policy produced it)
    the flat token sequence a trainer learns from.

    ``token_ids``, ``loss_mask`` and ``logprobs`` are aligned: ``loss_mask[i] == 1`` exactly on
    tokens the model sampled, and ``logprobs[i]`` is the sampling log-probability of
    ``token_ids[i]`` there (0.0 elsewhere).
    """

    env_id: str | None
    messages: list[Message] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    reset_info: dict[str, Any] = field(default_factory=dict)
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    """Per assistant turn, the ``[start, end)`` slice of ``token_ids`` the model sampled."""
    context_starts: list[int] = field(default_factory=list)
    """Empty when the model saw the whole conversation (``token_ids`` is one context). With a
    history window (the collector's ``history_turns``) each turn was sampled from a context of
    its own: ``token_ids`` is those contexts one after another, each ending in its turn's
    sampled ids, and ``context_starts`` holds where each begins (the first is 0). A trainer
    runs each context as a sequence of its own."""
    turn_choices: list[tuple[tuple[int, ...], ...]] = field(default_factory=list)
    """Empty when sampling was free. With constrained decoding (the collector's
    ``action_choices``), one entry per turn (aligned with ``turn_spans``): the token-id
    sequences the turn was restricted to (``SamplingParams.choices``; ``()`` for a free turn).
    A trainer scores a constrained turn's tokens under the same restriction
    (``agentgym.inference.choice_next_tokens``); a token that was the only one allowed was
    forced, not sampled, and has ``loss_mask`` 0."""
    weight_versions: list[int | None] = field(default_factory=list)
    """Per assistant turn (aligned with ``turn_spans``), the engine's weight version that
    sampled it (``Completion.weight_version``: the policy updates it had received; None
    where the engine does not say)."""
    metrics: dict[str, float] = field(default_factory=dict)
    trainable: bool = True
    group: int | None = None
    """Episodes with the same ``group`` (from one collect call) played the same task: compare
    their returns (GRPO). ``None`` outside a collector."""
    seed: int | None = None
    """The reset seed of the episode's task, when known."""

    @property
    def contexts(self) -> list[tuple[int, int]]:
        """The ``[start, end)`` slices of ``token_ids`` that the model saw as one sequence each:
        one slice for a whole-conversation episode, one per turn with a history window."""
        starts = self.context_starts or [0]
        ends = [*starts[1:], len(self.token_ids)]
        return list(zip(starts, ends, strict=True))

    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.turns]

    @property
    def total_reward(self) -> float:
        return float(sum(self.rewards))

    @property
    def terminated(self) -> bool:
        return bool(self.turns) and self.turns[-1].terminated

    @property
    def truncated(self) -> bool:
        return bool(self.turns) and self.turns[-1].truncated

    @property
    def infra_error(self) -> bool:
        """Whether the reset or a step failed for a reason outside the model (drop the sample)."""
        return is_infra_error(self.reset_info) or any(is_infra_error(t.info) for t in self.turns)

    @property
    def success(self) -> bool | None:
        """The env's ``info["success"]`` on the last step; ``None`` when it does not say (see
        :mod:`agentgym.core.info`: the one definition of success)."""
        return success_of([t.info for t in self.turns])

    @property
    def outcome(self) -> Outcome:
        """The class the episode ended in: ``success``, ``failed``, ``invalid``, ``timeout``,
        ``truncated`` or ``infra`` (:func:`agentgym.core.info.outcome_of` is the rule)."""
        infos = [t.info for t in self.turns]
        return outcome_of(self.reset_info, infos, truncated=self.truncated)

    @property
    def cause(self) -> str | None:
        """Why an ``infra`` episode failed (the failing call's ``error``); None otherwise."""
        for info in (self.reset_info, *(t.info for t in self.turns)):
            if is_infra_error(info):
                return str(info.get(ERROR) or "an infrastructure failure, cause not given")
        return None
