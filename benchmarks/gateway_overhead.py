"""The agent gateway's cost: per-call overhead against calling the engine directly, and episodes
per second of agent programs at several concurrencies.

Overhead, each side the same chat request (two messages, the tiny policy, ``--tokens`` sampled
tokens with EOS ignored so every call samples as many), ``--calls`` calls per side per round,
alternating call by call, ``--rounds`` rounds (a fresh session each); the median per-call
time of each side is reported:

- in-process: ``HFEngine.generate`` on the rendered prompt, against an unmodified
  ``openai.AsyncOpenAI`` client on a gateway session over an in-process ASGI transport;
- through ``agentgym serve`` over localhost HTTP: the server's own ``/v1/chat/completions``
  against the gateway mounted beside it (``/sessions/<id>/v1``).

Episodes per second: ``AgentProgramSource.collect`` of ``--episodes`` programs that each make
two chat calls (the second continues the first), at 1, 8 and 64 programs at once::

    .venv/bin/python benchmarks/gateway_overhead.py --out gateway.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import threading
import time
from typing import Any

import httpx
import openai
import torch
import uvicorn

from agentgym.gateway import Gateway, gateway_routes
from agentgym.gateway.source import AgentProgramSource
from agentgym.inference import HFEngine, SamplingParams
from agentgym.inference.chat import render_ids
from agentgym.inference.server import build_app
from agentgym.models import load

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Say something about the weather today."},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _alternating(first: Any, second: Any, n: int) -> tuple[list[float], list[float]]:
    """``n`` timed calls of each, alternating one by one (after one untimed call of each), so
    that a noisy neighbour slows both sides alike."""
    await first()
    await second()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(n):
        for call, into in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            await call()
            into.append(time.perf_counter() - started)
    return times


async def overhead_in_process(tokens: int, calls: int, rounds: int) -> dict[str, float]:
    model, tok = load(seed=0)
    engine = HFEngine(model, tok, seed=0)
    gateway = Gateway(engine, tok)
    prompt = render_ids(tok, MESSAGES, add_generation_prompt=True)
    sampling = SamplingParams(max_tokens=tokens, ignore_eos=True)
    body = {"max_tokens": tokens, "extra_body": {"ignore_eos": True}}
    direct: list[float] = []
    through: list[float] = []
    transport = httpx.ASGITransport(app=gateway.app())
    async with httpx.AsyncClient(transport=transport) as http:
        for _ in range(rounds):
            session = gateway.open()
            client = openai.AsyncOpenAI(
                base_url=gateway.url("http://gateway", session), api_key="-", http_client=http
            )
            one, two = await _alternating(
                lambda: engine.generate(prompt, sampling),
                lambda c=client: c.chat.completions.create(
                    model="agentgym-tiny", messages=MESSAGES, **body
                ),
                calls,
            )
            direct, through = direct + one, through + two
            gateway.close(session)
    await engine.close()
    return _sides("engine", direct, "gateway", through)


async def overhead_served(tokens: int, calls: int, rounds: int) -> dict[str, float]:
    model, tok = load(seed=0)
    engine = HFEngine(model, tok, seed=0)
    port = _free_port()
    app = build_app(engine, tok, mount=gateway_routes)
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        await asyncio.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    body = {"max_tokens": tokens, "extra_body": {"ignore_eos": True}}
    serve: list[float] = []
    through: list[float] = []
    try:
        async with httpx.AsyncClient() as http:
            plain = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="-", http_client=http)
            for _ in range(rounds):
                opened = (await http.post(f"{url}/sessions")).json()
                client = openai.AsyncOpenAI(
                    base_url=opened["base_url"], api_key="-", http_client=http
                )
                one, two = await _alternating(
                    lambda: plain.chat.completions.create(
                        model="agentgym-tiny", messages=MESSAGES, **body
                    ),
                    lambda c=client: c.chat.completions.create(
                        model="agentgym-tiny", messages=MESSAGES, **body
                    ),
                    calls,
                )
                serve, through = serve + one, through + two
                await http.post(f"{url}/sessions/{opened['id']}/close")
    finally:
        server.should_exit = True
        thread.join(10)
    return _sides("serve", serve, "serve_gateway", through)


def _sides(a: str, first: list[float], b: str, second: list[float]) -> dict[str, float]:
    one, two = statistics.median(first), statistics.median(second)
    return {
        f"{a}_ms": one * 1e3,
        f"{b}_ms": two * 1e3,
        "overhead_ms": (two - one) * 1e3,
        "calls_per_side": len(first),
    }


async def two_calls(client: Any, task: dict[str, Any]) -> float:
    messages: list[Any] = [{"role": "user", "content": task["question"]}]
    out = await client.chat.completions.create(
        model="agentgym-tiny", messages=messages, max_tokens=task["tokens"]
    )
    messages += [out.choices[0].message, {"role": "user", "content": "And then?"}]
    out = await client.chat.completions.create(
        model="agentgym-tiny", messages=messages, max_tokens=task["tokens"]
    )
    return float(len(out.choices[0].message.content or ""))


def episodes_per_second(episodes: int, tokens: int, concurrency: int) -> dict[str, float]:
    model, tok = load(seed=0)
    engine = HFEngine(model, tok, seed=0)
    tasks = [{"question": f"Question {i}?", "tokens": tokens} for i in range(episodes)]
    source = AgentProgramSource(
        engine, tok, two_calls, tasks, group_size=1, max_concurrency=concurrency
    )
    started = time.perf_counter()
    got = source.collect(episodes)
    wall = time.perf_counter() - started
    assert all(len(e.turns) == 2 and not e.context_starts for e in got)
    return {"concurrency": concurrency, "episodes": episodes, "wall_s": wall,
            "episodes_per_s": episodes / wall}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=8, help="sampled tokens per call")
    parser.add_argument("--calls", type=int, default=10, help="calls per side per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=64, help="programs per concurrency")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results: dict[str, Any] = {
        "in_process": asyncio.run(overhead_in_process(args.tokens, args.calls, args.rounds)),
        "agentgym_serve": asyncio.run(overhead_served(args.tokens, args.calls, args.rounds)),
        "episodes": [episodes_per_second(args.episodes, args.tokens, n) for n in (1, 8, 64)],
    }
    print(json.dumps(results, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
