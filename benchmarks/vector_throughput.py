"""Env steps per second: AgentVectorEnv against Gymnasium's SyncVectorEnv and AsyncVectorEnv.

Two workloads, each at several numbers of envs, all measured in this one process so that the
ratios compare like with like:

- ``frozenlake``: ``agentgym/FrozenLake-v0`` (CPU-bound, microseconds per step), actions are
  fenced directions cycling right/down/left/up; episodes end and autoreset (NEXT_STEP).
- ``io``: an ``AgentEnv`` whose step awaits ``--io-delay`` seconds (a stand-in for a sandbox,
  a tool server or a judge); its episodes never end.

Every vector env is driven through Gymnasium's lockstep ``reset``/``step``. AsyncVectorEnv runs
with ``shared_memory=False`` (agentgym's spaces are not numpy arrays) and one process per env,
so it is measured only up to ``--async-max-envs`` envs.

    python benchmarks/vector_throughput.py --out vector_throughput.json
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv

import agentgym
from agentgym.core import AgentEnv, user
from agentgym.core.env import StepResult
from agentgym.core.types import Action, Observation
from agentgym.vector import AgentVectorEnv

FROZENLAKE = "agentgym/FrozenLake-v0"
DIRECTIONS = ("right", "down", "left", "up")
OURS, SYNC, ASYNC = "AgentVectorEnv", "SyncVectorEnv", "AsyncVectorEnv"
IMPLS = (OURS, SYNC, ASYNC)


class IOBoundEnv(AgentEnv):
    """Each step awaits ``delay`` seconds and does nothing else; episodes never end."""

    def __init__(self, delay: float = 0.05) -> None:
        super().__init__()
        self.delay = delay

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        return (user("waiting"),), {}

    async def astep(self, action: Action) -> StepResult:
        await asyncio.sleep(self.delay)
        return (user("done"),), 0.0, False, False, {}


def lake_actions(batch: int, num_envs: int) -> list[str]:
    return [f"```\n{DIRECTIONS[(batch + i) % 4]}\n```" for i in range(num_envs)]


def io_actions(batch: int, num_envs: int) -> list[str]:
    return ["call the server"] * num_envs


@dataclass(frozen=True)
class Workload:
    name: str
    label: str
    makers: dict[str, Callable[[int], VectorEnv]]
    actions: Callable[[int, int], list[str]]
    warmup_batches: int  # untimed steps after reset (imports, caches, the env checker)


def workloads(io_delay: float) -> dict[str, Workload]:
    io_env = functools.partial(IOBoundEnv, io_delay)
    lake = {
        OURS: lambda n: gym.make_vec(FROZENLAKE, n, vectorization_mode="vector_entry_point"),
        SYNC: lambda n: gym.make_vec(FROZENLAKE, n, vectorization_mode="sync"),
        ASYNC: lambda n: gym.make_vec(
            FROZENLAKE, n, vectorization_mode="async", vector_kwargs={"shared_memory": False}
        ),
    }
    io = {
        OURS: lambda n: AgentVectorEnv([io_env] * n),
        SYNC: lambda n: SyncVectorEnv([io_env] * n),
        ASYNC: lambda n: AsyncVectorEnv([io_env] * n, shared_memory=False),
    }
    return {
        "frozenlake": Workload("frozenlake", FROZENLAKE, lake, lake_actions, warmup_batches=3),
        "io": Workload("io", f"I/O-bound ({io_delay * 1000:g} ms/step)", io, io_actions, 0),
    }


@dataclass
class Result:
    workload: str
    impl: str
    num_envs: int
    steps_per_s: float | None
    batches: int = 0
    seconds: float = 0.0
    setup_s: float = 0.0
    skipped: str = ""


def measure(workload: Workload, impl: str, num_envs: int, seconds: float) -> Result:
    """Lockstep batches for at least ``seconds`` (and at least one); env steps per second."""
    started = time.perf_counter()
    venv = workload.makers[impl](num_envs)
    try:
        venv.reset(seed=0)
        for batch in range(workload.warmup_batches):
            venv.step(workload.actions(batch, num_envs))
        setup = time.perf_counter() - started
        batches, start = 0, time.perf_counter()
        while batches == 0 or time.perf_counter() - start < seconds:
            venv.step(workload.actions(batches, num_envs))
            batches += 1
        elapsed = time.perf_counter() - start
    finally:
        venv.close()
    return Result(
        workload.name, impl, num_envs, num_envs * batches / elapsed, batches, elapsed, setup
    )


def ratios(results: Sequence[Result]) -> list[dict[str, Any]]:
    """Per workload and size: AgentVectorEnv's steps/s over the best Gymnasium vector env's."""
    rows = []
    for workload, num_envs in dict.fromkeys((r.workload, r.num_envs) for r in results):
        here = {r.impl: r for r in results if (r.workload, r.num_envs) == (workload, num_envs)}
        theirs = [r for r in (here.get(SYNC), here.get(ASYNC)) if r and r.steps_per_s]
        if OURS not in here or not theirs:
            continue
        best = max(theirs, key=lambda r: r.steps_per_s or 0.0)
        rows.append({
            "workload": workload,
            "num_envs": num_envs,
            "ours": here[OURS].steps_per_s,
            "best_gymnasium": best.impl,
            "best_gymnasium_steps_per_s": best.steps_per_s,
            "ratio": (here[OURS].steps_per_s or 0.0) / (best.steps_per_s or 1.0),
        })  # fmt: skip
    return rows


def markdown(
    results: Sequence[Result], table: Sequence[dict[str, Any]], labels: dict[str, str]
) -> str:
    lines = [
        f"| workload | envs | {OURS} | {SYNC} | {ASYNC} | {OURS} / best Gymnasium |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    cells = {(r.workload, r.num_envs, r.impl): r for r in results}
    for row in table:
        key = (row["workload"], row["num_envs"])
        shown = []
        for impl in IMPLS:
            r = cells.get((*key, impl))
            shown.append(r.skipped if r and r.skipped else f"{r.steps_per_s:,.0f}" if r else "—")
        ratio = f"**{row['ratio']:.2f}x** (vs {row['best_gymnasium'].removesuffix('VectorEnv')})"
        lines.append(f"| {labels[key[0]]} | {key[1]} | " + " | ".join(shown) + f" | {ratio} |")
    return "\n".join(lines)


def io_ceiling(results: Sequence[Result], delay: float) -> str:
    """No lockstep vector env beats ``num_envs / delay`` on the io workload; how close each gets."""
    parts = []
    for r in results:
        if r.workload == "io" and r.impl == OURS and r.steps_per_s:
            ceiling = r.num_envs / delay
            parts.append(
                f"{r.num_envs} envs {ceiling:,.0f} ({r.steps_per_s / ceiling:.0%} reached)"
            )
    return "\nI/O-bound ceiling, num_envs / delay, for AgentVectorEnv: " + "; ".join(parts) + "."


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "gymnasium": gym.__version__,
        "agentgym": agentgym.__version__,
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument(
        "--workloads", nargs="+", choices=["frozenlake", "io"], default=["frozenlake", "io"]
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=1.0,
        help="timed stepping per measurement (at least 1 batch)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3,
        help="rounds per cell, best kept (cells whose one batch outlasts 2x --seconds run once)",
    )  # fmt: skip
    parser.add_argument("--io-delay", type=float, default=0.05, help="seconds each io step awaits")
    parser.add_argument(
        "--async-max-envs", type=int, default=64,
        help="largest num_envs to run AsyncVectorEnv at (one process per env)",
    )  # fmt: skip
    parser.add_argument("--out", help="write the results as JSON to this path")
    return parser.parse_args(argv)


def measure_cell(
    workload: Workload, num_envs: int, args: argparse.Namespace
) -> tuple[list[Result], list[Result]]:
    """Best of ``args.repeats`` rounds per implementation (rounds interleave the implementations,
    so a noisy neighbour hurts all alike); returns ``(best per impl, every run)``."""
    runs: dict[str, list[Result]] = {impl: [] for impl in IMPLS}
    for round_ in range(args.repeats):
        for impl in IMPLS:
            if impl == ASYNC and num_envs > args.async_max_envs:
                if round_ == 0:
                    note = f"not run (> --async-max-envs {args.async_max_envs})"
                    runs[impl].append(Result(workload.name, impl, num_envs, None, skipped=note))
                continue
            if runs[impl] and runs[impl][0].seconds > 2 * args.seconds:
                continue  # one batch outlasts the budget: sleep-bound, a repeat adds nothing
            runs[impl].append(measure(workload, impl, num_envs, args.seconds))
            r = runs[impl][-1]
            print(f"{workload.name:>10} {impl:>15} {num_envs:>4} envs: "
                  f"{r.steps_per_s:>10,.0f} steps/s", file=sys.stderr)  # fmt: skip
    best = [max(r, key=lambda x: x.steps_per_s or 0.0) for r in runs.values()]
    return best, [x for r in runs.values() for x in r]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    chosen = workloads(args.io_delay)
    results: list[Result] = []
    every_run: list[Result] = []
    for name in args.workloads:
        for num_envs in args.num_envs:
            best, runs = measure_cell(chosen[name], num_envs, args)
            results += best
            every_run += runs
    table = ratios(results)
    print(markdown(results, table, {k: w.label for k, w in chosen.items()}))
    if "io" in args.workloads:
        print(io_ceiling(results, args.io_delay))
    info = machine()
    print(f"\n{info['cpus']} CPUs, Python {info['python']}, gymnasium {info['gymnasium']}; "
          f"best of {args.repeats} rounds of {args.seconds:g} s of stepping per cell.")  # fmt: skip
    if args.out:
        report = {
            "command": ["python", *sys.argv],
            "machine": info,
            "settings": vars(args),
            "results": [asdict(r) for r in results],
            "ratios": table,
            "runs": [asdict(r) for r in every_run],
        }
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
