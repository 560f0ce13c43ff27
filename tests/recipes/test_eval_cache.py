"""The start evaluation shared by runs that begin from the same policy (AGENTGYM_EVAL_CACHE):
reused only for the same weights and settings, computed once by concurrent runs."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import torch
from small_runs import train_args

from agentgym.cli import main
from agentgym.recipes.eval_cache import CACHE_VARIABLE, cached_evaluation, fingerprint

SETTINGS = {"env": "agentgym/FrozenLake-v0", "episodes": 8, "seed": 1}


def weights() -> dict[str, torch.Tensor]:
    return {"a": torch.arange(6, dtype=torch.float32).view(2, 3), "b": torch.ones(2)}


def test_fingerprint_tells_apart_one_changed_element_dtype_shape_and_setting() -> None:
    base = fingerprint(weights(), SETTINGS)
    assert fingerprint(weights(), dict(SETTINGS)) == base
    changed = weights()
    changed["a"][1, 2] += 1e-6
    assert fingerprint(changed, SETTINGS) != base
    assert fingerprint({**weights(), "b": torch.ones(2, dtype=torch.float64)}, SETTINGS) != base
    assert fingerprint({**weights(), "a": torch.arange(6.0).view(3, 2)}, SETTINGS) != base
    assert fingerprint(weights(), {**SETTINGS, "seed": 2}) != base


def test_reused_for_the_same_weights_only(tmp_path: Path) -> None:
    calls: list[int] = []

    def evaluate() -> dict[str, float]:
        calls.append(1)
        return {"success_rate": 0.25 * len(calls)}

    first = cached_evaluation(weights, SETTINGS, evaluate, tmp_path)
    again = cached_evaluation(weights, SETTINGS, evaluate, tmp_path)
    assert (first["start_eval_cache"], again["start_eval_cache"]) == ("miss", "hit")
    assert again["success_rate"] == first["success_rate"] == 0.25
    other = {**weights(), "b": torch.zeros(2)}
    assert cached_evaluation(lambda: other, SETTINGS, evaluate, tmp_path)["success_rate"] == 0.5
    assert len(calls) == 2


def test_no_folder_no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    result = cached_evaluation(weights, SETTINGS, lambda: {"success_rate": 1.0})
    assert result == {"success_rate": 1.0}


def test_concurrent_runs_evaluate_once(tmp_path: Path) -> None:
    calls: list[int] = []

    def evaluate() -> dict[str, float]:
        calls.append(1)
        time.sleep(0.3)  # long enough for the other thread to arrive while this one evaluates
        return {"success_rate": 0.5}

    results: list[dict[str, object]] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(cached_evaluation(weights, SETTINGS, evaluate, tmp_path))
        )
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert sorted(r["start_eval_cache"] for r in results) == ["hit", "hit", "miss"]


def test_two_runs_from_one_seed_share_the_start_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    starts = []
    for algo in ("grpo", "ppo"):  # PPO's critic is built beside the same initial policy
        out = tmp_path / algo
        args = [*train_args("--eval-episodes", "4"), "--algo", algo, "--steps", "1"]
        assert main([*args, "--out", str(out)]) == 0
        starts.append(json.loads((out / "start_eval.json").read_text()))
    assert [s["start_eval_cache"] for s in starts] == ["miss", "hit"]
    assert starts[1]["success_rate"] == starts[0]["success_rate"]
    assert starts[1]["episodes"] == starts[0]["episodes"] == 4
    assert "from the cache" in capsys.readouterr().out
