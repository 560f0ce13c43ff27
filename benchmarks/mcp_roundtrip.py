"""Tool-call round trips per second: through ``agentgym/MCP-v0`` against the raw ``mcp`` client.

Both sides talk to the shipped store server (``python -m agentgym.envs.mcp.servers.store``, one
stdio process per side) and call ``get_stock`` on rotating skus:

- **raw**: ``mcp.Client.call_tool`` awaited in a loop (with ``--calls-per-turn`` > 1, that many
  calls gathered at once), on one event loop with nothing else.
- **env**: ``env.step(text)`` with one hermes ``<tool_call>`` per call, through Gymnasium's
  synchronous API, and ``await env.unwrapped.astep(text)`` (what ``AgentVectorEnv`` and the
  collector call): parsing, JSON-schema validation, the deadline, the ``_meta`` episode key and
  formatting the tool messages included. One long episode (``max_turns`` above the step count),
  so no server start is timed.

The rounds interleave raw and env (``--repeats``, best round kept), each ``--seconds`` long, so a
noisy neighbour slows both alike. All in one process.

    python benchmarks/mcp_roundtrip.py --out mcp_roundtrip.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from typing import Any

import gymnasium as gym
from mcp import Client, StdioServerParameters

import agentgym
from agentgym.core.aio import run_sync
from agentgym.envs.mcp.servers.store_data import build_store

SERVER = [sys.executable, "-m", "agentgym.envs.mcp.servers.store"]
SKUS = sorted(build_store(0).products)


def _arguments(k: int) -> dict[str, Any]:
    return {"sku": SKUS[k % len(SKUS)]}


async def raw_round(seconds: float, per_turn: int) -> float:
    # The client is entered and left by this one task (anyio's rule); its start is not timed.
    async with Client(StdioServerParameters(command=SERVER[0], args=SERVER[1:])) as client:
        await client.call_tool("get_stock", _arguments(0))
        calls, k, start = 0, 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            batch = [client.call_tool("get_stock", _arguments(k + i)) for i in range(per_turn)]
            for result in await asyncio.gather(*batch):
                assert not result.is_error
            calls, k = calls + per_turn, k + per_turn
        return calls / (time.perf_counter() - start)


def _turn(k: int, per_turn: int) -> str:
    return "".join(
        f"<tool_call>{json.dumps({'name': 'get_stock', 'arguments': _arguments(k + i)})}"
        "</tool_call>"
        for i in range(per_turn)
    )


def env_round(env: gym.Env, seconds: float, per_turn: int) -> float:
    """Gymnasium's synchronous ``env.step``: one event-loop run per step."""
    calls, k, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        observation, *_ = env.step(_turn(k, per_turn))
        assert not observation[0]["content"].startswith("Error"), observation
        calls, k = calls + per_turn, k + per_turn
    return calls / (time.perf_counter() - start)


async def env_async_round(env: gym.Env, seconds: float, per_turn: int) -> float:
    """``await env.unwrapped.astep``: what the vector env and the rollout collector call."""
    calls, k, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        observation, *_ = await env.unwrapped.astep(_turn(k, per_turn))
        assert not observation[0]["content"].startswith("Error"), observation
        calls, k = calls + per_turn, k + per_turn
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one round")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per side (best kept)")
    parser.add_argument("--calls-per-turn", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--out", help="write every round and the settings as JSON")
    args = parser.parse_args()

    loop = asyncio.new_event_loop()
    env = gym.make("agentgym/MCP-v0", max_turns=10**9)
    env.reset(seed=0)
    rounds: dict[str, dict[str, list[float]]] = {}
    try:
        for per_turn in args.calls_per_turn:
            cell = rounds.setdefault(str(per_turn), {"raw": [], "env": [], "env_async": []})
            for _ in range(args.repeats):
                cell["raw"].append(loop.run_until_complete(raw_round(args.seconds, per_turn)))
                cell["env"].append(env_round(env, args.seconds, per_turn))
                # run_sync: the loop the env's sessions live on (this thread's).
                cell["env_async"].append(run_sync(env_async_round(env, args.seconds, per_turn)))
    finally:
        env.close()
        loop.close()

    columns = ("calls per turn", "raw mcp client", "env.step", "await env.astep")
    print(f"| {' | '.join(columns)} | step / raw | astep / raw |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for per_turn, cell in rounds.items():
        raw, sync, asynchronous = (max(cell[k]) for k in ("raw", "env", "env_async"))
        print(
            f"| {per_turn} | {raw:,.0f} | {sync:,.0f} | {asynchronous:,.0f} "
            f"| **{sync / raw:.2f}x** | **{asynchronous / raw:.2f}x** |"
        )
    if args.out:
        machine = {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "agentgym": agentgym.__version__,
            "load_average": os.getloadavg(),
        }
        with open(args.out, "w") as f:
            json.dump({"settings": vars(args), "machine": machine, "rounds": rounds}, f, indent=2)


if __name__ == "__main__":
    main()
