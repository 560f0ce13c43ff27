"""Backends: the torch backend's accumulation and clipping, micro-batch planning, the DeepSpeed
config, and the acceptance test: the same batches give the same losses, gradient norms and
weights on the torch backend and on two DeepSpeed processes at ZeRO 0, 1, 2 and 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from agentgym import models
from agentgym.error import ConfigError
from agentgym.trainers import Backend, TorchBackend, make, make_backend
from agentgym.trainers.backends.deepspeed_backend import deepspeed_config
from agentgym.trainers.batch import plan_micro_batches

from .ds_step import CONFIGS, MICRO_BATCH_TOKENS, NOT_COMPARED, batches

REPO = Path(__file__).resolve().parents[2]


def test_torch_backend_satisfies_the_protocol():
    assert isinstance(TorchBackend(device="cpu"), Backend)


def test_step_returns_the_norm_before_clipping_and_clips_to_max():
    layer = nn.Linear(3, 1, bias=False)
    backend = TorchBackend(device="cpu")
    backend.prepare(
        layer,
        lambda m: torch.optim.SGD(m.parameters(), lr=1.0),
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda _: 1.0),
        max_grad_norm=1.0,
    )
    before = layer.weight.detach().clone()
    x = torch.tensor([[3.0, 4.0, 0.0]])
    backend.backward(backend.forward(input=x).sum())  # gradient (3, 4, 0): norm 5
    assert backend.step() == pytest.approx(5.0, abs=1e-12)
    step = before - layer.weight.detach()  # SGD lr 1: the clipped gradient
    torch.testing.assert_close(step, torch.tensor([[0.6, 0.8, 0.0]]), atol=1e-6, rtol=0)
    assert layer.weight.grad is None  # zeroed for the next step


def test_micro_batching_gives_the_update_of_one_big_batch():
    def run(budget: int | None) -> tuple[list[dict[str, float]], dict[str, torch.Tensor]]:
        trainer = make(
            "grpo", policy=models.load(seed=0), config=CONFIGS["grpo"], micro_batch_tokens=budget
        )
        metrics = [trainer.step(batch) for batch in batches("grpo")]
        return metrics, trainer.policy_state_dict()

    whole, whole_weights = run(None)
    micro, micro_weights = run(MICRO_BATCH_TOKENS)
    for a, b in zip(whole, micro, strict=True):
        for key in a.keys() - NOT_COMPARED:
            assert a[key] == pytest.approx(b[key], abs=1e-5), key
    for name, tensor in whole_weights.items():
        torch.testing.assert_close(micro_weights[name], tensor, atol=1e-6, rtol=0)


def test_plan_gives_every_rank_the_same_number_of_micro_batches():
    lengths = [30, 5, 12, 12, 40, 7, 3]
    plans = [
        plan_micro_batches(range(7), lengths, world_size=3, rank=r, token_budget=40)
        for r in range(3)
    ]
    assert len({len(p) for p in plans}) == 1
    rows = sorted(row for plan in plans for micro in plan for row in micro)
    assert rows == list(range(7))  # each row once
    for plan in plans:
        for micro in plan:
            if micro:
                assert len(micro) * max(lengths[i] for i in micro) <= 40 or len(micro) == 1
    # More ranks than rows: the rank without rows runs one dummy pass ([]).
    assert plan_micro_batches([0], [5], world_size=2, rank=1, token_budget=None) == [[]]


def test_plan_keeps_rows_with_the_same_tokens_in_one_micro_batch():
    # Two prompts' turns, interleaved as a batch holds them, all of one length: a budget of two
    # rows would pair each prompt with the other one; with the rows' tokens as keys, a
    # micro-batch holds one prompt's rows, which prefix sharing then runs once.
    tokens = [
        [1, 2, 9],
        [1, 3, 9],
        [1, 2, 9],
        [1, 3, 8],
        [1, 2, 8],
        [1, 3, 9],
        [1, 2, 7],
        [1, 3, 7],
    ]
    lengths = [3] * 8
    plain = plan_micro_batches(range(8), lengths, world_size=1, rank=0, token_budget=6)
    assert any(len({tuple(tokens[i][:2]) for i in micro}) > 1 for micro in plain)
    keyed = plan_micro_batches(range(8), lengths, world_size=1, rank=0, token_budget=6, keys=tokens)
    assert sorted(row for micro in keyed for row in micro) == list(range(8))
    assert all(len(micro) == 2 for micro in keyed)
    assert all(len({tuple(tokens[i][:2]) for i in micro}) == 1 for micro in keyed)


def test_make_backend_names_unknown_backends_and_options():
    with pytest.raises(ConfigError, match="Did you mean 'deepspeed'"):
        make_backend("deepspeeed")
    with pytest.raises(ConfigError, match="Did you mean 'micro_batch_tokens'"):
        make_backend("torch", micro_batch_token=8)
    with pytest.raises(ConfigError, match="micro_batch_tokens"):
        make_backend("torch", micro_batch_tokens=0)


def test_deepspeed_config_follows_our_settings():
    config = deepspeed_config(
        zero_stage=3,
        precision="bf16",
        max_grad_norm=None,
        offload_optimizer=True,
        overrides={"zero_optimization": {"stage3_max_live_parameters": 10}},
    )
    zero = config["zero_optimization"]
    assert zero["stage"] == 3
    assert zero["offload_optimizer"]["device"] == "cpu"
    assert zero["stage3_max_live_parameters"] == 10
    assert zero["overlap_comm"] is False
    assert config["bf16"] == {"enabled": True}
    assert config["gradient_clipping"] == 0.0  # None: no clipping, the norm is still reported
    assert config["managed_gradient_accumulation"] is False
    # Stage 0 in fp32: torch clips (DeepSpeed would report no norm), so DeepSpeed must not.
    plain = deepspeed_config(zero_stage=0, precision="fp32", max_grad_norm=1.0)
    assert plain["gradient_clipping"] == 0.0
    assert deepspeed_config(zero_stage=1, precision="fp32", max_grad_norm=1.0)[
        "gradient_clipping"
    ] == pytest.approx(1.0)


@pytest.fixture(scope="module")
def deepspeed_runs(tmp_path_factory):
    """Two DeepSpeed processes (torchrun, gloo on the CPU) training every CONFIGS algorithm at
    ZeRO 0-3: ``tests/trainers/ds_step.py``. Without deepspeed installed this fails, naming it."""
    out = tmp_path_factory.mktemp("deepspeed")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
    ]
    command += ["tests/trainers/ds_step.py", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return out, json.loads((out / "results.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("algo", sorted(CONFIGS))
def test_deepspeed_zero_0_to_3_on_two_processes_match_torch(deepspeed_runs, algo):
    out, results = deepspeed_runs
    assert results["world_size"] == 2
    trainer = make(algo, policy=models.load(seed=0), config=CONFIGS[algo])
    expected = [trainer.step(batch) for batch in batches(algo)]
    weights = trainer.policy_state_dict()
    for stage in range(4):
        run = results[f"{algo}-zero{stage}"]
        for step, (a, b) in enumerate(zip(expected, run["steps"], strict=True)):
            assert a.keys() == b.keys()
            for key in a.keys() - NOT_COMPARED:
                assert b[key] == pytest.approx(a[key], abs=1e-5), (stage, step, key)
        gathered = torch.load(out / f"{algo}-zero{stage}.pt", weights_only=True)
        assert gathered.keys() == weights.keys()
        for name, tensor in weights.items():
            torch.testing.assert_close(gathered[name], tensor, atol=1e-6, rtol=0)
        # A trainer that loaded the checkpoint saved after step 2 repeats step 3 exactly.
        third, resumed = run["steps"][2], run["resumed"]
        assert {k: resumed[k] for k in resumed.keys() - NOT_COMPARED} == {
            k: third[k] for k in third.keys() - NOT_COMPARED
        }
        assert run["resumed_weight_gap"] == 0.0


@pytest.fixture(scope="module")
def deepspeed_bf16_runs(tmp_path_factory):
    """``ds_step.py`` in DeepSpeed's bf16 mode (bf16 weights and activations, fp32 master
    weights in the optimizer) on two processes at ZeRO 0-3."""
    out = tmp_path_factory.mktemp("deepspeed-bf16")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", "2", "tests/trainers/ds_step.py", "--out", str(out)]
    command += ["--precision", "bf16"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return out, json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def fp32_reference():
    """The torch backend's fp32 metrics and weights on ``ds_step``'s batches, per algorithm."""
    found = {}
    for algo in sorted(CONFIGS):
        trainer = make(algo, policy=models.load(seed=0), config=CONFIGS[algo], precision="fp32")
        steps = [trainer.step(batch) for batch in batches(algo)]
        found[algo] = steps, trainer.policy_state_dict()
    return found


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_a_deepspeed_bf16_update_at_zero_stage(deepspeed_bf16_runs, fp32_reference, stage):
    # bf16 weights and activations round the log-probs' inputs, not the log-probs: the
    # log-softmax and the entropy run in fp32 on the bf16 logits, so a bf16 update tracks fp32.
    out, results = deepspeed_bf16_runs
    for algo, (expected, weights) in fp32_reference.items():
        run = results[f"{algo}-zero{stage}"]
        for step, (a, b) in enumerate(zip(expected, run["steps"], strict=True)):
            assert all(v == v and abs(v) != float("inf") for v in b.values()), (step, b)
            for key in ("loss", "approx_kl"):
                assert b[key] == pytest.approx(a[key], abs=2e-3), (algo, step, key)
            for key in ("entropy", "grad_norm"):
                assert b[key] == pytest.approx(a[key], rel=2e-2), (algo, step, key)
        gathered = torch.load(out / f"{algo}-zero{stage}.pt", weights_only=True)
        initial = models.load(seed=0)[0].state_dict()
        changed = sum(int((gathered[k] != initial[k].bfloat16().float()).sum()) for k in weights)
        assert changed > 1000  # the fp32 master weights moved some bf16 weights
        steps = len(expected) * CONFIGS[algo]["num_minibatches"]
        drift = 2 * steps * CONFIGS[algo]["learning_rate"]  # Adam moves a weight ≤ lr a step
        for name, tensor in weights.items():  # the fp32 update's weights, rounded to bf16
            torch.testing.assert_close(gathered[name], tensor, rtol=2**-8, atol=drift)
        # Resuming restores the fp32 master weights: the third step repeats exactly.
        third, resumed = run["steps"][2], run["resumed"]
        assert {k: resumed[k] for k in resumed.keys() - NOT_COMPARED} == {
            k: third[k] for k in third.keys() - NOT_COMPARED
        }
        assert run["resumed_weight_gap"] == 0.0
