"""``fit`` writes no run folder: without a recorder it leaves checkpoints alone under ``out``;
with one, the recorder gets every row and event, and on resume the state it had at the
checkpoint, so a run killed between checkpoints records each update exactly once."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from typing import Any

from agentgym import models
from agentgym.trainers import fit, make
from agentgym.trainers.guards import Guards, GuardsConfig
from agentgym.trainers.recorder import Recorder

from .ds_step import CONFIGS, NOT_COMPARED, SyntheticSource

WARN_ALWAYS = {
    "entropy_collapse": {
        "action": "warn", "threshold": 1e9, "patience": 1, "relative": None, "min_success": None,
    },
}  # fmt: skip
"""A monitor that trips on the first update: an event to record."""


class Rows:
    """A recorder in memory: what outlives a killed ``fit`` call is this object."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.loaded: list[Any] = []

    def row(self, metrics: Mapping[str, float]) -> None:
        self.rows.append(dict(metrics))

    def event(self, event: Mapping[str, Any]) -> None:
        self.events.append(dict(event))

    def state_dict(self) -> dict[str, Any]:
        return {"rows": len(self.rows), "events": len(self.events)}

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        self.loaded.append(None if state is None else dict(state))
        state = state or {}
        del self.rows[state.get("rows", 0) :]
        del self.events[state.get("events", 0) :]

    def roll_back(self, state: Mapping[str, Any]) -> None:
        del self.rows[state["rows"] :]


class KilledSource(SyntheticSource):
    """Raises out of ``fit`` (like a kill) when asked for batch number ``kill_at``."""

    def __init__(self, group_size: int, kill_at: int | None = None) -> None:
        super().__init__(group_size)
        self.kill_at = kill_at

    def collect(self, num_groups: int) -> Any:
        if self.position == self.kill_at:
            raise KeyboardInterrupt
        return super().collect(num_groups)


def trainer() -> Any:
    return make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"])


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in NOT_COMPARED} for row in rows]


def test_fit_without_a_recorder_writes_only_checkpoints(tmp_path):
    guards = Guards(GuardsConfig.from_dict(WARN_ALWAYS))
    with contextlib.redirect_stdout(io.StringIO()):
        history = fit(
            trainer(), SyntheticSource(4), steps=2, out=tmp_path, guards=guards, checkpoint_every=1
        )
    assert [row["step"] for row in history] == [1, 2]
    assert [e["monitor"] for e in guards.events] == ["entropy_collapse"]  # kept, not written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step-00000001",
        "step-00000002",
    ]


def test_a_recorder_gets_every_row_and_event_and_resumes_exactly(tmp_path):
    assert isinstance(Rows(), Recorder)
    straight, guards = Rows(), Guards(GuardsConfig.from_dict(WARN_ALWAYS))
    with contextlib.redirect_stdout(io.StringIO()):
        history = fit(
            trainer(),
            SyntheticSource(4),
            steps=4,
            out=tmp_path / "straight",
            checkpoint_every=2,
            recorder=straight,
            guards=guards,
        )
    assert straight.rows == history
    assert straight.events == guards.events
    assert len(straight.events) == 1
    assert straight.loaded == [None]  # a fresh run: forget everything

    # Killed while collecting update 4: update 3 is recorded, the checkpoint is update 2's.
    resumed = Rows()
    killed = KilledSource(4, kill_at=3)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(KeyboardInterrupt):
        fit(
            trainer(),
            killed,
            steps=4,
            out=tmp_path / "run",
            checkpoint_every=2,
            recorder=resumed,
            guards=Guards(GuardsConfig.from_dict(WARN_ALWAYS)),
        )
    assert [row["step"] for row in resumed.rows] == [1, 2, 3]
    with contextlib.redirect_stdout(io.StringIO()):
        fit(
            trainer(),
            SyntheticSource(4),
            steps=4,
            out=tmp_path / "run",
            checkpoint_every=2,
            recorder=resumed,
            guards=Guards(GuardsConfig.from_dict(WARN_ALWAYS)),
        )
    assert resumed.loaded[-1] == {"rows": 2, "events": 1}  # where it stood at update 2
    assert comparable(resumed.rows) == comparable(straight.rows)
    assert resumed.events == straight.events
