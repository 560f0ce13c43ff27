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

``reduce_metrics`` joins what ranks measured on their own (wall times) after a step; ``any_rank``
lets one rank's stop request (Ctrl-C) end every rank after the same update.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import torch

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.trainers.backends import Backend
from agentgym.trainers.collector import episode_task, shard_size
from agentgym.trainers.source import EpisodeSource

__all__ = ["ShardedSource", "any_rank", "reduce_metrics"]


class ShardedSource:
    """The global batch from every rank's share of it; see the module docstring.

    Args:
        local: This rank's source: ``collect(G)`` returns the rank's share of the ``G`` groups
            (e.g. ``CollectorSource(..., rank=r, world_size=W)``), and its position counts
            groups of the whole batch, so it is the same on every rank.
        backend: The trainer's backend (its process group gathers the shares).
    """

    def __init__(self, local: EpisodeSource, backend: Backend) -> None:
        self.local, self.backend = local, backend
        self.seen_tasks: set[str] = set()
        """Tasks played by any rank (an evaluation can hold out the others)."""
        self.stats: dict[str, float] = {}
        """The last collect's timings: ``rank_collect_s`` (mean over ranks of a rank's own
        collection), ``rank_collect_s_max`` (the slowest rank's) and ``gather_s`` (rank 0's wait
        for the others plus the transfer)."""

    def collect(self, num_groups: int) -> list[Episode]:
        if threading.current_thread() is not threading.main_thread():
            raise ConfigError(
                "ShardedSource.collect",
                threading.current_thread().name,
                "is a collective and was called outside the main thread",
                "wrap the background source: ShardedSource(AsyncSource(local), backend)",
            )
        shard_size(num_groups, self.backend.world_size)
        start = time.perf_counter()
        mine = self.local.collect(num_groups)
        collected = time.perf_counter()
        shares = self.backend.all_gather_object((mine, collected - start))
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
        ranks = self.backend.all_gather_object(self.local.state_dict())
        return {"ranks": ranks, "seen_tasks": sorted(self.seen_tasks)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """This rank's local state from a ``state_dict`` of as many ranks."""
        ranks = state["ranks"]
        if len(ranks) != self.backend.world_size:
            raise ConfigError(
                "source state",
                f"{len(ranks)} ranks",
                f"does not match this run's {self.backend.world_size} ranks",
                f"resume with {len(ranks)} processes",
            )
        self.local.load_state_dict(ranks[self.backend.rank])
        self.seen_tasks = set(state.get("seen_tasks", ()))


def reduce_metrics(metrics: Mapping[str, float], backend: Backend) -> dict[str, float]:
    """``metrics`` joined over ranks, the same on every rank: a value every rank reports alike
    (everything computed from the global batch: losses, rewards, success) is kept as it is; one
    that differs (a rank's own wall time, throughput) becomes the mean over the ranks that
    report it. Collective (main thread); one process: ``metrics`` unchanged."""
    if backend.world_size == 1:
        return dict(metrics)
    every = backend.all_gather_object(dict(metrics))
    joined: dict[str, float] = {}
    for key in sorted({k for m in every for k in m}):
        values = [float(m[key]) for m in every if key in m]
        same = all(v == values[0] or (v != v and values[0] != values[0]) for v in values)
        joined[key] = values[0] if same else sum(values) / len(values)
    return joined


def any_rank(flag: bool, backend: Backend) -> bool:
    """Whether ``flag`` is set on any rank (collective; one process: ``flag``)."""
    if backend.world_size == 1:
        return flag
    return bool(backend.all_reduce(torch.tensor([float(flag)])).item() > 0)
