"""The main job: with only the env named, ``agentgym train``'s FrozenLake defaults (GRPO) take
the tiny policy from random moves to most episodes won (a full run, minutes: slow).

The issue's target is success above 0.9 for PPO, GRPO and DAPO. Measured so far (README): GRPO
ends at 0.82 sampled at temperature 1 (0.92 greedy), so this guards the learning curve, not the
target; DAPO and PPO are not checked here yet."""

from __future__ import annotations

import json

import pytest

from agentgym.trainers.run import RunSpec, train_run


@pytest.mark.slow
def test_the_default_frozenlake_run_learns_to_win_most_episodes(tmp_path):
    out = tmp_path / "grpo"
    summary = train_run(
        RunSpec(
            env="agentgym/FrozenLake-v0", out=str(out), seed=0, eval_episodes=128, show_bar=False
        )
    )
    start, end = summary["start"], summary["end"]
    assert start["success_rate"] < 0.3  # random moves
    assert end["success_rate"] > 0.6, summary
    assert end["ci95"][0] > start["ci95"][1]  # the intervals do not overlap
    assert summary["first_batch_success_0.9"] is not None  # some batch won 0.9 of its episodes
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == summary["steps"] == 150
    assert all(row["entropy"] <= 1.3863 for row in rows)  # sampled among the four moves
