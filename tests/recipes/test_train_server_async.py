"""``agentgym train --engine sglang --set max_staleness=1`` against ``agentgym serve`` in its own
process: a background thread generates on the server while the main thread updates and pushes.

One server process serves three runs: two updates, a resume to four (the batch collected ahead,
persisted in the checkpoint, is trained on after the resume), and two data-parallel ranks
sharing the server (``--nproc 2``), of which only rank 0 pushes.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from test_train_server import PushProbe, Server, _train

from agentgym import models
from agentgym.rollout.collector_source import CollectorSource
from agentgym.trainers import trainer as trainer_module
from agentgym.trainers.episodes import oldest_version

ASYNC = ("--set", "max_staleness=1")


def _spy(monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[int, list]], set[str]]:
    """The (update, every trained sample's oldest turn version) of each update reaching the
    loss, and the names of the threads that collected."""
    seen: list[tuple[int, list]] = []
    threads: set[str] = set()
    run_update = trainer_module.run_update
    collect = CollectorSource.collect

    def spy_update(inputs: Any, batch: list, step: int) -> dict[str, float]:
        seen.append((step, [oldest_version(s.episode) for s in batch]))
        return run_update(inputs, batch, step)

    def spy_collect(source: CollectorSource, num_groups: int) -> list:
        threads.add(threading.current_thread().name)
        return collect(source, num_groups)

    monkeypatch.setattr(trainer_module, "run_update", spy_update)
    monkeypatch.setattr(CollectorSource, "collect", spy_collect)
    return seen, threads


def _steps(out: Path) -> list[float]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


def _check_one_process(seen: list[tuple[int, list]], probe: PushProbe) -> None:
    assert [step for step, _ in seen] == [0, 1, 2, 3]
    for step, versions in seen:
        assert versions
        assert None not in versions
        assert min(versions) >= step - 1, (step, versions)  # never older than k = 1
        assert max(versions) <= step  # nor newer than the weights pushed before the update
    # pushes: 0 (attach), 1, 2; after the resume: 0 (attach), 2 (checkpoint), 3, 4
    assert [r["version"] for r in probe.records] == [0, 1, 2, 0, 2, 3, 4]
    for record in probe.records:  # the server samples exactly the weights pushed last
        assert record["served_version"] == record["version"]
        assert record["server"] == pytest.approx(record["trainer"], abs=1e-4, rel=0)


@pytest.mark.slow
def test_async_training_on_a_server_process_trains_no_sample_older_than_k(
    tmp_path, monkeypatch, capsys
):
    torch.set_num_threads(1)
    start_model = tmp_path / "server-model"
    model, tokenizer = models.load(seed=1)
    model.save_pretrained(start_model)
    tokenizer.save_pretrained(start_model)
    seen, threads = _spy(monkeypatch)
    probe = PushProbe(monkeypatch)
    out, log = tmp_path / "run", tmp_path / "server.log"

    server = Server(start_model, log)
    try:
        server.wait_ready()
        assert _train(out, server.url, *ASYNC, "--steps", "2") == 0
        ahead = torch.load(
            out / "checkpoints" / "step-00000002" / "trainer" / "state.pt", weights_only=False
        )
        assert ahead["state"]["source"]["ready"][0]  # a batch collected ahead was persisted
        assert ahead["state"]["pushed_versions"] == [0, 1, 2]  # its versions stay known
        assert _train(out, server.url, *ASYNC, "--steps", "4", "--resume") == 0
        _check_one_process(seen, probe)
        assert _steps(out) == [1.0, 2.0, 3.0, 4.0]
        assert threading.current_thread().name not in threads  # collected in the background

        before = log.stat().st_size
        dp = tmp_path / "dp"
        code = _train(dp, server.url, *ASYNC, "--steps", "2", "--nproc", "2")
        assert code == 0, capsys.readouterr().err[-3000:]
    finally:
        server.kill()
    with open(log, "rb") as f:
        f.seek(before)
        requests = f.read().decode(errors="replace")
    # one load per version (0 at attach, then after each update): rank 0's, never rank 1's;
    # both ranks trained on samples of known versions only (else UnknownPolicyVersion, exit 1)
    assert requests.count("POST /update_weights_from_disk") == 3
    assert _steps(dp) == [1.0, 2.0]
    assert sorted(p.name for p in (dp / "weights").iterdir()) == ["step-00000001", "step-00000002"]
