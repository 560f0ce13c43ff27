"""``Trace``: a run's episodes, one Parquet file per update, written off the training thread.

::

    trace = Trace("runs/fl")                       # <run>/traces/, every episode
    fit(trainer, source, steps=100, out="runs/fl", trace=trace)

Layout (``docs/traces.md``)::

    <run>/traces/update-00000001.parquet           the episodes collected for update 1
    <run>/traces/update-00000003-empty-001.parquet a step after update 3 that trained on nothing
    <run>/traces/_vocab.parquet                    id -> text of every token of the tokenizer
    <run>/traces/_rolled_back/rollback-<k>/        the files of the updates a rollback discarded

A file is written whole to a hidden temporary name and renamed into place, so a reader (or a
resume) never sees half of one, and a SIGKILL loses at most the updates not yet written.
``state_dict`` (saved in each checkpoint) waits for the files before it; ``load_state_dict``
(resume) deletes the files after the checkpoint, which the resumed run writes again. Names
starting with ``_`` or ``.`` are skipped by pandas and pyarrow when they read the folder.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.rollout.traces.records import EpisodeTokens, to_table

__all__ = ["TRACES", "Trace", "TraceBudgetWarning", "TraceMode", "parse_mode"]

TRACES = "traces"
"""The trace's folder in a run folder."""
VOCAB = "_vocab.parquet"
ROLLED_BACK = "_rolled_back"
_FILE = re.compile(r"update-(\d{8})(-empty-(\d+))?\.parquet")
_COMPRESSION = {"compression": "zstd", "compression_level": 3}
_WARN_AT = 0.8


class TraceBudgetWarning(UserWarning):
    """The trace nears or reached its size budget (it then keeps fewer groups)."""


@dataclass(frozen=True)
class TraceMode:
    """What a trace keeps of each update: every episode, ``groups`` groups, or nothing."""

    keep: str  # "all" | "sample" | "off"
    groups: int = 0

    def __str__(self) -> str:
        return f"sample:{self.groups}" if self.keep == "sample" else self.keep


def parse_mode(value: str | TraceMode) -> TraceMode:
    """``all``, ``off`` or ``sample:N`` (the first ``N`` groups of each update)."""
    if isinstance(value, TraceMode):
        return value
    text = str(value).strip()
    if text in ("all", "off"):
        return TraceMode(text)
    head, _, count = text.partition(":")
    if head == "sample" and count.isdigit() and int(count) >= 1:
        return TraceMode("sample", int(count))
    raise ConfigError(
        "trace", value, "is not all, off or sample:N (N >= 1)", "pass e.g. --trace sample:4"
    )


class UpdateTokensLike(Protocol):
    """``agentgym.trainers.update.UpdateTokens``: an update's numbers in episode rows."""

    episodes: list[Episode]
    logprobs: Any  # [E, T] tensor
    advantages: Any  # [E, T] tensor


def _name(update: int, empty: int | None) -> str:
    tail = "" if empty is None else f"-empty-{empty:03d}"
    return f"update-{update:08d}{tail}.parquet"


def _after(path: Path, update: int) -> bool:
    """Whether the file ``path`` holds a step after the checkpoint of ``update``: a later
    update, or a step without an update that followed update ``update`` itself."""
    match = _FILE.fullmatch(path.name)
    if match is None:
        return False
    n = int(match.group(1))
    return n > update or (match.group(2) is not None and n >= update)


class Trace:
    """The episode trace of the run folder ``out``, kept as ``mode`` says (``parse_mode``)
    within ``budget_gb``: at 80 % it warns; past it, it keeps one group per update and warns.
    ``folder``: the files go there instead of ``<out>/traces`` (``agentgym eval``'s).

    One background thread writes the files; ``write`` hands it an update's episodes and
    returns at once (it waits only when ``queue_size`` updates are already waiting).
    """

    def __init__(
        self,
        out: str | os.PathLike[str],
        mode: str | TraceMode = "all",
        budget_gb: float = 4.0,
        *,
        folder: str | os.PathLike[str] | None = None,
        queue_size: int = 2,
    ) -> None:
        if not budget_gb > 0:
            raise ConfigError(
                "trace_budget_gb", budget_gb, "must be > 0", "pass e.g. 4, or --trace off"
            )
        self.folder = Path(out) / TRACES if folder is None else Path(folder)
        self.mode = parse_mode(mode)
        self.budget = int(budget_gb * 1e9)
        self.written = 0
        """Bytes of the trace's files on disk (those the run rewinds excepted)."""
        self._warned: set[str] = set()
        self._queue: queue.Queue[tuple[Any, ...] | None] = queue.Queue(queue_size)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def on(self) -> bool:
        return self.mode.keep != "off"

    # -- writing ----------------------------------------------------------------------------

    def start(self, tokenizer: Any) -> None:
        """Write the vocabulary of ``tokenizer`` once per run folder (in the background)."""
        if self.on and not (self.folder / VOCAB).is_file():
            self._put(("vocab", tokenizer))

    def write(
        self,
        update: int,
        episodes: Sequence[Episode],
        tokens: UpdateTokensLike | None = None,
        *,
        empty: int | None = None,
        group_size: int = 1,
    ) -> None:
        """Trace ``episodes``, collected for ``update`` (``empty``: the how-manieth step in a
        row after update ``update`` that trained on nothing); ``tokens``: the trainer's
        numbers for those it trained on (``Trainer.last_tokens``). An episode without a
        ``group`` belongs to the ``group_size`` consecutive ones around it."""
        if not self.on:
            return
        self._put(("update", update, empty, self._kept(list(episodes), group_size), tokens))

    def _kept(self, episodes: list[Episode], group_size: int) -> list[tuple[int, Episode]]:
        groups = self.mode.groups if self.mode.keep == "sample" else None
        if self.written >= self.budget:
            groups = 1
            self._warn("full", f"the trace reached its budget of {self.budget / 1e9:g} GB; it "
                       "keeps one group per update from now on. Raise --trace-budget-gb, or "
                       "pass --trace sample:N")  # fmt: skip
        elif self.written >= _WARN_AT * self.budget:
            self._warn("near", f"the trace holds {self.written / 1e9:.2f} GB, 80% of its "
                       f"budget of {self.budget / 1e9:g} GB; past it, it keeps one group per "
                       "update (raise --trace-budget-gb to keep every episode)")  # fmt: skip
        indexed = list(enumerate(episodes))
        if groups is None:
            return indexed
        keys = [("at", i // group_size) if e.group is None else e.group for i, e in indexed]
        order: dict[Any, int] = {}
        for key in keys:
            order.setdefault(key, len(order))
        return [pair for pair, key in zip(indexed, keys, strict=True) if order[key] < groups]

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, TraceBudgetWarning, stacklevel=3)

    def _put(self, job: tuple[Any, ...]) -> None:
        self._raise()
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="agentgym-trace", daemon=True)
            self._thread.start()
        self._queue.put(job)

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                if self._error is None:
                    self._do(job)
            except BaseException as error:  # handed to the training thread at its next call
                self._error = error
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _do(self, job: tuple[Any, ...]) -> None:
        if job[0] == "vocab":
            self._publish(_vocabulary(job[1]), VOCAB)
            return
        _, update, empty, kept, tokens = job
        trained = _trained(kept, tokens)
        table = to_table(update, [e for _, e in kept], trained, [i for i, _ in kept])
        self.written += self._publish(table, _name(update, empty))

    def _publish(self, table: pa.Table, name: str) -> int:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{name}.tmp"
        pq.write_table(table, tmp, **_COMPRESSION)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.folder / name)
        return tmp.parent.joinpath(name).stat().st_size

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def flush(self) -> None:
        """Wait until every update handed over is on disk."""
        if self._thread is not None:
            self._queue.join()
        self._raise()

    def close(self) -> None:
        """Flush, and end the writer thread."""
        if self._thread is not None:
            self._queue.join()
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        self._raise()

    # -- resume and rollback ----------------------------------------------------------------

    def state_dict(self, update: int) -> dict[str, Any]:
        """The state a checkpoint of ``update`` saves, once the files up to it are written."""
        self.flush()
        return {"update": update}

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        """Resume from a checkpoint's ``state``: delete the files of the steps after it (the
        run plays them again). None: a fresh run, delete every file."""
        self.flush()
        update = -1 if state is None else int(state["update"])
        for path in self._files():
            if _after(path, update):
                path.unlink()
        if state is None:
            (self.folder / VOCAB).unlink(missing_ok=True)
        self.written = sum(p.stat().st_size for p in self._files())

    def roll_back(self, state: Mapping[str, Any]) -> Path | None:
        """A guard's rollback to the checkpoint that saved ``state``: the files after it move
        to ``_rolled_back/rollback-<k>/`` (returned; None when there were none)."""
        self.flush()
        moved = [p for p in self._files() if _after(p, int(state["update"]))]
        if not moved:
            return None
        parent = self.folder / ROLLED_BACK
        k = 1 + sum(1 for _ in parent.glob("rollback-*")) if parent.is_dir() else 1
        target = parent / f"rollback-{k}"
        target.mkdir(parents=True, exist_ok=True)
        for path in moved:
            shutil.move(path, target / path.name)
        self.written = sum(p.stat().st_size for p in self._files())
        return target

    def _files(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.iterdir() if _FILE.fullmatch(p.name))


def _trained(
    kept: list[tuple[int, Episode]], tokens: UpdateTokensLike | None
) -> list[EpisodeTokens | None]:
    """Per kept episode, its row of ``tokens`` when the update trained on it."""
    if tokens is None:
        return [None] * len(kept)
    rows = {id(e): i for i, e in enumerate(tokens.episodes)}
    found: list[EpisodeTokens | None] = []
    for _, episode in kept:
        row = rows.get(id(episode))
        if row is None:
            found.append(None)
            continue
        n = len(episode.token_ids)
        found.append(
            EpisodeTokens(
                tokens.logprobs[row, :n].float().numpy().astype(np.float32),
                tokens.advantages[row, :n].float().numpy().astype(np.float32),
            )
        )
    return found


def _vocabulary(tokenizer: Any) -> pa.Table:
    """``id``, ``token`` (the tokenizer's piece) and ``text`` (the id decoded alone)."""
    size = len(tokenizer)
    ids = list(range(size))
    pieces = tokenizer.convert_ids_to_tokens(ids)
    texts = tokenizer.batch_decode([[i] for i in ids])
    return pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "token": pa.array([str(p) for p in pieces]),
            "text": pa.array(texts),
        }
    )
