"""Weights to ``agentgym serve`` through a gloo process group: after every sync the server's
logprobs are the trainer's, in a bounded number of calls and without files; a tensor corrupted
on the way is caught and named with the server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import torch

from agentgym import models
from agentgym.core.aio import run_sync
from agentgym.inference import SamplingParams, SGLangEngine
from agentgym.trainers import make
from agentgym.trainers.group_sync import GroupSync, WeightSyncMismatch
from agentgym.trainers.weight_sync import attach_server

torch.set_num_threads(1)

PROMPTS = [[5, 17, 230, 41, 9], [101, 7, 7, 64]]
CORRUPTED = "model.layers.0.mlp.down_proj.weight"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _serve(**env: str) -> Iterator[str]:
    """``agentgym serve`` (tiny policy, seed 0) in its own process; yields its URL."""
    port = _free_port()
    environ = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentgym", "serve", "--port", str(port), "--seed", "0"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environ,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"agentgym serve exited:\n{log.read().decode()[-3000:]}")
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "agentgym serve did not answer in 120 s"
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            process.wait(30)


def _trainer():
    # seed 1: not the served policy (seed 0), so the first sync must change every tensor
    return make("grpo", policy=models.load(seed=1), config={"group_size": 2, "batch_size": 2})


def _teacher_forced(model: torch.nn.Module, prompt: list[int], ids: list[int]) -> list[float]:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1]
    logprobs = torch.log_softmax(logits.float(), -1)
    return logprobs.gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()


def _check_logprobs(policy, trainer) -> None:
    """The server's sampling logprobs (temperature 1, no truncation: the model's own) for
    ``PROMPTS`` equal the trainer's, and carry the trainer's version."""
    sampling = SamplingParams(temperature=1.0, max_tokens=6, seed=3, ignore_eos=True)
    for prompt in PROMPTS:
        out = run_sync(policy.generate(prompt, sampling))
        assert out.weight_version == trainer.step_count
        expected = _teacher_forced(trainer.module.policy, prompt, list(out.token_ids))
        torch.testing.assert_close(out.logprobs, expected, rtol=0, atol=1e-4)


@pytest.mark.slow  # ~40 s wall on 2 busy cores: a server process, three syncs, six generations
def test_every_sync_over_gloo_gives_the_server_the_trainers_logprobs(tmp_path):
    with _serve() as url:
        trainer = _trainer()
        sync = GroupSync(backend="gloo", bucket_bytes=2**20)  # a 5 MiB model: several buckets
        policy = attach_server(trainer, SGLangEngine(url), tmp_path / "weights", sync=sync)
        try:
            assert sync.group is not None
            first = sync.calls
            assert 3 <= first <= 8  # buckets, not one call per tensor (51 tensors)
            _check_logprobs(policy, trainer)
            for _ in range(2):  # an update, by hand: new weights, the next version
                with torch.no_grad():
                    for p in trainer.module.policy.parameters():
                        p.add_(torch.randn_like(p) * 0.02)
                trainer.step_count += 1
                trainer.push_weights()
                _check_logprobs(policy, trainer)
            assert sync.calls == 3 * first
            assert policy.pushed == {0, 1, 2}
            assert not (tmp_path / "weights").exists()  # nothing went through files
        finally:
            run_sync(policy.close())


@pytest.mark.slow  # ~20-45 s wall: a server process and one sync
def test_a_tensor_corrupted_in_the_sync_is_named_with_the_server(tmp_path):
    with _serve(AGENTGYM_SERVE_FAULT_TENSOR=CORRUPTED) as url:
        trainer = _trainer()
        engine = SGLangEngine(url)
        sync = GroupSync(backend="gloo", flatten=False)  # the per-tensor wire this time
        try:
            with pytest.raises(WeightSyncMismatch) as caught:
                attach_server(trainer, engine, tmp_path / "weights", sync=sync)
            message = str(caught.value)
            assert repr(CORRUPTED) in message
            assert url in message
            assert "model.layers.0.mlp.up_proj.weight" not in message  # only the bad one
        finally:
            run_sync(engine.close())
