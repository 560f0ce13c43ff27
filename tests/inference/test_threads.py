"""ThreadTuner and HFEngine's per-step thread counts: timed candidates, the choice, and how it
follows the machine."""

from __future__ import annotations

import asyncio

import torch

from agentgym.inference import HFEngine, SamplingParams
from agentgym.inference._threads import ThreadTuner
from agentgym.models import load


def run(tuner: ThreadTuner, rows: int, seconds: dict[int, float], steps: int) -> list[int]:
    """Steps of ``rows`` rows whose time depends on the thread count only; the counts used."""
    used = []
    for _ in range(steps):
        threads = tuner.threads_for(rows)
        used.append(threads)
        tuner.record(rows, threads, seconds[threads])
    return used


def test_candidates_alternate_then_the_faster_is_kept_per_batch_size():
    tuner = ThreadTuner(most=4, probes=3)
    small = run(tuner, rows=3, seconds={1: 0.002, 4: 0.005}, steps=10)
    assert small[:6] == [1, 4, 1, 4, 1, 4]  # alternating, so drift hits both alike
    assert small[6:] == [1] * 4
    large = run(tuner, rows=60, seconds={1: 0.010, 4: 0.004}, steps=10)
    assert large[6:] == [4] * 4
    assert tuner.chosen == {4: 1, 64: 4}  # buckets: rows rounded up to a power of two
    assert run(tuner, rows=4, seconds={1: 1.0, 4: 0.0}, steps=1) == [1]  # 3 and 4 share one


def test_more_threads_must_be_clearly_faster():
    tuner = ThreadTuner(most=2, probes=3)
    run(tuner, rows=8, seconds={1: 0.0100, 2: 0.0097}, steps=6)  # 3% faster: not worth a core
    assert tuner.chosen == {8: 1}
    tuner = ThreadTuner(most=2, probes=3)
    run(tuner, rows=8, seconds={1: 0.0100, 2: 0.0090}, steps=6)
    assert tuner.chosen == {8: 2}


def test_the_median_decides_not_one_slow_step():
    tuner = ThreadTuner(most=2, probes=3)
    times = iter([0.010, 0.004, 0.010, 0.500, 0.010, 0.004])  # 2 threads: one step stalled
    for _ in range(6):
        threads = tuner.threads_for(16)
        tuner.record(16, threads, next(times))
    assert tuner.chosen == {16: 2}


def test_one_step_in_explore_tries_the_other_count():
    tuner = ThreadTuner(most=2, probes=2, explore=8)
    assert run(tuner, rows=2, seconds={1: 0.001, 2: 0.002}, steps=4) == [1, 2, 1, 2]
    used = run(tuner, rows=2, seconds={1: 0.001, 2: 0.002}, steps=16)
    assert [i for i, n in enumerate(used) if n == 2] == [7, 15]
    assert tuner.chosen == {2: 1}  # still slower: the choice stands


def test_a_count_that_turns_slow_is_dropped_within_a_few_steps():
    # Two threads win at first; then something else takes the second core.
    tuner = ThreadTuner(most=2, probes=3, explore=100)
    run(tuner, rows=64, seconds={1: 0.010, 2: 0.006}, steps=6)
    assert tuner.chosen == {64: 2}
    used = run(tuner, rows=64, seconds={1: 0.010, 2: 0.030}, steps=6)
    assert used == [2, 2, 1, 1, 1, 1]  # two slow steps make the median of three slow
    assert tuner.chosen == {64: 1}


def test_a_count_that_turns_fast_is_found_again():
    tuner = ThreadTuner(most=2, probes=3, explore=4)
    run(tuner, rows=8, seconds={1: 0.001, 2: 0.003}, steps=6)
    assert tuner.chosen == {8: 1}
    # The machine changed: two threads now win, seen on the exploring steps only.
    used = run(tuner, rows=8, seconds={1: 0.003, 2: 0.001}, steps=10)
    assert used[:8] == [1, 1, 1, 2, 1, 1, 1, 2]
    assert used[8:] == [2, 2]
    assert tuner.chosen == {8: 2}


def test_times_compare_per_row_within_a_bucket():
    tuner = ThreadTuner(most=2, probes=1)
    tuner.record(33, 1, 0.033)  # 1 ms a row
    tuner.record(64, 2, 0.048)  # 0.75 ms a row: faster, though the step took longer
    assert tuner.chosen == {64: 2}


def test_one_thread_has_nothing_to_choose():
    tuner = ThreadTuner(most=1, probes=2)
    assert run(tuner, rows=5, seconds={1: 0.001}, steps=4) == [1, 1, 1, 1]
    assert tuner.chosen == {8: 1}


class _Fixed(ThreadTuner):
    """Always answers ``answer``, and remembers what it was told."""

    def __init__(self, most: int, answer: int) -> None:
        super().__init__(most)
        self.answer = answer
        self.recorded: list[tuple[int, int]] = []

    def threads_for(self, rows: int) -> int:
        return self.answer

    def record(self, rows: int, threads: int, seconds: float) -> None:
        self.recorded.append((rows, threads))


def test_engine_runs_prefills_on_every_thread_and_decode_steps_as_the_tuner_says():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model, tok = load(seed=0)
        engine = HFEngine(model, tok)  # threads=None on a CPU: tuned
        assert engine._tuner is not None
        assert engine._tuner.most == 2
        assert HFEngine(model, tok, threads=2)._tuner is None  # a fixed count is kept
        torch.set_num_threads(1)
        assert HFEngine(model, tok)._tuner is None  # one thread: nothing to choose
        torch.set_num_threads(2)
        engine._tuner = _Fixed(2, answer=1)
        seen: list[tuple[int, int]] = []  # (rows joining, worker threads) per step
        step = engine._batch.step

        def watched(joining, version):
            seen.append((len(joining), torch.get_num_threads()))
            return step(joining, version)

        engine._batch.step = watched  # type: ignore[method-assign]

        async def go():
            sampling = SamplingParams(max_tokens=6, ignore_eos=True, seed=1)
            done = await asyncio.gather(
                *(engine.generate([5, 6, 7 + i], sampling) for i in range(3))
            )
            await engine.close()
            return done

        done = asyncio.run(go())
    finally:
        torch.set_num_threads(before)
    assert [len(c.token_ids) for c in done] == [6, 6, 6]
    assert seen[0] == (3, 2)  # the prefill: every thread
    assert seen[1:] == [(0, 1)] * 5  # decode steps: the tuner's count
    assert engine._tuner.recorded == [(3, 1)] * 5
