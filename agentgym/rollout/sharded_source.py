"""Data-parallel collection: each rank plays its share of a batch, and every rank trains on
the whole of it.

``Trainer.step`` takes the global batch, the same on every rank, and deals its rows to the
ranks. Under ``deepspeed`` / ``torchrun`` with ``W`` processes, ``ShardedSource`` gets that
batch without any rank playing it all::

    local = CollectorSource(engine, env, group_size=8, rank=rank, world_size=W)
    source = ShardedSource(local, trainer.backend)
    fit(trainer, source, steps=100, out="runs/r1")

Of the ``G`` groups ``fit`` asks for, rank ``r`` plays groups ``r * G / W`` to
``(r + 1) * G / W - 1`` of the batch with its own envs and engine (an in-process engine on its
device, or a shared server), with the reset and sampling seeds one process would give them;
groups never straddle ranks. The shares are then all-gathered (pickled episodes over the
process group) and joined in rank order: the batch one process would have collected, in its
order.

The gather is a collective: it runs in the caller's thread, which must be the main thread of
every rank. A source that collects ahead in a background thread goes *inside*
(``ShardedSource(AsyncSource(local))``), never around it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.inference.base import InferenceEngine
from agentgym.rollout.collector_source import episode_task, shard_size
from agentgym.rollout.source import EpisodeSource, SourceBase, as_source

__all__ = ["ProcessGroup", "ShardedSource"]


class ProcessGroup(Protocol):
    """The ranks a ``ShardedSource`` gathers over (a trainer's backend is one)."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank (collective, main thread)."""
        ...


class ShardedSource(SourceBase):
    """The global batch from every rank's share of it; see the module docstring.

    Args:
        local: This rank's source: ``collect(G)`` returns the rank's share of the ``G`` groups
            (e.g. ``CollectorSource(..., rank=r, world_size=W)``), and its position counts
            groups of the whole batch, so it is the same on every rank.
        group: The ranks (the trainer's backend: its process group gathers the shares).
    """

    def __init__(self, local: EpisodeSource, group: ProcessGroup) -> None:
        self.local = local
        """This rank's source (``fit`` wraps it in an ``AsyncSource`` to collect ahead)."""
        self.group = group
        self.seen_tasks: set[str] = set()
        """Tasks played by any rank (an evaluation can hold out the others)."""
        self.stats: dict[str, float] = {}
        """The last collect's timings: ``rank_collect_s`` (mean over ranks of a rank's own
        collection), ``rank_collect_s_max`` (the slowest rank's) and ``gather_s`` (rank 0's wait
        for the others plus the transfer)."""

    @property  # type: ignore[override]
    def engine(self) -> InferenceEngine | None:
        """The local source's engine (``SourceBase.engine``)."""
        return as_source(self.local).engine

    @engine.setter
    def engine(self, engine: InferenceEngine | None) -> None:
        as_source(self.local).engine = engine

    def collect(self, num_groups: int) -> list[Episode]:
        if threading.current_thread() is not threading.main_thread():
            raise ConfigError(
                "ShardedSource.collect",
                threading.current_thread().name,
                "is a collective and was called outside the main thread",
                "wrap the background source: ShardedSource(AsyncSource(local), backend)",
            )
        shard_size(num_groups, self.group.world_size)
        start = time.perf_counter()
        mine = self.local.collect(num_groups)
        collected = time.perf_counter()
        shares = self.group.all_gather_object((mine, collected - start))
        episodes = [episode for share, _ in shares for episode in share]
        times = [seconds for _, seconds in shares]
        self.stats = {
            "rank_collect_s": sum(times) / len(times),
            "rank_collect_s_max": max(times),
            "gather_s": time.perf_counter() - collected,
        }
        self.seen_tasks.update(t for t in map(episode_task, episodes) if t is not None)
        return episodes

    def state_dict(self) -> dict[str, Any]:
        """Every rank's local state (rank 0 alone writes the checkpoint's; a local source may
        hold its own share of batches collected ahead) and the tasks any rank played.
        Collective: every rank calls it, in the main thread."""
        ranks = self.group.all_gather_object(self.local.state_dict())
        return {"ranks": ranks, "seen_tasks": sorted(self.seen_tasks)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """This rank's local state from a ``state_dict`` of as many ranks."""
        ranks = state["ranks"]
        if len(ranks) != self.group.world_size:
            raise ConfigError(
                "source state",
                f"{len(ranks)} ranks",
                f"does not match this run's {self.group.world_size} ranks",
                f"resume with {len(ranks)} processes",
            )
        self.local.load_state_dict(ranks[self.group.rank])
        self.seen_tasks = set(state.get("seen_tasks", ()))

    def close(self) -> None:
        """Close the local source (``SourceBase.close``)."""
        as_source(self.local).close()
