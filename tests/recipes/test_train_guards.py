"""``agentgym train`` with failure-mode guards: a run forced into entropy collapse by an absurd
learning rate is rolled back, then stopped, and says so (stdout, ``summary.json``,
``guards.jsonl``); ``--guards off`` and the ``[guards]`` table reach the run."""

from __future__ import annotations

import json

import pytest
from small_runs import train_args

from agentgym.cli import main
from agentgym.core.errors import ConfigError
from agentgym.recipes.cli import run_from_args

ARGS = train_args()

GUARDS = """
[guards]
max_rollbacks = 1

[guards.entropy_collapse]
patience = 2
"""


@pytest.mark.slow
def test_an_absurd_learning_rate_is_rolled_back_then_stopped(tmp_path, capsys):
    (tmp_path / "run.toml").write_text(GUARDS)
    out = tmp_path / "run"
    absurd = ["--set", "learning_rate=0.5", "--set", "num_minibatches=1"]
    args = ["--config", str(tmp_path / "run.toml"), *absurd, "--steps", "12", "--out", str(out)]
    assert main([*ARGS, *args]) == 0
    printed = capsys.readouterr().out

    summary = json.loads((out / "summary.json").read_text())
    guards = summary["guards"]
    assert guards["stopped"]
    assert guards["rollbacks"] == 1
    assert guards["lr_scale"] == 0.5
    rollback, stop = guards["events"]
    assert (rollback["monitor"], rollback["action"]) == ("entropy_collapse", "rollback")
    assert rollback["value"] < rollback["threshold"] == 0.05
    assert rollback["to_update"] <= rollback["since_update"] - 2  # before the collapse began
    assert (stop["monitor"], stop["action"]) == ("entropy_collapse", "stop")
    assert "max_rollbacks=1" in stop["reason"]
    assert summary["steps"] < 12
    logged = [json.loads(line) for line in (out / "guards.jsonl").read_text().splitlines()]
    assert logged == guards["events"]
    assert "guard entropy_collapse" in printed
    assert "rolled back from update" in printed
    assert (out / "metrics.rolled_back.jsonl").read_text().strip()
    assert (out / "curves.png").is_file()


def _args(*flags: str):
    import argparse

    from agentgym.recipes.cli import add_train_arguments

    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    return parser.parse_args(list(flags))


def test_guards_flag_and_table_reach_the_run(tmp_path):
    (tmp_path / "run.toml").write_text(GUARDS)
    run = run_from_args(_args("--config", str(tmp_path / "run.toml"), "--guards", "off"))
    assert dict(run.guards) == {"max_rollbacks": 1, "entropy_collapse": {"patience": 2}} | {
        "enabled": False
    }
    assert dict(run_from_args(_args()).guards) == {}
    (tmp_path / "bad.toml").write_text("[guards.kl_spike]\naction = 'explode'\n")
    with pytest.raises(ConfigError, match=r"guards\.kl_spike\.action.*set by .*bad\.toml"):
        run_from_args(_args("--config", str(tmp_path / "bad.toml")))


def test_resolved_guards_are_recorded_in_run_json_format(tmp_path):
    run = run_from_args(_args("--guards", "off", "--out", str(tmp_path / "r")))
    assert run.to_dict()["guards"] == {"enabled": False}  # what run.json keeps for --resume
