"""``agentgym serve``'s app and ``OpenAIEngine`` against it, over real HTTP on localhost."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import threading
import time

import gymnasium as gym
import httpx
import pytest
import torch
import uvicorn

import agentgym  # noqa: F401  (registers the envs)
from agentgym.error import ConfigError, InfraError
from agentgym.inference import Completion, HFEngine, OpenAIEngine, SamplingParams, sampling_logprobs
from agentgym.inference.chat import render_ids
from agentgym.inference.server import add_serve_arguments, build_app, served_names
from agentgym.models import load

torch.set_num_threads(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Served:
    """An app served by uvicorn on a free localhost port, in a thread."""

    def __init__(self, app):
        self.port = _free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def served():
    model, tok = load(seed=0)
    with _Served(build_app(HFEngine(model, tok), tok)) as url:
        yield url, model, tok


def test_token_level_completions_are_trainable_and_exact(served):
    url, model, tok = served
    prompts = [tok.encode("P F F\nF H G"), tok.encode("What is 2 + 3?"), [5]]
    sampling = SamplingParams(temperature=0.9, top_k=50, max_tokens=12, seed=3, ignore_eos=True)

    async def run():
        engine = OpenAIEngine(url, "agentgym-tiny")
        outs = await asyncio.gather(*(engine.generate(p, sampling) for p in prompts))
        local = HFEngine(model, tok)
        same = await local.generate(prompts[0], sampling)
        await asyncio.gather(engine.close(), local.close())
        return outs, same, engine.token_level

    outs, same, token_level = asyncio.run(run())
    assert token_level is True
    assert outs[0].token_ids == same.token_ids  # the same seed gives the same tokens over HTTP
    for prompt, out in zip(prompts, outs, strict=True):
        assert out.trainable
        assert out.logprob_mode == "sampling"
        assert len(out.token_ids) == 12
        with torch.no_grad():
            logits = model(torch.tensor([prompt + out.token_ids])).logits[0, len(prompt) - 1 : -1]
        expected = sampling_logprobs(logits, 0.9, 50).gather(
            -1, torch.tensor(out.token_ids)[:, None]
        )[:, 0]
        torch.testing.assert_close(torch.tensor(out.logprobs), expected, rtol=0, atol=1e-4)


def test_frozenlake_episode_end_to_end_over_http(served):
    """Both paths play FrozenLake: token ids through generate(), messages through chat()."""
    url, _, tok = served
    env = gym.make("agentgym/FrozenLake-v0")

    async def play(engine, use_chat):
        obs, info = env.reset(seed=1)
        messages, turns, done = list(obs), 0, False
        while not done and turns < 3:
            sampling = SamplingParams(max_tokens=24, seed=turns)
            if use_chat:
                out = await engine.chat(messages, sampling, tools=info["tools"])
                action = out.message
            else:
                ids = render_ids(tok, messages, tools=info["tools"], add_generation_prompt=True)
                out = await engine.generate(ids, sampling)
                action = tok.decode(out.token_ids, skip_special_tokens=True)
            obs, _, terminated, truncated, _ = env.step(action)
            messages += [action if use_chat else {"role": "assistant", "content": action}, *obs]
            turns, done = turns + 1, terminated or truncated
        return out, turns

    async def run():
        engine = OpenAIEngine(url, "agentgym-tiny", tokenizer=tok)
        result = await play(engine, use_chat=False), await play(engine, use_chat=True)
        await engine.close()
        return result

    (token_out, turns_a), (chat_out, turns_b) = asyncio.run(run())
    assert turns_a >= 1
    assert turns_b >= 1
    assert token_out.trainable
    assert not chat_out.trainable
    assert chat_out.message is not None


class _ScriptedEngine:
    """Answers every request with one fixed text (to test the server's parsing)."""

    def __init__(self, tok, text):
        self.ids = tok.encode(text, add_special_tokens=False)
        self.text = text
        self.prompts: list[list[int]] = []

    async def generate(self, prompt, sampling):
        self.prompts.append(list(prompt))
        return Completion(self.ids, [-0.5] * len(self.ids), "stop", text=self.text)


def test_chat_completions_parse_hermes_tool_calls():
    _, tok = load()
    text = 'I go left.\n<tool_call>{"name": "move", "arguments": {"direction": "left"}}</tool_call>'
    engine = _ScriptedEngine(tok, text)
    tools = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": "Where?"}]
    with _Served(build_app(engine, tok)) as url:
        answer = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "agentgym-tiny", "messages": messages, "tools": tools, "logprobs": True},
        ).json()
        plain = httpx.post(
            f"{url}/v1/chat/completions", json={"model": "agentgym-tiny", "messages": messages}
        ).json()
        models = httpx.get(f"{url}/v1/models").json()
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "I go left."
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "move"
    assert json.loads(call["function"]["arguments"]) == {"direction": "left"}
    assert len(choice["logprobs"]["content"]) == len(engine.ids)
    assert engine.prompts[0] == render_ids(tok, messages, tools=tools, add_generation_prompt=True)
    assert plain["choices"][0]["message"]["content"] == text  # no tools offered: nothing parsed
    assert models["data"][0]["id"] == "agentgym-tiny"


def test_bad_requests_get_openai_style_errors():
    _, tok = load()
    with _Served(build_app(_ScriptedEngine(tok, "x"), tok)) as url:
        stream = httpx.post(f"{url}/v1/completions", json={"prompt": [1, 2], "stream": True})
        bad_temp = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "temperature": -1})
        no_messages = httpx.post(f"{url}/v1/chat/completions", json={"messages": []})
    assert stream.status_code == bad_temp.status_code == no_messages.status_code == 400
    assert "temperature" in bad_temp.json()["error"]["message"]


def test_chat_only_and_text_only_servers_give_untrainable_results():
    _, tok = load()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/chat/completions":
            return httpx.Response(
                200,
                json={
                    "choices": [
                        {
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "left"},
                        }
                    ]
                },
            )
        return httpx.Response(404, json={"error": "not found"})

    def text_only(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "choices": [
                    {
                        "text": "down",
                        "finish_reason": "length",
                        "logprobs": {"tokens": ["down"], "token_logprobs": [-1.0]},
                    }
                ]
            },
        )

    async def run():
        chat_only = OpenAIEngine("http://fake/v1", "m", transport=httpx.MockTransport(handler))
        with pytest.raises(InfraError, match="chat"):
            await chat_only.generate([1, 2], SamplingParams())
        assert await chat_only.probe() is False
        answer = await chat_only.chat([{"role": "user", "content": "go"}], SamplingParams())
        texty = OpenAIEngine(
            "http://fake", "m", tokenizer=tok, transport=httpx.MockTransport(text_only)
        )
        retokenized = await texty.generate([1, 2], SamplingParams())
        bare = OpenAIEngine("http://fake", "m", transport=httpx.MockTransport(text_only))
        with pytest.raises(InfraError, match="token ids"):
            await bare.generate([1, 2], SamplingParams())
        for engine in (chat_only, texty, bare):
            await engine.close()
        return answer, retokenized

    answer, retokenized = asyncio.run(run())
    assert not answer.trainable
    assert answer.text == "left"
    assert answer.logprob_mode == "none"
    assert not retokenized.trainable
    assert retokenized.token_ids == tok.encode("down", add_special_tokens=False)


def test_serve_parser_defaults():
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args(["--port", "9000"])
    assert (args.model, args.host, args.port, args.max_batch_size) == (None, "127.0.0.1", 9000, 64)


def test_a_model_it_does_not_serve_is_404_model_not_found(served):
    """As OpenAI and vLLM answer; agentgym serve used to answer for any name."""
    url, _, _ = served
    models = httpx.get(f"{url}/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["agentgym-tiny"]
    for path, body in [
        ("/v1/completions", {"prompt": [5], "max_tokens": 1}),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
        ),
    ]:
        answer = httpx.post(f"{url}{path}", json={"model": "gpt-4o", **body}, timeout=30)
        assert answer.status_code == 404, path
        error = answer.json()["error"]
        assert (error["code"], error["param"]) == ("model_not_found", "model")
        assert "`gpt-4o`" in error["message"]
        assert "`agentgym-tiny`" in error["message"]
        served_name = httpx.post(
            f"{url}{path}", json={"model": "agentgym-tiny", **body}, timeout=30
        )
        assert served_name.status_code == 200, path

    async def run():
        engine = OpenAIEngine(url, "gpt-4o")
        try:
            await engine.generate([5], SamplingParams(max_tokens=1))
        finally:
            await engine.close()

    with pytest.raises(ConfigError, match="model='gpt-4o': is not served at") as refused:
        asyncio.run(run())
    assert "offers no /v1/completions" not in str(refused.value)  # not mistaken for a route


def test_served_names_are_the_given_names_else_the_model_path():
    assert served_names(None) == ("agentgym-tiny",)
    assert served_names("runs/x/ckpt") == ("runs/x/ckpt", os.path.abspath("runs/x/ckpt"))
    assert served_names("/m", ["fl", "fl-v2"]) == ("fl", "fl-v2")
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    assert parser.parse_args(["--served-model-name", "a", "b"]).model_name == ["a", "b"]
    assert parser.parse_args(["--model-name", "a"]).model_name == ["a"]
