"""``agentgym train --curriculum adaptive`` on FrozenLake with sizes 3-6 as difficulty: the run
folder's ``tasks.jsonl`` records the groups played, and a resumed run draws the tasks (and
writes the records) of the uninterrupted one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from small_runs import train_args

from agentgym.cli import main

ARGS = train_args(
    "--curriculum", "adaptive", "--curriculum-kwargs", "min_tries=4", "floor=0.2",
    "--train-env-kwargs", '{"sizes": [3, 4, 5, 6]}',
    group_size=2, max_turns=6, checkpoint_every=2,
)  # fmt: skip


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_adaptive_curriculum_records_its_tasks_and_resumes_exactly(tmp_path, capsys):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main([*ARGS, "--steps", "3", "--out", str(straight)]) == 0
    assert main([*ARGS, "--steps", "2", "--out", str(resumed)]) == 0
    with (resumed / "tasks.jsonl").open("a") as file:  # a killed run's group after its checkpoint
        file.write(json.dumps({"group": 8, "task": 0, "difficulty": 3}) + "\n")
    assert main(["train", "--out", str(resumed), "--resume", "--steps", "3", "--no-progress"]) == 0
    capsys.readouterr()

    records = _records(straight)
    assert len(records) == 3 * 4  # 3 updates of 4 groups
    assert [r["group"] for r in records] == list(range(12))
    for record in records:
        assert record["difficulty"] in (3, 4, 5, 6)
        assert record["curriculum_task"] == f"difficulty={record['difficulty']}"
        assert record["tries"] == 2
        assert 0 <= record["successes"] <= 2
    assert len({r["difficulty"] for r in records}) > 1
    assert _records(resumed) == records
    metrics = [json.loads(x) for x in (straight / "metrics.jsonl").read_text().splitlines()]
    again = [json.loads(x) for x in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert [m["success_rate"] for m in again] == [m["success_rate"] for m in metrics]
    assert [m["loss"] for m in again] == pytest.approx([m["loss"] for m in metrics])
