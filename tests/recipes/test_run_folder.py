"""``RunFolder``, the run folder's logs that ``agentgym train`` hands ``fit``: ``metrics.jsonl``
and ``guards.jsonl`` beside ``fit``'s checkpoints, cut back to the checkpoint on resume so that
a run killed between checkpoints logs each update exactly once."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path
from typing import Any

from agentgym import models
from agentgym.recipes.run_folder import EVENTS_FILE, METRICS_FILE, ROLLED_BACK_FILE, RunFolder
from agentgym.trainers import fit, make
from agentgym.trainers.guards import Guards, GuardsConfig


def _load_ds_step() -> Any:
    """The trainer tests' synthetic episode source (``tests/trainers/ds_step.py``)."""
    path = Path(__file__).parents[1] / "trainers" / "ds_step.py"
    spec = importlib.util.spec_from_file_location("run_folder_ds_step", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DS_STEP = _load_ds_step()
WARN_ALWAYS = {
    "entropy_collapse": {
        "action": "warn", "threshold": 1e9, "patience": 1, "relative": None, "min_success": None,
    },
}  # fmt: skip
"""A monitor that trips on the first update: a line in ``guards.jsonl``."""


class KilledSource(DS_STEP.SyntheticSource):  # type: ignore[misc, name-defined]
    """Raises out of ``fit`` (like a kill) when asked for batch number ``kill_at``."""

    def __init__(self, kill_at: int | None = None) -> None:
        super().__init__(4)
        self.kill_at = kill_at

    def collect(self, num_groups: int) -> Any:
        if self.position == self.kill_at:
            raise KeyboardInterrupt
        return super().collect(num_groups)


def run(out: Path, kill_at: int | None = None) -> None:
    """Four updates, a checkpoint every second, resuming from ``out``."""
    trainer = make("grpo", policy=models.load(seed=0), config=DS_STEP.CONFIGS["grpo"])
    guards = Guards(GuardsConfig.from_dict(WARN_ALWAYS))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(KeyboardInterrupt):
        fit(
            trainer,
            KilledSource(kill_at),
            steps=4,
            out=out,
            checkpoint_every=2,
            recorder=RunFolder(out),
            guards=guards,
        )


def rows(path: Path) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in DS_STEP.NOT_COMPARED} for row in found]


def test_a_run_killed_between_checkpoints_resumes_its_logs_exactly(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "run"
    run(straight)
    assert sorted(p.name for p in straight.iterdir()) == ["checkpoints", EVENTS_FILE, METRICS_FILE]
    assert [row["step"] for row in rows(straight / METRICS_FILE)] == [1, 2, 3, 4]
    assert [e["monitor"] for e in rows(straight / EVENTS_FILE)] == ["entropy_collapse"]

    run(resumed, kill_at=3)  # killed collecting update 4: update 3 logged, checkpoint 2
    assert [row["step"] for row in rows(resumed / METRICS_FILE)] == [1, 2, 3]
    with (resumed / EVENTS_FILE).open("a") as f:  # an event after the checkpoint, too
        f.write(json.dumps({"update": 3, "monitor": "kl_spike"}) + "\n")
    run(resumed)
    for name in (METRICS_FILE, EVENTS_FILE):
        assert rows(resumed / name) == rows(straight / name), name
    assert not (resumed / ROLLED_BACK_FILE).exists()  # made by a rollback only


def test_a_fresh_run_empties_the_logs_and_a_rollback_sets_rows_aside(tmp_path):
    folder = RunFolder(tmp_path)
    folder.load_state_dict(None)
    assert sorted(p.name for p in tmp_path.iterdir()) == [METRICS_FILE]
    folder.row({"step": 1.0})
    at_checkpoint = folder.state_dict()
    folder.row({"step": 2.0})
    folder.event({"update": 2, "monitor": "kl_spike"})
    folder.roll_back(at_checkpoint)
    assert rows(tmp_path / METRICS_FILE) == [{"step": 1.0}]
    assert rows(tmp_path / ROLLED_BACK_FILE) == [{"step": 2.0}]
    assert len(rows(tmp_path / EVENTS_FILE)) == 1  # events stay
    RunFolder(tmp_path).load_state_dict(None)  # the same folder, started afresh
    assert all(not (tmp_path / name).read_text() for name in (METRICS_FILE, EVENTS_FILE))
