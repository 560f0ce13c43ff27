"""The env server's cost per call: ``agentgym serve-env`` + ``agentgym/Remote-v0`` on loopback
against the same env in-process.

One ``agentgym serve-env agentgym/FrozenLake-v0`` child process serves every round. Measured,
each side in the same round so that a noisy neighbour slows both alike (``--repeats`` rounds,
the best kept):

- **step round trip**: ``await env.astep(move)`` for ``--seconds`` (episodes reset when they
  end; resets not timed), three sides taking turns step by step: in-process
  (``gym.make(...).unwrapped``), Remote-v0 (``session="env"``: the connection stays open), and
  openenv-core's own ``GenericEnvClient`` against the same server. The overhead per step is
  remote minus in-process; the issue's goal is a round trip of at most 2 ms.
- **reset**: Remote-v0 with ``session="episode"`` (a new WebSocket session, hence a new server
  env, per reset: the default) and ``session="env"``, against in-process.
- **throughput**: ``--envs`` envs stepping at once (``asyncio.gather``), steps/s in-process and
  remote, with the CPU time per step of the client process and of the server (``/proc``).

    python benchmarks/env_server.py --out env_server.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from openenv.core import GenericEnvClient

import agentgym
from agentgym.vector.remote import RemoteEnv, start_server

ENV_ID = "agentgym/FrozenLake-v0"
MOVES = ("```left```", "```down```", "```right```", "```up```")


class _Client:
    """openenv-core's ``GenericEnvClient`` behind the ``areset``/``astep`` of an env."""

    def __init__(self, url: str) -> None:
        self.client = GenericEnvClient(base_url=url)

    async def areset(self, seed: int) -> Any:
        return await self.client.reset(seed=seed)

    async def astep(self, action: str) -> tuple[Any, ...]:
        result = await self.client.step({"message": action})
        return (result.observation, result.reward, result.done, False, {})

    async def aclose(self) -> None:
        await self.client.close()


async def _steps(sides: dict[str, Any], seconds: float) -> dict[str, list[float]]:
    """Per-step seconds of each side's ``astep``, the sides taking turns step by step (so that
    load changes hit all alike); resets untimed."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for env in sides.values():
        await env.areset(seed=0)
    k, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for name, env in sides.items():
            start = time.perf_counter()
            result = await env.astep(MOVES[k % 4])
            times[name].append(time.perf_counter() - start)
            if result[2] or result[3]:
                await env.areset(seed=k)
        k += 1
    return times


async def _resets(sides: dict[str, Any], n: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in sides}
    for seed in range(n):
        for name, env in sides.items():
            start = time.perf_counter()
            await env.areset(seed=seed)
            times[name].append(time.perf_counter() - start)
    return times


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _throughput(
    make: Callable[[], Any], n_envs: int, steps: int, server_pid: int | None = None
) -> dict[str, float]:
    """Steps/s of ``n_envs`` envs stepping at once, and CPU milliseconds per step of this
    process and of the server (wall time on a loaded machine mostly measures waiting for a CPU
    at each hand-over between client and server; CPU time does not)."""
    envs = [make() for _ in range(n_envs)]
    await asyncio.gather(*(e.areset(seed=i) for i, e in enumerate(envs)))

    async def play(i: int, env: Any) -> None:
        for k in range(steps):
            result = await env.astep(MOVES[(i + k) % 4])
            if result[2] or result[3]:
                await env.areset(seed=i * steps + k)

    server_cpu = _cpu_seconds(server_pid) if server_pid else 0.0
    cpu, start = time.process_time(), time.perf_counter()
    await asyncio.gather(*(play(i, e) for i, e in enumerate(envs)))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    server_cpu = _cpu_seconds(server_pid) - server_cpu if server_pid else 0.0
    for env in envs:
        await env.aclose()
    total = n_envs * steps
    return {
        "steps_per_s": round(total / wall, 1),
        "client_cpu_ms_per_step": round(cpu / total * 1e3, 4),
        "server_cpu_ms_per_step": round(server_cpu / total * 1e3, 4),
    }


def _ms(times: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(times) * 1e3, 3),
        "mean_ms": round(statistics.fmean(times) * 1e3, 3),
        "n": len(times),
    }


async def one_round(url: str, server_pid: int, args: argparse.Namespace) -> dict[str, Any]:
    local = gym.make(ENV_ID).unwrapped
    remote = RemoteEnv(url=url, session="env")
    per_episode = RemoteEnv(url=url)
    client = _Client(url)
    steps = await _steps(
        {"in_process": local, "remote": remote, "openenv_client": client}, args.seconds
    )
    resets = await _resets(
        {"in_process": local, "remote_env_session": remote, "remote_episode_session": per_episode},
        args.resets,
    )
    row: dict[str, Any] = {f"step_{k}": _ms(v) for k, v in steps.items()}
    row.update({f"reset_{k}": _ms(v) for k, v in resets.items()})
    for env in (local, remote, per_episode, client):
        await env.aclose()
    for n in args.envs:
        row[f"throughput_in_process_{n}"] = await _throughput(
            lambda: gym.make(ENV_ID).unwrapped, n, args.steps
        )
        row[f"throughput_remote_{n}"] = await _throughput(
            lambda: RemoteEnv(url=url, session="env"), n, args.steps, server_pid
        )
    return row


def _best(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per measure, the round with the lowest median (latency) or most steps/s."""
    best: dict[str, Any] = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        if "median_ms" in values[0]:
            best[key] = min(values, key=lambda v: v["median_ms"])
        else:
            best[key] = max(values, key=lambda v: v["steps_per_s"])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per step-latency side")
    parser.add_argument("--resets", type=int, default=50)
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=int, default=20, help="steps per env (throughput)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args()
    server = start_server(ENV_ID, num_envs=max(args.envs) + 8)
    try:
        rounds = [
            asyncio.run(one_round(server.url, server.process.pid, args))
            for _ in range(args.repeats)
        ]
    finally:
        server.close()
    best = _best(rounds)
    overhead = best["step_remote"]["median_ms"] - best["step_in_process"]["median_ms"]
    result = {
        "best": best,
        "step_overhead_median_ms": round(overhead, 3),
        "remote_vs_openenv_client_step": round(
            best["step_openenv_client"]["median_ms"] / best["step_remote"]["median_ms"], 2
        ),
        "throughput_ratio": {
            n: round(
                best[f"throughput_remote_{n}"]["steps_per_s"]
                / best[f"throughput_in_process_{n}"]["steps_per_s"],
                3,
            )
            for n in args.envs
        },
        "cpu_ms_per_step_remote_vs_in_process": {
            n: (
                round(
                    best[f"throughput_remote_{n}"]["client_cpu_ms_per_step"]
                    + best[f"throughput_remote_{n}"]["server_cpu_ms_per_step"],
                    4,
                ),
                best[f"throughput_in_process_{n}"]["client_cpu_ms_per_step"],
            )
            for n in args.envs
        },
        "rounds": rounds,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "agentgym": agentgym.__version__,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
