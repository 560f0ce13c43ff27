"""``SGLangEngine`` against ``agentgym serve`` in its own process, over real HTTP.

The server holds the tiny policy (seed 0); weight updates go through safetensors on disk, as a
trainer pushes them, and the server process is never restarted.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import torch

from agentgym.error import InfraError
from agentgym.inference import SamplingParams, SGLangEngine
from agentgym.models import load

torch.set_num_threads(1)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang"
PROMPT = [5, 17, 230, 41, 9]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """``agentgym serve`` (tiny policy, seed 0) on a free port; yields ``(url, process,
    models)``, ``models[s]`` the tiny policy from seed ``s`` (0: the served one) in this process.
    """
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentgym", "serve", "--port", str(port), "--seed", "0"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            models = {seed: load(seed=seed)[0] for seed in (0, 1)}  # while the server starts
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
            yield url, process, models
        finally:
            process.terminate()
            process.wait(30)


def _teacher_forced(model, prompt: list[int], ids: list[int]) -> list[float]:
    """log p(ids[i] | prompt + ids[:i]) by one forward pass of ``model``."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1]
    logprobs = torch.log_softmax(logits.float(), -1)
    return logprobs.gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()


def _sample(url: str, engine_kwargs=None) -> object:
    sampling = SamplingParams(temperature=1.0, max_tokens=10, seed=3, ignore_eos=True)

    async def run():
        engine = SGLangEngine(url, **(engine_kwargs or {}))
        try:
            return await engine.generate(PROMPT, sampling)
        finally:
            await engine.close()

    return asyncio.run(run())


def test_generate_matches_a_teacher_forced_pass(server):
    url, _, models = server
    model = models[0]
    out = _sample(url)
    assert len(out.token_ids) == 10
    assert out.finish_reason == "length"
    assert out.logprob_mode == "sampling"  # the server says what its logprobs are
    assert out.logprobs == pytest.approx(_teacher_forced(model, PROMPT, out.token_ids), abs=1e-4)
    assert out.weight_version == int(httpx.get(f"{url}/get_model_info").json()["weight_version"])


def test_update_weights_from_disk_changes_the_served_model_without_restart(server, tmp_path):
    url, process, models = server
    pid = process.pid
    new_model, old_model = models[1], models[0]
    new_model.save_pretrained(tmp_path / "step1", safe_serialization=True)
    old_model.save_pretrained(tmp_path / "step2", safe_serialization=True)

    async def run():
        engine = SGLangEngine(url)
        start = await engine.server_weight_version()
        engine.weight_version = start
        sampling = SamplingParams(temperature=1.0, max_tokens=8, seed=4, ignore_eos=True)
        await engine.update_weights(tmp_path / "step1")
        after_new = await engine.generate(PROMPT, sampling)
        await engine.update_weights(tmp_path / "step2")
        after_old = await engine.generate(PROMPT, sampling)
        await engine.close()
        return start, after_new, after_old

    start, after_new, after_old = asyncio.run(run())
    assert process.poll() is None
    assert process.pid == pid
    assert after_new.weight_version == start + 1
    assert after_old.weight_version == start + 2
    expected = _teacher_forced(new_model, PROMPT, after_new.token_ids)
    assert after_new.logprobs == pytest.approx(expected, abs=1e-4)
    stale = _teacher_forced(old_model, PROMPT, after_new.token_ids)
    assert max(abs(a - b) for a, b in zip(after_new.logprobs, stale, strict=True)) > 1e-2
    expected = _teacher_forced(old_model, PROMPT, after_old.token_ids)
    assert after_old.logprobs == pytest.approx(expected, abs=1e-4)
    info = httpx.get(f"{url}/get_model_info").json()
    assert info["weight_version"] == str(start + 2)
    assert after_new.info["meta_info"]["weight_version"] == str(start + 1)


def test_a_failing_weight_load_is_a_client_error_and_keeps_the_weights(server, tmp_path):
    url, _, models = server
    model = models[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    from safetensors.torch import save_file

    wrong = tmp_path / "wrong"
    wrong.mkdir()
    save_file({"model.embed_tokens.weight": torch.zeros(3, 3)}, str(wrong / "model.safetensors"))
    before = httpx.get(f"{url}/get_model_info").json()["weight_version"]

    async def run():
        engine = SGLangEngine(url)
        engine.weight_version = int(before)
        with pytest.raises(InfraError, match="no safetensors"):
            await engine.update_weights(empty)
        with pytest.raises(InfraError, match=r"shape \[3, 3\]"):
            await engine.update_weights(wrong)
        with pytest.raises(InfraError, match="no safetensors"):
            await engine.update_weights(tmp_path / "missing")
        assert engine.weight_version == int(before)
        await engine.close()

    asyncio.run(run())
    raw = httpx.post(f"{url}/update_weights_from_disk", json={"model_path": str(empty)})
    assert raw.status_code == 400
    assert raw.json()["success"] is False
    assert httpx.get(f"{url}/get_model_info").json()["weight_version"] == before
    out = _sample(url)  # still serving the seed-0 weights, untouched by the failed loads
    assert out.logprobs == pytest.approx(_teacher_forced(model, PROMPT, out.token_ids), abs=1e-4)


def test_pause_holds_generation_until_continue(server):
    url, _, _ = server

    async def waiting(client: httpx.AsyncClient) -> int:
        return (await client.get(f"{url}/get_load")).json()[0]["num_waiting_reqs"]

    async def run():
        engine = SGLangEngine(url)
        async with httpx.AsyncClient(timeout=30) as client:
            paused = await client.post(f"{url}/pause_generation", json={"mode": "retract"})
            task = asyncio.ensure_future(engine.generate(PROMPT, SamplingParams(max_tokens=2)))
            deadline = time.monotonic() + 30
            while await waiting(client) < 1:  # the request reached the server and is held
                assert time.monotonic() < deadline, "the request never reached the server"
                await asyncio.sleep(0.05)
            held = task.done()
            resumed = await client.post(f"{url}/continue_generation", json={})
            out = await asyncio.wait_for(task, 60)
            left = await waiting(client)
        await engine.close()
        return paused.json(), resumed.json(), held, out, left

    paused, resumed, held, out, left = asyncio.run(run())
    assert paused == json.loads((FIXTURES / "pause_generation.json").read_text())["body"]
    assert resumed == json.loads((FIXTURES / "continue_generation.json").read_text())["body"]
    assert held is False
    assert len(out.token_ids) >= 1
    assert left == 0


def _shape(value):
    """The JSON type tree of ``value`` (dict keys, list element types, leaf types)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    return "number" if isinstance(value, int | float) else type(value).__name__


def _recorded(name: str):
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_answers_have_sglangs_keys_and_types(server, tmp_path):
    url, _, _ = server
    body = {
        "input_ids": PROMPT,
        "sampling_params": {"max_new_tokens": 4, "temperature": 0.0},
        "return_logprob": True,
    }
    single = httpx.post(f"{url}/generate", json=body).json()
    recorded = _shape(_recorded("generate_final")["body"])
    ours = _shape(single)
    assert set(ours["meta_info"]) - set(recorded["meta_info"]) == {"logprob_mode"}  # our one extra
    ours["meta_info"].pop("logprob_mode")
    ours["meta_info"]["finish_reason"] = recorded["meta_info"]["finish_reason"]  # length vs stop
    assert single["meta_info"]["finish_reason"] == {"type": "length", "length": 4}
    assert ours == recorded

    batch = httpx.post(f"{url}/generate", json={**body, "input_ids": [PROMPT, [7, 8]]}).json()
    assert isinstance(batch, list)
    assert len(batch) == 2
    assert [len(b["output_ids"]) for b in batch] == [4, 4]
    assert [b["meta_info"]["prompt_tokens"] for b in batch] == [5, 2]

    info = httpx.get(f"{url}/get_model_info").json()
    assert _shape(info).keys() == _shape(_recorded("get_model_info")["body"]).keys()
    assert info["is_generation"] is True

    bad = httpx.post(f"{url}/update_weights_from_disk", json={"model_path": str(tmp_path)})
    failure = _recorded("update_weights_from_disk_failure")
    assert (bad.status_code, _shape(bad.json())) == (failure["status"], _shape(failure["body"]))

    error = httpx.post(f"{url}/generate", json={"input_ids": "nope"})
    recorded_error = _recorded("generate_error")
    assert (error.status_code, _shape(error.json())) == (
        recorded_error["status"],
        _shape(recorded_error["body"]),
    )
    assert httpx.post(f"{url}/flush_cache").status_code == 200
    assert httpx.get(f"{url}/health_generate").status_code == 200
