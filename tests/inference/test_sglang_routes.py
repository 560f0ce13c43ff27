"""The native routes' bookkeeping with a scripted engine, in process (no model)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from safetensors.torch import save_file

from agentgym.inference import Completion, SamplingParams, SGLangEngine
from agentgym.inference.server import build_app


class _GatedEngine:
    """Completes a request only when told to; counts weight versions as HFEngine does."""

    def __init__(self) -> None:
        self.weight_version = 0
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.loaded: list[str] = []

    async def generate(self, prompt, sampling: SamplingParams) -> Completion:
        version = self.weight_version
        self.started.set()
        await self.release.wait()
        return Completion([7], [-0.25], "length", text="x", weight_version=version)

    async def update_weights(self, path) -> None:
        self.loaded.append(str(path))
        self.weight_version += 1


class _Tokenizer:
    def encode(self, text, add_special_tokens=True):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


@pytest.fixture
def checkpoint(tmp_path):
    import torch

    save_file({"w": torch.zeros(2)}, str(tmp_path / "model.safetensors"))
    return tmp_path


def test_a_request_is_labelled_with_the_version_it_ran_on(checkpoint):
    engine = _GatedEngine()
    app = build_app(engine, _Tokenizer())

    async def run():
        transport = httpx.ASGITransport(app=app)
        client = SGLangEngine("http://serve", transport=transport)
        early = asyncio.ensure_future(client.generate([1, 2], SamplingParams(max_tokens=1)))
        await engine.started.wait()
        # The server loads version "5" while the early request still runs on version 0.
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as raw:
            update = await raw.post(
                "/update_weights_from_disk",
                json={"model_path": str(checkpoint), "weight_version": "5"},
            )
            engine.release.set()
            late = await client.generate([1], SamplingParams(max_tokens=1))
            info = (await raw.get("/get_model_info")).json()
            text = await raw.post("/generate", json={"text": "ab", "return_logprob": True})
        out = await early
        await client.close()
        return update.json(), out, late, info, text.json()

    update, early, late, info, text = asyncio.run(run())
    assert update == {
        "success": True,
        "message": "Succeeded to update model weights.",
        "num_paused_requests": 0,
    }
    assert (early.weight_version, late.weight_version) == (0, 5)
    assert info["weight_version"] == "5"
    assert engine.loaded == [str(checkpoint)]
    assert text["meta_info"]["prompt_tokens"] == 2  # a text prompt, tokenized by the server
    assert text["meta_info"]["output_token_logprobs"] == [[-0.25, 7, None]]


def test_bad_generate_requests_are_400_in_sglangs_shape():
    app = build_app(_GatedEngine(), _Tokenizer())

    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as raw:
            bodies = [
                {"input_ids": [1], "stream": True},
                {"input_ids": [1], "text": "a"},
                {"input_ids": [[1], []]},
                {"input_ids": [1], "sampling_params": {"frequency_penalty": 1.0}},
                {"input_ids": [[1], [2]], "sampling_params": [{}]},
                {"input_ids": [1], "sampling_params": {"temperature": -1}},
            ]
            answers = [await raw.post("/generate", json=b) for b in bodies]
            pause = await raw.post("/pause_generation", json={"mode": "later"})
        return answers, pause

    answers, pause = asyncio.run(run())
    assert [a.status_code for a in answers] == [400] * 6
    assert all(set(a.json()) == {"error"} for a in answers)
    assert "temperature" in answers[-1].json()["error"]["message"]
    assert pause.status_code == 400
