"""How many torch threads a CPU decode step should use, found by timing steps.

A decode step of a small model is many small kernels. Whether a second thread helps depends on
things the engine cannot see in advance: the model's size, the batch, the machine's load and
OpenMP's wait policy. Under ``OMP_WAIT_POLICY=PASSIVE`` every parallel region wakes a sleeping
thread: the tiny policy's 64 completions of 32 tokens took 0.30 s on two threads and 0.22 s on
one; with spinning threads (``ACTIVE``) two took 0.155 s.

So ``HFEngine`` times its decode steps. For each batch-size bucket (rows rounded up to a power of
two) it runs a few steps at each candidate count in turn and keeps the count with the lowest
median step time; more threads must be at least 5% faster, as they take cores from everything
else. After ``period`` steps of a bucket it measures again, in case the machine changed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

__all__ = ["ThreadTuner"]

_GAIN = 1.05
"""How much faster (median step time) more threads must be to be chosen."""


@dataclass
class _Bucket:
    times: dict[int, list[float]]  # candidate threads -> step times measured this round
    chosen: int | None = None
    since: int = 0  # steps run at ``chosen`` since it was chosen


@dataclass
class ThreadTuner:
    """``threads_for(rows)`` before a decode step, ``record(rows, threads, seconds)`` after it.

    Args:
        most: the most threads to use; the candidates are 1 and ``most``.
        probes: steps timed at each candidate before choosing (the candidates alternate).
        period: steps of a bucket run at its chosen count before it is measured again.
    """

    most: int
    probes: int = 5
    period: int = 1024
    _buckets: dict[int, _Bucket] = field(default_factory=dict, repr=False)

    @property
    def candidates(self) -> tuple[int, ...]:
        return (1, self.most) if self.most > 1 else (1,)

    @property
    def chosen(self) -> dict[int, int]:
        """Bucket (largest row count it holds) -> the thread count chosen for it."""
        return {size: b.chosen for size, b in sorted(self._buckets.items()) if b.chosen is not None}

    def threads_for(self, rows: int) -> int:
        bucket = self._bucket(rows)
        if bucket.chosen is not None:
            return bucket.chosen
        # measuring: the candidate with the fewest samples, so that they alternate
        return min(self.candidates, key=lambda n: (len(bucket.times[n]), n))

    def record(self, rows: int, threads: int, seconds: float) -> None:
        bucket = self._bucket(rows)
        if bucket.chosen is not None:
            bucket.since += 1
            if bucket.since >= self.period:
                bucket.chosen, bucket.since = None, 0
                bucket.times = {n: [] for n in self.candidates}
            return
        bucket.times[threads].append(seconds)
        if all(len(t) >= self.probes for t in bucket.times.values()):
            medians = {n: statistics.median(t) for n, t in bucket.times.items()}
            # More threads must be clearly faster: they also take cores from everything else.
            bucket.chosen = min(
                self.candidates, key=lambda n: (medians[n] * (_GAIN if n > 1 else 1.0), n)
            )

    def _bucket(self, rows: int) -> _Bucket:
        size = 1 << max(rows - 1, 0).bit_length()  # 1, 2, 4, 8, ...
        bucket = self._buckets.get(size)
        if bucket is None:
            bucket = self._buckets[size] = _Bucket({n: [] for n in self.candidates})
        return bucket
