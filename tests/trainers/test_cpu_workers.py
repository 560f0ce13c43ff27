"""The torch backend's CPU workers: micro-batches side by side on threads, gradients summed in
an order that does not depend on timing, the same updates as one micro-batch at a time."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from agentgym import models
from agentgym.error import ConfigError
from agentgym.trainers import TorchBackend, make
from agentgym.trainers.backends import torch_backend
from agentgym.trainers.batch import plan_micro_batches

from .ds_step import CONFIGS, NOT_COMPARED, batches


def _prepared(
    workers: int | None, module: nn.Module | None = None
) -> tuple[TorchBackend, nn.Module]:
    torch.manual_seed(0)
    module = module or nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    backend = TorchBackend(device="cpu", cpu_workers=workers)
    backend.prepare(
        module,
        lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda _: 1.0),
        max_grad_norm=None,
    )
    return backend, module


def _inputs(count: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(3 + i % 4, 8, generator=generator) for i in range(count)]


def _loss_of(backend: TorchBackend):
    def one(x: torch.Tensor) -> float:
        loss = backend.forward(input=x).square().mean()
        backend.backward(loss)
        return float(loss.detach())

    return one


@pytest.fixture
def two_threads():
    torch.set_num_threads(2)  # the trainer conftest restores its own setting after the test


def test_workers_run_micro_batches_at_once_on_their_own_threads(two_threads):
    backend, _ = _prepared(2)
    meeting = threading.Barrier(2, timeout=10)  # both first micro-batches must be in flight
    seen: list[tuple[int, int, int]] = []

    def one(i: int) -> int:
        if i in (0, 3):  # the first micro-batch of each worker's run: 0-2 and 3-5
            meeting.wait()
        seen.append((i, threading.get_ident(), torch.get_num_threads()))
        return i * 10

    assert backend.map_micro_batches(one, list(range(6))) == [0, 10, 20, 30, 40, 50]
    owners = {i: ident for i, ident, _ in seen}
    assert owners[0] == owners[1] == owners[2] != owners[3] == owners[4] == owners[5]
    assert threading.get_ident() not in owners.values()
    assert {threads for *_, threads in seen} == {1}  # 2 torch threads shared by 2 workers
    assert torch.get_num_threads() == 2  # the caller's own setting is untouched


def test_workers_sum_the_same_gradients_in_a_fixed_order(two_threads):
    xs = _inputs(7)
    alone, module = _prepared(1)
    losses = alone.map_micro_batches(_loss_of(alone), xs)
    expected = [p.grad.clone() for p in module.parameters()]

    runs = []
    for _ in range(3):
        backend, module = _prepared(2)
        assert backend.map_micro_batches(_loss_of(backend), xs) == pytest.approx(losses, rel=1e-6)
        runs.append([p.grad.clone() for p in module.parameters()])
    for grads in runs:
        for got, want in zip(grads, expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
        for got, first in zip(grads, runs[0], strict=True):
            assert torch.equal(got, first)  # bit for bit, whichever thread finished first


def test_workers_add_to_gradients_already_there(two_threads):
    xs = _inputs(4)
    alone, module = _prepared(1)
    for _ in range(2):
        alone.map_micro_batches(_loss_of(alone), xs)
    expected = [p.grad.clone() for p in module.parameters()]
    backend, module = _prepared(2)
    for _ in range(2):
        backend.map_micro_batches(_loss_of(backend), xs)
    for p, want in zip(module.parameters(), expected, strict=True):
        torch.testing.assert_close(p.grad, want, rtol=1e-6, atol=1e-7)


def test_workers_run_in_the_callers_grad_mode(two_threads):
    backend, _ = _prepared(2)
    with torch.no_grad():
        modes = backend.map_micro_batches(lambda _: torch.is_grad_enabled(), [0, 1, 2])
    assert modes == [False, False, False]
    assert backend.map_micro_batches(lambda _: torch.is_grad_enabled(), [0, 1]) == [True, True]


def test_a_failing_micro_batch_raises_after_every_worker_is_done(two_threads):
    backend, module = _prepared(2)
    finished = []
    loss_of = _loss_of(backend)

    def one(x: torch.Tensor) -> float:
        if x.shape[0] == 4:  # the second input: worker 0's second micro-batch
            raise ValueError("bad micro-batch")
        value = loss_of(x)
        finished.append(x.shape[0])
        return value

    with pytest.raises(ValueError, match="bad micro-batch"):
        backend.map_micro_batches(one, _inputs(4))
    assert sorted(finished) == [3, 5, 6]  # the other worker ran its whole share
    assert all(p.grad is None for p in module.parameters())  # nothing half-added


def test_concurrency_follows_torch_threads_and_the_buffer_cap(two_threads, monkeypatch):
    backend, module = _prepared(None)
    assert backend.concurrency == 2
    torch.set_num_threads(1)
    assert backend.concurrency == 1
    torch.set_num_threads(2)
    size = sum(p.numel() * p.element_size() for p in module.parameters())
    monkeypatch.setattr(torch_backend, "AUTO_WORKER_BYTES", size)  # room for one buffer
    assert backend.concurrency == 1
    assert _prepared(3)[0].concurrency == 3  # explicit: as asked
    assert (
        _prepared(1)[0].map_micro_batches(lambda _: threading.get_ident(), [0, 1])
        == [threading.get_ident()] * 2
    )


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
def test_bad_worker_counts_are_named(value):
    with pytest.raises(ConfigError, match="cpu_workers"):
        TorchBackend(device="cpu", cpu_workers=value)


def test_plan_cuts_balanced_runs_for_workers_within_the_budget():
    lengths = [30, 5, 12, 12, 40, 7, 3, 25, 25, 9]
    plan = plan_micro_batches(range(10), lengths, world_size=1, rank=0, token_budget=None, parts=2)
    assert sorted(row for micro in plan for row in micro) == list(range(10))
    assert len(plan) == 2
    tokens = [sum(lengths[r] for r in micro) for micro in plan]
    assert abs(tokens[0] - tokens[1]) <= max(lengths)  # about equal work for the two workers
    # The budget is shared by the micro-batches in flight together: each gets half.
    for micro in plan_micro_batches(
        range(10), lengths, world_size=1, rank=0, token_budget=100, parts=2
    ):
        assert len(micro) * max(lengths[r] for r in micro) <= 50 or len(micro) == 1
    # More parts than rows: one row each.
    assert plan_micro_batches([0, 1], [4, 9], world_size=1, rank=0, token_budget=None, parts=8) == [
        [1],
        [0],
    ]


def test_a_trainer_with_workers_takes_the_same_steps(two_threads):
    def run(workers: int) -> tuple[list[dict[str, float]], dict[str, torch.Tensor]]:
        trainer = make(
            "grpo", policy=models.load(seed=0), config=CONFIGS["grpo"], cpu_workers=workers
        )
        metrics = [trainer.step(batch) for batch in batches("grpo")]
        return metrics, trainer.policy_state_dict()

    alone, alone_weights = run(1)
    paired, paired_weights = run(2)
    again, again_weights = run(2)
    for a, b, c in zip(alone, paired, again, strict=True):
        for key in a.keys() - NOT_COMPARED:
            assert a[key] == pytest.approx(b[key], abs=1e-5), key
            assert b[key] == c[key], key  # the same run twice: bit for bit
    for name, tensor in alone_weights.items():
        torch.testing.assert_close(paired_weights[name], tensor, atol=1e-6, rtol=0)
        assert torch.equal(paired_weights[name], again_weights[name]), name


class _Summed(nn.Module):
    """Two parameters whose gradients autograd hands over as one tensor (``a + b``)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.linspace(0.5, 1.0, 4))
        self.b = nn.Parameter(torch.linspace(-0.2, 0.3, 4))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return (self.a + self.b) * input


def test_gradients_autograd_shares_between_parameters_are_summed_apart(two_threads):
    xs = [torch.full((4,), float(i + 1)) for i in range(4)]
    backend, module = _prepared(2, _Summed())
    backend.map_micro_batches(_loss_of(backend), xs)
    alone, reference = _prepared(1, _Summed())
    alone.map_micro_batches(_loss_of(alone), xs)
    for p, want in zip(module.parameters(), reference.parameters(), strict=True):
        assert want.grad.abs().min() > 0.1
        torch.testing.assert_close(p.grad, want.grad, rtol=1e-6, atol=0)
