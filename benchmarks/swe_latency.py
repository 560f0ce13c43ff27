"""agentgym/SWE-v0 latency: episode reset (docker cold / docker warm pool / local) and grading.

Each episode of each mode: ``reset`` on a task (timed: the env gets its sandbox from the
backend), the task's gold patch applied through the env's edit tools, then ``submit`` (timed:
grading, which takes the agent's diff, releases its sandbox, gets a fresh one, applies the diff
and the test patch and runs the tests). Modes:

  docker-cold   DockerSWEBackend(pool_size=0): the instance's image exists, the container is
                started (and the repository copied into it from the image) at reset
  docker-warm   DockerSWEBackend(pool_size=2), refilled before each episode: reset takes a
                container that is already running and holds the repository
  local         LocalSWEBackend: a bubblewrap sandbox with the host checkout copied in

Episodes cycle through the tasks; the modes take turns episode by episode, so load from other
processes hits them alike. Every episode must score 1 (a failure is reported). ``--build`` also
times building each task's image from scratch (no layer cache), once per task.

    python benchmarks/swe_latency.py --episodes 20 --out swe_latency.json
    python benchmarks/swe_latency.py --modes docker-warm,local --instances my.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from agentgym.envs.swe import SWEEnv, read_instances
from agentgym.envs.swe.backends import LocalSWEBackend, SWEBackend
from agentgym.envs.swe.patches import as_action, gold_tool_calls

MODES = ("docker-cold", "docker-warm", "local")
SUBMIT = as_action([{"name": "submit", "arguments": {}}])


def make_backend(mode: str) -> SWEBackend:
    if mode == "local":
        return LocalSWEBackend(isolation="bwrap")
    from agentgym.envs.swe.backends.docker import DockerSWEBackend

    return DockerSWEBackend(pool_size=2 if mode == "docker-warm" else 0)


async def episode(env: SWEEnv, backend: SWEBackend, task: Any, gold: Any) -> dict[str, Any]:
    """One timed episode: reset, gold patch, submit."""
    warm = getattr(backend, "warm", None)  # DockerSWEBackend's
    if warm is not None:
        await warm([task])  # waits until the warm pool is full again; a no-op at pool_size 0
    started = time.perf_counter()
    _, reset_info = await env.areset(options={"task_id": task.instance_id})
    reset_s = time.perf_counter() - started
    await env.astep(gold)
    started = time.perf_counter()
    _, reward, _, _, info = await env.astep(SUBMIT)
    grade_s = time.perf_counter() - started
    infra = reset_info["infra_error"] or info["infra_error"]
    return {"task": task.instance_id, "reset_s": reset_s, "grade_s": grade_s, "reward": reward,
            "infra_error": infra}  # fmt: skip


async def run(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    tasks = read_instances(args.instances)
    golds = {t.instance_id: as_action(gold_tool_calls(t)) for t in tasks}
    modes = args.modes
    backends = {mode: make_backend(mode) for mode in modes}
    envs = {m: SWEEnv(tasks=args.instances, backend=b) for m, b in backends.items()}
    samples: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    try:
        for mode in modes:  # untimed: images built, pools started, checkouts cached
            await episode(envs[mode], backends[mode], tasks[0], golds[tasks[0].instance_id])
        for k in range(args.episodes):
            task = tasks[k % len(tasks)]
            for mode in modes:
                sample = await episode(envs[mode], backends[mode], task, golds[task.instance_id])
                samples[mode].append(sample)
                print(f"{mode:>12} {task.instance_id:<24} reset {sample['reset_s']:6.3f} s  "
                      f"grade {sample['grade_s']:6.3f} s  reward {sample['reward']:g}",
                      file=sys.stderr)  # fmt: skip
    finally:
        for mode in modes:
            await envs[mode].aclose()
            await backends[mode].aclose()
    return samples


def build_times(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Seconds to build each task's image from scratch (replacing the existing one)."""
    from agentgym.envs.swe.images import build_instance_image

    times = []
    for task in read_instances(args.instances):
        started = time.perf_counter()
        build_instance_image(task, force=True)
        seconds = time.perf_counter() - started
        times.append({"task": task.instance_id, "build_s": seconds})
        print(f"{'build':>12} {task.instance_id:<24} {seconds:6.3f} s", file=sys.stderr)
    return times


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile, interpolated between the closest ranks."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(samples: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    table = {}
    for mode, rows in samples.items():
        reset = [r["reset_s"] for r in rows]
        grade = [r["grade_s"] for r in rows]
        table[mode] = {
            "episodes": len(rows),
            "failed": sum(r["reward"] != 1.0 for r in rows),
            "reset_median_s": statistics.median(reset),
            "reset_p90_s": percentile(reset, 0.9),
            "grade_median_s": statistics.median(grade),
            "grade_p90_s": percentile(grade, 0.9),
        }
    return table


def markdown(table: dict[str, dict[str, float]], builds: list[dict[str, Any]]) -> str:
    lines = [
        "| mode | episodes | reset median s | reset p90 s | grading median s | grading p90 s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode, row in table.items():
        failed = f" ({row['failed']} not resolved)" if row["failed"] else ""
        lines.append(
            f"| {mode} | {row['episodes']}{failed} | {row['reset_median_s']:.3f} | "
            f"{row['reset_p90_s']:.3f} | {row['grade_median_s']:.3f} | {row['grade_p90_s']:.3f} |"
        )
    if builds:
        values = [b["build_s"] for b in builds]
        lines.append(
            f"\nImage build from scratch, {len(values)} tasks: median "
            f"{statistics.median(values):.2f} s, p90 {percentile(values, 0.9):.2f} s."
        )
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        import docker

        info["docker"] = docker.from_env().version().get("Version")
    except Exception:  # no SDK or no daemon: the docker modes fail on their own
        info["docker"] = None
    return info


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20, help="timed episodes per mode")
    parser.add_argument(
        "--modes",
        type=lambda s: [m for m in s.split(",") if m],
        default=list(MODES),
        help=f"comma-separated, of {', '.join(MODES)}",
    )
    parser.add_argument("--instances", default=None, help="JSONL file (default: the shipped set)")
    parser.add_argument("--build", action="store_true", help="also time image builds")
    parser.add_argument("--out", help="write the settings, samples and summary as JSON here")
    args = parser.parse_args(argv)
    unknown = set(args.modes) - set(MODES)
    if unknown or args.episodes < 2:
        parser.error(f"unknown modes {sorted(unknown)}" if unknown else "--episodes must be >= 2")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    started = machine()
    builds = build_times(args) if args.build else []
    samples = asyncio.run(run(args))
    table = summary(samples)
    print(markdown(table, builds))
    print(f"\n{started['cpus']} CPUs, load average {started['loadavg'][0]:.1f} at the start, "
          f"Python {started['python']}, Docker {started['docker']}.")  # fmt: skip
    if args.out:
        report = {
            "command": ["python", *sys.argv],
            "machine": {**started, "loadavg_end": os.getloadavg()},
            "settings": vars(args),
            "summary": table,
            "builds": builds,
            "samples": samples,
        }
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
