"""Server-sent events in OpenAI's streaming shape, for an answer already sampled.

The engine returns a whole completion, so a streamed answer is that completion cut into OpenAI's
chunks: the role, the content, each tool call (``index``, ``id``, ``function.name`` and
``arguments``), the finish reason, and the usage when ``stream_options.include_usage`` asks.
"""

from __future__ import annotations

from typing import Any

from agentgym.core.types import Message

__all__ = ["chat_chunks", "completion_chunks"]


def _chunk(head: dict[str, Any], kind: str, choice: dict[str, Any] | None) -> dict[str, Any]:
    return {**head, "object": kind, "choices": [] if choice is None else [choice]}


def chat_chunks(
    head: dict[str, Any], message: Message, finish: str, usage: dict[str, int] | None
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of ``message``."""
    kind = "chat.completion.chunk"
    chunks = [_chunk(head, kind, {"index": 0, "delta": {"role": "assistant", "content": ""},
                                  "finish_reason": None})]  # fmt: skip
    if message.get("content"):
        delta = {"content": message["content"]}
        chunks.append(_chunk(head, kind, {"index": 0, "delta": delta, "finish_reason": None}))
    for k, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        delta = {
            "tool_calls": [
                {
                    "index": k,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": function["name"], "arguments": function["arguments"]},
                }
            ]
        }
        chunks.append(_chunk(head, kind, {"index": 0, "delta": delta, "finish_reason": None}))
    chunks.append(_chunk(head, kind, {"index": 0, "delta": {}, "finish_reason": finish}))
    if usage is not None:
        chunks.append({**_chunk(head, kind, None), "usage": usage})
    return chunks


def completion_chunks(
    head: dict[str, Any], text: str, finish: str, usage: dict[str, int] | None
) -> list[dict[str, Any]]:
    """The streamed ``text_completion`` objects of ``text``."""
    kind = "text_completion"
    chunks = [
        _chunk(head, kind, {"index": 0, "text": text, "logprobs": None, "finish_reason": None}),
        _chunk(head, kind, {"index": 0, "text": "", "logprobs": None, "finish_reason": finish}),
    ]
    if usage is not None:
        chunks.append({**_chunk(head, kind, None), "usage": usage})
    return chunks
