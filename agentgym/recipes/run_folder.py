"""The run folder's logs: ``agentgym train``'s recorder for ``fit`` (``docs/run_folder.md``).

::

    fit(trainer, source, steps=100, out="runs/fl", recorder=RunFolder("runs/fl"))

``fit`` keeps its checkpoints in ``<out>/checkpoints``; ``RunFolder`` writes beside them::

    <out>/metrics.jsonl               one line per metrics row, appended and fsynced
    <out>/guards.jsonl                one line per guard event
    <out>/metrics.rolled_back.jsonl   the rows a guard's rollback set aside

Its state (saved in every checkpoint) is each file's size, so a resumed run cuts the files back
to what they held at its checkpoint: a run killed at any moment logs each update exactly once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["EVENTS_FILE", "METRICS_FILE", "ROLLED_BACK_FILE", "MetricsLog", "RunFolder"]

METRICS_FILE = "metrics.jsonl"
EVENTS_FILE = "guards.jsonl"
ROLLED_BACK_FILE = "metrics.rolled_back.jsonl"
"""Where the metrics rows a rollback discarded go (beside ``metrics.jsonl``)."""

_FILES = (METRICS_FILE, EVENTS_FILE, ROLLED_BACK_FILE)


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


class MetricsLog:
    """A JSON-lines file, appended and fsynced line by line; ``truncate`` undoes lines written
    after a checkpoint. The file is made by ``create`` or at its first line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def truncate(self, size: int) -> None:
        if self.path.exists():
            with open(self.path, "r+b") as f:
                f.truncate(min(size, self.size()))

    def write(self, record: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _append(self.path, (json.dumps(dict(record), sort_keys=True) + "\n").encode())


class RunFolder:
    """The logs of the run folder ``out`` (an ``agentgym.trainers.recorder.Recorder``)."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        self.out = Path(out)
        self.logs = {name: MetricsLog(self.out / name) for name in _FILES}

    def row(self, metrics: Mapping[str, float]) -> None:
        self.logs[METRICS_FILE].write(metrics)

    def event(self, event: Mapping[str, Any]) -> None:
        self.logs[EVENTS_FILE].write(event)

    def state_dict(self) -> dict[str, Any]:
        return {"sizes": {name: log.size() for name, log in self.logs.items()}}

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        """Cut each file back to its size in ``state`` (None: a fresh run, to nothing). A
        checkpoint that saved no size for a file (one written before the file was the
        recorder's) leaves it as it is. ``metrics.jsonl`` exists from here on; the guards'
        files from their first line."""
        self.logs[METRICS_FILE].create()
        sizes = {} if state is None else state.get("sizes", {})
        for name, log in self.logs.items():
            if state is None or name in sizes:
                log.truncate(int(sizes.get(name, 0)))

    def roll_back(self, state: Mapping[str, Any]) -> None:
        """The metrics rows after ``state`` move to ``metrics.rolled_back.jsonl``."""
        log = self.logs[METRICS_FILE]
        size = int(state.get("sizes", {}).get(METRICS_FILE, 0))
        with open(log.path, "rb") as f:
            f.seek(size)
            rows = f.read()
        _append(self.logs[ROLLED_BACK_FILE].path, rows)
        log.truncate(size)
