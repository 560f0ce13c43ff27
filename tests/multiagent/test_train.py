"""Training one role: ``agentgym train --env agentgym/TicTacToe-v0 --train-roles o`` runs,
gives the trainer only o's episodes (x is the scripted opponent), and resumes exactly."""

from __future__ import annotations

import json

import pytest

from agentgym.cli import main
from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError
from agentgym.inference import HFEngine
from agentgym.models import load
from agentgym.multiagent.source import MultiAgentSource

TTT = "agentgym/TicTacToe-v0"


@pytest.fixture
def recorded(monkeypatch):
    """Every batch the source hands the trainer."""
    batches: list[list] = []
    collect = MultiAgentSource.collect

    def recording(self, num_groups):
        episodes = collect(self, num_groups)
        batches.append(episodes)
        return episodes

    monkeypatch.setattr(MultiAgentSource, "collect", recording)
    return batches


@pytest.mark.slow  # two short runs of the tiny policy: ~5 s alone, 20-30 s beside other jobs
def test_train_trains_only_the_chosen_role_and_resumes(tmp_path, recorded):
    out = tmp_path / "run"
    argv = [
        *("--env", TTT, "--train-roles", "o", "--role-policies", "x=heuristic"),
        *("--action-choices", "--init", "random", "--out", str(out), "--no-progress"),
        *("--set", "group_size=4", "--set", "batch_size=8", "--set", "num_minibatches=1"),
        *("--max-new-tokens", "8", "--eval-episodes", "4", "--checkpoint-every", "1"),
    ]
    assert main(["train", "--steps", "2", *argv]) == 0
    assert len(recorded) == 2
    for batch in recorded:
        assert len(batch) == 8
        assert {e.reset_info["role"] for e in batch} == {"o"}
        assert [e.group for e in batch] == [0] * 4 + [1] * 4
        for episode in batch:
            # o's own turns: one sampled cell digit each (the fences and <|im_end|> are forced)
            assert sum(episode.loss_mask) == len(episode.turns) >= 1
            # the heuristic x opens in the centre, and o's conversation says so
            assert episode.messages[1]["content"].startswith("X played 5.")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    assert all(row["episodes"] == 8 for row in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["start"]["episodes"] == summary["end"]["episodes"] == 4
    run = json.loads((out / "run.json").read_text())["run"]
    assert run["train_roles"] == "o"
    assert run["role_policies"]["x"] == "heuristic"  # the recipe's o = "random" is not used

    seeds_before = [e.seed for batch in recorded for e in batch]
    recorded.clear()
    assert main(["train", "--steps", "3", "--resume", *argv]) == 0
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").open()] == [1, 2, 3]
    assert seeds_before == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4  # reset seed = game group
    assert [e.seed for e in recorded[0]] == [4] * 4 + [5] * 4  # on from the checkpoint


def test_a_source_continues_exactly_from_its_state():
    model, tok = load(seed=0)
    engine = HFEngine(model, tok, seed=0)
    kwargs = {"train_roles": ["x", "o"], "group_size": 2, "seed": 5, "action_choices": True}
    try:
        a = MultiAgentSource(engine, TTT, **kwargs, max_tokens=8)
        a.collect(2)
        state = a.state_dict()
        following = a.collect(4)
        b = MultiAgentSource(engine, TTT, **kwargs, max_tokens=8)
        b.load_state_dict(state)
        again = b.collect(4)
    finally:
        run_sync(engine.close())
    assert [e.token_ids for e in again] == [e.token_ids for e in following]
    assert [(e.reset_info["role"], e.group, e.seed) for e in again][::2] == [
        ("x", 0, 6), ("o", 1, 6), ("x", 2, 7), ("o", 3, 7)
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="multiple of the 2 trained roles"):
        b.collect(3)
    with pytest.raises(ConfigError, match="trained roles"):
        MultiAgentSource(engine, TTT, **kwargs, policies={"x": "random"})
    with pytest.raises(ConfigError, match="roles of"):
        MultiAgentSource(engine, TTT, train_roles=["z"], group_size=2)


def test_agentgym_eval_refuses_a_multi_agent_env_and_names_the_way(capsys):
    assert main(["eval", "--env", TTT, "--episodes", "2"]) == 2
    assert "multi-agent env" in capsys.readouterr().err
