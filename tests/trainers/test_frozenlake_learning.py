"""The main job learns: PPO, GRPO and DAPO each take the tiny policy on FrozenLake from its
starting success to above 0.9 with the env's training defaults (slow: minutes per algorithm)."""

from __future__ import annotations

import json

import pytest

from agentgym.trainers.run import RunSpec, train_run


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["grpo", "dapo", "ppo"])
def test_the_default_run_takes_frozenlake_success_above_0_9(algo, tmp_path):
    out = tmp_path / algo
    spec = RunSpec(
        env="agentgym/FrozenLake-v0", algo=algo, out=str(out), eval_episodes=128, show_bar=False
    )
    summary = train_run(spec)
    start, end = summary["start"], summary["end"]
    assert start["success_rate"] < 0.3  # it starts from format only
    assert end["success_rate"] > 0.9, json.dumps(summary, indent=2)
    assert end["ci95"][0] > start["ci95"][1]  # learned, beyond evaluation noise
    assert summary["end_unseen_maps"]["episodes"] > 0
