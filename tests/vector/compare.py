"""Comparing two vector envs result by result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """Equal values, arrays (dtype included) and nested info dicts."""
    if isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), f"{where}: {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, tuple | list):
        assert type(a) is type(b), where
        assert len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype, f"{where}: {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, where
        assert a.tolist() == b.tolist(), where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def text_actions(t: int, n: int) -> list[str]:
    return [f"move {t} {i}" * (1 + (t + i) % 3) for i in range(n)]


def run_both(
    ours: VectorEnv,
    theirs: VectorEnv,
    *,
    steps: int,
    mode: AutoresetMode,
    seed: int = 7,
    actions: Callable[[int, int], list[Any]] = text_actions,
) -> int:
    """Drive both vector envs with the same actions; assert equal results; count episode ends."""
    assert_same(ours.reset(seed=seed), theirs.reset(seed=seed), "reset")
    endings = 0
    for t in range(steps):
        batch = actions(t, ours.num_envs)
        got, want = ours.step(batch), theirs.step(batch)
        assert_same(got, want, f"step {t}")
        done = got[2] | got[3]
        endings += int(done.sum())
        if mode is AutoresetMode.DISABLED and done.any():
            got = ours.reset(options={"reset_mask": done.copy()})
            assert_same(got, theirs.reset(options={"reset_mask": done.copy()}), f"reset {t}")
    return endings
