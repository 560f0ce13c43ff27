"""How many torch threads a CPU decode step should use, found by timing steps.

A decode step of a small model is many small kernels. Whether a second thread helps depends on
things the engine cannot see in advance: the model's size, the batch, the machine's load and
OpenMP's wait policy. Under ``OMP_WAIT_POLICY=PASSIVE`` every parallel region wakes a sleeping
thread: the tiny policy's 64 completions of 32 tokens took 0.30 s on two threads and 0.22 s on
one; with spinning threads (``ACTIVE``) two took 0.155 s.

And it changes while the engine runs. Under GNU OpenMP's default policy threads spin between
parallel regions, unless the process holds more OpenMP threads than there are cores: once the
trainer's thread has run a parallel region of its own next to the engine's worker, both teams
spin only briefly, and on two cores the same 64 completions went from 0.13 s on two threads to
0.30 s (0.17 s on one).

So ``HFEngine`` times its decode steps. For each batch-size bucket (rows rounded up to a power of
two) it first runs a few steps at each candidate count in turn, then runs the count whose recent
steps were fastest per row; more threads must be at least 5% faster, as they take cores from
everything else. Every step at the chosen count refreshes its timings, so a count that turns slow
is dropped within a few steps; one step in ``explore`` tries the other count, so a count that
turns fast is found again.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

__all__ = ["ThreadTuner"]

_GAIN = 1.05
"""How much faster (median time per row) more threads must be to be chosen."""


@dataclass
class _Bucket:
    times: dict[int, deque[float]]  # candidate threads -> its latest seconds per row
    chosen: int | None = None
    steps: int = 0  # steps run since the first choice


@dataclass
class ThreadTuner:
    """``threads_for(rows)`` before a decode step, ``record(rows, threads, seconds)`` after it.

    Args:
        most: the most threads to use; the candidates are 1 and ``most``.
        probes: steps timed at each candidate before the first choice (the candidates
            alternate); each candidate's choice rests on the median of its latest ``probes``.
        explore: once a bucket has a choice, one of its steps in this many runs at the other
            candidate.
    """

    most: int
    probes: int = 5
    explore: int = 32
    _buckets: dict[int, _Bucket] = field(default_factory=dict, repr=False)

    @property
    def candidates(self) -> tuple[int, ...]:
        return (1, self.most) if self.most > 1 else (1,)

    @property
    def chosen(self) -> dict[int, int]:
        """Bucket (largest row count it holds) -> the thread count chosen for it now."""
        return {size: b.chosen for size, b in sorted(self._buckets.items()) if b.chosen is not None}

    def threads_for(self, rows: int) -> int:
        bucket = self._bucket(rows)
        if bucket.chosen is None:
            # measuring: the candidate with the fewest samples, so that they alternate
            return min(self.candidates, key=lambda n: (len(bucket.times[n]), n))
        if len(self.candidates) > 1 and bucket.steps % self.explore == self.explore - 1:
            return next(n for n in self.candidates if n != bucket.chosen)
        return bucket.chosen

    def record(self, rows: int, threads: int, seconds: float) -> None:
        bucket = self._bucket(rows)
        if threads not in bucket.times:
            return  # not a candidate (set by hand): nothing to learn
        bucket.times[threads].append(seconds / max(rows, 1))
        if bucket.chosen is not None:
            bucket.steps += 1
        elif not all(len(t) >= self.probes for t in bucket.times.values()):
            return
        medians = {n: statistics.median(t) for n, t in bucket.times.items()}
        # More threads must be clearly faster: they also take cores from everything else.
        bucket.chosen = min(
            self.candidates, key=lambda n: (medians[n] * (_GAIN if n > 1 else 1.0), n)
        )

    def _bucket(self, rows: int) -> _Bucket:
        size = 1 << max(rows - 1, 0).bit_length()  # 1, 2, 4, 8, ...
        bucket = self._buckets.get(size)
        if bucket is None:
            times = {n: deque[float](maxlen=self.probes) for n in self.candidates}
            bucket = self._buckets[size] = _Bucket(times)
        return bucket
