"""Rows of a task file or a local Hugging Face dataset directory, read with pyarrow only.

``data`` may be:

- a ``.parquet`` file, or a JSONL file (one JSON object per line; any other suffix);
- a directory written by ``datasets.Dataset.save_to_disk``: ``state.json`` lists its
  ``_data_files`` (Arrow IPC stream files), read in that order;
- a directory written by ``datasets.DatasetDict.save_to_disk``: ``dataset_dict.json`` lists the
  splits, each a ``Dataset`` directory of that name;
- a Hub snapshot (``huggingface-cli download --repo-type dataset NAME --local-dir DIR`` or a git
  clone): ``.parquet`` / ``.jsonl`` files anywhere below it (hidden folders skipped), e.g.
  ``data/test-00000-of-00001.parquet``, or GSM8K's ``main/test-00000-of-00001.parquet``. A file
  belongs to a split when its name is the split followed by ``-``, ``_``, ``.``, a space or a
  digit (``test-00000-of-00001.parquet``, ``test.jsonl``); the split's files are read in sorted
  path order. They must lie in one folder: for GSM8K, whose ``main/`` and ``socratic/`` configs
  both hold a ``test`` split, pass ``DIR/main``.

``split`` picks the split of a ``DatasetDict`` or a snapshot; ``None`` (default) takes ``"test"``
if there is one, else ``"train"``. A single saved ``Dataset`` is read whole; a ``split`` given
for it must equal the split it recorded (if it recorded one). ``split`` is an error for a file.
Nothing is downloaded and the ``datasets`` package is not needed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentgym.core.errors import ConfigError

__all__ = ["read_rows"]

SNAPSHOT_SUFFIXES = (".parquet", ".jsonl")
_SPLIT_END = "-_. 0123456789"
_LAYOUTS = (
    "a .jsonl / .parquet file, a datasets save_to_disk directory (state.json or "
    "dataset_dict.json), or a Hub snapshot directory of split-named .parquet / .jsonl files"
)


def read_rows(data: str, split: str | None = None) -> list[Any]:
    """The rows of ``data`` (a file or a dataset directory, see the module doc), in order."""
    if split is not None and not isinstance(split, str):
        raise ConfigError("split", split, "must be a str or None", "pass split='test'")
    path = Path(data)
    if path.is_file():
        if split is not None:
            fix = "drop split=, or pass a dataset directory"
            raise ConfigError("split", split, "applies only to a dataset directory", fix)
        return file_rows(path)
    if not path.is_dir():
        raise ConfigError("tasks", data, "is not a file or a directory", f"pass {_LAYOUTS}")
    if (path / "dataset_dict.json").is_file():
        splits = _json(path / "dataset_dict.json", data).get("splits")
        if not isinstance(splits, list):
            raise ConfigError("tasks", data, "dataset_dict.json lists no 'splits'", _RESAVE)
        chosen = _pick_split([str(s) for s in splits], split, data)
        return _saved_dataset_rows(path / chosen, None, data)
    if (path / "state.json").is_file():
        return _saved_dataset_rows(path, split, data)
    return _snapshot_rows(path, split, data)


def file_rows(path: Path) -> list[Any]:
    """The rows of a ``.parquet`` file, or of a JSONL file (blank lines skipped)."""
    if path.suffix == ".parquet":
        return list(_pyarrow("parquet").read_table(path).to_pylist())
    rows = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    rule = f"line {number + 1} is not JSON ({e})"
                    raise ConfigError("tasks", str(path), rule, "fix the file") from None
    return rows


_RESAVE = "re-save it with datasets' save_to_disk, or pass a .jsonl / .parquet file"


def _pyarrow(module: str) -> Any:
    try:
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError as e:
        raise ImportError("reading Parquet / Arrow needs pyarrow. Fix: pip install pyarrow") from e
    return getattr(pyarrow, module)


def _json(path: Path, data: str) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError("tasks", data, f"{path.name} is not readable JSON ({e})", _RESAVE) from e
    if not isinstance(loaded, dict):
        raise ConfigError("tasks", data, f"{path.name} is not a JSON object", _RESAVE)
    return loaded


def _pick_split(available: list[str], split: str | None, data: str) -> str:
    chosen = split
    if chosen is None:
        chosen = "test" if "test" in available else "train"
    if chosen not in available:
        default = " (the default is 'test', else 'train')" if split is None else ""
        rule = f"names no split of {data}{default}; its splits: {sorted(available)}"
        fix = f"pass split= one of {sorted(available)}" if available else f"pass {_LAYOUTS}"
        raise ConfigError("split", split, rule, fix)
    return chosen


def _saved_dataset_rows(folder: Path, split: str | None, data: str) -> list[Any]:
    """A ``Dataset.save_to_disk`` folder: its Arrow stream files in ``state.json`` order."""
    if not (folder / "state.json").is_file():
        raise ConfigError("tasks", data, f"{folder} has no state.json", _RESAVE)
    state = _json(folder / "state.json", data)
    recorded = state.get("_split")
    if split is not None and recorded is not None and split != recorded:
        rule = f"{data} is a saved Dataset of split {recorded!r}"
        raise ConfigError("split", split, rule, f"pass split={recorded!r} or drop split=")
    files = state.get("_data_files")
    ok = isinstance(files, list) and all(isinstance(f, dict) and "filename" in f for f in files)
    if not ok or not files:
        raise ConfigError("tasks", data, "state.json lists no '_data_files'", _RESAVE)
    ipc, rows = _pyarrow("ipc"), []
    for entry in files:
        arrow = folder / str(entry["filename"])
        try:
            with ipc.open_stream(arrow) as reader:
                rows.extend(reader.read_all().to_pylist())
        except (OSError, ValueError) as e:  # pyarrow.ArrowInvalid is a ValueError
            rule = f"{arrow} is not a readable Arrow stream file ({e})"
            raise ConfigError("tasks", data, rule, _RESAVE) from e
    return rows


def _split_of(name: str) -> str:
    """The split a snapshot file belongs to: its name up to ``-``, ``_``, ``.``, space, digit."""
    return re.match(r"[^-_. 0-9]*", name).group()  # type: ignore[union-attr]


def _in_split(name: str, split: str) -> bool:
    rest = name[len(split) :]
    return name.startswith(split) and rest[:1] != "" and rest[0] in _SPLIT_END


def _snapshot_rows(root: Path, split: str | None, data: str) -> list[Any]:
    """A Hub snapshot: the split's ``.parquet`` / ``.jsonl`` files, sorted, from one folder."""
    files = sorted(
        p
        for p in root.rglob("*")
        if p.suffix in SNAPSHOT_SUFFIXES
        and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    if not files:
        raise ConfigError("tasks", data, "matches no dataset layout", f"pass {_LAYOUTS}")
    available = sorted({_split_of(p.name) for p in files} - {""})
    if split is None:
        split = _pick_split(available, None, data)
    chosen = [p for p in files if _in_split(p.name, split)]
    if not chosen:
        _pick_split(available, split, data)  # raises, naming the splits there are
    folders = sorted({str(p.parent.relative_to(root)) for p in chosen})
    if len(folders) > 1:
        rule = f"holds split {split!r} in several folders (configs?): {folders}"
        raise ConfigError("tasks", data, rule, f"pass one, e.g. tasks={str(root / folders[0])!r}")
    return [row for p in chosen for row in file_rows(p)]
