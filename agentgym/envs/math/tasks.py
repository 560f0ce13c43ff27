"""Math tasks: generated offline by ``reasoning-gym``, or read from local data.

``data`` is a JSONL / Parquet file or a local Hugging Face dataset directory: a
``datasets`` ``save_to_disk`` folder (``Dataset`` or ``DatasetDict``; ``split`` picks the split)
or a Hub snapshot of ``.parquet`` / ``.jsonl`` files such as GSM8K's
``main/test-00000-of-00001.parquet`` (``agentgym.envs.math.sources`` gives the exact rules; read
with pyarrow, nothing downloaded, no ``datasets`` package). Tasks keep the data's row order
(the files of a split one after another); a task's id is its row index.

Each row holds a question column and an answer column (names set by ``question_key`` /
``answer_key``). The reference answer is read by ``answer_format``:

- ``"plain"``: the column is the answer (``"42"``, ``"\\frac{1}{2}"``).
- ``"gsm8k"``: the text after the last ``####`` (GSM8K's ``answer`` column:
  ``"...reasoning...\\n#### 72"``); use ``question_key="question", answer_key="answer"``.
- ``"math"``: the last ``\\boxed{...}`` of a worked solution (MATH / Hendrycks:
  ``question_key="problem", answer_key="solution"``).
- ``"auto"`` (default): ``gsm8k`` if the text holds ``####``, ``math`` if it holds ``\\boxed``,
  else ``plain``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentgym.core.errors import ConfigError
from agentgym.envs.math.grading import last_boxed
from agentgym.envs.math.sources import read_rows
from agentgym.extras import pip_install

__all__ = ["DEFAULT_GENERATORS", "MathTask", "generate_tasks", "load_file"]

MATH_INSTALL = pip_install("math")
AnswerFormat = Literal["auto", "plain", "gsm8k", "math"]

DEFAULT_GENERATORS: dict[str, dict[str, Any]] = {
    "basic_arithmetic": {"min_terms": 2, "max_terms": 4, "max_digits": 3},
    "chain_sum": {"max_terms": 5, "max_digits": 3},
    "gsm_symbolic": {},
    "fraction_simplification": {"max_value": 500},
    "simple_equations": {},
    "lcm": {},
    "gcd": {},
}
"""The default mix: reasoning-gym generator name -> config overrides (its difficulty knobs)."""

# Where equal values are not enough: "simplify 4/6" must be answered 2/3, not 4/6.
EXACT_GENERATORS = frozenset({"fraction_simplification"})


@dataclass(frozen=True)
class MathTask:
    task_id: str
    question: str
    answer: str
    exact: bool = False
    """Grade by the answer's written form (e.g. a fraction in lowest terms), not only its value."""


def generate_tasks(
    generators: Mapping[str, Mapping[str, Any]], size: int, seed: int
) -> tuple[MathTask, ...]:
    """``size`` tasks, the generators taking turns; the same arguments give the same tasks."""
    try:
        import reasoning_gym
        from reasoning_gym.factory import DATASETS
    except ImportError as e:
        raise ImportError(
            f"Math-v0's generated tasks need reasoning-gym. Fix: {MATH_INSTALL}"
        ) from e
    unknown = sorted(set(generators) - set(DATASETS))
    if unknown or not generators:
        fix = "pass reasoning-gym names, e.g. {'basic_arithmetic': {'max_terms': 3}}"
        raise ConfigError("generators", dict(generators), f"unknown or empty: {unknown}", fix)
    per = math.ceil(size / len(generators))
    made = {}
    for offset, (name, config) in enumerate(generators.items()):
        try:
            made[name] = reasoning_gym.create_dataset(name, size=per, seed=seed + offset, **config)
        except (TypeError, ValueError, AssertionError) as e:  # reasoning-gym validates by assert
            fix = f"use the fields of reasoning-gym's {name} config"
            raise ConfigError(
                f"generators[{name!r}]", dict(config), str(e) or "invalid", fix
            ) from e
    tasks = []
    for i in range(size):
        name = list(generators)[i % len(generators)]
        entry = made[name][i // len(generators)]
        tasks.append(
            MathTask(
                f"{name}/{i}", entry["question"], str(entry["answer"]), name in EXACT_GENERATORS
            )
        )
    return tuple(tasks)


def reference_answer(text: str, answer_format: AnswerFormat) -> str | None:
    """The reference answer in ``text`` read as ``answer_format`` (``None`` if absent)."""
    if answer_format == "auto":
        answer_format = "gsm8k" if "####" in text else "math" if "\\boxed" in text else "plain"
    if answer_format == "gsm8k":
        if "####" not in text:
            return None
        return text.rsplit("####", 1)[1].strip().replace(",", "") or None
    if answer_format == "math":
        return last_boxed(text)
    return text.strip() or None


def load_file(
    data: str,
    question_key: str,
    answer_key: str,
    answer_format: AnswerFormat,
    split: str | None = None,
) -> tuple[MathTask, ...]:
    """Tasks from a file or a local Hugging Face dataset directory (``split`` picks a split),
    in file order; task ids are row indices. The layouts: ``agentgym.envs.math.sources``."""
    tasks = []
    for index, row in enumerate(read_rows(data, split)):
        question = row.get(question_key) if isinstance(row, dict) else None
        raw = row.get(answer_key) if isinstance(row, dict) else None
        answer = reference_answer(str(raw), answer_format) if raw is not None else None
        if not isinstance(question, str) or answer is None:
            rule = f"row {index} has no {question_key!r} text or no {answer_format} {answer_key!r}"
            fix = "set question_key / answer_key / answer_format to match the file's columns"
            raise ConfigError("tasks", data, rule, fix)
        tasks.append(MathTask(str(index), question, answer))
    if not tasks:
        raise ConfigError("tasks", data, "holds no rows", "add one task per row")
    return tuple(tasks)
