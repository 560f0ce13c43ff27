"""``agentgym train --engine sglang --engine-url A --engine-url B`` against two ``agentgym serve``
processes: episodes spread over both, each on one server; every push loads on each; one
server killed mid-run turns its episodes into counted infra failures, the run goes on with the
other and takes the server back (at the current weights) once it answers again on its port;
then two data-parallel ranks share the two servers, rank 0 loading each update on each once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from test_train_server import _free_port, _train

from agentgym import models
from agentgym.inference.routing import EpisodeRoute, Router
from agentgym.trainers.weight_sync import ServerPolicy


class Serve:
    """``agentgym serve --model DIR`` on ``port`` (a free one by default), its log appended
    to ``log``."""

    def __init__(self, model_dir: Path, log: Path, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        command = [sys.executable, "-m", "agentgym", "serve", "--model", str(model_dir)]
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"agentgym serve exited, see {self.log}"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"agentgym serve did not answer in {timeout} s")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)

    def requests(self, since: int = 0) -> str:
        with open(self.log, "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")


@pytest.mark.slow  # three agentgym serve starts, a 3-update run, a 2-rank run: ~3 min wall
def test_two_servers_one_killed_mid_run_then_two_ranks(tmp_path, monkeypatch, capsys):
    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    start_model = tmp_path / "server-model"
    model, tokenizer = models.load(seed=1)  # not the trainer's policy: the first push must land
    model.save_pretrained(start_model)
    tokenizer.save_pretrained(start_model)

    picks: list[tuple[EpisodeRoute | None, int | None]] = []
    pick = Router.pick

    def spy_pick(router: Router, route: EpisodeRoute | None) -> int | None:
        index = pick(router, route)
        picks.append((route, index))
        return index

    monkeypatch.setattr(Router, "pick", spy_pick)
    a = Serve(start_model, tmp_path / "a.log")
    b = Serve(start_model, tmp_path / "b.log")
    servers = [a, b]
    restarted: list[Serve] = []
    push = ServerPolicy.update_weights
    pushes: list[tuple[int, list[bool]]] = []

    async def update_weights(policy: ServerPolicy, weights: Any) -> None:
        version = policy.trainer.step_count
        if version == 2:  # b was killed after push 1; it is restarted meanwhile: wait for it
            restarted[0].wait_ready()
        await push(policy, weights)
        pushes.append((version, list(policy.router.up)))
        if version == 1:
            b.kill()  # mid-run: the next batch's episodes on b fail
            # restarted on its port, as a supervisor would, while the run goes on
            restarted.append(Serve(start_model, tmp_path / "b2.log", b.port))

    monkeypatch.setattr(ServerPolicy, "update_weights", update_weights)
    out = tmp_path / "run"
    try:
        for server in servers:
            server.wait_ready()
        code = _train(out, a.url, "--engine-url", b.url, "--steps", "3")
        assert code == 0, capsys.readouterr().err[-3000:]
        (b2,) = restarted

        # every push reached both servers (b: up to its death, then from its restart on)
        assert [v for v, _ in pushes] == [0, 1, 2, 3]
        assert all(up == [True, True] for _, up in pushes)
        assert a.requests().count("POST /update_weights_from_disk") == 4
        assert b.requests().count("POST /update_weights_from_disk") == 2  # 0, 1
        assert b2.requests().count("POST /update_weights_from_disk") >= 2  # (1 if probed,) 2, 3
        # episodes went to both, and to b again once it was back
        assert "POST /generate" in a.requests()
        assert "POST /generate" in b.requests()
        assert "POST /generate" in b2.requests()
        pinned: dict[int, set[int]] = {}
        for route, index in picks:
            if route is not None and index is not None:
                pinned.setdefault(id(route), set()).add(index)
        assert all(len(s) == 1 for s in pinned.values())  # each episode on one server
        # b's episodes of the batch after its death: dropped as infra failures, counted
        metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        # (a batch whose every group lost an episode is an empty step: logged, then collected
        # anew for the same update)
        assert sorted({m["step"] for m in metrics}) == [1.0, 2.0, 3.0]
        assert metrics[-1]["step"] == 3.0
        assert sum(m.get("dropped/infra", 0.0) for m in metrics) > 0

        # two ranks, two servers: rank 0 loads each update on each server once
        before = [len(a.requests()), len(b2.requests())]
        dp = tmp_path / "dp"
        code = _train(dp, a.url, "--engine-url", b2.url, "--steps", "1", "--nproc", "2")
        assert code == 0, capsys.readouterr().err[-3000:]
        for server, since in zip([a, b2], before, strict=True):
            requests = server.requests(since)
            assert requests.count("POST /update_weights_from_disk") == 2  # 0, 1: rank 0's
            assert "POST /generate" in requests
        steps = [
            json.loads(line)["step"] for line in (dp / "metrics.jsonl").read_text().splitlines()
        ]
        assert steps == [1.0]
    finally:
        for server in [*servers, *restarted]:
            server.kill()


def test_engine_url_takes_one_server_or_several():
    import argparse

    from agentgym.core.errors import ConfigError
    from agentgym.recipes.cli import add_train_arguments, run_from_args
    from agentgym.recipes.config import Layer, resolve_run

    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    served = ["--engine", "sglang", "--no-action-choices", "--out", "unused"]
    one = run_from_args(parser.parse_args([*served, "--engine-url", "http://h:1"]))
    assert (one.engine_url, one.engine_urls) == ("http://h:1", ("http://h:1",))  # as before
    two = run_from_args(
        parser.parse_args([*served, "--engine-url", "http://h:1", "--engine-url", "http://h:2"])
    )
    assert two.engine_urls == ("http://h:1", "http://h:2")
    assert resolve_run(Layer("t", two.to_dict())).engine_urls == two.engine_urls  # run.json
    assert "repeated" in parser.format_help()
    base = {"out": "unused", "action_choices": False}
    with pytest.raises(ConfigError, match=r"engine_url.*twice"):
        resolve_run(Layer("t", {**base, "engine": "sglang", "engine_url": ["http://h:1"] * 2}))
    with pytest.raises(ConfigError, match=r"engine_url.*several are for engine sglang"):
        resolve_run(
            Layer("t", {**base, "engine": "openai", "engine_url": ["http://a", "http://b"]})
        )
    with pytest.raises(ConfigError, match=r"engine_url.*list of URLs.*--engine-url"):
        resolve_run(Layer("t", {**base, "engine": "sglang", "engine_url": []}))
