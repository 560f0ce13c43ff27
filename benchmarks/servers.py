"""Episodes per second with one inference server versus two, the same collection otherwise.

Two ``agentgym serve`` processes (the tiny default policy, one thread each) run for the whole
benchmark. Each round attaches a trainer's ``ServerPolicy`` to the first server alone, then to
both (its router pins each episode to one server and sends new ones to the least loaded), and
times the collection of ``--groups`` groups of ``agentgym/FrozenLake-v0`` (``--group-size``
episodes each, at most ``--max-turns`` turns, ``--max-tokens`` per turn). Reported: episodes per
second per round and their median, and the ratio two / one.

On a machine with few cores the servers and the collector share them: two servers can only be
faster where a server's own work (its forward passes) is what limits, and a spare core runs
the second one. ::

    .venv/bin/python benchmarks/servers.py --rounds 3 --out servers.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import torch

from agentgym.core.aio import run_sync
from agentgym.inference import SGLangEngine
from agentgym.models import load
from agentgym.rollout.collector_source import CollectorSource
from agentgym.trainers import make
from agentgym.trainers.weight_sync import attach_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(log: Any) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "serve", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    return process, f"http://127.0.0.1:{port}"


def _wait(process: subprocess.Popen[bytes], url: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"agentgym serve exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"agentgym serve at {url} did not answer in {timeout:g} s")


def _episodes_per_s(urls: list[str], args: argparse.Namespace, weights: Path) -> float:
    trainer = make("grpo", policy=load(seed=0), config={"group_size": args.group_size})
    policy = attach_server(trainer, [SGLangEngine(u) for u in urls], weights)
    source = CollectorSource(
        policy,
        "agentgym/FrozenLake-v0",
        group_size=args.group_size,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    try:
        source.collect(1)  # warm: first requests, prompt rendering
        started = time.perf_counter()
        episodes = source.collect(args.groups)
        elapsed = time.perf_counter() - started
    finally:
        run_sync(policy.close())
    return len(episodes) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rates: dict[str, list[float]] = {"one": [], "two": []}
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryFile() as log:
        servers = [_serve(log) for _ in range(2)]
        try:
            for process, url in servers:
                _wait(process, url)
            urls = [url for _, url in servers]
            for round_ in range(args.rounds):
                for name, chosen in (("one", urls[:1]), ("two", urls)):
                    rate = _episodes_per_s(chosen, args, Path(folder) / f"{name}-{round_}")
                    rates[name].append(rate)
                    print(f"round {round_ + 1} {name}: {rate:.2f} episodes/s", flush=True)
        finally:
            for process, _ in servers:
                process.terminate()
                process.wait(30)
    result: dict[str, Any] = {
        "settings": vars(args) | {"out": str(args.out) if args.out else None},
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "episodes_per_s": rates,
        "median": {k: statistics.median(v) for k, v in rates.items()},
    }
    result["two_over_one"] = result["median"]["two"] / result["median"]["one"]
    print(json.dumps(result, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
