"""A model turn read as one web action: from text or from a tool call, never a crash."""

from __future__ import annotations

from dataclasses import dataclass

from agentgym.core.parsing import MalformedCall, ParsedAction, ParsedCall
from agentgym.core.tools import clip
from agentgym.core.types import Message, Observation, tool_message, user
from agentgym.envs.web.actions import WebAction, from_arguments, parse

__all__ = ["Reading", "read_turn"]


@dataclass(frozen=True)
class Reading:
    """A turn read as an action (or the error saying why it is none), and how to answer it: the
    page goes in a tool message answering ``call_id`` when the action was a tool call, else in a
    user message; ``others`` answer further calls of the same turn."""

    action: WebAction | None
    error: str | None = None
    call_id: str | None = None
    call_name: str = ""
    others: tuple[Message, ...] = ()

    def reply(self, content: str) -> Observation:
        if self.call_id is None:
            return (user(content),)
        return (tool_message(content, self.call_id, self.call_name), *self.others)


def read_turn(parsed: ParsedAction, tools: bool) -> Reading:
    """The action of a parsed turn: its one tool call, else the grammar read from its text."""
    if not parsed.has_calls:
        found = parse(parsed.content or "")
        if isinstance(found, WebAction):
            return Reading(found)
        return Reading(None, found)
    attempts: list[ParsedCall | MalformedCall] = [*parsed.calls, *parsed.malformed]
    order = {call_id: i for i, call_id in enumerate(parsed.order)}
    attempts.sort(key=lambda a: order.get(a.id, 0))
    first, rest = attempts[0], attempts[1:]
    others = tuple(
        tool_message("Error: not run: one action per turn", a.id, clip(a.name, 64) or "invalid")
        for a in rest
    )
    name = clip(first.name, 64) or "invalid"
    if rest:
        error = f"{len(attempts)} tool calls in one turn; make exactly one action per turn"
        return Reading(None, error, first.id, name, others)
    if not tools:
        error = "tools are off for this env; write the action as text, e.g. click(12)"
        return Reading(None, error, first.id, name)
    if isinstance(first, MalformedCall):
        return Reading(None, f"malformed tool call: {clip(first.error, 200)}", first.id, name)
    found = from_arguments(first.name, first.arguments)
    if isinstance(found, WebAction):
        return Reading(found, None, first.id, name)
    return Reading(None, found, first.id, name)
