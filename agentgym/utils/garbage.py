"""Garbage a model may send: labelled actions no env may raise on (``check_env`` steps each)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np

__all__ = ["garbage_actions"]

_HUGE = 1_000_000
# [start, stop) code point ranges for random unicode; none holds a surrogate (D800-DFFF).
_UNICODE_RANGES = np.array(
    [
        [0x00, 0x20],  # C0 controls, NUL included
        [0x20, 0x7F],  # ASCII
        [0x7F, 0xA0],  # DEL and C1 controls
        [0x300, 0x370],  # combining marks
        [0x590, 0x700],  # Hebrew and Arabic (right to left)
        [0x200B, 0x2030],  # zero-width and bidi controls
        [0x4E00, 0x9FFF],  # CJK
        [0x1F300, 0x1FA00],  # emoji
    ]
)
# Candidate values for "arguments of the wrong type": the first one a property rejects is used.
_WRONG_VALUES: tuple[Any, ...] = ({"not": "expected"}, 12345, "not the expected type", [1, 2], True)


def _random_unicode(rng: np.random.Generator, length: int) -> str:
    ranges = _UNICODE_RANGES[rng.integers(0, len(_UNICODE_RANGES), size=length)]
    return "\x00" + "".join(map(chr, rng.integers(ranges[:, 0], ranges[:, 1])))


def _hermes(name: str, arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _structured(calls: Any, content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": calls}


def _wrong_value(schema: Any) -> Any:
    for value in _WRONG_VALUES:
        try:
            if not jsonschema.Draft202012Validator(schema).is_valid(value):
                return value
        except (jsonschema.SchemaError, TypeError):
            return value
    return _WRONG_VALUES[0]


def _tool_garbage(schema: dict[str, Any]) -> list[tuple[str, Any]]:
    name = schema["function"]["name"]
    properties = schema["function"]["parameters"].get("properties") or {}
    wrong = {key: _wrong_value(sub) for key, sub in properties.items()} or {"unexpected": 1}
    huge = {key: "A" * _HUGE for key in properties} or {"unexpected": "A" * _HUGE}
    bad_json = {
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": "{not json"},
    }
    return [
        (f"wrong argument types for {name}", _hermes(name, wrong)),
        (f'{name} with "arguments": "not an object"', _hermes(name, "not an object")),
        (f"{name} with 1 MB arguments", _hermes(name, huge)),
        (f"structured {name} call with non-JSON arguments", _structured([bad_json])),
    ]


def garbage_actions(tools: list[dict[str, Any]], seed: int) -> list[tuple[str, Any]]:
    """Labelled actions no env may raise on: empty, huge, random unicode, malformed tool calls."""
    rng = np.random.default_rng(seed)
    actions: list[tuple[str, Any]] = [
        ("empty string", ""),
        ("1 MB of text", ("A" * 1023 + "\n") * 1024),
        *((f"random unicode ({n} chars)", _random_unicode(rng, n)) for n in (1, 64, 4096)),
        ("random unicode inside <tool_call>", f"<tool_call>{_random_unicode(rng, 64)}</tool_call>"),
        ("tool call that is not JSON", "<tool_call>{not json</tool_call>"),
        ("unclosed tool call", '<tool_call>{"name": "x"'),
        ("unknown tool", _hermes("no_such_tool_agentgym_check", {})),
        ("1 MB tool name", _hermes("x" * _HUGE, {})),
        ('"arguments": "not an object"', _hermes("x", "not an object")),
        ("deeply nested JSON", f"<tool_call>{'[' * 100_000}</tool_call>"),
        ("structured call without function", _structured([{"id": "c0", "type": "function"}])),
        ("structured tool_calls that is not a list", _structured("not a list", "")),
    ]
    for schema in tools:
        actions.extend(_tool_garbage(schema))
    return actions
