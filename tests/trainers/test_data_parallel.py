"""Data-parallel ranks that each collect their share of a batch (``ShardedSource``,
``CollectorSource(rank=, world_size=)``, ``agentgym train --nproc/--nnodes``).

The acceptance tests launch real processes (torchrun, gloo on the CPU): two ranks collecting
half of every batch train exactly as one process on the whole batch (GRPO and PPO, resumed
from a checkpoint midway), and a two-"node" launch on localhost trains FrozenLake."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from agentgym import models
from agentgym.error import ConfigError
from agentgym.rollout.collector_source import CollectorSource, shard_size
from agentgym.rollout.sharded_source import ShardedSource
from agentgym.trainers.checkpoint import read_manifest
from agentgym.trainers.sharding import any_rank, reduce_metrics

from .dp_fit import ShardSource
from .dp_fit import run as fit_run
from .ds_step import CONFIGS, NOT_COMPARED

REPO = Path(__file__).resolve().parents[2]
AGENTGYM = [sys.executable, "-c", "import sys; from agentgym.cli import main; sys.exit(main())"]
WORKER_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


class FakeRanks:
    """The part of a backend ``ShardedSource`` and ``reduce_metrics`` use, for ``world_size``
    ranks whose objects are given up front (this process is rank 0)."""

    def __init__(self, others: list[Any]) -> None:
        self.others, self.rank, self.world_size = others, 0, 1 + len(others)

    def all_gather_object(self, obj: Any) -> list[Any]:
        return [obj, *self.others]

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor + 1.0  # another rank says True


def test_groups_that_do_not_split_over_the_ranks_are_refused():
    assert shard_size(6, 3) == 2
    with pytest.raises(ConfigError, match=r"over 4 data-parallel ranks.*\[1, 2, 3, 6\]"):
        shard_size(6, 4)


def test_each_rank_plays_its_share_with_the_seeds_of_one_process():
    model, tokenizer = models.load(seed=0)
    from agentgym.inference import HFEngine

    engine = HFEngine(model, tokenizer, seed=0)

    def source(rank: int, world: int) -> CollectorSource:
        return CollectorSource(
            engine, "agentgym/FrozenLake-v0", group_size=2, seed=3, rank=rank, world_size=world,
            max_turns=1, max_tokens=8, temperature=1.0,
        )  # fmt: skip

    whole = source(0, 1).collect(4)
    ranks = [source(r, 2) for r in range(2)]
    shares = [rank.collect(4) for rank in ranks]
    assert [len(s) for s in shares] == [4, 4]
    joined = shares[0] + shares[1]
    assert [e.seed for e in joined] == [e.seed for e in whole] == [3, 3, 4, 4, 5, 5, 6, 6]
    # the same tasks (first prompts); the sampling seeds are the same too, but the engine's
    # batches differ (4 groups at once vs 2), so logits, and rarely a sampled token, may too
    def prompts(episodes: list[Any]) -> list[list[int]]:
        return [e.token_ids[: e.turn_spans[0][0]] for e in episodes]

    assert prompts(joined) == prompts(whole)
    assert len({tuple(p) for p in prompts(whole)}) > 1
    assert {r.position for r in ranks} == {4}  # the position counts the whole batch's groups


def test_sharded_source_joins_the_shares_in_rank_order_and_keeps_every_task():
    local = ShardSource(group_size=2, rank=0, world_size=2)
    other = ShardSource(group_size=2, rank=1, world_size=2)
    other_share = other.collect(4)
    for i, episode in enumerate(other_share):
        episode.reset_info = {"task_id": f"t{i}"}
    source = ShardedSource(local, FakeRanks([(other_share, 2.0)]))
    whole = ShardSource(group_size=2).collect(4)
    got = source.collect(4)
    assert [e.token_ids for e in got] == [e.token_ids for e in whole]
    assert source.stats["rank_collect_s_max"] == 2.0
    # every rank's own state (here FakeRanks hands back the share again), every rank's tasks
    state = source.state_dict()
    assert state["ranks"][0] == {"position": 4}
    assert state["seen_tasks"] == ["t0", "t1", "t2", "t3"]
    again = ShardedSource(ShardSource(group_size=2, rank=0, world_size=2), FakeRanks([None]))
    again.load_state_dict({"ranks": [{"position": 8}, {"position": 8}], "seen_tasks": ["t0"]})
    assert again.local.position == 8  # type: ignore[attr-defined]
    assert again.seen_tasks == {"t0"}


def test_sharded_source_refuses_to_gather_outside_the_main_thread():
    source = ShardedSource(ShardSource(2), FakeRanks([([], 0.0)]))
    errors: list[BaseException] = []

    def collect() -> None:
        try:
            source.collect(2)
        except ConfigError as error:
            errors.append(error)

    thread = threading.Thread(target=collect)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert "main thread" in str(errors[0])


def test_metrics_keep_global_values_and_average_each_ranks_own():
    ranks = FakeRanks([{"loss": 0.5, "step_s": 3.0, "only_there": 1.0}])
    joined = reduce_metrics({"loss": 0.5, "step_s": 1.0}, ranks)
    assert joined == {"loss": 0.5, "step_s": 2.0, "only_there": 1.0}
    assert any_rank(False, ranks) is True


def test_resuming_with_another_number_of_processes_says_why_and_what_to_do(tmp_path):
    trainer = fit_run("grpo", tmp_path, backend="torch", steps=1)
    checkpoint = tmp_path / "checkpoints" / "step-00000001"
    manifest = {**read_manifest(checkpoint), "world_size": 2}
    with pytest.raises(ConfigError) as caught:
        trainer._check_manifest(checkpoint, manifest)
    message = str(caught.value)
    assert "2 data-parallel processes, not 1" in message
    assert "resume with 2 processes" in message
    assert f"--model {checkpoint}" in message  # the checkpoint is a model directory
    assert (checkpoint / "config.json").is_file()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """``dp_fit.py`` on two processes (torchrun, gloo)."""
    out = tmp_path_factory.mktemp("data-parallel")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", "2", "tests/trainers/dp_fit.py", "--out", str(out)]
    done = subprocess.run(
        command, cwd=REPO, env=WORKER_ENV, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("algo", sorted(CONFIGS))
def test_two_ranks_collecting_halves_train_as_one_process(two_ranks, algo, tmp_path):
    one = fit_run(algo, tmp_path, backend="torch", steps=3)
    expected = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    got = [json.loads(line) for line in (two_ranks / algo / "metrics.jsonl").open()]
    assert [m["step"] for m in got] == [1.0, 2.0, 3.0]  # the third after the resume
    for step, (a, b) in enumerate(zip(expected, got, strict=True)):
        assert {"rank_collect_s", "rank_collect_s_max", "gather_s"} <= b.keys()
        for key in a.keys() - NOT_COMPARED:
            assert b[key] == pytest.approx(a[key], abs=1e-5), (step, key)
    weights = torch.load(two_ranks / algo / "final.pt", weights_only=True)
    for name, tensor in one.policy_state_dict().items():
        torch.testing.assert_close(weights[name], tensor, atol=1e-5, rtol=0)
    # the resumed run is the straight one, bit for bit
    straight = torch.load(two_ranks / algo / "straight.pt", weights_only=True)
    assert all(torch.equal(weights[name], tensor) for name, tensor in straight.items())
    timings = NOT_COMPARED | {"rank_collect_s", "rank_collect_s_max", "gather_s"}
    resumed_last = {k: v for k, v in got[-1].items() if k not in timings}
    straight_rows = (two_ranks / f"{algo}-straight" / "metrics.jsonl").open()
    straight_last = [json.loads(line) for line in straight_rows][-1]
    assert resumed_last == {k: v for k, v in straight_last.items() if k in resumed_last}
    manifest = read_manifest(two_ranks / algo / "checkpoints" / "step-00000003")
    assert manifest["world_size"] == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_two_node_launch_on_localhost_trains_and_resumes_only_on_two(tmp_path):
    out, port = tmp_path / "run", _free_port()
    flags = ["--env", "agentgym/FrozenLake-v0", "--out", str(out), "--steps", "2"]
    flags += ["--batch-size", "8", "--group-size", "4", "--max-turns", "3"]
    flags += ["--eval-episodes", "0", "--no-progress", "--checkpoint-every", "1"]
    flags += ["--nproc", "1", "--nnodes", "2", "--master-port", str(port)]
    nodes = [
        subprocess.Popen(
            [*AGENTGYM, "train", *flags, "--node-rank", str(rank)],
            cwd=REPO,
            env=WORKER_ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [node.communicate(timeout=280) for node in nodes]
    for node, (stdout, stderr) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, stdout[-3000:] + stderr[-5000:]
    printed = outputs[0][0]
    summary = json.loads(printed[printed.rindex("\n{\n") + 1 :])
    assert summary["steps"] == 2
    assert '"steps"' not in outputs[1][0]  # rank 1 prints no summary of its own
    rows = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [1.0, 2.0]
    assert all(r["episodes"] == 8 for r in rows)  # the whole batch, half from each node
    run = json.loads((out / "run.json").read_text())["run"]
    assert run["backend"] == "deepspeed"
    assert read_manifest(out / "checkpoints" / "step-00000002")["world_size"] == 2
    # one process cannot continue it, and says why and what to do instead
    command = [*AGENTGYM, "train", "--out", str(out), "--resume", "--steps", "3", "--nproc", "1"]
    done = subprocess.run(
        command, cwd=REPO, env=WORKER_ENV, capture_output=True, text=True, timeout=280
    )
    assert done.returncode != 0
    assert "was written by 2 data-parallel processes, not 1" in done.stderr, done.stderr[-3000:]
    assert "--model" in done.stderr
