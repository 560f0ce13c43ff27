"""A push to a server while a background thread generates on it (asynchronous training): the
load waits for the completions under way, so each completion is of the one version it records;
with data-parallel ranks only rank 0 loads, the others hold their completions and learn the
version; the versions pushed survive a checkpoint in ``trainer.state``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

from agentgym.core.aio import run_sync
from agentgym.core.types import Episode
from agentgym.inference.base import Completion, SamplingParams
from agentgym.trainers.weight_sync import ServerPolicy, UnknownPolicyVersion


class BlockingServer:
    """A server whose completions wait for ``release``; records generations and loads."""

    base_url = "http://blocking-server:1"

    def __init__(self) -> None:
        self.events: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.weight_version = 0

    async def generate(self, prompt: Sequence[int], sampling: SamplingParams) -> Completion:
        version = self.weight_version
        self.events.append(f"generate {version}")
        self.started.set()
        await asyncio.to_thread(self.release.wait)
        self.events.append(f"done {version}")
        return Completion([1], [-0.5], "length", weight_version=version)

    async def update_weights(self, weights: Any) -> None:
        assert isinstance(weights, Path)
        self.weight_version += 1
        self.events.append(f"load {self.weight_version}")

    async def close(self) -> None:
        pass


class Backend:
    def __init__(self, rank: int = 0, world_size: int = 1) -> None:
        self.rank, self.world_size = rank, world_size
        self.reduced: list[float] = []

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        self.reduced.append(float(tensor.sum()))
        return tensor


class FakeTrainer:
    """What a ``ServerPolicy`` uses of a trainer; ``exported`` releases the server's
    completions once the model directory is written (the load must still wait for them)."""

    tokenizer = None

    def __init__(self, backend: Backend, on_export: threading.Event | None = None) -> None:
        self.step_count, self.backend, self.state = 0, backend, {}
        self.on_export = on_export

    def attach_engine(self, engine: Any) -> None:
        pass

    def push_weights(self) -> None:
        pass

    def _export_policy(self, directory: Path, weights: dict) -> None:
        (directory / "model.safetensors").write_bytes(b"")
        if self.on_export is not None:
            self.on_export.set()


def test_a_push_waits_for_the_completion_under_way_and_the_next_records_the_new_version(
    tmp_path,
):
    server = BlockingServer()
    trainer = FakeTrainer(Backend(), on_export=server.release)
    policy = ServerPolicy(server, trainer, tmp_path)  # type: ignore[arg-type]
    greedy = SamplingParams(temperature=0, max_tokens=1)
    run_sync(policy.update_weights({}))  # version 0, as attach_server pushes
    server.release.clear()
    server.events.clear()
    with ThreadPoolExecutor(1, thread_name_prefix="collector") as collector:
        running = collector.submit(run_sync, policy.generate([3], greedy))
        assert server.started.wait(60)
        trainer.step_count = 1
        run_sync(policy.update_weights({}))  # writes (releasing the completion), then loads
        first = running.result(60)
        second = collector.submit(run_sync, policy.generate([3], greedy)).result(60)
    run_sync(policy.close())
    assert server.events == ["generate 1", "done 1", "load 2", "generate 2", "done 2"]
    assert (first.weight_version, second.weight_version) == (0, 1)  # the trainer's versions
    assert trainer.state["pushed_versions"] == [0, 1]


def test_rank_one_holds_its_completions_and_learns_the_version_rank_zero_pushes(tmp_path):
    server = BlockingServer()
    backend = Backend(rank=1, world_size=2)
    trainer = FakeTrainer(backend)
    policy = ServerPolicy(server, trainer, tmp_path)  # type: ignore[arg-type]
    trainer.step_count = 3
    run_sync(policy.update_weights({}))
    run_sync(policy.close())
    assert server.events == []  # no load from rank 1
    assert not list(tmp_path.iterdir())  # nor a model directory
    assert backend.reduced == [0.0, 0.0]  # the barrier before rank 0's load, then its outcome
    assert policy.pushed == {3}


def test_a_resumed_policy_knows_the_versions_pushed_before_the_checkpoint(tmp_path):
    trainer = FakeTrainer(Backend())
    trainer.state = {"pushed_versions": [0, 1, 2]}  # as Trainer.load restores it
    policy = ServerPolicy(BlockingServer(), trainer, tmp_path)  # type: ignore[arg-type]
    episode = Episode("agentgym/FrozenLake-v0", token_ids=[1, 2], loss_mask=[0, 1])
    episode.weight_versions = [1]
    policy.check([episode])  # no UnknownPolicyVersion: version 1 was pushed before
    episode.weight_versions = [3]
    with pytest.raises(UnknownPolicyVersion, match="pushed: \\[0, 1, 2\\]"):
        policy.check([episode])
