"""A curriculum over data-parallel ranks (``CollectorSource(gather=...)``): every rank draws the
whole batch's tasks and plays its slice; the groups' outcomes are all-gathered, so every rank's
curriculum equals the one a single process holds, and the records cover every rank's groups."""

from __future__ import annotations

import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest

from agentgym import models
from agentgym.core.errors import ConfigError
from agentgym.rollout.collector_source import CollectorSource
from agentgym.rollout.curriculum import Task, Uniform, make_curriculum, task_set

sys.path.insert(0, str(Path(__file__).parents[1] / "rollout"))
from toys import ScriptedEngine

ENV = "agentgym/FrozenLake-v0"
KWARGS = {"tool": False, "sizes": [3, 4, 5, 6]}
DIRECTIONS = ("left", "down", "right", "up")


class ThreadGather:
    """``all_gather_object`` between threads standing in for ranks (a barrier and slots)."""

    def __init__(self, world_size: int) -> None:
        self.slots: list[Any] = [None] * world_size
        self.barrier = threading.Barrier(world_size, timeout=60)

    def for_rank(self, rank: int):
        def gather(obj: Any) -> list[Any]:
            self.slots[rank] = obj
            self.barrier.wait()
            gathered = list(self.slots)
            self.barrier.wait()  # every rank has read before the next gather writes
            return gathered

        return gather


def _source(rank: int, world_size: int, records: list, gather: Any = None) -> CollectorSource:
    tokenizer = models.load_tokenizer()
    engine = ScriptedEngine(
        tokenizer, reply=lambda prompt, n: f"```{DIRECTIONS[zlib.crc32(prompt.encode()) % 4]}```"
    )
    curriculum = make_curriculum("adaptive", task_set(ENV, KWARGS), seed=3, min_tries=4)
    return CollectorSource(
        engine, ENV, group_size=2, seed=3, env_kwargs=KWARGS, max_turns=3, max_tokens=8,
        curriculum=curriculum, rank=rank, world_size=world_size, gather=gather,
        on_records=lambda rows, first: records.__setitem__(slice(first, None), rows),
    )


def test_two_ranks_hear_every_group_and_match_one_process():
    single: list = []
    one = _source(0, 1, single)
    for _ in range(3):
        one.collect(4)

    hub = ThreadGather(2)
    rows: list[list] = [[], []]
    ranks = [_source(r, 2, rows[r], hub.for_rank(r)) for r in range(2)]
    errors: list[BaseException] = []

    def play(source: CollectorSource) -> None:
        try:
            for _ in range(3):
                source.collect(4)
        except BaseException as error:  # reported below: a thread's failure fails the test
            errors.append(error)
            hub.barrier.abort()

    threads = [threading.Thread(target=play, args=(s,)) for s in ranks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert [r["group"] for r in rows[0]] == list(range(12))  # every group, in group order
    assert rows[0] == rows[1] == single
    assert ranks[0].curriculum.state_dict() == ranks[1].curriculum.state_dict()
    assert ranks[0].curriculum.state_dict() == one.curriculum.state_dict()
    assert ranks[0].num_records == 12
    assert len({r["difficulty"] for r in single}) > 1


def test_without_gather_ranks_are_refused_a_curriculum_that_learns_from_outcomes():
    with pytest.raises(ConfigError, match=r"Adaptive curriculum over 2 ranks.*gather="):
        _source(1, 2, [])
    rows: list = []
    uniform = Uniform([Task("all")], seed=3)  # its draws never depend on outcomes
    source = CollectorSource(
        _source(0, 1, []).engine, ENV, group_size=2, seed=3, env_kwargs=KWARGS, max_turns=3,
        max_tokens=8, curriculum=uniform, rank=1, world_size=2,
        on_records=lambda records, first: rows.extend(records),
    )
    source.collect(4)
    assert [r["group"] for r in rows] == [2, 3]  # this rank's own groups only
