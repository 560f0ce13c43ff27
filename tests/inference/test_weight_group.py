"""Weight sync through a process group, without a server process: buckets, the gloo wire
both ways, checksums, and ``SGLangEngine``'s calls against the answers recorded from SGLang's
source (``tests/fixtures/sglang/``)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path

import httpx
import pytest
import torch

from agentgym.error import ConfigError, InfraError
from agentgym.inference import SGLangEngine
from agentgym.inference import weight_group as wg
from agentgym.trainers.group_sync import GroupSync

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang"


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "a": torch.randn(300, 200, generator=g),  # 240,000 bytes
        "b": torch.randn(10, generator=g).to(torch.bfloat16),
        "c": torch.randn(100, 100, generator=g),  # 40,000 bytes
        "d": torch.randn(7, 3, generator=g).to(torch.bfloat16),
        "e": torch.randn(64, 64, generator=g),  # 16,384 bytes
    }


def test_buckets_hold_one_dtype_within_the_bound_and_every_tensor_once():
    weights = _weights()
    buckets = wg.plan_buckets(weights, bucket_bytes=60_000)
    assert sorted(n for b in buckets for n in b.names) == sorted(weights)
    for bucket in buckets:
        assert {t.dtype for t in bucket.tensors} == {bucket.dtype}
        assert bucket.nbytes <= 60_000 or len(bucket.names) == 1  # "a" alone, over the bound
    assert [b.names for b in buckets] == [["a"], ["c", "e"], ["b", "d"]]
    assert len(wg.plan_buckets(weights)) == 2  # 512 MiB: one per dtype
    with pytest.raises(ConfigError, match="bucket_bytes"):
        wg.plan_buckets(weights, bucket_bytes=0)


def test_tied_tensors_are_sent_once():
    weights = _weights()
    weights["tied"] = weights["a"]  # lm_head.weight tied to the embeddings
    weights["copy"] = weights["a"].clone()  # equal values, its own storage: sent
    assert list(wg.without_aliases(weights)) == ["a", "b", "c", "d", "e", "copy"]


@pytest.mark.parametrize("flatten", [True, False])
def test_buckets_cross_a_gloo_group_bit_for_bit(flatten):
    weights = _weights()
    buckets = wg.plan_buckets(weights, bucket_bytes=60_000)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    received: dict[str, torch.Tensor] = {}

    def server() -> None:
        group = wg.join_group("127.0.0.1", port, 1, 2, "gloo", 30)
        for b in buckets:
            shapes = [list(t.shape) for t in b.tensors]
            dtypes = [t.dtype for t in b.tensors]
            received.update(wg.receive_bucket(group, b.names, dtypes, shapes, flatten=flatten))

    thread = threading.Thread(target=server)
    thread.start()
    group = wg.join_group("127.0.0.1", port, 0, 2, "gloo", 30)
    for bucket in buckets:
        wg.send_bucket(group, bucket, flatten=flatten)
    thread.join(30)
    assert set(received) == set(weights)
    for name, tensor in weights.items():
        assert received[name].dtype == tensor.dtype
        assert torch.equal(received[name], tensor), name


def test_a_checksum_changes_with_one_bit_a_swap_or_a_dtype():
    weights = _weights()
    a = weights["a"]
    base = wg.tensor_checksum(a)
    assert wg.tensor_checksum(a.clone()) == base
    flipped = a.clone()
    flipped.view(torch.int32).view(-1)[12_345] ^= 1  # one ulp of one element
    assert wg.tensor_checksum(flipped) != base
    swapped = a.clone()
    swapped[[0, 1]] = swapped[[1, 0]]  # the same values: a sum or norm cannot tell
    assert wg.tensor_checksum(swapped) != base
    assert wg.tensor_checksum(a.to(torch.bfloat16)) != wg.tensor_checksum(a)
    assert wg.tensor_checksum(a.reshape(200, 300)) != base  # same bytes, another shape


def _engine(answers: dict[str, dict]) -> tuple[SGLangEngine, list[tuple[str, dict | None]]]:
    calls: list[tuple[str, dict | None]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        calls.append((request.url.path, body))
        answer = answers.get(request.url.path)
        if answer is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(answer["status"], json=answer["body"])

    return SGLangEngine("http://sglang:30000", transport=httpx.MockTransport(handle)), calls


BRACKET = {
    "/pause_generation": recorded("pause_generation"),
    "/flush_cache": {"status": 200, "body": None},
    "/continue_generation": recorded("continue_generation"),
    "/init_weights_update_group": recorded("init_weights_update_group_success"),
    "/update_weights_from_distributed": recorded("update_weights_from_distributed_success"),
}


def test_a_sync_is_bracketed_bucketed_and_names_its_version_last():
    buckets = wg.plan_buckets(_weights(), bucket_bytes=60_000)
    sent: list[list[str]] = []

    async def send(bucket: wg.Bucket) -> None:
        sent.append(bucket.names)

    async def run():
        engine, calls = _engine(BRACKET)
        engine.weight_version = 2
        body = wg.init_group_request("10.0.0.1", 29500, 2, backend="nccl")
        await engine.init_weights_group(body)
        await engine.update_weights_from_group(buckets, send, flatten=True)
        await engine.close()
        return engine, calls

    engine, calls = asyncio.run(run())
    assert engine.weight_version == 3
    assert [path for path, _ in calls] == [
        "/init_weights_update_group",
        "/pause_generation",
        *["/update_weights_from_distributed"] * 3,
        "/flush_cache",
        "/continue_generation",
    ]
    init = calls[0][1]
    assert init == {
        "master_address": "10.0.0.1",
        "master_port": 29500,
        "rank_offset": 1,
        "world_size": 2,
        "group_name": "weight_update_group",
        "backend": "nccl",
    }
    updates = [body for path, body in calls if path == "/update_weights_from_distributed"]
    assert [u["names"] for u in updates] == sent == [["a"], ["c", "e"], ["b", "d"]]
    assert updates[2]["dtypes"] == ["bfloat16", "bfloat16"]
    assert updates[2]["shapes"] == [[10], [7, 3]]
    assert [u.get("weight_version") for u in updates] == [None, None, "3"]
    assert {u["load_format"] for u in updates} == {"flattened_bucket"}


def test_a_refused_bucket_raises_sglangs_message_and_keeps_the_version():
    failing = {**BRACKET}
    failing["/update_weights_from_distributed"] = recorded(
        "update_weights_from_distributed_failure"
    )

    async def send(bucket: wg.Bucket) -> None:
        pass

    async def run():
        engine, calls = _engine(failing)
        with pytest.raises(InfraError, match="partially updated"):
            await engine.update_weights_from_group(wg.plan_buckets(_weights()), send)
        await engine.close()
        return engine, calls

    engine, calls = asyncio.run(run())
    assert engine.weight_version == 0
    assert calls[-1][0] == "/continue_generation"  # generation resumes


def test_sglangs_own_checksums_are_read_but_not_taken_for_agentgyms():
    async def run():
        engine, calls = _engine({"/weights_checker": recorded("weights_checker_checksum")})
        checksums, _, algorithm = await engine.weight_checksums()
        sync = GroupSync(backend="gloo")
        with pytest.warns(UserWarning, match="not verified"):
            await sync.check(engine, _weights())
        await engine.close()
        return checksums, algorithm, calls

    checksums, algorithm, calls = asyncio.run(run())
    assert checksums["model.layers.0.mlp.down_proj.weight"] == "03be77f1a2c9e460"
    assert algorithm is None
    assert calls[0] == ("/weights_checker", {"action": "checksum"})


def test_group_sync_arguments_are_checked_at_construction():
    with pytest.raises(ConfigError, match="weight_sync_backend"):
        GroupSync(backend="mpi")
    with pytest.raises(ConfigError, match="bucket_bytes"):
        GroupSync(bucket_bytes=1000)
