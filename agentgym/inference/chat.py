"""Chat rendering that keeps token ids, and parsing a completion back into a message.

``render_ids`` is the one place that turns messages into prompt token ids with the tokenizer's
chat template. ``parse_assistant`` turns sampled text into an OpenAI assistant message with
structured ``tool_calls`` (hermes ``<tool_call>`` blocks by default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentgym.core.parsing import parse_action
from agentgym.core.types import Message

__all__ = ["parse_assistant", "render_ids", "render_text"]


def render_text(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
) -> str:
    """The chat template's text for ``messages`` (and ``tools`` schemas)."""
    return str(
        tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tools=list(tools) if tools else None,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )
    )


def render_ids(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
) -> list[int]:
    """The token ids of ``render_text``: the rendered text tokenized without extra special tokens
    (the template writes every marker itself)."""
    text = render_text(
        tokenizer, messages, tools=tools, add_generation_prompt=add_generation_prompt
    )
    return list(tokenizer.encode(text, add_special_tokens=False))


def parse_assistant(text: str, *, parser: str = "hermes", id_prefix: str = "call_") -> Message:
    """The assistant message that ``text`` stands for, with parsed ``tool_calls``.

    Text outside tool-call blocks becomes ``content``. If a block is malformed, ``content`` keeps
    the whole text so nothing the model wrote is lost; the well-formed calls are still returned.
    """
    parsed = parse_action(text, parser, id_prefix)
    message = parsed.message()
    if parsed.malformed:
        message["content"] = text
    elif parsed.calls and not message["content"]:
        message["content"] = None
    return message
