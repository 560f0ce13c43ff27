"""MCP tasks: a prompt plus verifiers of the final answer and of the server's end state.

A JSONL file holds one task per line::

    {"id": "t1", "prompt": "What time is it in Tokyo when it is 09:00 in UTC?",
     "answer": "18:00", "match": "contains"}
    {"id": "t2", "prompt": "Write 'hello' to notes.txt.",
     "checks": [{"tool": "read_file", "arguments": {"path": "notes.txt"}, "contains": "hello"}]}

Fields:

- ``prompt`` (required): the user message.
- ``id``: the task id (default: the line's 0-based index among tasks, as a string).
- ``answer`` and ``match``: the expected final answer. The answer graded is the text of the last
  ``<answer>...</answer>`` in the model's final message, or the whole message when it has none.
  ``match`` is ``"text"`` (default: equal after case folding, whitespace and surrounding
  punctuation are normalised), ``"contains"`` (the expected text occurs in it) or ``"number"``
  (the last number in it is within 0.005 of the expected one, relative tolerance 1e-6).
- ``checks``: calls made on the server after the episode (never shown to the model), each
  ``{"tool", "arguments", "path", "equals" | "contains"}``. ``path`` (dotted, list indices as
  numbers) picks a value from the result's structured content (or its text parsed as JSON);
  ``equals`` compares it; ``contains`` is a substring of a string value (of the result's text
  when the value is no string), an element of a list (dicts match when they hold the given keys,
  recursively), or a sub-dict of a dict. A check whose call returns an error fails.
- ``solution``: optional oracle tool calls, a list of turns, each a list of
  ``{"name", "arguments"}`` (used by tests and baselines; not shown to the model).

A task needs an ``answer``, ``checks``, or both; the reward is 1 when all of them pass.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentgym.core.errors import ConfigError

__all__ = [
    "Check",
    "MCPTask",
    "Match",
    "answer_correct",
    "extract_answer",
    "load_tasks",
    "task_from_dict",
    "value_at",
    "value_matches",
]

Match = Literal["text", "contains", "number"]
MATCHES: tuple[str, ...] = ("text", "contains", "number")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_NUMBER_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_PUNCTUATION = " \t\n.,;:!?\"'`*_()[]"
_TASK_KEYS = frozenset({"id", "prompt", "answer", "match", "checks", "solution"})


@dataclass(frozen=True)
class Check:
    """A call made on the server after the episode, and what its result must show."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""
    equals: Any = _MISSING
    contains: Any = _MISSING

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tool": self.tool, "arguments": dict(self.arguments)}
        if self.path:
            data["path"] = self.path
        for key in ("equals", "contains"):
            if getattr(self, key) is not _MISSING:
                data[key] = getattr(self, key)
        return data


@dataclass(frozen=True)
class MCPTask:
    task_id: str
    prompt: str
    answer: str | None = None
    match: Match = "text"
    checks: tuple[Check, ...] = ()
    solution: tuple[tuple[dict[str, Any], ...], ...] = ()
    """Oracle tool calls, one tuple per turn: ``{"name": ..., "arguments": {...}}``."""


# --- grading ------------------------------------------------------------------------------------


def extract_answer(text: str) -> str:
    """The last ``<answer>...</answer>`` of ``text``, else ``text`` itself."""
    found = _ANSWER_RE.findall(text)
    return found[-1] if found else text


def _normalise(text: str) -> str:
    return " ".join(text.casefold().split()).strip(_PUNCTUATION)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=0.005)


def answer_correct(text: str, expected: str, match: Match) -> bool:
    """Whether the final message ``text`` gives ``expected`` (rules in the module doc)."""
    given = extract_answer(text)
    if match == "number":
        numbers = _NUMBER_RE.findall(given)
        if not numbers:
            return False
        try:
            return _close(float(numbers[-1].replace(",", "")), float(expected))
        except ValueError:
            return False
    if match == "contains":
        return _normalise(expected) in _normalise(given)
    return _normalise(given) == _normalise(expected)


def value_at(value: Any, path: str) -> Any:
    """``value`` followed along the dotted ``path``; ``_MISSING``-like ``KeyError`` if absent."""
    for part in [p for p in path.split(".") if p]:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif (
            isinstance(value, list)
            and part.lstrip("-").isdigit()
            and -len(value) <= int(part) < len(value)
        ):
            value = value[int(part)]
        else:
            raise KeyError(path)
    return value


def _equal(actual: Any, expected: Any) -> bool:
    numbers = (int, float)
    if isinstance(actual, bool) or isinstance(expected, bool):
        return actual is expected
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        return _close(float(actual), float(expected))
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        return actual.keys() == expected.keys() and all(
            _equal(actual[k], expected[k]) for k in expected
        )
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(map(_equal, actual, expected))
    return bool(actual == expected)


def _includes(actual: Any, expected: Any) -> bool:
    """``actual`` holds ``expected``: dict keys recursively, list elements anywhere."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and _includes(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return isinstance(actual, list) and all(
            any(_includes(a, e) for a in actual) for e in expected
        )
    return _equal(actual, expected)


def value_matches(check: Check, structured: Any, text: str) -> bool:
    """Whether a check's call result (structured content and text) passes the check."""
    value = structured
    if value is None:
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, ValueError):
            value = text
    try:
        value = value_at(value, check.path)
    except KeyError:
        return False
    if check.equals is not _MISSING:
        return _equal(value, check.equals)
    expected = check.contains
    if isinstance(value, list):
        return any(_includes(item, expected) for item in value)
    if isinstance(expected, str):
        return expected in (value if isinstance(value, str) else text)
    return _includes(value, expected)


# --- loading ------------------------------------------------------------------------------------


def _check_from(raw: Any, where: str) -> Check:
    fix = '{"tool": "get_stock", "arguments": {"sku": "X"}, "path": "total", "equals": 3}'
    if not isinstance(raw, Mapping) or not isinstance(raw.get("tool"), str):
        raise ConfigError(where, raw, "must be a dict with a 'tool' name", f"write e.g. {fix}")
    unknown = sorted(set(raw) - {"tool", "arguments", "path", "equals", "contains"})
    if unknown or (("equals" in raw) == ("contains" in raw)):
        rule = f"has unknown keys {unknown}" if unknown else "needs exactly one of equals/contains"
        raise ConfigError(where, raw, rule, f"write e.g. {fix}")
    arguments, path = raw.get("arguments", {}), raw.get("path", "")
    if not isinstance(arguments, Mapping) or not isinstance(path, str):
        raise ConfigError(where, raw, "arguments must be a dict and path a string", fix)
    return Check(
        raw["tool"],
        dict(arguments),
        path,
        raw.get("equals", _MISSING),
        raw.get("contains", _MISSING),
    )


def _solution_from(raw: Any, where: str) -> tuple[tuple[dict[str, Any], ...], ...]:
    fix = 'a list of turns, e.g. [[{"name": "get_stock", "arguments": {"sku": "X"}}]]'
    ok = isinstance(raw, list) and all(
        isinstance(turn, list)
        and all(isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in turn)
        for turn in raw
    )
    if not ok:
        raise ConfigError(where, raw, "must be a list of lists of tool calls", fix)
    return tuple(
        tuple({"name": c["name"], "arguments": dict(c.get("arguments") or {})} for c in turn)
        for turn in raw
    )


def task_from_dict(row: Any, default_id: str, where: str = "task") -> MCPTask:
    """One task from its JSON form (fields in the module doc)."""
    example = '{"prompt": "...", "answer": "42", "match": "number"}'
    if not isinstance(row, Mapping) or not isinstance(row.get("prompt"), str):
        raise ConfigError(where, row, "must be an object with a 'prompt' string", example)
    unknown = sorted(set(row) - _TASK_KEYS)
    if unknown:
        raise ConfigError(
            where, dict(row), f"has unknown keys {unknown}", f"use {sorted(_TASK_KEYS)}"
        )
    answer, match = row.get("answer"), row.get("match", "text")
    if match not in MATCHES:
        raise ConfigError(f"{where}['match']", match, f"must be one of {MATCHES}", "'text'")
    raw_checks = row.get("checks", [])
    if not isinstance(raw_checks, list):
        raise ConfigError(f"{where}['checks']", raw_checks, "must be a list", "[{...}]")
    checks = tuple(_check_from(c, f"{where}['checks'][{i}]") for i, c in enumerate(raw_checks))
    if answer is None and not checks:
        raise ConfigError(where, dict(row), "has neither 'answer' nor 'checks'", example)
    if answer is not None and not isinstance(answer, str | int | float):
        raise ConfigError(f"{where}['answer']", answer, "must be a string or number", '"42"')
    task_id = row.get("id", default_id)
    solution = _solution_from(row["solution"], f"{where}['solution']") if "solution" in row else ()
    return MCPTask(
        str(task_id),
        row["prompt"],
        None if answer is None else str(answer),
        match,
        checks,
        solution,
    )


def load_tasks(
    source: str | Path | Sequence[Mapping[str, Any] | MCPTask],
) -> tuple[MCPTask, ...]:
    """Tasks from a JSONL path, or a list of task dicts (or ``MCPTask`` s)."""
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_file():
            raise ConfigError(
                "tasks", str(source), "is not a file", "pass the path of a .jsonl file"
            )
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ConfigError(
                    f"{path}:{number}",
                    line[:80],
                    f"is not JSON ({e.msg})",
                    "one JSON object per line",
                ) from None
    elif isinstance(source, Sequence) and not isinstance(source, bytes):
        rows = list(source)
    else:
        raise ConfigError(
            "tasks", source, "must be a JSONL path or a list of dicts", "tasks='tasks.jsonl'"
        )
    if not rows:
        raise ConfigError("tasks", str(source), "holds no tasks", "add one JSON object per line")
    tasks = tuple(
        row if isinstance(row, MCPTask) else task_from_dict(row, str(i), f"tasks[{i}]")
        for i, row in enumerate(rows)
    )
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ConfigError(
            "tasks", str(source)[:80], "repeats task ids", "give each task a unique 'id'"
        )
    return tasks
