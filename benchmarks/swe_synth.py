"""``agentgym swe synth`` throughput: candidates and validated tasks per hour on a repository.

Runs ``synthesize`` on REPO into a fresh output folder (no resume state), then, with
``--verify``, grades every emitted task through ``agentgym/SWE-v0`` with the local sandbox:
the gold patch (applied with the env's own edit tools) must score 1 and submitting no change 0.
Prints (and writes with ``--out``) the counts of each verdict, the validity rate, candidates and
valid tasks per hour of wall time, and the machine's load average at start and end (other
processes slow it down).

``--compare`` synthesizes the same candidates twice, first running the whole suite for each
(``full_suite=True``), then only the test files whose tests ran the mutated function (the
default; its time includes the traced clean run), and reports both, the speed-up and whether
every candidate got the same verdict and ``FAIL_TO_PASS`` tests both ways.

    python benchmarks/swe_synth.py ~/src/toolz --candidates 60 --workers 2 --verify
    python benchmarks/swe_synth.py ~/src/mylib --test-cmd "pytest tests" --out synth.json
    python benchmarks/swe_synth.py ~/src/toolz --candidates 60 --workers 1 --compare
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentgym.envs.swe import SWEEnv, as_action, gold_tool_calls
from agentgym.envs.swe.synth import synthesize

SUBMIT = as_action([{"name": "submit", "arguments": {}}])


def verify(tasks: Path, limit: int | None = None) -> dict[str, Any]:
    """Gold 1 and no change 0 for every task of ``tasks`` (the first ``limit``) through SWE-v0
    (local sandbox)."""
    env = SWEEnv(tasks=str(tasks), sandbox="local")
    failures: list[str] = []
    started = time.monotonic()
    checked = env.instances[:limit]
    try:
        for instance in checked:
            env.reset(options={"task_id": instance.instance_id})
            env.step(as_action(gold_tool_calls(instance)))
            gold = env.step(SUBMIT)[1]
            env.reset(options={"task_id": instance.instance_id})
            nothing = env.step(SUBMIT)[1]
            if gold != 1.0 or nothing != 0.0:
                failures.append(f"{instance.instance_id}: gold {gold}, no change {nothing}")
    finally:
        env.close()
    return {
        "tasks": len(checked),
        "failures": failures,
        "seconds": round(time.monotonic() - started, 1),
    }


def synth_figures(args: argparse.Namespace, out: Path, *, full_suite: bool) -> dict[str, Any]:
    """One synthesis run into the fresh folder ``out``: its counts and rates."""
    load_start = os.getloadavg()
    started = time.monotonic()
    result = synthesize(
        args.repo,
        out,
        test_cmd=args.test_cmd,
        max_candidates=args.candidates,
        seed=args.seed,
        workers=args.workers,
        combine=args.combine,
        sources=args.source,
        full_suite=full_suite,
    )
    wall = time.monotonic() - started
    hours = wall / 3600
    return {
        "repo": str(Path(args.repo).resolve()),
        "full_suite": full_suite,
        "candidates": result.candidates,
        "valid": result.valid,
        "verdicts": result.verdicts,
        "validity_rate": round(result.valid / max(result.candidates, 1), 3),
        "stable_tests": result.stable_tests,
        "left_out_tests": result.left_out_tests,
        "wall_s": round(wall, 1),
        "candidates_per_hour": round(result.candidates / hours),
        "valid_per_hour": round(result.valid / hours),
        "workers": args.workers or min(8, os.cpu_count() or 1),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_start": [round(x, 1) for x in load_start],
        "load_average_end": [round(x, 1) for x in os.getloadavg()],
    }


def disagreements(full: Path, selected: Path) -> list[str]:
    """Candidates whose verdict or ``FAIL_TO_PASS`` tests differ between the two runs."""

    def records(out: Path) -> dict[str, tuple[str, list[str]]]:
        lines = (out / "candidates.jsonl").read_text().splitlines()
        return {r["key"]: (r["verdict"], r["FAIL_TO_PASS"]) for r in map(json.loads, lines)}

    a, b = records(full), records(selected)
    return [
        f"{key}: {a.get(key)} vs {b.get(key)}"
        for key in sorted({*a, *b})
        if a.get(key) != b.get(key)
    ]


def compare(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The same candidates with the whole suite, then with the selected test files."""
    full = synth_figures(args, tmp / "full", full_suite=True)
    selected = synth_figures(args, tmp / "selected", full_suite=False)
    lines = (tmp / "selected" / "candidates.jsonl").read_text().splitlines()
    ran = [json.loads(line).get("files") for line in lines]
    return {
        "full_suite": full,
        "selected": selected,
        "speedup_candidates_per_hour": round(full["wall_s"] / selected["wall_s"], 2),
        "speedup_valid_per_hour": round(
            selected["valid_per_hour"] / max(full["valid_per_hour"], 1), 2
        ),
        "candidates_whole_suite": sum(files is None for files in ran),
        "candidates_no_test_file": sum(files == [] for files in ran),
        "disagreements": disagreements(tmp / "full", tmp / "selected"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", help="a local git repository with a pytest suite")
    parser.add_argument("--candidates", type=int, default=60, help="single bugs to try")
    parser.add_argument("--workers", type=int, default=None, help="parallel sandboxes")
    parser.add_argument("--test-cmd", default=None, help="'pytest ARGS' naming the tests")
    parser.add_argument("--source", action="append", default=None, help="files to mutate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--combine", type=int, default=0, choices=(0, 2, 3))
    parser.add_argument("--full-suite", action="store_true", help="every stable test, always")
    parser.add_argument("--compare", action="store_true", help="whole suite vs selected files")
    parser.add_argument("--verify", action="store_true", help="grade gold and no-op per task")
    parser.add_argument("--verify-limit", type=int, default=None, help="grade only the first N")
    parser.add_argument("--keep", default=None, help="write the tasks here (default: a temp dir)")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="swe-synth-bench-") as tmp:
        if args.compare:
            figures = compare(args, Path(tmp))
        else:
            out = Path(args.keep or Path(tmp) / "tasks")
            if args.keep and (out / "candidates.jsonl").exists():
                parser.error(f"{out} holds an earlier run's state; pass a new --keep folder")
            figures = synth_figures(args, out, full_suite=args.full_suite)
            if args.verify and figures["valid"]:
                figures["verify"] = verify(out / "tasks.jsonl", args.verify_limit)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    failed = figures.get("verify", {}).get("failures") or figures.get("disagreements")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
