"""Weights to ``agentgym serve`` through a gloo process group: a tensor corrupted on the way
is caught and named with the server. (That the server's logprobs equal the trainer's after
every sync, in a bounded number of calls and without files, is checked end to end by
``tests/recipes/test_train_server.py``; the wire and the checksums by
``tests/inference/test_weight_group.py``.)"""

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
from agentgym.inference import SGLangEngine
from agentgym.trainers import make
from agentgym.trainers.group_sync import GroupSync, WeightSyncMismatch
from agentgym.trainers.weight_sync import attach_server

torch.set_num_threads(1)

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


@pytest.mark.slow  # ~30-60 s wall: two server processes and one sync to each
def test_a_tensor_corrupted_in_the_sync_is_named_with_the_server(tmp_path):
    """Two servers, a process group each, each verified: the faulty one is named, alone."""
    with _serve() as clean, _serve(AGENTGYM_SERVE_FAULT_TENSOR=CORRUPTED) as url:
        trainer = _trainer()
        engines = [SGLangEngine(clean), SGLangEngine(url)]
        sync = GroupSync(backend="gloo", flatten=False)  # the per-tensor wire this time
        try:
            with pytest.raises(WeightSyncMismatch) as caught:
                attach_server(trainer, engines, tmp_path / "weights", sync=sync)
            message = str(caught.value)
            assert repr(CORRUPTED) in message
            assert url in message
            assert clean not in message  # its group's sync was verified and matched
            assert "model.layers.0.mlp.up_proj.weight" not in message  # only the bad one
            assert sync.group is not None  # the clean server's group (server 0: this sync)
            assert sync.calls > 0
        finally:
            for engine in engines:
                run_sync(engine.close())
