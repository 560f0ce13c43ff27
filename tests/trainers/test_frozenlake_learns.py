"""Acceptance: with only the env and the algorithm named, each algorithm's FrozenLake defaults
take the tiny policy from its starting success to above 0.9 (a full ``agentgym train`` run,
minutes each: slow)."""

from __future__ import annotations

import json

import pytest

from agentgym.trainers.run import RunSpec, train_run


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["grpo", "dapo", "ppo"])
def test_the_default_run_raises_frozenlake_success_above_0_9(algo, tmp_path):
    out = tmp_path / algo
    summary = train_run(
        RunSpec(
            env="agentgym/FrozenLake-v0",
            algo=algo,
            out=str(out),
            seed=0,
            eval_episodes=128,
            show_bar=False,
        )
    )
    start, end = summary["start"], summary["end"]
    assert start["success_rate"] < 0.3  # random moves
    assert end["success_rate"] > 0.9, summary
    assert end["ci95"][0] > start["ci95"][1]  # the intervals do not overlap
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == summary["steps"]
    assert all(row["entropy"] <= 1.3863 for row in rows)  # sampled among the four moves
