"""Curricula: which tasks the collector plays next, chosen from per-task outcomes.

::

    tasks = task_set("agentgym/FrozenLake-v0", {"sizes": [3, 4, 5, 6]})   # one task per size
    curriculum = make_curriculum("adaptive", tasks, seed=0)
    source = CollectorSource(engine, env, group_size=8, curriculum=curriculum)

A ``Task`` is a set of reset options (``{"difficulty": 6}``: any 6x6 map, the seed picks which;
``{"difficulty": 6, "task_id": 17}``: one map) with a key for its statistics. The collector asks
``next_tasks(n)`` for a batch's ``n`` groups, plays group ``j`` with reset seed ``seed + j`` and
the options of task ``j``, and reports each group's successes with ``update``. Three samplers:

- ``uniform`` (the default): no options at all, so the seed alone picks the task, exactly as
  without a curriculum; over pinned tasks (``tasks_per_level``), each group draws one of them
  with equal probability.
- ``schedule``: the env's difficulty levels, easiest first; the current level's tasks (and,
  with probability ``review``, an earlier level's) until its recent success reaches
  ``threshold`` over ``min_tries`` episodes, or for ``updates_per_level`` batches.
- ``adaptive``: tasks weighted by learnability ``p * (1 - p)`` (``p``: the recent success rate,
  with one success and one failure of prior), mixed with ``floor`` of uniform draws so tasks
  never solved are revisited; a task whose recent success is ``>= retire_at`` over ``min_tries``
  episodes is retired (drawn only with probability ``revisit``, and back in play when it fails).

"Recent" counts decay by ``decay`` per batch. Draws come from a generator seeded with
``(seed, batches drawn)``; ``state_dict`` holds that count and the statistics, so a resumed run
draws the tasks the uninterrupted one would have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from agentgym.core.difficulty import DIFFICULTY, difficulty_levels
from agentgym.core.errors import ConfigError

__all__ = [
    "CURRICULA",
    "Adaptive",
    "Curriculum",
    "Sampler",
    "Schedule",
    "Task",
    "TaskStats",
    "Uniform",
    "make_curriculum",
    "task_set",
]


@dataclass(frozen=True)
class Task:
    """What a group plays: reset options (None: the seed alone) and a key for its statistics."""

    key: str
    difficulty: Any = None
    options: Mapping[str, Any] | None = None


@dataclass
class TaskStats:
    """A task's outcomes: all of them, and the recent ones (decayed per batch)."""

    tries: int = 0
    successes: int = 0
    recent_tries: float = 0.0
    recent_successes: float = 0.0

    @property
    def rate(self) -> float:
        """The recent success rate, with one success and one failure of prior."""
        return (self.recent_successes + 1.0) / (self.recent_tries + 2.0)


@runtime_checkable
class Curriculum(Protocol):
    """A task sampler fed by outcomes; see the module docstring."""

    def next_tasks(self, n: int) -> list[Task]:
        """The tasks of the next ``n`` groups."""
        ...

    def update(self, task: Task, outcomes: Sequence[bool | None]) -> None:
        """Record a group's outcomes (``None``: unknown, not counted)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@dataclass
class Sampler:
    """What the three samplers share: per-task statistics, the seeded draws, the state."""

    tasks: Sequence[Task]
    seed: int = 0
    decay: float = 0.9
    """Recent counts are multiplied by this once per batch drawn."""
    batches: int = 0
    stats: dict[str, TaskStats] = field(default_factory=dict)
    name = "sampler"

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ConfigError("tasks", self.tasks, "is empty", "pass at least one Task")
        if len({t.key for t in self.tasks}) != len(self.tasks):
            raise ConfigError("tasks", [t.key for t in self.tasks], "repeat a key", "dedupe")
        _check_fraction("decay", self.decay, "pass e.g. decay=0.9 (1.0: never forget)")
        self.stats = {t.key: TaskStats() for t in self.tasks}

    def next_tasks(self, n: int) -> list[Task]:
        for stats in self.stats.values():
            stats.recent_tries *= self.decay
            stats.recent_successes *= self.decay
        rng = np.random.default_rng([self.seed, self.batches])
        self.batches += 1
        return [self._draw(rng) for _ in range(n)]

    def _draw(self, rng: np.random.Generator) -> Task:
        return self.tasks[int(rng.integers(len(self.tasks)))]

    def update(self, task: Task, outcomes: Sequence[bool | None]) -> None:
        known = [bool(o) for o in outcomes if o is not None]
        stats = self.stats[task.key]
        stats.tries += len(known)
        stats.successes += sum(known)
        stats.recent_tries += len(known)
        stats.recent_successes += sum(known)

    def state_dict(self) -> dict[str, Any]:
        stats = {key: vars(s).copy() for key, s in self.stats.items()}
        return {"name": self.name, "batches": self.batches, "stats": stats, **self._extra()}

    def _extra(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("name") != self.name:
            raise ConfigError(
                "curriculum",
                self.name,
                f"differs from the checkpoint's {state.get('name')!r}",
                f"resume with --curriculum {state.get('name')}",
            )
        missing = sorted(set(self.stats) - set(state["stats"]))
        if missing:
            raise ConfigError(
                "curriculum tasks", missing, "are not in the checkpoint", "resume with its env"
            )
        self.batches = int(state["batches"])
        self.stats = {key: TaskStats(**state["stats"][key]) for key in self.stats}


@dataclass
class Uniform(Sampler):
    """Today's behaviour over ``[Task("all")]`` (no reset options; the seed picks the task), or
    equal draws over a set of pinned tasks (``tasks_per_level``; see the module)."""

    name = "uniform"


@dataclass
class Schedule(Sampler):
    """Difficulty levels in order, moving on by success or by batches (see the module)."""

    threshold: float = 0.8
    min_tries: int = 32
    updates_per_level: int | None = None
    """Move on after this many batches at a level; None: by success (``threshold``)."""
    review: float = 0.2
    level: int = 0
    batches_at_level: int = 0
    name = "schedule"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_fraction("threshold", self.threshold, "pass e.g. threshold=0.8")
        _check_fraction("review", self.review, "pass e.g. review=0.2 (0: never)")
        self.levels = list(dict.fromkeys(t.difficulty for t in self.tasks))

    def next_tasks(self, n: int) -> list[Task]:
        if self._should_advance():
            self.level, self.batches_at_level = self.level + 1, 0
        self.batches_at_level += 1
        return super().next_tasks(n)

    def _should_advance(self) -> bool:
        if self.level + 1 >= len(self.levels):
            return False
        if self.updates_per_level is not None:
            return self.batches_at_level >= self.updates_per_level
        current = [self.stats[t.key] for t in self._at(self.level)]
        tries = sum(s.recent_tries for s in current)
        rate = sum(s.recent_successes for s in current) / max(tries, 1e-9)
        return tries >= self.min_tries and rate >= self.threshold

    def _at(self, level: int) -> list[Task]:
        return [t for t in self.tasks if t.difficulty == self.levels[level]]

    def _draw(self, rng: np.random.Generator) -> Task:
        level = self.level
        if level > 0 and rng.random() < self.review:
            level = int(rng.integers(level))
        pool = self._at(level)
        return pool[int(rng.integers(len(pool)))]

    def _extra(self) -> dict[str, Any]:
        return {"level": self.level, "batches_at_level": self.batches_at_level}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.level, self.batches_at_level = int(state["level"]), int(state["batches_at_level"])


@dataclass
class Adaptive(Sampler):
    """Learnability-weighted draws, solved tasks retired, failures revisited (see the module)."""

    retire_at: float = 0.9
    min_tries: int = 32
    floor: float = 0.1
    revisit: float = 0.05
    name = "adaptive"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("retire_at", "floor", "revisit"):
            _check_fraction(name, getattr(self, name), f"pass a fraction, e.g. {name}=0.1")

    def retired(self, task: Task) -> bool:
        stats = self.stats[task.key]
        return stats.recent_tries >= self.min_tries and stats.rate >= self.retire_at

    def probabilities(self) -> np.ndarray:
        """The next draw's probability of each task (in ``tasks`` order)."""
        retired = np.array([self.retired(t) for t in self.tasks])
        if retired.all():
            return np.full(len(self.tasks), 1.0 / len(self.tasks))
        rates = np.array([self.stats[t.key].rate for t in self.tasks])
        weights = np.where(retired, 0.0, rates * (1.0 - rates))
        active = ~retired
        probs = (1.0 - self.floor) * weights / weights.sum() + self.floor * active / active.sum()
        if retired.any():
            probs = (1.0 - self.revisit) * probs + self.revisit * retired / retired.sum()
        return probs / probs.sum()

    def next_tasks(self, n: int) -> list[Task]:
        self._probs: np.ndarray | None = None
        return super().next_tasks(n)

    def _draw(self, rng: np.random.Generator) -> Task:
        if self._probs is None:  # once per batch, after the decay
            self._probs = self.probabilities()
        return self.tasks[int(rng.choice(len(self.tasks), p=self._probs))]


CURRICULA: dict[str, type[Sampler]] = {
    "uniform": Uniform,
    "schedule": Schedule,
    "adaptive": Adaptive,
}


def make_curriculum(
    name: str, tasks: Sequence[Task], *, seed: int = 0, **params: Any
) -> Sampler:
    """The sampler ``name`` (uniform, schedule, adaptive) over ``tasks`` with ``params``."""
    if name not in CURRICULA:
        raise ConfigError("curriculum", name, f"is not one of {sorted(CURRICULA)}", "pick one")
    if name == "uniform" and not any(t.options and "task_id" in t.options for t in tasks):
        tasks = [Task("all")]  # levels alone: the seed draws them, as without a curriculum
    elif len({t.difficulty for t in tasks}) < 2 and name == "schedule":
        raise ConfigError(
            "curriculum",
            name,
            "needs an env with two or more difficulty levels",
            "declare difficulty_levels on the env (FrozenLake: --train-env-kwargs "
            "'{\"sizes\": [3, 4, 5, 6]}')",
        )
    try:
        return CURRICULA[name](tasks=list(tasks), seed=seed, **params)
    except TypeError as error:
        raise ConfigError(
            "curriculum_kwargs", params, f"do not fit the {name} curriculum: {error}",
            f"pass only the fields of agentgym.rollout.curriculum.{CURRICULA[name].__name__}",
        ) from None


def task_set(
    env: Any, env_kwargs: Mapping[str, Any] | None = None, *, tasks_per_level: int | None = None,
    seed: int = 0,
) -> list[Task]:
    """The tasks of ``env`` (an env id, made once with ``env_kwargs``, or an env): one per
    declared difficulty level (the seed picks the level's task), or ``tasks_per_level`` pinned
    task ids per level; ``[Task("all")]`` for an env without levels."""
    if isinstance(env, str):
        import gymnasium as gym

        made = gym.make(env, disable_env_checker=True, **dict(env_kwargs or {}))
        try:
            levels = difficulty_levels(made)
        finally:
            made.close()
    else:
        levels = difficulty_levels(env)
    if levels is None:
        return [Task("all")]
    if tasks_per_level is None:
        return [Task(f"{DIFFICULTY}={v}", v, {DIFFICULTY: v}) for v in levels]
    rng = np.random.default_rng([seed, 0x7A5C])
    return [
        Task(f"{DIFFICULTY}={v}/task_id={k}", v, {DIFFICULTY: v, "task_id": k})
        for v in levels
        for k in map(int, rng.choice(2**31, size=tasks_per_level, replace=False))
    ]


def _check_fraction(name: str, value: object, fix: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(name, value, "must be a number in [0, 1]", fix)
