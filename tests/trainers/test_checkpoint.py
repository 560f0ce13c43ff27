"""Checkpoints: exact resume, atomic saves, and a run killed with SIGKILL that resumes without
repeating or skipping an update."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agentgym import models
from agentgym.error import ConfigError
from agentgym.recipes.run_folder import RunFolder
from agentgym.rollout import traces
from agentgym.rollout.traces import Trace
from agentgym.trainers import checkpoint, find_latest, fit, make

from .ds_step import CONFIGS, FIT_CONFIG, NOT_COMPARED, SyntheticSource, synthetic_episodes

REPO = Path(__file__).resolve().parents[2]

# grpo: two minibatches (Adam state, recomputed π_old), a KL reference model;
# ppo: a value model and KL in the reward; dapo: a dynamic-sampling batch half full at the save.
RESUME_CONFIGS: dict[str, dict[str, Any]] = {
    "grpo": FIT_CONFIG,
    "ppo": CONFIGS["ppo"] | {"learning_rate": 1e-3},
    "dapo": {"group_size": 4, "batch_size": 8, "learning_rate": 1e-3, "num_minibatches": 2},
}


def batches_for(algo: str) -> list[list]:
    config = RESUME_CONFIGS[algo]
    size = config.get("group_size", 1)
    groups = config["batch_size"] // size
    out = [synthetic_episodes(groups, size, seed=s) for s in range(20, 25)]
    if algo == "dapo":  # batch 1 has one informative group only: the sampler waits for more
        for index, batch in enumerate(out):
            for i, episode in enumerate(batch):
                informative = index != 1 or i < size
                episode.turns[-1].reward = float(i % size == 0 or not informative)
    return out


def trainer_for(algo: str, seed: int = 0):
    return make(algo, policy=models.load(seed=seed), config=RESUME_CONFIGS[algo])


def comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if k not in NOT_COMPARED}


@pytest.mark.parametrize("algo", sorted(RESUME_CONFIGS))
def test_resume_continues_bit_identically(algo, tmp_path):
    batches = batches_for(algo)
    straight = trainer_for(algo)
    expected = [comparable(straight.step(b)) for b in batches]
    if algo == "dapo":
        assert [m["update"] for m in expected[:3]] == [1, 0, 1]  # saved with a group pending

    first = trainer_for(algo)
    for batch in batches[:2]:
        first.step(batch)
    first.save(tmp_path / "ckpt")
    del first
    resumed = trainer_for(algo, seed=1)  # other initial weights: all of them must be loaded
    resumed.load(tmp_path / "ckpt")
    got = [comparable(resumed.step(b)) for b in batches[2:]]

    assert got == expected[2:]
    assert resumed.step_count == straight.step_count
    for name, tensor in straight.module.state_dict().items():  # policy and value model
        assert torch.equal(resumed.module.state_dict()[name], tensor), name


def test_rng_states_are_restored(tmp_path):
    trainer = trainer_for("grpo")
    random.seed(5)
    torch.manual_seed(5)
    trainer.save(tmp_path / "ckpt")
    expected = (random.random(), torch.rand(3))
    random.random()
    torch.rand(100)
    trainer.load(tmp_path / "ckpt")
    got = (random.random(), torch.rand(3))
    assert got[0] == expected[0]
    assert torch.equal(got[1], expected[1])


def test_a_checkpoint_is_a_loadable_policy_directory(tmp_path):
    trainer = trainer_for("grpo")
    trainer.step(batches_for("grpo")[0])
    trainer.save(tmp_path / "ckpt")
    model, _ = models.load(tmp_path / "ckpt")
    for name, tensor in trainer.policy_state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_a_torch_checkpoint_prints_no_deepspeed_notice(tmp_path):
    """Where DeepSpeed is installed, transformers' save_pretrained imports it, and on a machine
    without a GPU it warned "Setting accelerator to CPU" on every torch-backend run. A fresh
    process: DeepSpeed warns once per process, on import."""
    script = (
        "import sys\n"
        "from agentgym import models\n"
        "from agentgym.trainers import make\n"
        f"make('grpo', policy=models.load(seed=0)).save({str(tmp_path / 'ckpt')!r})\n"
        "print('deepspeed imported:', 'deepspeed' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=REPO
    )
    assert run.returncode == 0, run.stderr
    assert "Setting accelerator" not in run.stdout + run.stderr
    assert (tmp_path / "ckpt" / "config.json").is_file()


def test_a_failed_save_publishes_nothing_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    trainer = trainer_for("grpo")
    path = trainer.save(tmp_path / "ckpt")
    trainer.step(batches_for("grpo")[0])

    def broken(directory: Path) -> None:
        (directory / "partial").mkdir(parents=True)
        raise OSError("disk full")

    monkeypatch.setattr(trainer.backend, "save_checkpoint", broken)
    with pytest.raises(OSError, match="disk full"):
        trainer.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert checkpoint.read_manifest(path)["step"] == 0


def test_a_kill_between_the_two_renames_falls_back_to_the_old_copy(tmp_path):
    trainer = trainer_for("grpo")
    path = trainer.save(tmp_path / "ckpt")
    os.rename(path, tmp_path / ".ckpt.old-deadbeef")  # what a kill after the first rename leaves
    (tmp_path / ".ckpt.tmp-x").mkdir()  # and the new copy, never renamed into place
    assert trainer.load(path) == tmp_path / ".ckpt.old-deadbeef"
    with pytest.raises(ConfigError, match="not a complete agentgym checkpoint"):
        checkpoint.resolve(tmp_path / "elsewhere")


def test_find_latest_ignores_incomplete_directories(tmp_path):
    trainer = trainer_for("grpo")
    trainer.save(tmp_path / "step-00000002")
    (tmp_path / "step-00000003").mkdir()  # no manifest
    (tmp_path / ".step-00000004.tmp-abc").mkdir()
    assert find_latest(tmp_path) == tmp_path / "step-00000002"
    assert find_latest(tmp_path / "missing") is None


def worker(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "tests/trainers/ds_step.py", "--fit-worker", "--out", str(out), *extra]


HANG = 900.0
"""Seconds a fit worker may take before the test calls it a hang."""


def traced_updates(out: Path) -> list[int]:
    return sorted(set(traces.read(out)["update"].tolist()))


def logged_steps(out: Path) -> list[float]:
    text = (out / "metrics.jsonl").read_text() if (out / "metrics.jsonl").exists() else ""
    return [json.loads(line)["step"] for line in text.splitlines()]


@pytest.mark.slow
def test_sigkill_at_any_moment_resumes_without_repeating_or_skipping(tmp_path):
    out, steps = tmp_path / "run", "6"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # Each worker takes ~10 s alone; the deadlines catch a hang only (a run beside a loaded
    # machine's other jobs once took past 120 s while using 39 CPU-s in all).
    killed = subprocess.run(
        worker(out, "--steps", steps, "--kill-in-save", "3"), cwd=REPO, env=env, timeout=HANG
    )
    assert killed.returncode == -signal.SIGKILL  # killed mid-save of update 3
    assert logged_steps(out) == [1, 2, 3]  # update 3 was logged before its save
    assert traced_updates(out) == [1, 2, 3]  # its trace too: a checkpoint waits for it
    assert find_latest(out / "checkpoints") == out / "checkpoints" / "step-00000002"

    # Resume, and kill again at a random moment once update 4 is logged.
    running = subprocess.Popen(worker(out, "--steps", steps), cwd=REPO, env=env)
    deadline = time.monotonic() + HANG
    while len(logged_steps(out)) < 4 and running.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(random.uniform(0.0, 0.3))
    running.send_signal(signal.SIGKILL)
    running.wait(timeout=60)

    finished = subprocess.run(worker(out, "--steps", steps), cwd=REPO, env=env, timeout=HANG)
    assert finished.returncode == 0
    assert logged_steps(out) == [1, 2, 3, 4, 5, 6]

    reference = make("grpo", policy=models.load(seed=0), config=FIT_CONFIG)
    straight = tmp_path / "straight"
    fit(
        reference,
        SyntheticSource(4),
        steps=6,
        out=straight,
        checkpoint_every=1,
        recorder=RunFolder(straight),
        trace=Trace(straight),
    )
    # the trace continues: every update once, as a run never killed wrote it
    ours, theirs = traces.read(out), traces.read(straight)
    assert ours["update"].tolist() == theirs["update"].tolist() == sorted([1, 2, 3, 4, 5, 6] * 8)
    for name in ("token_ids", "loss_mask", "logprobs", "trainer_logprobs", "advantages"):
        for a, b in zip(ours[name], theirs[name], strict=True):
            np.testing.assert_array_equal(a, b)
    resumed_lines = (out / "metrics.jsonl").read_text().splitlines()
    straight_lines = (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()
    for a, b in zip(resumed_lines, straight_lines, strict=True):
        assert comparable(json.loads(a)) == comparable(json.loads(b))
    final = torch.load(out / "final.pt", weights_only=True)
    for name, tensor in reference.policy_state_dict().items():
        assert torch.equal(final[name], tensor), name
