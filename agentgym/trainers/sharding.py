"""Data-parallel training over ranks that each collect their share of a batch
(``agentgym.rollout.sharded_source.ShardedSource``, re-exported here): ``reduce_metrics`` joins
what ranks measured on their own (wall times) after a step; ``any_rank`` lets one rank's stop
request (Ctrl-C) end every rank after the same update.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from agentgym.rollout.sharded_source import ShardedSource
from agentgym.trainers.backends import Backend

__all__ = ["ShardedSource", "any_rank", "reduce_metrics"]


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
