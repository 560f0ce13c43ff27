"""Guards beyond one plain process: a run forced into entropy collapse (an absurd learning rate)
rolls back on both of two data-parallel ranks together (``--nproc 2``: rank 0's checkpoint
choice, then every rank checked at the same update and learning rate) and then stops cleanly;
and on the DeepSpeed backend (one rank, ZeRO-2) the rollback loads DeepSpeed's checkpoint: the
update after it replays the discarded one exactly, at half the learning rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from small_runs import train_args

from agentgym.cli import main

ARGS = train_args(
    "--set", "learning_rate=0.5", "--set", "num_minibatches=1", "--steps", "12"
)  # fmt: skip

GUARDS = """
[guards]
max_rollbacks = 1

[guards.entropy_collapse]
patience = 2
"""


def _rows(path: Path) -> dict[int, dict]:
    return {int(r["step"]): r for r in map(json.loads, path.read_text().splitlines())}


def _rolled_back_and_stopped(tmp_path: Path, *flags: str) -> dict:
    """Train into collapse with ``flags``; checks the rollback, the stop and the replayed update;
    returns the rollback event."""
    (tmp_path / "run.toml").write_text(GUARDS)
    out = tmp_path / "run"
    config = ["--config", str(tmp_path / "run.toml"), "--out", str(out)]
    assert main([*ARGS, *config, *flags]) == 0
    guards = json.loads((out / "summary.json").read_text())["guards"]
    assert guards["stopped"]
    assert (guards["rollbacks"], guards["lr_scale"]) == (1, 0.5)
    rollback, stop = guards["events"]
    assert (rollback["action"], stop["action"]) == ("rollback", "stop")
    kept, dropped = _rows(out / "metrics.jsonl"), _rows(out / "metrics.rolled_back.jsonl")
    after = rollback["to_update"] + 1  # played again from the good checkpoint's policy
    assert sorted(dropped) == list(range(after, rollback["update"] + 1))
    assert kept[after]["reward_mean"] == dropped[after]["reward_mean"]  # the same batch
    assert kept[after]["loss"] == pytest.approx(dropped[after]["loss"], rel=1e-5, abs=1e-7)
    assert kept[after]["entropy"] == pytest.approx(dropped[after]["entropy"], rel=1e-5)
    assert kept[after]["lr"] == pytest.approx(0.5 * dropped[after]["lr"])
    assert max(kept) == stop["update"] < 12
    return rollback


@pytest.mark.slow
@pytest.mark.timeout(300)  # a rank left waiting in a collective would hang the launch
def test_two_ranks_roll_back_together_then_stop(tmp_path, capfd):
    rollback = _rolled_back_and_stopped(tmp_path, "--nproc", "2")
    assert rollback["ranks"] == 2  # each rank back at the same update with the same lr
    assert "rolled back from update" in capfd.readouterr().out  # rank 0 says so


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_deepspeed_rollback_loads_its_checkpoint(tmp_path, capsys):
    rollback = _rolled_back_and_stopped(tmp_path, "--backend", "deepspeed", "--zero-stage", "2")
    assert "ranks" not in rollback
    run = tmp_path / "run" / "checkpoints" / f"step-{rollback['to_update']:08d}"
    assert (run / "trainer" / "backend").is_dir()  # DeepSpeed's own checkpoint was loaded
    capsys.readouterr()
