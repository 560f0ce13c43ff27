"""Weights to a server by disk: pushed at attach and after every update as safetensors model
directories, the server's samples tagged with the trainer's policy version, batches of unknown
versions refused, and a server that fails stopping the run with the fix."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from agentgym import models
from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError, InfraError
from agentgym.core.types import Episode
from agentgym.inference.base import Completion, SamplingParams
from agentgym.inference.hf import HFEngine
from agentgym.inference.openai import OpenAIEngine
from agentgym.rollout.collector_source import CollectorSource
from agentgym.trainers import fit, make
from agentgym.trainers.weight_sync import (
    InferenceServerError,
    ServerPolicy,
    UnknownPolicyVersion,
    attach_server,
)

from .ds_step import CONFIGS, synthetic_episodes

FIT_CONFIG = {
    "group_size": 4,
    "batch_size": 8,
    "num_minibatches": 1,
    "learning_rate": 1e-3,
    "max_new_tokens": 8,
}


class FakeServer:
    """A server in this process: loads model directories only (as SGLang's
    ``/update_weights_from_disk``), its own ``weight_version`` counting loads."""

    base_url = "http://fake-server:1"

    def __init__(self, model: torch.nn.Module, tokenizer: Any) -> None:
        self.inner = HFEngine(copy.deepcopy(model), tokenizer, seed=0)
        self.paths: list[str] = []
        self.fail: Exception | None = None

    @property
    def weight_version(self) -> int:
        return self.inner.weight_version

    async def generate(self, prompt: Sequence[int], sampling: SamplingParams) -> Completion:
        if self.fail is not None:
            raise self.fail
        return await self.inner.generate(prompt, sampling)

    async def update_weights(self, weights: Any) -> None:
        assert isinstance(weights, str | Path), "a server gets a directory, never tensors"
        if self.fail is not None:
            raise self.fail
        self.paths.append(str(weights))
        await self.inner.update_weights(weights)

    async def close(self) -> None:
        await self.inner.close()


def _trainer(config: dict | None = None):
    return make("grpo", policy=models.load(seed=0), config=config or FIT_CONFIG)


def _source(server: FakeServer) -> CollectorSource:
    """FrozenLake, two turns per episode (fast); ``fit`` routes it through the server's
    ``ServerPolicy``."""
    return CollectorSource(
        server, "agentgym/FrozenLake-v0", group_size=4, max_turns=2, max_tokens=8
    )


def test_fit_pushes_model_directories_and_tags_samples_with_the_trainers_version(tmp_path):
    trainer = _trainer()
    server = FakeServer(trainer.module.policy, trainer.tokenizer)
    seen: list[list[int | None]] = []
    step = trainer.step

    def recording_step(episodes, **kwargs):
        seen.append(sorted({v for e in episodes for v in e.weight_versions}))
        return step(episodes, **kwargs)

    trainer.step = recording_step  # type: ignore[method-assign]
    try:
        fit(trainer, _source(server), steps=3, out=tmp_path, engine=server)
        policy = trainer.engine
        assert isinstance(policy, ServerPolicy)
        assert policy.engine is server
        # pushed at attach (version 0), then after each update; samples of the version served
        assert [Path(p).name for p in server.paths] == [f"step-{n:08d}" for n in range(4)]
        assert seen == [[0], [1], [2]]
        assert policy.version == 3
        assert policy.pushed == {0, 1, 2, 3}
        kept = sorted(p.name for p in (tmp_path / "weights").iterdir())
        assert kept == ["step-00000002", "step-00000003"]  # the newest two, no temporaries
        assert (tmp_path / "weights" / "step-00000003" / "model.safetensors").is_file()
        served = server.inner.model.state_dict()
        for name, tensor in trainer.policy_state_dict().items():
            torch.testing.assert_close(served[name], tensor, rtol=0, atol=0, msg=name)
    finally:
        run_sync(trainer.engine.close())


def test_resuming_pushes_the_checkpoints_weights_first(tmp_path):
    trainer = _trainer()
    server = FakeServer(trainer.module.policy, trainer.tokenizer)
    try:
        fit(trainer, _source(server), steps=2, out=tmp_path, engine=server)
    finally:
        run_sync(trainer.engine.close())
    resumed = _trainer()  # its initial weights, not the checkpoint's
    server = FakeServer(resumed.module.policy, resumed.tokenizer)
    try:
        fit(resumed, _source(server), steps=3, out=tmp_path, engine=server)
        assert [Path(p).name for p in server.paths][-2:] == ["step-00000002", "step-00000003"]
        assert resumed.engine.pushed >= {2, 3}
    finally:
        run_sync(resumed.engine.close())


def _episodes(versions: list[int | None]) -> list[Episode]:
    episodes = synthetic_episodes(2, 4, seed=0)  # CONFIGS["grpo"]'s batch
    for episode in episodes:
        episode.weight_versions = list(versions)
    return episodes


@pytest.mark.parametrize("versions", [[None], [0, None], [7]])
def test_a_batch_of_an_unknown_policy_version_is_refused(tmp_path, versions):
    trainer = make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"])
    server = FakeServer(trainer.module.policy, trainer.tokenizer)
    attach_server(trainer, server, tmp_path)
    try:
        before = {k: v.clone() for k, v in trainer.policy_state_dict().items()}
        with pytest.raises(UnknownPolicyVersion, match="did not push"):
            trainer.step(_episodes(versions))
        assert trainer.step_count == 0
        for name, tensor in trainer.policy_state_dict().items():
            assert torch.equal(tensor, before[name]), name
        assert trainer.step(_episodes([0]))["update"] == 1.0  # a pushed version trains
    finally:
        run_sync(trainer.engine.close())


def test_samples_of_weights_the_trainer_never_pushed_carry_no_version(tmp_path):
    trainer = make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"])
    server = FakeServer(trainer.module.policy, trainer.tokenizer)
    policy = ServerPolicy(server, trainer, tmp_path)  # not attached: nothing pushed yet
    try:
        completion = run_sync(policy.generate([1, 2, 3], SamplingParams(max_tokens=2)))
        assert completion.weight_version is None
    finally:
        run_sync(policy.close())


def test_a_server_that_fails_to_load_the_weights_stops_with_the_fix(tmp_path):
    trainer = make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"])
    server = FakeServer(trainer.module.policy, trainer.tokenizer)
    attach_server(trainer, server, tmp_path)
    server.fail = InfraError("POST /update_weights_from_disk answered HTTP 500")
    try:
        with pytest.raises(InferenceServerError) as caught:
            trainer.step(_episodes([0]))
        message = str(caught.value)
        assert server.base_url in message
        assert "update 1" in message
        assert "restart the server and rerun with --resume" in message
        with pytest.raises(InferenceServerError, match=r"failed while generating.*--resume"):
            run_sync(trainer.engine.generate([1, 2], SamplingParams(max_tokens=2)))
    finally:
        run_sync(trainer.engine.close())


def test_a_restarted_server_loads_the_newest_weights_before_it_generates(tmp_path):
    trainer = make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"])
    server = FakeServer(models.load(seed=1)[0], trainer.tokenizer)  # starts on other weights
    policy = attach_server(trainer, server, tmp_path)
    try:
        with torch.no_grad():  # what a restarted server holds: its start weights
            server.inner.model.load_state_dict(models.load(seed=1)[0].state_dict())
        policy.server_restarted(server.base_url)  # ServerFleet's callback
        completion = run_sync(policy.generate([1, 2, 3], SamplingParams(max_tokens=2)))
        assert [Path(p).name for p in server.paths] == ["step-00000000"] * 2  # loaded again
        assert completion.weight_version == 0
        served = server.inner.model.state_dict()
        for name, tensor in trainer.policy_state_dict().items():
            torch.testing.assert_close(served[name], tensor, rtol=0, atol=0, msg=name)
    finally:
        run_sync(policy.close())


def test_an_unreachable_server_is_refused_at_attach(tmp_path):
    trainer = make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"])
    server = FakeServer(trainer.module.policy, trainer.tokenizer)
    server.fail = InfraError("POST http://fake-server:1/pause_generation failed: ConnectError")
    try:
        with pytest.raises(InferenceServerError, match=r"update 0.*start the server"):
            attach_server(trainer, server, tmp_path)
    finally:
        run_sync(server.close())


def test_an_openai_compatible_server_is_refused_for_training(tmp_path):
    trainer = make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"])
    engine = OpenAIEngine("http://127.0.0.1:9", "tiny")
    try:
        with pytest.raises(ConfigError, match="no weight-update API"):
            attach_server(trainer, engine, tmp_path)
        assert trainer.engine is None
        assert not (tmp_path / "step-00000000").exists()
    finally:
        run_sync(engine.close())


def test_an_in_process_engine_is_not_synced_by_disk(tmp_path):
    trainer = make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"])
    engine = HFEngine(trainer.module.policy, trainer.tokenizer)
    try:
        with pytest.raises(ConfigError, match="attach_engine"):
            attach_server(trainer, engine, tmp_path)
    finally:
        run_sync(engine.close())


def test_fit_with_a_server_needs_a_folder_for_the_weights():
    trainer = _trainer()
    server = FakeServer(trainer.module.policy, trainer.tokenizer)
    try:
        with pytest.raises(ConfigError, match="weights_dir"):
            fit(trainer, "agentgym/FrozenLake-v0", steps=1, engine=server)
    finally:
        run_sync(server.close())
