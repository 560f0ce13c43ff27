"""What ``agentgym view`` reads: a run folder, a trace folder, one trace file or an eval output,
read-only and a page at a time (``docs/view.md``).

Episode lists read only the scalar columns they show (cached per file, keyed on its size and
mtime, so a run still training costs one new file per poll); one episode's tokens are read from
its update's file alone. Every file is checked when first read: a missing, truncated or corrupt
one raises :class:`TraceFileError` naming it and what is wrong.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from agentgym.core.errors import Error
from agentgym.rollout.traces import SCHEMA, TRACES, vocabulary

__all__ = ["LIST_COLUMNS", "Filters", "RunData", "TraceFileError"]

LIST_COLUMNS = [
    "update", "index", "trained", "env_id", "task_id", "seed", "group", "outcome", "cause",
    "success", "reward", "turns",
]  # fmt: skip
"""The columns an episode list shows (and filters on); token columns are never among them."""

_UPDATE_FILE = re.compile(r"update-(\d+)(-empty-\d+)?\.parquet$")


class TraceFileError(Error):
    """A trace file (or the path given) that cannot be read: missing, truncated or corrupt."""

    def __init__(self, path: str | os.PathLike[str], problem: str, fix: str) -> None:
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}: {problem}. Fix: {fix}")


@dataclass(frozen=True)
class Filters:
    """An episode search; every field optional (None: any)."""

    outcome: str | None = None
    success: bool | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    task_id: str | None = None
    text: str | None = None
    update_min: int | None = None
    update_max: int | None = None


def _read_json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TraceFileError(path, f"is not JSON ({e})", "restore the file or remove it") from e


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a line being written by a run still training
            continue
    return rows


def resolve(path: str | os.PathLike[str]) -> tuple[Path | None, Path]:
    """``(run folder or None, trace folder)`` for a run folder, a trace folder, an eval output
    ``F`` (its trace is ``F.traces/``) or one trace file."""
    given = Path(path)
    if not given.exists():
        raise TraceFileError(
            given, "does not exist",
            "pass a run folder (agentgym train --out), its traces/ folder, an agentgym eval "
            "--output file or one trace .parquet file",
        )  # fmt: skip
    if given.is_dir() and (given / TRACES).is_dir():
        return given, given / TRACES
    if given.is_file() and Path(f"{given}.traces").is_dir():
        return None, Path(f"{given}.traces")
    if given.is_dir() and (given / "metrics.jsonl").is_file():
        return given, given / TRACES  # a run with --trace off, or one not yet at its first update
    return None, given


class RunData:
    """One run (or trace) as the viewer reads it. Nothing here writes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.given = Path(path)
        self.run, self.traces = resolve(path)
        self._cache: dict[Path, tuple[tuple[int, int], pa.Table]] = {}
        self._derived_cache: dict[Path, tuple[tuple[int, int], pa.Table]] = {}
        self._vocab: list[str] | None = None
        self.files()  # fails now on a path that holds no trace and no run

    # --- files -----------------------------------------------------------------------------

    def files(self) -> list[Path]:
        """The trace's update files in update order (one file if a file was given)."""
        if self.traces.is_file():
            return [self.traces]
        found = sorted(
            p for p in self.traces.glob("update-*.parquet") if _UPDATE_FILE.search(p.name)
        ) if self.traces.is_dir() else []  # fmt: skip
        if not found and self.run is None:
            raise TraceFileError(
                self.given, "holds no trace (no update-*.parquet files)",
                "pass a run folder that agentgym train wrote with --trace all or sample:N, or "
                "an agentgym eval --output file",
            )  # fmt: skip
        return found

    def updates(self) -> list[dict[str, Any]]:
        """Each update file with its size and mtime (what a page that follows a run polls)."""
        out = []
        for path in self.files():
            stat = path.stat()
            out.append({"file": path.name, "bytes": stat.st_size, "mtime": stat.st_mtime})
        return out

    def _check(self, path: Path, table_schema: pa.Schema) -> None:
        missing = [n for n in LIST_COLUMNS if n not in table_schema.names]
        if missing:
            raise TraceFileError(
                path, f"is not a trace file: it lacks the columns {missing}",
                "pass a file that agentgym train or agentgym eval --output wrote",
            )  # fmt: skip

    def _open(self, path: Path) -> pq.ParquetFile:
        try:
            handle = pq.ParquetFile(path)
        except FileNotFoundError as e:
            raise TraceFileError(path, "vanished while being read", "reload the page") from e
        except (OSError, pa.ArrowException) as e:
            raise TraceFileError(
                path, f"is truncated or corrupt, not a readable Parquet file ({e})",
                "delete it (its update is lost) or restore it from a copy",
            ) from e  # fmt: skip
        self._check(path, handle.schema_arrow)
        return handle

    def _scalars(self, path: Path) -> pa.Table:
        stat = path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        handle = self._open(path)
        try:
            table = handle.read(columns=LIST_COLUMNS)
        except (OSError, pa.ArrowException) as e:
            raise TraceFileError(
                path, f"is corrupt: its data cannot be decoded ({e})",
                "delete it (its update is lost) or restore it from a copy",
            ) from e  # fmt: skip
        table = table.cast(pa.schema([SCHEMA.field(n) for n in LIST_COLUMNS]))
        self._cache[path] = (key, table)
        return table

    def table(self) -> pa.Table:
        """Every episode's list columns (cached per file)."""
        tables = [self._scalars(p) for p in self.files()]
        if not tables:
            return pa.schema([SCHEMA.field(n) for n in LIST_COLUMNS]).empty_table()
        return pa.concat_tables(tables)

    def _file_of(self, update: int) -> list[Path]:
        if self.traces.is_file():
            return [self.traces]
        return [p for p in self.files() if int(_UPDATE_FILE.search(p.name).group(1)) == update]  # type: ignore[union-attr]

    # --- queries ---------------------------------------------------------------------------

    def search(self, filters: Filters, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """One page of the episodes that pass ``filters``, and how many pass."""
        table = self.table()
        mask = _mask(table, filters)
        if filters.text:
            mask = pc.and_(mask, self._text_mask(table, mask, filters.text))
        chosen = table.filter(mask)
        page = chosen.slice(offset, limit)
        return {"total": chosen.num_rows, "offset": offset, "episodes": _rows(page)}

    def _text_mask(self, table: pa.Table, mask: pa.Array, text: str) -> pa.Array:
        """Rows whose conversation holds ``text`` (case-insensitive): reads ``messages`` only,
        file by file."""
        hits = []
        for path in self.files():
            column = self._open(path).read(columns=["messages"]).column("messages")
            hits.append(pc.match_substring(column, text, ignore_case=True).fill_null(False))
        return pa.chunked_array([c for h in hits for c in h.chunks], pa.bool_()) if hits else mask

    def episode(self, update: int, index: int) -> dict[str, Any]:
        """One episode: every column, its tokens with their text, the parsed JSON columns."""
        for path in self._file_of(update):
            table = self._open(path).read()
            found = table.filter(
                pc.and_(pc.equal(table["update"], update), pc.equal(table["index"], index))
            )
            if found.num_rows:
                return self._episode_row(found.slice(0, 1).to_pylist()[0], path)
        raise TraceFileError(
            self.traces, f"holds no episode update={update} index={index}",
            "pick one from the episode list",
        )  # fmt: skip

    def _episode_row(self, row: dict[str, Any], path: Path) -> dict[str, Any]:
        text = self.vocabulary()
        ids = row.pop("token_ids") or []
        row["tokens"] = {
            "text": [text[i] if 0 <= i < len(text) else f"<{i}>" for i in ids],
            "ids": ids,
            "loss_mask": row.pop("loss_mask"),
            "logprob": row.pop("logprobs"),
            "trainer_logprob": row.pop("trainer_logprobs"),
            "advantage": row.pop("advantages"),
        }
        for name in ("messages", "reset_info", "infos", "reward_components"):
            try:
                row[name] = json.loads(row[name]) if row.get(name) else None
            except ValueError as e:
                raise TraceFileError(
                    path,
                    f"holds a {name} cell that is not JSON ({e})",
                    "restore the file from a copy",
                ) from e
        row["file"] = path.name
        return row

    def vocabulary(self) -> list[str]:
        if self._vocab is None:
            folder = self.traces.parent if self.traces.is_file() else self.traces
            try:
                self._vocab = vocabulary(folder)
            except Error:
                self._vocab = []  # ids shown as <id>
            except (OSError, pa.ArrowException) as e:
                raise TraceFileError(
                    folder / "_vocab.parquet", f"is corrupt ({e})", "restore it from a copy"
                ) from e
        return self._vocab

    def task(self, task_id: str) -> list[dict[str, Any]]:
        """The episodes of one task across updates."""
        table = self.table()
        return _rows(table.filter(pc.equal(table["task_id"], task_id)))

    def group(self, update: int) -> list[dict[str, Any]]:
        """One update's episodes with their mean token advantage (read for this update only)."""
        rows = []
        for path in self._file_of(update):
            table = self._open(path).read(columns=[*LIST_COLUMNS, "advantages", "loss_mask"])
            for row in table.to_pylist():
                adv, mask = row.pop("advantages"), row.pop("loss_mask")
                sampled = [a for a, m in zip(adv or [], mask or [], strict=False) if m]
                row["advantage"] = sum(sampled) / len(sampled) if sampled else None
                rows.append(row)
        return rows

    def _derived(self, path: Path) -> pa.Table:
        """Per episode of one file: sampled tokens, the largest |trainer - sampler| logprob gap
        on a sampled token, and whether an info reports ``tampering`` (cached like the list)."""
        stat = path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._derived_cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        table = self._open(path).read(
            columns=["loss_mask", "logprobs", "trainer_logprobs", "infos"]
        )
        n = table.num_rows
        mask = table["loss_mask"].combine_chunks()
        parents = pc.list_parent_indices(mask).to_numpy()
        flat_mask = pc.list_flatten(mask).to_numpy(zero_copy_only=False).astype(bool)
        answer = np.bincount(parents[flat_mask], minlength=n)
        drift = np.full(n, np.nan)
        trainer = table["trainer_logprobs"].combine_chunks()
        has = pc.is_valid(trainer)
        if pc.any(has).as_py():
            trained = trainer.filter(has)
            flat = [
                pc.list_flatten(column.combine_chunks().filter(has)).to_numpy(zero_copy_only=False)
                for column in (table["logprobs"], table["loss_mask"])
            ]
            gap = np.abs(pc.list_flatten(trained).to_numpy(zero_copy_only=False) - flat[0])
            gap = np.where(flat[1].astype(bool), gap, 0.0)
            lengths = pc.list_value_length(trained).to_numpy(zero_copy_only=False)
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            largest = np.zeros(len(lengths))
            full = lengths > 0  # reduceat over each episode's slice (ufunc.at is far slower)
            if full.any():
                largest[full] = np.maximum.reduceat(gap, starts[full])
            drift[has.to_numpy(zero_copy_only=False)] = largest
        tampering = pc.match_substring(table["infos"], '"tampering"').fill_null(False)
        derived = pa.table(
            {"answer_tokens": pa.array(answer), "drift": pa.array(drift, from_pandas=True),
             "tampering": tampering.combine_chunks()}
        )  # fmt: skip
        self._derived_cache[path] = (key, derived)
        return derived

    def look(self, limit: int = 10) -> dict[str, list[dict[str, Any]]]:
        """The "look here" lists: reward without success, timeouts and infra failures, SWE
        tampering findings, the largest drift, the longest and shortest answers."""
        files = self.files()
        if not files:
            return {}
        table = self.table()
        derived = pa.concat_tables([self._derived(p) for p in files])
        for name in derived.column_names:
            table = table.append_column(name, derived[name])
        reward = pc.fill_null(pc.greater(table["reward"], 0), False)
        unsuccessful = pc.invert(pc.fill_null(table["success"], False))
        failed = pc.is_in(table["outcome"], pa.array(["timeout", "infra"]))
        drift = table.filter(pc.is_valid(table["drift"]))

        def top(t: pa.Table, column: str, order: str) -> list[dict[str, Any]]:
            return _rows(t.sort_by([(column, order)]).slice(0, limit))

        return {
            "reward without success": _rows(table.filter(pc.and_(reward, unsuccessful)))[:limit],
            "timeouts and infra failures": _rows(table.filter(failed))[:limit],
            "tampering": _rows(table.filter(table["tampering"]))[:limit],
            "largest drift": top(drift, "drift", "descending"),
            "longest answers": top(table, "answer_tokens", "descending"),
            "shortest answers": top(table, "answer_tokens", "ascending"),
        }

    # --- the run folder --------------------------------------------------------------------

    def run_info(self) -> dict[str, Any]:
        """The resolved config, the metrics rows, guard events and evaluations."""
        if self.run is None:
            return {"path": str(self.given), "config": None, "metrics": [], "events": [],
                    "evaluations": []}  # fmt: skip
        summary = _read_json(self.run / "summary.json") or {}
        evaluations = []
        if (self.run / "start_eval.json").is_file():
            evaluations.append({"step": 0, "name": "start"})
        if "end" in summary:
            evaluations.append({"step": summary.get("steps"), "name": "end"})
        return {
            "path": str(self.given),
            "config": _read_json(self.run / "run.json"),
            "metrics": _read_jsonl(self.run / "metrics.jsonl"),
            "events": _read_jsonl(self.run / "guards.jsonl"),
            "evaluations": evaluations,
            "summary": summary,
        }


def _mask(table: pa.Table, f: Filters) -> pa.Array:
    mask = pa.array([True] * table.num_rows)
    tests = [
        (f.outcome, lambda v: pc.equal(table["outcome"], v)),
        (f.success, lambda v: pc.equal(table["success"], v)),
        (f.reward_min, lambda v: pc.greater_equal(table["reward"], v)),
        (f.reward_max, lambda v: pc.less_equal(table["reward"], v)),
        (f.task_id, lambda v: pc.equal(table["task_id"], v)),
        (f.update_min, lambda v: pc.greater_equal(table["update"], v)),
        (f.update_max, lambda v: pc.less_equal(table["update"], v)),
    ]
    for value, test in tests:
        if value is not None:
            mask = pc.and_(mask, pc.fill_null(test(value), False))
    return mask


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    rows = table.to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and value != value:
                row[key] = None  # NaN is not JSON
    return rows
