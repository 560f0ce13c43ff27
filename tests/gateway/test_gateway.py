"""The gateway with an unmodified ``openai.AsyncOpenAI`` client: token-exact episodes through
multi-turn tool use and history edits, isolated concurrent sessions, OpenAI-style errors."""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json

import httpx
import openai
import pytest
import torch

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.gateway import Gateway, gateway_routes
from agentgym.inference import HFEngine, sampling_logprobs
from agentgym.inference.chat import render_ids
from agentgym.inference.server import add_serve_arguments, build_app
from agentgym.models import load

torch.set_num_threads(1)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
        },
    }
]
CALL_TEXT = '<tool_call>{"name": "add"}</tool_call>'
SCRIPT_BIAS = 12.0
"""Logit bonus of the scripted next token: the tiny model then writes a tool call most of the
time, yet every logprob stays a real, non-zero number of the model's distribution."""


@functools.cache
def scripted() -> tuple[torch.nn.Module, object]:
    """The tiny policy, nudged to answer with a hermes tool call: each token of ``CALL_TEXT``
    (all distinct) favours the next one, the end of the generation prompt favours its first and
    ``</tool_call>`` favours ``<|im_end|>``. A function of the last token only, so the engine's
    cached decoding and a teacher-forced pass see the same model."""
    model, tok = load(seed=0)
    ids = tok.encode(CALL_TEXT, add_special_tokens=False)
    assert len(set(ids)) == len(ids)
    opener = render_ids(tok, [{"role": "user", "content": "x"}], add_generation_prompt=True)[-1]
    chain = [opener, *ids, tok.eos_token_id]
    table = torch.zeros(model.config.vocab_size, model.config.vocab_size)
    for before, after in itertools.pairwise(chain):
        table[before, after] = SCRIPT_BIAS
    last: dict[str, torch.Tensor] = {}
    model.model.embed_tokens.register_forward_pre_hook(lambda m, args: last.update(ids=args[0]))
    model.lm_head.register_forward_hook(lambda m, args, logits: logits + table[last["ids"]])
    return model, tok


@functools.cache
def plain() -> tuple[torch.nn.Module, object]:
    """The tiny policy as it is: free text, logprobs far from 0."""
    return load(seed=0)


@pytest.fixture(scope="module")
def gateway():
    model, tok = scripted()
    return Gateway(HFEngine(model, tok, seed=0), tok)


@pytest.fixture(scope="module")
def free_gateway():
    model, tok = plain()
    return Gateway(HFEngine(model, tok, seed=0), tok)


def client(gateway: Gateway, session_id: str | None, **kwargs) -> openai.AsyncOpenAI:
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway.app()))
    url = gateway.url("http://gateway", session_id) if session_id else "http://gateway/v1"
    return openai.AsyncOpenAI(base_url=url, api_key="unused", http_client=http, **kwargs)


def teacher_forced_gaps(model: torch.nn.Module, episode: Episode) -> list[float]:
    """|recorded - teacher-forced| logprob of every sampled token, each context on its own."""
    gaps: list[float] = []
    for start, end in episode.contexts:
        ids = torch.tensor([episode.token_ids[start:end]])
        with torch.no_grad():
            logits = model(ids).logits[0]  # [T, V]
        mask = episode.loss_mask[start:end]
        positions = torch.tensor([i for i, m in enumerate(mask) if m])  # [N]
        assert positions.min() > 0
        forced = sampling_logprobs(logits[positions - 1], 1.0, 0, 1.0)  # [N, V]
        forced = forced.gather(-1, ids[0, positions][:, None])[:, 0]
        recorded = torch.tensor(episode.logprobs[start:end])[positions]
        gaps += (forced - recorded).abs().tolist()
    return gaps


def test_an_sdk_tool_loop_is_one_token_exact_context(gateway):
    """A plain SDK loop (assistant messages sent back as the SDK returned them, tool results,
    one streamed call) records one context whose logprobs a teacher-forced pass reproduces."""
    model, tok = scripted()
    session = gateway.open()

    async def agent() -> list:
        llm = client(gateway, session)
        messages: list = [
            {"role": "system", "content": "You add numbers."},
            {"role": "user", "content": "What is 2 + 2?"},
        ]
        got = []
        for turn in range(4):
            kwargs = {"model": "agentgym-tiny", "messages": messages, "tools": TOOLS}
            kwargs |= {"max_tokens": 16, "seed": turn, "extra_body": {"return_token_ids": True}}
            if turn == 3:  # streamed: the program sees the same message, assembled from chunks
                stream = await llm.chat.completions.create(**kwargs, stream=True)
                calls = [c.choices[0].delta async for c in stream if c.choices]
                message = {"role": "assistant", "content": "".join(d.content or "" for d in calls)}
                got.append(message)
                break
            reply = (await llm.chat.completions.create(**kwargs)).choices[0]
            got.append(reply)
            messages.append(reply.message)
            for call in reply.message.tool_calls or ():
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "4"})
            if not reply.message.tool_calls:
                messages.append({"role": "user", "content": "Use the tool."})
        history.extend(messages)
        return got

    history: list = []
    got = asyncio.run(agent())
    episode = gateway.close(session, reward=1.0)
    assert episode.context_starts == []  # one context: every call continued the one before
    assert len(episode.turns) == 4
    assert episode.total_reward == 1.0
    assert sum(bool(r.message.tool_calls) for r in got[:3]) >= 2  # multi-turn tool use
    for (start, end), reply in zip(episode.turn_spans, got[:3], strict=False):
        assert episode.token_ids[start:end] == reply.model_extra["token_ids"]  # as sampled
    gaps = teacher_forced_gaps(model, episode)
    assert len(gaps) == sum(episode.loss_mask)
    assert max(gaps) < 1e-4
    # The template renders a tool call its own way: re-rendering the conversation would have
    # changed the tokens the first reply is trained on.
    second = episode.turn_spans[1][0]
    sent = [*history[:2], got[0].message.model_dump(exclude_none=True), history[3]]
    assert (
        render_ids(tok, sent, tools=TOOLS, add_generation_prompt=True)
        != (episode.token_ids[:second])
    )


def test_a_history_edit_starts_a_new_context(free_gateway):
    """Continuing a reply as it was extends the context; a summarised history or an edited
    reply starts a new one; every context is token-exact."""
    gateway = free_gateway
    model, _ = plain()
    session = gateway.open()
    system = {"role": "system", "content": "Be brief."}

    async def agent() -> None:
        llm = client(gateway, session)

        async def ask(messages: list, max_tokens: int = 16) -> dict:
            out = await llm.chat.completions.create(
                model="agentgym-tiny", messages=messages, max_tokens=max_tokens, seed=7
            )
            return {"role": "assistant", "content": out.choices[0].message.content}

        first = [system, {"role": "user", "content": "Name a prime."}]
        r1 = await ask(first, max_tokens=5)  # cut by length: the turn's end is not sampled
        second = [*first, r1, {"role": "user", "content": "Another one."}]
        r2 = await ask(second)
        await ask([*second, r2, {"role": "user", "content": "And a third."}])
        await ask([system, {"role": "user", "content": "Summary: two primes named."}])
        edited = {"role": "assistant", "content": r1["content"] + " (edited)"}
        await ask([*first, edited, {"role": "user", "content": "Another one."}])

    asyncio.run(agent())
    calls = gateway.sessions[session].calls
    assert [c.parent for c in calls] == [None, 0, 1, None, None]
    episode = gateway.close(session)
    assert len(episode.context_starts) == 3
    assert len(episode.turns) == 5
    gaps = teacher_forced_gaps(model, episode)
    assert len(gaps) == sum(episode.loss_mask)
    assert max(gaps) < 1e-4


def test_32_concurrent_sessions_hold_only_their_own_calls(gateway):
    async def program(k: int) -> tuple[str, list[list[int]]]:
        session = gateway.open()
        llm = client(gateway, session)
        messages: list = [{"role": "user", "content": f"task number {k}"}]
        sampled = []
        for _ in range(2):
            out = await llm.chat.completions.create(
                model="agentgym-tiny",
                messages=messages,
                max_tokens=3,
                extra_body={"return_token_ids": True},
            )
            sampled.append(out.choices[0].model_extra["token_ids"])
            messages += [out.choices[0].message, {"role": "user", "content": f"more {k}"}]
        return session, sampled

    async def run() -> list:
        return await asyncio.gather(*(program(k) for k in range(32)))

    _, tok = scripted()
    for k, (session, sampled) in enumerate(asyncio.run(run())):
        episode = gateway.close(session)
        assert episode.context_starts == []
        assert len(episode.turns) == 2
        assert [episode.token_ids[s:e] for s, e in episode.turn_spans] == sampled
        text = tok.decode(
            [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=False) if not m]
        )
        assert f"task number {k}<" in text
        assert f"more {k}<" in text
        assert sum(f"task number {j}<" in text for j in range(32)) == 1


def test_completions_continue_token_and_text_prompts(gateway):
    session = gateway.open()

    async def agent() -> None:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=gateway.app()), base_url="http://gateway"
        ) as http:
            head = {"X-Session-Id": session}
            body = {"prompt": "Once upon a time", "max_tokens": 4, "return_token_ids": True}
            first = (await http.post("/v1/completions", json=body, headers=head)).json()
            ids = first["choices"][0]["prompt_token_ids"] + first["choices"][0]["token_ids"]
            body = {"prompt": [*ids, 5], "max_tokens": 3, "stream": True}
            streamed = await http.post("/v1/completions", json=body, headers=head)
            assert streamed.text.endswith("data: [DONE]\n\n")
            chunks = [json.loads(x[6:]) for x in streamed.text.split("\n\n")[:-2]]
            assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
            # A text prompt continuing the first call's text: its sampled ids are kept as they
            # were; it forks the first call (already continued), so it is a context of its own.
            text = body_text + tok.decode(first["choices"][0]["token_ids"])
            body = {"prompt": text + " and then", "max_tokens": 2}
            assert (await http.post("/v1/completions", json=body, headers=head)).status_code == 200
            return first["choices"][0]["token_ids"]

    _, tok = scripted()
    body_text = "Once upon a time"
    sampled = asyncio.run(agent())
    calls = gateway.sessions[session].calls
    assert [c.parent for c in calls] == [None, 0, 0]
    assert calls[2].prompt_ids[: len(calls[0].tokens)] == calls[0].tokens
    assert calls[0].completion.token_ids == sampled
    episode = gateway.close(session)
    assert episode.context_starts == [0, len(calls[1].tokens)]
    assert episode.loss_mask.count(1) == sum(len(c.completion.token_ids) for c in calls)


BAD = {
    "unserved model": ({"model": "gpt-4o"}, openai.NotFoundError, "model_not_found"),
    "unknown session": ({"session": "nope"}, openai.NotFoundError, "session_not_found"),
    "closed session": ({"session": "closed"}, openai.ConflictError, "session_closed"),
    "tool without a name": (
        {"tools": [{"type": "function", "function": {"parameters": {}}}]},
        openai.BadRequestError,
        "invalid_tools",
    ),
    "tool parameters not an object": (
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]},
        openai.BadRequestError,
        "invalid_tools",
    ),
    "tools not a list": ({"tools": {"name": "f"}}, openai.BadRequestError, "invalid_tools"),
    "no session named": ({"session": None}, openai.BadRequestError, "missing_session"),
    "bad temperature": ({"temperature": -1}, openai.BadRequestError, "400"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_gets_an_openai_error_and_touches_no_session(gateway, case):
    change, error, code = BAD[case]
    change = dict(change)
    session = change.pop("session", "")
    if session == "closed":
        session = gateway.open()
        gateway.close(session)
    elif session == "":
        session = gateway.open()
    bystander = gateway.open()
    kwargs = {"model": "agentgym-tiny", "messages": [{"role": "user", "content": "hi"}]}
    kwargs |= {"max_tokens": 2} | change

    async def run() -> None:
        with pytest.raises(error) as raised:
            await client(gateway, session, max_retries=0).chat.completions.create(**kwargs)
        assert raised.value.code == code
        assert raised.value.message
        ok = await client(gateway, bystander).chat.completions.create(
            model="agentgym-tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        assert ok.choices[0].finish_reason in ("stop", "length")

    asyncio.run(run())
    if session in gateway.sessions:
        assert gateway.sessions[session].calls == []
    assert len(gateway.close(bystander).turns) == 1


def test_an_engine_failure_is_a_500_for_that_call_only():
    class Failing:
        async def generate(self, prompt, sampling):
            raise RuntimeError("the server went away")

    _, tok = scripted()
    gateway = Gateway(Failing(), tok)
    session = gateway.open()

    async def run() -> None:
        llm = client(gateway, session, max_retries=0)
        with pytest.raises(openai.InternalServerError, match="the server went away"):
            await llm.chat.completions.create(
                model="agentgym-tiny", messages=[{"role": "user", "content": "hi"}]
            )

    asyncio.run(run())
    episode = gateway.close(session)
    assert episode.turns == []
    assert episode.trainable is False


def test_agentgym_serve_mounts_the_gateway_beside_its_own_routes():
    model, tok = plain()
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    assert parser.parse_args(["--gateway"]).gateway is True
    app = build_app(HFEngine(model, tok, seed=0), tok, mount=gateway_routes)

    async def run() -> tuple[dict, dict]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as http:
            opened = (await http.post("/sessions", json={"id": "ep-1"})).json()
            assert opened == {"id": "ep-1", "base_url": "http://serve/sessions/ep-1/v1"}
            llm = openai.AsyncOpenAI(base_url=opened["base_url"], api_key="-", http_client=http)
            kwargs = {"model": "agentgym-tiny", "max_tokens": 3}
            await llm.chat.completions.create(messages=[{"role": "user", "content": "a"}], **kwargs)
            plain_call = await http.post(  # the server's own route: not recorded
                "/v1/chat/completions", json={"messages": [{"role": "user", "content": "b"}]}
            )
            assert plain_call.status_code == 200
            closed = (await http.post("/sessions/ep-1/close", json={"reward": 1})).json()
            again = await http.post("/sessions/ep-1/close")
            return closed, again.json()

    closed, again = asyncio.run(run())
    assert len(closed["turn_spans"]) == 1  # one call recorded: the session's
    start, end = closed["turn_spans"][0]
    assert closed["loss_mask"] == [0] * start + [1] * (end - start)
    assert closed["context_starts"] == [0]
    assert again["error"]["code"] == "session_closed"


def test_the_serve_command_mounts_the_gateway_only_when_asked(monkeypatch):
    from agentgym import cli
    from agentgym.inference import server

    mounts = []
    monkeypatch.setattr(server, "serve", lambda *a, mount=None, **k: mounts.append(mount))
    assert cli.main(["serve", "--port", "0"]) == 0
    assert cli.main(["serve", "--port", "0", "--gateway"]) == 0
    assert mounts == [None, gateway_routes]


def test_a_gateway_in_front_of_an_sglang_server_is_token_exact():
    """The engine behind the gateway is a server (SGLang's native API, here ``agentgym serve``
    speaking it): its completions carry no text, the recorded ids and logprobs are still exact."""
    from agentgym.inference.sglang import SGLangEngine

    model, tok = plain()
    served = build_app(HFEngine(model, tok, seed=0), tok)
    engine = SGLangEngine("http://serve", transport=httpx.ASGITransport(app=served))
    gateway = Gateway(engine, tok)
    session = gateway.open()

    async def agent() -> None:
        llm = client(gateway, session)
        messages: list = [{"role": "user", "content": "Count to three."}]
        for _ in range(2):
            out = await llm.chat.completions.create(
                model="agentgym-tiny", messages=messages, max_tokens=6
            )
            messages += [out.choices[0].message, {"role": "user", "content": "Again."}]
        await engine.close()

    asyncio.run(agent())
    episode = gateway.close(session)
    assert episode.context_starts == []
    assert len(episode.turns) == 2
    gaps = teacher_forced_gaps(model, episode)
    assert len(gaps) == sum(episode.loss_mask)
    assert max(gaps) < 1e-4


def test_sub_agents_in_one_session_are_contexts_of_their_own(free_gateway):
    """Two conversations interleaved in one session (a program and its sub-agent): each call
    continues its own conversation, so the episode holds two contexts, each token-exact."""
    gateway = free_gateway
    model, _ = plain()
    session = gateway.open()

    async def agent() -> None:
        llm = client(gateway, session)
        main_chat: list = [{"role": "user", "content": "Plan the trip."}]
        helper: list = [{"role": "system", "content": "You find trains."}]
        helper.append({"role": "user", "content": "Trains to Lyon?"})
        for turn in range(2):
            for chat in (main_chat, helper):
                out = await llm.chat.completions.create(
                    model="agentgym-tiny", messages=chat, max_tokens=4, seed=turn
                )
                chat += [out.choices[0].message, {"role": "user", "content": "More."}]

    asyncio.run(agent())
    assert [c.parent for c in gateway.sessions[session].calls] == [None, None, 0, 1]
    episode = gateway.close(session)
    assert len(episode.context_starts) == 2
    assert len(episode.turns) == 4
    gaps = teacher_forced_gaps(model, episode)
    assert len(gaps) == sum(episode.loss_mask)
    assert max(gaps) < 1e-4


def test_closed_session_ids_are_remembered_up_to_a_bound():
    _, tok = plain()
    gateway = Gateway(object(), tok, max_closed=2)  # no call reaches the engine
    ids = [gateway.open() for _ in range(3)]
    for session_id in ids:
        gateway.close(session_id)
    assert list(gateway.closed) == ids[1:]  # the oldest was forgotten: memory stays bounded

    async def call(session_id: str) -> None:
        await client(gateway, session_id, max_retries=0).chat.completions.create(
            model="agentgym-tiny", messages=[{"role": "user", "content": "hi"}]
        )

    with pytest.raises(openai.NotFoundError, match="unknown or expired session") as forgotten:
        asyncio.run(call(ids[0]))
    assert forgotten.value.code == "session_not_found"
    with pytest.raises(openai.ConflictError, match="was closed") as remembered:
        asyncio.run(call(ids[2]))
    assert remembered.value.code == "session_closed"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="max_closed"):
            Gateway(object(), tok, max_closed=bad)
