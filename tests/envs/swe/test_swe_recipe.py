"""The SWE-v0 recipe (DeepSWE's GRPO++): found by (env, algo), its settings, and a few updates
of the tiny policy on shipped tasks in the local sandbox. Here, not in tests/recipes: CI's early
run takes tests/recipes before bubblewrap is installed (scripts/run_tests.sh)."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import load_file

from agentgym import models
from agentgym.cli import main
from agentgym.recipes.config import Layer, recipe_names, resolve_run
from agentgym.sandbox import bwrap_usable
from agentgym.trainers.algorithms.advantages import AdvantageEstimator
from agentgym.trainers.algorithms.aggregation import Aggregation

SWE = "agentgym/SWE-v0"


@pytest.fixture(autouse=True)
def one_thread():
    """torch on one thread, as the other trainer tests (the machine is shared)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_swe_recipe_is_found_by_env_and_algo_and_holds_deepswe_s_settings():
    assert f"{SWE} grpo: recipe swe/grpo.toml" in recipe_names()
    run = resolve_run(Layer("flags", {"env": SWE, "out": "unused"}))
    config = run.config
    assert config.advantage_estimator == AdvantageEstimator.RLOO
    assert (config.clip_eps_low, config.clip_eps_high) == (0.2, 0.28)
    assert (config.kl_beta, config.entropy_coef) == (0.0, 0.0)
    assert config.aggregation == Aggregation.SEQ_MEAN_TOKEN_SUM
    assert (config.learning_rate, config.temperature, config.group_size) == (1e-6, 1.0, 8)
    assert config.mask_outcomes == ("truncated",)
    assert run.env_kwargs["max_turns"] == 50
    assert run.options.weight_decay == 0.01
    # the scale is the user's to change, layer over layer, without losing the algorithm
    bigger = resolve_run(Layer("flags", {"env": SWE, "out": "x", "config": {"batch_size": 512}}))
    assert bigger.config.batch_size == 512
    assert bigger.config.clip_eps_high == 0.28


@pytest.fixture
def local_sandbox() -> None:
    if not bwrap_usable():
        reason = "bubblewrap (bwrap) cannot create sandboxes here"
        if os.environ.get("AGENTGYM_REQUIRE_DOCKER") == "1":
            pytest.fail(f"{reason} (AGENTGYM_REQUIRE_DOCKER=1 requires it)")
        pytest.skip(reason)


@pytest.mark.slow  # 29-40 s on 2 busy cores (~18 CPU-s): 4 episodes, each graded in a sandbox
def test_the_recipe_trains_the_tiny_policy_on_swe_tasks_in_the_local_sandbox(
    tmp_path, local_sandbox
):
    out = tmp_path / "run"
    small = ["--group-size", "2", "--batch-size", "2", "--set", "num_minibatches=1"]
    small += ["--set", "max_new_tokens=32", "--env-kwargs", "max_turns=2", "sandbox=local"]
    argv = ["train", "--env", SWE, "--steps", "2", "--out", str(out), *small]
    assert main([*argv, "--eval-episodes", "0", "--checkpoint-every", "1", "--no-progress"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["advantage_estimator"] == "rloo"
    assert run["config"]["mask_outcomes"] == ["truncated"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert row["episodes"] == 2
        assert row["turns_mean"] == 2  # played to SWE-v0's turn limit, then graded
        # The tiny policy never submits: every episode ran out of turns, so compact filtering
        # masked all of them and nothing was trained on (and nothing was punished).
        assert row["outcome/truncated"] == 1.0
        assert row["masked_episodes"] == 2
        assert row["sampled_tokens"] == 0
        assert row["grad_norm"] == 0
        assert row["skipped_update"] == 1  # no optimizer step on an all-masked batch
        assert row["optimizer_steps"] == 0
    # the checkpoints hold the policy as it started (no optimizer step ever ran)
    model, _ = models.load()  # the shipped format-only weights the run starts from (init)
    start = model.state_dict()
    saved = load_file(out / "checkpoints" / "step-00000002" / "model.safetensors")
    assert saved.keys() <= start.keys()
    assert all(torch.equal(saved[k], start[k]) for k in saved)
