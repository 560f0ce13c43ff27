"""``agentgym train --nproc 2`` with a curriculum: both ranks draw the whole batch's tasks, play
their halves and all-gather the outcomes, so rank 0's ``tasks.jsonl`` has every group of every
rank, the two ranks' curriculum states (both in rank 0's checkpoint) are equal, and a resumed
run draws what the uninterrupted one does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from small_runs import train_args

from agentgym.cli import main

ARGS = train_args(
    "--train-env-kwargs", '{"sizes": [3, 4]}', "--nproc", "2",
    group_size=2, max_turns=6, checkpoint_every=2,
)  # fmt: skip
ADAPTIVE = ["--curriculum", "adaptive", "--curriculum-kwargs", "min_tries=4", "floor=0.2"]


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]


def _rank_states(out: Path, step: int) -> list[dict]:
    path = out / "checkpoints" / f"step-{step:08d}" / "trainer" / "state.pt"
    return torch.load(path, weights_only=False)["state"]["source"]["ranks"]


@pytest.mark.slow
def test_adaptive_over_two_ranks_records_every_group_and_resumes_exactly(tmp_path, capsys):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main([*ARGS, *ADAPTIVE, "--steps", "3", "--out", str(straight)]) == 0
    assert main([*ARGS, *ADAPTIVE, "--steps", "2", "--out", str(resumed)]) == 0
    with (resumed / "tasks.jsonl").open("a") as file:  # a killed run's group after its checkpoint
        file.write(json.dumps({"group": 8, "task": 0, "difficulty": 3}) + "\n")
    again = ["train", "--out", str(resumed), "--resume", "--steps", "3", "--no-progress"]
    assert main([*again, "--nproc", "2"]) == 0
    capsys.readouterr()

    records = _records(straight)
    assert [r["group"] for r in records] == list(range(3 * 4))  # 3 updates of 4 groups, 2 ranks
    for record in records:
        assert record["curriculum_task"] == f"difficulty={record['difficulty']}"
        assert record["tries"] == 2
    assert len({r["difficulty"] for r in records}) == 2
    zero, one = _rank_states(straight, 3)
    assert zero["curriculum"] == one["curriculum"]
    assert zero["curriculum"]["batches"] == 3
    assert sum(s["tries"] for s in zero["curriculum"]["stats"].values()) == 3 * 4 * 2
    assert zero["num_records"] == one["num_records"] == 12
    assert _records(resumed) == records
    assert _rank_states(resumed, 3) == [zero, one]


@pytest.mark.slow
def test_uniform_over_two_ranks_records_every_group(tmp_path, capsys):
    out = tmp_path / "uniform"
    assert main([*ARGS, "--steps", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    records = _records(out)
    assert [r["group"] for r in records] == list(range(2 * 4))
    assert {r["curriculum_task"] for r in records} == {"all"}
    assert all(r["tries"] == 2 and r["difficulty"] in (3, 4) for r in records)
    assert len({r["task"] for r in records}) == 8  # each rank's own maps, not rank 0's twice


def test_a_curriculum_over_ranks_with_max_staleness_is_refused_with_the_fix():
    import argparse

    from agentgym.core.errors import ConfigError
    from agentgym.recipes.cli import add_train_arguments, run_from_args
    from agentgym.recipes.run import _curriculum

    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    flags = [*ADAPTIVE, "--train-env-kwargs", '{"sizes": [3, 4]}', "--set", "max_staleness=1"]
    run = run_from_args(parser.parse_args(flags))
    with pytest.raises(ConfigError, match=r"background threads.*max_staleness=0"):
        _curriculum(run, 2)
    assert _curriculum(run, 1).name == "adaptive"  # one process: the thread hears every group
    uniform = run_from_args(parser.parse_args(["--set", "max_staleness=1"]))
    assert _curriculum(uniform, 2).name == "uniform"  # its draws never depend on outcomes
