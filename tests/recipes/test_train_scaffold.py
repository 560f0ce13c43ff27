"""``agentgym train --scaffold react``: training and evaluation play through the ReAct scaffold."""

from __future__ import annotations

import json

import pytest

from agentgym.cli import main
from agentgym.error import ConfigError
from agentgym.recipes.config import RunConfig
from agentgym.rollout import MemoryScaffold, ReActScaffold
from agentgym.rollout import collect as real_collect

SMALL = [
    "--set", "group_size=4", "--set", "batch_size=8", "--set", "num_minibatches=1",
    "--max-turns", "2", "--eval-episodes", "2", "--checkpoint-every", "1", "--no-progress",
]  # fmt: skip



@pytest.fixture
def scaffolds(monkeypatch: pytest.MonkeyPatch) -> list:
    """The scaffold of every collect call, training's and the evaluations'."""
    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs.get("scaffold"))
        return real_collect(*args, **kwargs)

    monkeypatch.setattr("agentgym.rollout.collector_source.collect", spy)
    monkeypatch.setattr("agentgym.rollout.collect", spy)  # the evaluations import it from here
    return seen

def test_train_and_eval_with_the_react_scaffold_record_it_and_play_through_it(
    tmp_path, capsys, scaffolds
):
    out = tmp_path / "run"
    flags = ["train", "--steps", "1", "--out", str(out), "--scaffold", "react", *SMALL]
    assert main(flags) == 2  # FrozenLake's recipe decodes among its moves: refused at the start
    assert "--no-action-choices" in capsys.readouterr().err
    assert main([*flags, "--no-action-choices"]) == 0
    assert json.loads((out / "run.json").read_text())["run"]["scaffold"] == "react"
    assert len(scaffolds) >= 2  # the training batch and the evaluations
    assert all(isinstance(s, ReActScaffold) for s in scaffolds)
    capsys.readouterr()

    # agentgym eval of the run's model plays through the scaffold it was trained with
    for given, expected in [([], "react"), (["--scaffold", "default"], "default")]:
        scaffolds.clear()
        args = ["eval", "--model", str(out), "--episodes", "2", "--json", *given]
        assert main(args) == 0
        assert json.loads(capsys.readouterr().out)["scaffold"] == expected
        assert all(isinstance(s, ReActScaffold) == (expected == "react") for s in scaffolds)
        assert scaffolds


def test_train_and_eval_with_the_memory_scaffold_record_it_and_play_through_it(
    tmp_path, capsys, scaffolds
):
    out = tmp_path / "run"
    flags = ["train", "--steps", "1", "--out", str(out), "--scaffold", "memory", *SMALL]
    assert main(flags) == 0  # the memory scaffold passes constrained replies on as they are
    assert json.loads((out / "run.json").read_text())["run"]["scaffold"] == "memory"
    assert len(scaffolds) >= 2
    assert all(s == MemoryScaffold() for s in scaffolds)
    capsys.readouterr()
    scaffolds.clear()
    assert main(["eval", "--model", str(out), "--episodes", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scaffold"] == "memory"
    assert scaffolds
    assert all(s == MemoryScaffold() for s in scaffolds)


def test_an_unknown_scaffold_is_refused(tmp_path, capsys):
    assert main(["train", "--scaffold", "recall", "--out", str(tmp_path / "x"), *SMALL]) == 2
    assert "scaffold" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="scaffold"):
        RunConfig(scaffold="recall")  # type: ignore[arg-type]  # a run file's value
