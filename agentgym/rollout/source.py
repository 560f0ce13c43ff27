"""``EpisodeSource``: where ``fit`` gets episodes. The rollout collector is one
(``agentgym.rollout.collector_source.CollectorSource``); a test's synthetic episodes, a replay
buffer or a remote fleet of actors are others.

A source needs only the three methods of ``EpisodeSource``. What else a trainer may read of it is
declared on ``SourceBase``, with its default: a source that has more to say subclasses it, and
``as_source`` gives any other source those defaults. Nothing else of a source is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentgym.core.types import Episode

if TYPE_CHECKING:
    from agentgym.inference.base import InferenceEngine

__all__ = ["EpisodeSource", "SourceBase", "as_source"]


@runtime_checkable
class EpisodeSource(Protocol):
    """Where ``fit`` gets episodes: the rollout collector, or any stand-in."""

    def collect(self, num_groups: int) -> list[Episode]:
        """``num_groups`` groups of ``config.group_size`` episodes (each group's episodes share
        a task and lie next to each other), sampled with the current policy."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The source's position (task order, seeds): saved in every checkpoint."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a position ``state_dict`` returned."""
        ...


class SourceBase:
    """An ``EpisodeSource`` with the optional members a trainer reads, at their defaults.

    Subclass it and implement ``collect``, ``state_dict`` and ``load_state_dict``; set or
    override the members below where the source has something to say.
    """

    engine: InferenceEngine | None = None
    """The engine the source samples with; None: it samples with none (a replay buffer, a
    test's episodes). ``fit`` may replace it by the same server behind weight sync, and an
    ``AsyncSource`` by a copy of the policy while it collects ahead: collect with the engine
    this attribute holds at the time."""

    stats: Mapping[str, float] = MappingProxyType({})
    """Numbers about the last ``collect`` (e.g. a ``ShardedSource``'s timings), added to the
    update's metrics row."""

    seen_tasks: Set[str] = frozenset()
    """The tasks (``info["task_id"]``) played so far: an evaluation can hold out the others."""

    def collect(self, num_groups: int) -> list[Episode]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the source holds open (e.g. a vector env it was given); the default
        holds nothing. Safe to call twice."""


class _Declared(SourceBase):
    """A plain ``EpisodeSource`` with ``SourceBase``'s defaults."""

    def __init__(self, source: EpisodeSource) -> None:
        self.source = source

    def collect(self, num_groups: int) -> list[Episode]:
        return self.source.collect(num_groups)

    def state_dict(self) -> dict[str, Any]:
        return self.source.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.source.load_state_dict(state)


def as_source(source: EpisodeSource) -> SourceBase:
    """``source`` itself when it is a ``SourceBase``; else ``source`` behind ``SourceBase``'s
    defaults (no engine, no stats, no tasks seen, nothing to close)."""
    return source if isinstance(source, SourceBase) else _Declared(source)
