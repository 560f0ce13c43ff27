"""Checkpoints that are either complete or absent, and the RNG states that make resuming exact.

``atomic_directory(path, backend)`` hands every rank one temporary directory next to ``path``;
when all ranks have written, rank 0 fsyncs every file and renames the directory to ``path``. A
process killed mid-save leaves only a ``.<name>.tmp-*`` directory, which ``resolve`` never
returns and the next save removes. Replacing an existing checkpoint takes two renames; a kill
between them leaves the previous one as ``.<name>.old-*``, which ``resolve`` falls back to.

A complete checkpoint holds ``MANIFEST`` (written last). Layout::

    <path>/config.json, model.safetensors, tokenizer*   the policy, loadable by agentgym.models.load
    <path>/trainer/state.pt                             step, fit-loop state, sampler, configs
    <path>/trainer/reference.pt                         the frozen reference policy (KL), if any
    <path>/trainer/rng/rank<r>.pkl                      python, numpy, torch (and CUDA) RNG states
    <path>/trainer/backend/                             module, optimizer, scheduler (the backend's)
    <path>/agentgym_checkpoint.json                     MANIFEST

``export_policy`` writes the policy's part (also the weights a server loads from disk).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import random
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.core.errors import ConfigError
from agentgym.trainers.backends.base import Backend

_DEEPSPEED_CPU_NOTICE = "Setting accelerator to CPU"

__all__ = [
    "MANIFEST",
    "atomic_directory",
    "export_policy",
    "find_latest",
    "load_rng_state",
    "read_manifest",
    "resolve",
    "rng_state",
    "save_rng_state",
    "set_rng_state",
    "write_manifest",
]

MANIFEST = "agentgym_checkpoint.json"
FORMAT_VERSION = 1


def _fsync_tree(root: Path) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(directory, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(Path(directory))


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _siblings(path: Path, kind: str) -> list[Path]:
    return sorted(path.parent.glob(f".{path.name}.{kind}-*"))


def _publish(tmp: Path, path: Path) -> None:
    """fsync ``tmp`` and move it to ``path``, replacing a previous checkpoint there."""
    _fsync_tree(tmp)
    if path.exists():
        old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
        os.rename(path, old)
        os.rename(tmp, path)  # a kill before this line leaves `old`, which resolve() finds
        _fsync_dir(path.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, path)
        _fsync_dir(path.parent)


def _remove_leftovers(path: Path) -> None:
    """Temporary directories of killed saves; old copies once ``path`` is complete."""
    for tmp in _siblings(path, "tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
    if (path / MANIFEST).is_file():
        for old in _siblings(path, "old"):
            shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str], backend: Backend) -> Iterator[Path]:
    """A temporary directory every rank writes into, published as ``path`` once all are done.

    Collective: every rank enters it. On an exception nothing is published.
    """
    path = Path(path)
    name = None
    if backend.rank == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(path)
        name = tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent)
        os.chmod(name, 0o755)  # mkdtemp's 0700 would carry over to the published checkpoint
    tmp = Path(backend.broadcast_object(name))
    try:
        yield tmp
        backend.barrier()
        if backend.rank == 0:
            if not (tmp / MANIFEST).is_file():
                raise ConfigError("checkpoint", str(tmp), "has no manifest", "write_manifest last")
            _publish(tmp, path)
        backend.barrier()
    except BaseException:
        if backend.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_manifest(directory: Path, info: dict[str, Any]) -> None:
    """The last file of a checkpoint: what wrote it. Its presence marks it complete."""
    text = json.dumps({"format": FORMAT_VERSION, **info}, indent=2, sort_keys=True)
    (directory / MANIFEST).write_text(text + "\n")


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the complete checkpoint at ``path``."""
    data: dict[str, Any] = json.loads((path / MANIFEST).read_text())
    return data


def resolve(path: str | os.PathLike[str]) -> Path:
    """The complete checkpoint at ``path``, or the previous one a killed save left beside it."""
    path = Path(path)
    if (path / MANIFEST).is_file():
        return path
    olds = [p for p in _siblings(path, "old") if (p / MANIFEST).is_file()]
    if not path.exists() and olds:
        return max(olds, key=lambda p: p.stat().st_mtime)
    raise ConfigError(
        "checkpoint",
        str(path),
        f"is not a complete agentgym checkpoint (no {MANIFEST})",
        "pass a directory written by Trainer.save, e.g. find_latest(run / 'checkpoints')",
    )


_STEP_DIR = re.compile(r"step-(\d+)")


def find_latest(directory: str | os.PathLike[str]) -> Path | None:
    """The complete ``step-<n>`` checkpoint with the largest ``n`` under ``directory``."""
    directory = Path(directory)
    if not directory.is_dir():
        return None
    found = []
    for entry in directory.iterdir():
        match = _STEP_DIR.fullmatch(entry.name)
        if match and (entry / MANIFEST).is_file():
            found.append((int(match.group(1)), entry))
    return max(found)[1] if found else None


def rng_state() -> dict[str, Any]:
    """Python's, numpy's global and torch's RNG states (CUDA's too where present)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_rng_state(directory: Path, rank: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"rank{rank}.pkl", "wb") as f:
        pickle.dump(rng_state(), f)


def load_rng_state(directory: Path, rank: int) -> None:
    """Restore what ``save_rng_state`` wrote (a pickle: load only checkpoints you trust)."""
    with open(directory / f"rank{rank}.pkl", "rb") as f:
        set_rng_state(pickle.load(f))


class _NoDeepSpeedCPUNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_DEEPSPEED_CPU_NOTICE)


@contextlib.contextmanager
def _quiet_deepspeed_import() -> Iterator[None]:
    """Drop DeepSpeed's "Setting accelerator to CPU" warning while ``save_pretrained`` runs.

    Where DeepSpeed is installed, transformers' ``save_pretrained`` imports it (accelerate's
    unwrapping checks for a ``DeepSpeedEngine``), and DeepSpeed warns on import when it finds no
    GPU: on every torch-backend run on a CPU, though nothing of DeepSpeed is used.
    """
    notice = _NoDeepSpeedCPUNotice()
    logger = logging.getLogger("DeepSpeed")  # the name DeepSpeed's own logger is created with
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


def export_policy(policy: Any, tokenizer: Any, directory: Path, weights: dict[str, Any]) -> None:
    """``policy`` (with ``weights``) and ``tokenizer`` as a transformers model directory, which
    ``agentgym.models.load`` reads; no progress bars, no DeepSpeed notice."""
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with _quiet_deepspeed_import():
            policy.save_pretrained(directory, state_dict=weights)
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    if hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(directory)
