"""A start evaluation shared by runs that begin from the same policy.

Runs that differ only in what happens after the start (PPO, GRPO and DAPO from one seed, a sweep
of learning rates) evaluate the same initial policy on the same episodes. With
``AGENTGYM_EVAL_CACHE`` naming a folder, the first such run evaluates and writes the result
there; the others (concurrent ones wait on a file lock) read it instead of playing the episodes
again. The key is a SHA-256 of the policy's weights (every tensor's bytes, dtype and shape) and
of every setting the evaluation depends on, so a result is reused only for the same weights
evaluated the same way. The record says which it was (``start_eval_cache``: ``hit`` or
``miss``).

Only single-process runs use it: gathering the weights is a collective under several ranks.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = ["CACHE_VARIABLE", "cached_evaluation", "fingerprint"]

CACHE_VARIABLE = "AGENTGYM_EVAL_CACHE"


def fingerprint(weights: Mapping[str, Tensor], settings: Mapping[str, Any]) -> str:
    """SHA-256 of ``weights`` (names, dtypes, shapes, bytes) and ``settings`` (JSON)."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for name in sorted(weights):
        tensor = weights[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.flatten().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cached_evaluation(
    weights: Callable[[], Mapping[str, Tensor]],
    settings: Mapping[str, Any],
    evaluate: Callable[[], dict[str, Any]],
    folder: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """``evaluate()``, or the result an earlier call with the same weights and settings stored
    in ``folder`` (default: ``$AGENTGYM_EVAL_CACHE``; unset: no cache)."""
    folder = folder if folder is not None else os.environ.get(CACHE_VARIABLE)
    if not folder:
        return evaluate()
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    key = fingerprint(weights(), settings)
    path = root / f"start-{key[:32]}.json"
    with _locked(root / f"start-{key[:32]}.lock"):
        if path.is_file():
            stored = json.loads(path.read_text())
            if stored.get("key") == key:
                return {**stored["result"], "start_eval_cache": "hit"}
        result = evaluate()
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps({"key": key, "settings": settings, "result": result}))
        partial.replace(path)
    return {**result, "start_eval_cache": "miss"}
