"""``agentgym train --engine sglang`` against ``agentgym serve`` in its own process.

The server starts on another policy than the trainer's; the trainer pushes its weights by disk
at start and after every update. After each push the server's logprobs for a fixed prompt must
equal a teacher-forced pass of the trainer's policy (no server restart). The server is then
killed mid-run: the run stops with an error naming the URL and the fix; a new server and
``--resume`` finish the run from its last checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from agentgym import models
from agentgym.cli import main
from agentgym.inference.base import SamplingParams
from agentgym.recipes.config import Layer, resolve_run
from agentgym.trainers.weight_sync import ServerPolicy

PROMPT = [5, 17, 230, 41, 9, 88, 3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``agentgym serve --model DIR`` on a free port, in its own process."""

    def __init__(self, model_dir: Path, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "ab")  # noqa: SIM115 (open while the server runs)
        command = [sys.executable, "-m", "agentgym", "serve", "--model", str(model_dir)]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, f"agentgym serve exited, see {self.log.name}"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"agentgym serve did not answer in {timeout} s"
            time.sleep(0.2)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        self.log.close()


def _teacher_forced(model: torch.nn.Module, ids: list[int]) -> list[float]:
    """log p(ids[i] | PROMPT + ids[:i]) in one forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([PROMPT + ids])).logits[0, len(PROMPT) - 1 : -1]
    logprobs = torch.log_softmax(logits.float(), -1)
    return logprobs.gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()


class PushProbe:
    """After each push, asks the server for PROMPT's greedy continuation and records its
    logprobs beside the trainer policy's teacher-forced ones; can kill the server after a
    given version."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.records: list[dict[str, Any]] = []
        self.push_s: list[float] = []
        self.kill_after: tuple[int, Server] | None = None
        push = ServerPolicy.update_weights
        probe = self

        async def update_weights(policy: ServerPolicy, weights: Any) -> None:
            started = time.perf_counter()
            await push(policy, weights)
            probe.push_s.append(time.perf_counter() - started)
            await probe.check(policy)

        monkeypatch.setattr(ServerPolicy, "update_weights", update_weights)

    async def check(self, policy: ServerPolicy) -> None:
        greedy = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
        completion = await policy.generate(PROMPT, greedy)
        model = policy.trainer.module.policy
        training = model.training
        model.eval()
        expected = await asyncio.to_thread(_teacher_forced, model, completion.token_ids)
        model.train(training)
        self.records.append(
            {
                "version": policy.version,
                "served_version": completion.weight_version,
                "server": completion.logprobs,
                "trainer": expected,
            }
        )
        if self.kill_after is not None and policy.version == self.kill_after[0]:
            self.kill_after[1].kill()


def _train(out: Path, url: str, *extra: str) -> int:
    return main(
        [
            "train",
            "--env",
            "agentgym/FrozenLake-v0",
            "--engine",
            "sglang",
            "--engine-url",
            url,
            "--steps",
            "3",
            "--group-size",
            "2",
            "--batch-size",
            "4",
            "--set",
            "num_minibatches=1",
            "--max-turns",
            "2",
            "--no-action-choices",
            "--eval-episodes",
            "0",
            "--checkpoint-every",
            "1",
            "--no-progress",
            "--out",
            str(out),
            *extra,
        ]
    )


@pytest.mark.slow
def test_train_against_a_server_process_syncs_weights_and_resumes_after_it_dies(
    tmp_path, monkeypatch, capsys
):
    torch.set_num_threads(1)
    start_model = tmp_path / "server-model"
    model, tokenizer = models.load(seed=1)  # not the trainer's policy: the first push must land
    model.save_pretrained(start_model)
    tokenizer.save_pretrained(start_model)
    out = tmp_path / "run"
    probe = PushProbe(monkeypatch)

    first = Server(start_model, tmp_path / "server.log")
    try:
        first.wait_ready()
        probe.kill_after = (2, first)
        assert _train(out, first.url) == 1
    finally:
        first.kill()
    error = capsys.readouterr().err
    assert f"inference server at {first.url}" in error
    assert "restart the server and rerun with --resume" in error
    checkpoints = sorted(p.name for p in (out / "checkpoints").glob("step-*"))
    assert checkpoints[-1] == "step-00000002"  # the last checkpoint is valid

    second = Server(start_model, tmp_path / "server.log")  # its start weights again
    try:
        second.wait_ready()
        assert _train(out, second.url, "--resume") == 0
    finally:
        second.kill()

    # pushes: 0 (attach), 1, 2 (then killed); after resume: 0 (attach), 2 (checkpoint), 3
    assert [r["version"] for r in probe.records] == [0, 1, 2, 0, 2, 3]
    for record in probe.records:
        assert record["served_version"] == record["version"]
        assert record["server"] == pytest.approx(record["trainer"], abs=1e-4, rel=0)
    pairs = [p for r in probe.records for p in zip(r["server"], r["trainer"], strict=True)]
    gap = max(abs(a - b) for a, b in pairs)
    print(
        f"server vs trainer logprobs: max |diff| {gap:.2e}; push (write + load) s: "
        + ", ".join(f"{s:.2f}" for s in probe.push_s)
    )
    by_version = {r["version"]: r["trainer"] for r in probe.records}
    assert by_version[1] != pytest.approx(by_version[0], abs=1e-4)  # the updates moved it
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1.0, 2.0, 3.0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3
    kept = sorted(p.name for p in (out / "weights").iterdir())
    assert kept == ["step-00000002", "step-00000003"]


def test_the_run_settings_refuse_what_a_server_cannot_do():
    from agentgym.core.errors import ConfigError

    base = {"env": "agentgym/FrozenLake-v0", "out": "unused"}
    with pytest.raises(ConfigError, match=r"engine_url.*is needed with engine sglang"):
        resolve_run(Layer("t", {**base, "engine": "sglang", "action_choices": False}))
    with pytest.raises(ConfigError, match=r"action_choices.*--no-action-choices"):
        resolve_run(Layer("t", {**base, "engine": "sglang", "engine_url": "http://h:1"}))
    with pytest.raises(ConfigError, match=r"engine_url.*is for a server"):
        resolve_run(Layer("t", {**base, "engine_url": "http://h:1"}))
    served = {"engine": "sglang", "engine_url": "http://h:1", "action_choices": False}
    run = resolve_run(Layer("t", {**base, **served}))
    assert (run.engine, run.engine_url, run.weights_dir) == ("sglang", "http://h:1", None)


def test_an_openai_server_is_refused_before_training_and_says_why(tmp_path, monkeypatch, capsys):
    """A chat/text-only server: refused at start, naming what it lacks and what to use."""
    import agentgym.recipes.engines as engines

    async def text_only(engine: Any) -> bool:
        return False

    monkeypatch.setattr(engines, "token_level", text_only)
    code = main(
        [
            "train",
            "--engine",
            "openai",
            "--engine-url",
            "http://127.0.0.1:9",
            "--no-action-choices",
            "--eval-episodes",
            "0",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    error = capsys.readouterr().err
    assert code == 2
    assert "not the sampled token ids" in error
    assert "--engine sglang" in error
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_weight_sync_through_a_group_is_for_an_sglang_server_and_builds_its_sync():
    from agentgym.core.errors import ConfigError
    from agentgym.recipes.run import _group_sync
    from agentgym.trainers.group_sync import GroupSync

    base = {"env": "agentgym/FrozenLake-v0", "out": "unused", "weight_sync": "group"}
    with pytest.raises(ConfigError, match=r"weight_sync.*needs engine sglang.*--engine sglang"):
        resolve_run(Layer("t", base))
    served = {"engine": "sglang", "engine_url": "http://h:1", "action_choices": False}
    with pytest.raises(ConfigError, match=r"weight_sync_bucket_mb.*must be >= 1"):
        resolve_run(Layer("t", {**base, **served, "weight_sync_bucket_mb": 0}))
    run = resolve_run(
        Layer("t", {**base, **served, "weight_sync_backend": "gloo", "weight_sync_bucket_mb": 64})
    )
    sync = _group_sync(run)
    assert isinstance(sync, GroupSync)
    assert (sync.backend, sync.bucket_bytes, sync.verify) == ("gloo", 64 * 2**20, True)
    assert _group_sync(resolve_run(Layer("t", {**base, **served, "weight_sync": "disk"}))) is None


@pytest.mark.slow  # one agentgym serve start, two updates: ~30-40 s wall on 2 busy cores
def test_train_launches_its_server_syncs_through_a_group_and_stops_it(
    tmp_path, monkeypatch, capsys
):
    from agentgym.recipes.servers import ServerFleet
    from agentgym.trainers.group_sync import GroupSync

    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    probe = PushProbe(monkeypatch)
    fleets: list[ServerFleet] = []
    start = ServerFleet.start

    def recording_start(fleet: ServerFleet) -> list[str]:
        fleets.append(fleet)
        return start(fleet)

    monkeypatch.setattr(ServerFleet, "start", recording_start)
    calls: list[int] = []  # /update_weights_from_distributed calls per push
    push = GroupSync.push

    async def counting_push(sync: GroupSync, engine: Any, weights: Any) -> None:
        before = sync.calls
        await push(sync, engine, weights)
        calls.append(sync.calls - before)

    monkeypatch.setattr(GroupSync, "push", counting_push)
    template = "{python} -m agentgym serve --seed 1 --host {host} --port {port}"
    out = tmp_path / "run"
    code = main(
        [
            "train", "--env", "agentgym/FrozenLake-v0", "--engine", "sglang",
            "--launch", "1", "--launch-command", template,
            "--weight-sync", "group", "--weight-sync-backend", "gloo",
            "--weight-sync-bucket-mb", "1",  # a 5 MiB policy: several buckets
            "--steps", "2", "--group-size", "2", "--batch-size", "4",
            "--set", "num_minibatches=1", "--max-turns", "2", "--no-action-choices",
            "--eval-episodes", "0", "--checkpoint-every", "2", "--no-progress",
            "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err[-3000:]
    # the server started on other weights (seed 1); each push, through the group, landed
    assert [r["version"] for r in probe.records] == [0, 1, 2]
    for record in probe.records:
        assert record["served_version"] == record["version"]
        assert record["server"] == pytest.approx(record["trainer"], abs=1e-4, rel=0)
    assert not (out / "weights").exists()  # no files: the process group carried them
    assert len(calls) == 3
    assert 3 <= calls[0] <= 8  # buckets, not one call per tensor (51 tensors)
    assert calls == [calls[0]] * 3
    (fleet,) = fleets
    (pid,) = fleet.pids
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{fleet.urls[0]}/health", timeout=2)  # stopped with the run
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
