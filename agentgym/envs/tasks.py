"""Picking a task for ``reset``: shared by the envs whose tasks are a list with ids."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from agentgym.core.errors import ConfigError

__all__ = ["choose_task"]


class _HasId(Protocol):
    @property
    def task_id(self) -> str: ...


T = TypeVar("T", bound=_HasId)


def choose_task(
    tasks: Sequence[T],
    by_id: Mapping[str, T],
    options: dict[str, Any] | None,
    rng: np.random.Generator,
) -> T:
    """The task ``options["task_id"]`` names (an id or an index), else one drawn from ``rng``.

    Options whose value is ``None`` count as absent; any other key is a ``ConfigError``.
    """
    given = {k: v for k, v in (options or {}).items() if v is not None}
    unknown = sorted(set(given) - {"task_id"})
    if unknown:
        raise ConfigError("options", options, f"has unknown keys {unknown}", "pass 'task_id'")
    if "task_id" not in given:
        return tasks[int(rng.integers(len(tasks)))]
    task_id = given["task_id"]
    if isinstance(task_id, str) and task_id in by_id:
        return by_id[task_id]
    is_index = isinstance(task_id, numbers.Integral) and not isinstance(task_id, bool)
    if is_index and 0 <= int(task_id) < len(tasks):
        return tasks[int(task_id)]
    fix = f"pass an id such as {tasks[0].task_id!r} or an index < {len(tasks)}"
    raise ConfigError("options['task_id']", task_id, "names no task", fix)
