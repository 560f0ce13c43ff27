"""What ``fit`` tells the application about a run, and what it needs back to resume exactly.

``fit`` writes no run folder: its metrics rows and the guards' events go to a ``Recorder`` the
caller passes (``agentgym.recipes.run_folder.RunFolder`` is ``agentgym train``'s, writing
``metrics.jsonl``, ``guards.jsonl`` and ``metrics.rolled_back.jsonl``). A recorder keeps what
it was told across a kill: ``fit`` saves its ``state_dict`` in every checkpoint and, on resume,
hands that state back to ``load_state_dict``, which forgets whatever was recorded after it, so
a run killed at any moment (SIGKILL included) records each update exactly once.

::

    class Rows:  # the smallest recorder: rows in memory, so nothing survives a kill
        def __init__(self) -> None:
            self.rows: list[dict[str, float]] = []
        def row(self, metrics): self.rows.append(dict(metrics))
        def event(self, event): pass
        def state_dict(self): return {"rows": len(self.rows)}
        def load_state_dict(self, state): del self.rows[(state or {}).get("rows", 0):]
        def roll_back(self, state): del self.rows[state.get("rows", 0):]

With several ranks, ``fit`` uses the recorder on rank 0 only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Recorder"]


@runtime_checkable
class Recorder(Protocol):
    """Where ``fit`` puts a run's metrics rows and guard events (``fit(..., recorder=...)``)."""

    def row(self, metrics: Mapping[str, float]) -> None:
        """One metrics row: after every update, and after every step whose every episode was
        dropped (``docs/run_folder.md`` lists the keys)."""

    def event(self, event: Mapping[str, Any]) -> None:
        """One event of the guards (``agentgym.trainers.guards``): a monitor tripped."""

    def state_dict(self) -> dict[str, Any]:
        """Where the record stands now; saved in every checkpoint (picklable)."""

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        """Resume: forget everything recorded after ``state`` (from ``state_dict``); None: a
        fresh run, forget everything."""

    def roll_back(self, state: Mapping[str, Any]) -> None:
        """A guard's rollback to the checkpoint that saved ``state``: set the rows recorded
        after it aside (they are no longer the run's); events stay."""
