"""Asynchronous training: per-update wall time and learning curve of the synchronous loop
against ``max_staleness`` 1 and 2, on FrozenLake, with the in-process engine or a server process.

Each mode trains a fresh policy with the FrozenLake GRPO recipe (``agentgym train``'s settings,
same seed) for ``--updates`` updates; the modes run one after another, ``--rounds`` times, in
turn and then in reverse order (0 1 2 2 1 0 ...), so that a drift of load on a shared machine
hits all of them. Per mode it prints the mean wall time per update (from the end of update
``k + 1``: the first updates of an async run wait for batches nobody collected ahead), updates
per hour and their ratio to the synchronous loop, and the batch success of every update (the
learning curve).

    .venv/bin/python benchmarks/async_training.py --updates 20
    .venv/bin/python benchmarks/async_training.py --updates 12 --batch-size 32 --json out.json
    .venv/bin/python benchmarks/async_training.py --updates 20 --engine server --init format

``--engine server`` starts one ``agentgym serve`` process (one torch thread) for the whole
benchmark, and every run trains against it as ``agentgym train --engine sglang --engine-url``
does: the run pushes its fresh policy at the start, then its weights by disk after every update
(without action choices, which a server does not apply). ``--engine hf`` (the default) is the
in-process engine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch


@contextlib.contextmanager
def serve(engine: str) -> Iterator[str | None]:
    """For ``engine == "server"``, the URL of an ``agentgym serve`` process running while the
    context is open (else None)."""
    if engine != "server":
        yield None
        return
    import httpx

    from agentgym import models

    with tempfile.TemporaryDirectory() as folder, socket.socket() as s:
        model, tokenizer = models.load(seed=1)  # each run pushes its own policy at the start
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        command = [sys.executable, "-m", "agentgym", "serve", "--model", folder]
        server = subprocess.Popen(
            [*command, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                if server.poll() is not None:
                    raise SystemExit(f"agentgym serve exited with code {server.returncode}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                time.sleep(0.2)
            yield url
        finally:
            server.terminate()
            server.wait(30)


def train(k: int, args: argparse.Namespace, url: str | None = None) -> dict[str, Any]:
    """One run of ``args.updates`` updates with ``max_staleness=k`` (on the server at ``url``
    when given): its update times and batch successes."""
    from agentgym.core.aio import run_sync
    from agentgym.recipes.config import Layer, resolve_run
    from agentgym.recipes.run import _build
    from agentgym.trainers.fit import fit

    config: dict[str, Any] = {**dict(args.set), "max_staleness": k}
    if args.batch_size is not None:
        config["batch_size"] = args.batch_size
    server = {} if url is None else {"engine": "sglang", "engine_url": url}
    if url is not None:
        server["action_choices"] = False
    with tempfile.TemporaryDirectory() as out:
        run = resolve_run(
            Layer(
                "benchmark",
                {
                    "env": "agentgym/FrozenLake-v0",
                    "steps": args.updates,
                    "out": out,
                    "eval_episodes": 0,
                    "config": config,
                    **({} if args.init is None else {"init": args.init}),
                    **server,
                },
            )
        )
        trainer, source = _build(run, Path(out))
        stamps: list[float] = []
        successes: list[float] = []
        steps: list[float] = []

        def record(metrics: dict[str, float]) -> None:
            stamps.append(time.perf_counter())
            successes.append(float(metrics.get("success_rate", float("nan"))))
            steps.append(float(metrics["step_s"]))

        start = time.perf_counter()
        try:
            fit(trainer, source, steps=args.updates, on_metrics=record)
        finally:
            run_sync(trainer.engine.close())
    warm = min(k + 1, len(stamps) - 2)
    intervals = [b - a for a, b in zip(stamps[warm:], stamps[warm + 1 :], strict=False)]
    return {
        "max_staleness": k,
        "load": os.getloadavg()[0],  # the 1-minute load average at the end of the run
        "wall_s": time.perf_counter() - start,
        "update_s": statistics.fmean(intervals),
        "step_s": statistics.fmean(steps[warm:]),  # the trainer's own update (no collection)
        "success": successes,
    }


def _pair(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=20, help="updates per run (default 20)")
    parser.add_argument("--modes", default="0,1,2", help="max_staleness values (default 0,1,2)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each mode, in turn")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="episodes per update (recipe's: 64)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument(
        "--engine",
        choices=("hf", "server"),
        default="hf",
        help="in-process (hf, the default) or an agentgym serve process (server)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=_pair,
        help="an algorithm field over the recipe, as agentgym train --set (repeatable)",
    )
    parser.add_argument(
        "--init",
        choices=("format", "random"),
        default=None,
        help="the tiny policy's start (default: the recipe's, random); with --engine server, "
        "format: without action choices a random policy writes no valid move, so no group has "
        "a learning signal",
    )
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    if args.updates < 4:
        parser.error("--updates must be >= 4 (the first k + 1 updates are warm-up)")
    torch.set_num_threads(args.threads)
    modes = [int(m) for m in args.modes.split(",")]
    runs: dict[int, list[dict[str, Any]]] = {k: [] for k in modes}
    with serve(args.engine) as url:
        for round_ in range(args.rounds):
            for k in modes if round_ % 2 == 0 else modes[::-1]:  # ABC, CBA: drift hits all
                result = train(k, args, url)
                runs[k].append(result)
                curve = " ".join(f"{s:.2f}" for s in result["success"])
                print(
                    f"max_staleness={k} ({args.engine}): {result['update_s']:.2f} s/update (of "
                    f"which the step {result['step_s']:.2f} s), wall {result['wall_s']:.0f} s, "
                    f"load {result['load']:.1f}, success per update {curve}",
                    flush=True,
                )
    base = statistics.fmean(r["update_s"] for r in runs[modes[0]])
    print(f"\n{'max_staleness':>13} | {'s/update':>8} | {'updates/h':>9} | vs {modes[0]} | last 5")
    for k in modes:
        seconds = statistics.fmean(r["update_s"] for r in runs[k])
        last = statistics.fmean(s for r in runs[k] for s in r["success"][-5:])
        ratio = base / seconds
        print(f"{k:>13} | {seconds:8.2f} | {3600 / seconds:9.0f} | {ratio:4.2f}x | {last:.2f}")
    if args.json:
        results = {"args": vars(args), "runs": {str(k): v for k, v in runs.items()}}
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
