"""A guard's rollback: back to a good checkpoint of the run, with a lower learning rate.

The steps are ordered so that a run killed at any moment of a rollback resumes exactly:

1. every rank loads the good checkpoint (weights, optimizer, RNG states, the source's position);
2. rank 0 deletes the checkpoints after it (each loses its manifest first), so a resume can only
   find the good one, whose state replays the same updates and the same rollback;
3. the event goes to ``fit``'s recorder, which sets the metrics rows after the checkpoint aside
   (``agentgym train``: from ``metrics.jsonl`` to ``metrics.rolled_back.jsonl``), and the
   trace's files of those updates move to ``traces/_rolled_back/rollback-<k>/``;
4. the good checkpoint is written again in place, now with the guards' new state (rollbacks
   done, learning-rate scale) and the recorder's, and the run continues from it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from agentgym.core.errors import Error
from agentgym.trainers.checkpoint import MANIFEST

__all__ = ["checkpoint_at_or_before", "roll_back"]

_STEP_DIR = re.compile(r"step-(\d+)")


def _complete(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        match = _STEP_DIR.fullmatch(entry.name)
        if match and (entry / MANIFEST).is_file():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def checkpoint_at_or_before(directory: Path, step: int) -> Path | None:
    """The newest complete ``step-<n>`` checkpoint under ``directory`` with ``n <= step``."""
    before = [path for n, path in _complete(directory) if n <= step]
    return before[-1] if before else None


def protected_step(directory: Path, step: int) -> int | None:
    """The step of the checkpoint ``checkpoint_at_or_before`` finds (pruning keeps it)."""
    found = checkpoint_at_or_before(directory, step)
    return None if found is None else int(found.name.removeprefix("step-"))


def _delete_after(directory: Path, step: int) -> None:
    for n, path in _complete(directory):
        if n > step:
            os.unlink(path / MANIFEST)  # incomplete from here on: never resumed from
            shutil.rmtree(path, ignore_errors=True)


def _agreed(trainer: Any) -> int:
    """The number of ranks, once every rank is checked to be back at the same update with the
    same learning rate (collective); a disagreement would train the ranks apart."""
    backend = trainer.backend
    if backend.world_size == 1:
        return 1
    mine = (trainer.step_count, trainer.lr_scale, backend.learning_rate())
    every = backend.all_gather_object(mine)
    if any(other != every[0] for other in every):
        raise Error(
            f"after a guard's rollback the ranks' (update, lr scale, learning rate) differ: "
            f"{every}; every rank must see the same run folder (a shared file system) to roll "
            "back together; resume the run from its checkpoint with --resume"
        )
    return len(every)


def roll_back(guards: Any, run: Any, source: Any, target: Path, events: list[dict]) -> None:
    """Return ``run`` (fit's checkpoints and recorder) and ``source`` to the checkpoint
    ``target``, lower the learning rate, record ``events`` (the trip that asked for it) and
    checkpoint (collective).

    ``guards`` is the run's ``agentgym.trainers.guards.Guards`` (not imported here: it imports
    this module)."""
    trainer = run.trainer
    tripped_at = max(e["update"] for e in events)
    trainer.load(target)
    source.load_state_dict(trainer.state["source"])
    guards.load_monitors(trainer.state.get("guards", {}).get("monitors", {}))
    guards.rollbacks += 1
    guards.lr_scale *= guards.config.settings.lr_factor
    trainer.set_lr_scale(guards.lr_scale)
    ranks = _agreed(trainer)
    for event in events:
        if event["action"] == "rollback":
            event.update(to_update=trainer.step_count, lr_scale=guards.lr_scale)
            if ranks > 1:
                event["ranks"] = ranks  # every rank took it: same update, same learning rate
    if trainer.backend.rank == 0:
        _delete_after(run.checkpoints, trainer.step_count)
    trainer.backend.barrier()
    guards._record(events)
    if run.recorder is not None:
        run.recorder.roll_back(trainer.state.get("recorder", {}))
    if getattr(run, "trace", None) is not None:  # the discarded updates' episodes set aside
        run.trace.roll_back({"update": trainer.step_count})
    guards.say(
        f"rolled back from update {tripped_at} to the checkpoint of update "
        f"{trainer.step_count}; learning rate x{guards.lr_scale:g} "
        f"(rollback {guards.rollbacks} of {guards.config.settings.max_rollbacks})"
    )
    run.checkpoint(source)
