"""SGLangEngine's requests and answers, against an in-process fake of SGLang's HTTP API.

SGLang needs CUDA, so nothing here talks to a real server; the fake answers in the shapes SGLang's
``/generate`` and weight-update endpoints use.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys

import httpx
import pytest

from agentgym.error import ConfigError, InfraError
from agentgym.inference import SamplingParams, SGLangEngine


class FakeSGLang:
    """Records requests; answers /generate with a scripted completion."""

    def __init__(self, logprob_form="tuple", finish=None, delay=0.0):
        self.calls: list[tuple[str, dict]] = []
        self.logprob_form, self.delay = logprob_form, delay
        self.finish = finish or {"type": "length", "length": 3}

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.calls.append((request.url.path, body))
        if request.url.path == "/generate":
            await asyncio.sleep(self.delay)
            ids = [7, 8, 9]
            meta = {
                "finish_reason": self.finish,
                "prompt_tokens": len(body["input_ids"]),
                "completion_tokens": 3,
            }
            if self.logprob_form == "tuple":
                meta["output_token_logprobs"] = [[-0.1 * i, t, None] for i, t in enumerate(ids, 1)]
            else:
                meta["output_token_logprobs"] = [
                    {"logprob": -0.1 * i, "token_id": t} for i, t in enumerate(ids, 1)
                ]
            return httpx.Response(200, json={"text": "abc", "output_ids": ids, "meta_info": meta})
        if request.url.path.startswith("/update_weights"):
            return httpx.Response(
                200, json={"success": True, "message": "ok", "num_paused_requests": 0}
            )
        return httpx.Response(200, json={"status": "ok"})

    def engine(self, **kwargs) -> SGLangEngine:
        return SGLangEngine(
            "http://sglang:30000", transport=httpx.MockTransport(self.handle), **kwargs
        )


@pytest.mark.parametrize("form", ["tuple", "dict"])
def test_generate_sends_native_request_and_reads_logprobs(form):
    fake = FakeSGLang(form)
    sampling = SamplingParams(
        temperature=0.7, top_p=0.9, top_k=20, max_tokens=3, stop=["\n"], seed=5
    )

    async def run():
        engine = fake.engine()
        out = await engine.generate([1, 2, 3], sampling)
        await engine.close()
        return out

    out = asyncio.run(run())
    path, body = fake.calls[0]
    assert path == "/generate"
    assert body["input_ids"] == [1, 2, 3]
    assert body["return_logprob"] is True
    assert body["sampling_params"] == {
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 20,
        "max_new_tokens": 3,
        "ignore_eos": False,
        "skip_special_tokens": True,
        "no_stop_trim": False,
        "stop": ["\n"],
        "sampling_seed": 5,
    }
    assert out.token_ids == [7, 8, 9]
    assert out.logprobs == pytest.approx([-0.1, -0.2, -0.3])
    assert out.finish_reason == "length"
    assert out.logprob_mode == "temperature"
    assert out.trainable


def test_finish_reasons_map_to_ours():
    async def finish(reason):
        fake = FakeSGLang(finish=reason)
        engine = fake.engine()
        out = await engine.generate([1], SamplingParams())
        await engine.close()
        return out

    stop = asyncio.run(finish({"type": "stop", "matched": 2}))
    assert stop.finish_reason == "stop"
    assert stop.stop == 2
    assert asyncio.run(finish({"type": "abort", "message": "x"})).finish_reason == "abort"


def test_update_from_disk_drains_pauses_updates_flushes_and_continues(tmp_path):
    fake = FakeSGLang(delay=0.05)

    async def run():
        engine = fake.engine()
        running = asyncio.ensure_future(engine.generate([1], SamplingParams()))
        await asyncio.sleep(0.01)
        await engine.update_weights(tmp_path)
        assert running.done()  # the update waited for it
        after = await engine.generate([1], SamplingParams())
        await engine.close()
        return await running, after

    before, after = asyncio.run(run())
    paths = [path for path, _ in fake.calls]
    assert paths == [
        "/generate",
        "/pause_generation",
        "/update_weights_from_disk",
        "/flush_cache",
        "/continue_generation",
        "/generate",
    ]
    update = fake.calls[2][1]
    assert update["model_path"] == str(tmp_path.resolve())
    assert update["flush_cache"] is True
    assert fake.calls[1][1] == {"mode": "retract"}
    assert (before.weight_version, after.weight_version) == (0, 1)


def test_refused_update_is_an_infra_error_and_generation_resumes(tmp_path):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/update_weights_from_disk":
            return httpx.Response(400, json={"success": False, "message": "shape mismatch"})
        return httpx.Response(404)

    async def run():
        engine = SGLangEngine("http://sglang", transport=httpx.MockTransport(handler))
        with pytest.raises(InfraError, match="shape mismatch"):
            await engine.update_weights(tmp_path)
        assert engine._open.is_set()
        assert engine.weight_version == 0
        await engine.close()

    asyncio.run(run())


def test_state_dict_needs_colocation_and_bad_arguments_are_config_errors():
    async def run():
        engine = FakeSGLang().engine()
        with pytest.raises(ConfigError, match="colocated"):
            await engine.update_weights({"w": 1})
        await engine.close()

    asyncio.run(run())
    with pytest.raises(ConfigError, match="model_path"):
        SGLangEngine()
    with pytest.raises(ConfigError, match="pause_mode"):
        SGLangEngine("http://x", pause_mode="later")


def test_launch_command_and_a_server_that_dies_at_start():
    engine = SGLangEngine(
        model_path="/models/qwen", port=31000, server_args=["--tp", "1"], python=sys.executable
    )
    assert engine.launch_command() == [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/qwen",
        "--host",
        "127.0.0.1",
        "--port",
        "31000",
        "--tp",
        "1",
    ]
    assert engine.base_url == "http://127.0.0.1:31000"

    async def run():
        # Without sglang installed the module cannot be found and the process exits at once.
        dead = SGLangEngine(model_path="/nonexistent", python=sys.executable, startup_timeout=60)
        try:
            with pytest.raises(InfraError, match="exited"):
                await dead.generate([1], SamplingParams())
        finally:
            await dead.close()

    asyncio.run(run())


def test_a_server_that_does_not_answer_is_a_clear_infra_error(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async def run():
        real = SGLangEngine(f"http://127.0.0.1:{port}", timeout=10)
        with pytest.raises(InfraError, match=r"did not answer /generate: .*Fix: check that"):
            await real.generate([1], SamplingParams(max_tokens=1))
        fake = SGLangEngine("http://sglang", transport=httpx.MockTransport(refused))
        with pytest.raises(InfraError, match="did not answer /update_weights_from_disk"):
            await fake.update_weights(tmp_path)
        assert fake._open.is_set()  # generation is not left blocked
        assert fake.weight_version == 0
        await asyncio.gather(real.close(), fake.close())

    asyncio.run(run())
