"""Curricula on FrozenLake: updates until the policy solves 6x6 maps, per curriculum.

Each (curriculum, seed) trains a fresh tiny policy with the FrozenLake GRPO recipe
(``agentgym train``'s settings) on maps of sizes 3-6 (``train_env_kwargs sizes``, the env's
difficulty levels). The task set is ``--tasks-per-level`` pinned maps per size (the seed picks
them; every curriculum of a seed trains on the same maps: ``uniform`` draws them with equal
probability, ``adaptive`` by learnability, ``schedule`` by level). Every ``--eval-every``
updates the policy plays ``--eval-episodes`` episodes on the task set's 6x6 maps (in turn, the
run's evaluation seeds), until its success reaches ``--target`` or ``--updates`` run out; the
last evaluation is repeated on as many 6x6 maps it never trained on (``held out``).
``--tasks-per-level 0`` trains on one task per size (any map of it, the seed picks) and
evaluates on held-out maps only. It prints, per run, the first update at which evaluation
reached the target and the last evaluation's success with its Wilson 95% interval, then per
curriculum the mean updates-to-target over the seeds (a run that never got there counts as
``--updates``, and is marked ``>``) and its ratio to uniform's.

    .venv/bin/python benchmarks/curriculum.py --updates 200 --set entropy_decay_steps=0  # the study
    .venv/bin/python benchmarks/curriculum.py --updates 4 --eval-every 2 --eval-episodes 16 \\
        --batch-size 16 --max-turns 8                                            # reduced
    .venv/bin/python benchmarks/curriculum.py --curricula uniform schedule --seeds 0 \\
        --curriculum-kwargs threshold=0.7

A full run is up to 200 updates of the tiny model (tens of minutes of two CPUs each); the reduced
form only shows that the study runs. ``--set KEY=VALUE`` changes a trainer setting of the
recipe (the acceptance study keeps the entropy bonus to the end: docs/curriculum.md).
``--json FILE`` writes every evaluation; ``--tables FILE ...`` prints the table of runs written
by several invocations (one per curriculum and seed, e.g. side by side on a machine with cores
to spare).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentgym.core.aio import run_sync
from agentgym.core.keyvalue import parse_kwargs, parse_pairs
from agentgym.recipes.config import Layer, RunConfig, resolve_run
from agentgym.recipes.run import _build, _evaluate, _prepare_out
from agentgym.rollout.curriculum import task_set
from agentgym.trainers.fit import fit


def _run_config(args: argparse.Namespace, curriculum: str, seed: int, out: Path) -> RunConfig:
    config: dict[str, Any] = parse_pairs(args.overrides, "--set")
    if args.batch_size:
        config["batch_size"] = args.batch_size
    values: dict[str, Any] = {
        "env": "agentgym/FrozenLake-v0",
        "algo": "grpo",
        "seed": seed,
        "steps": args.updates,
        "out": str(out),
        "curriculum": curriculum,
        "curriculum_kwargs": _curriculum_kwargs(args, curriculum),
        "env_kwargs": {"size": args.eval_size},
        "train_env_kwargs": {"sizes": args.sizes},
        "eval_episodes": args.eval_episodes,
        "max_turns": args.max_turns,
        "show_bar": False,
        "config": config,
        "options": parse_pairs(args.option_pairs, "--option"),
    }
    return resolve_run(Layer("benchmarks/curriculum.py", values))


def _curriculum_kwargs(args: argparse.Namespace, curriculum: str) -> dict[str, Any]:
    kwargs = {}
    if curriculum != "uniform":
        kwargs = parse_kwargs(args.curriculum_kwargs, "--curriculum-kwargs")
    if args.tasks_per_level:
        kwargs["tasks_per_level"] = args.tasks_per_level
    return dict(kwargs)


def _eval_options(args: argparse.Namespace, run: RunConfig) -> list[dict[str, Any]] | None:
    """One reset-options mapping per evaluation episode: the task set's eval-size maps in
    turn (None: held-out maps, the seed picks them)."""
    if not args.tasks_per_level:
        return None
    kwargs = {**run.env_kwargs, **run.train_env_kwargs}
    pinned = task_set(run.env, kwargs, tasks_per_level=args.tasks_per_level, seed=run.seed)
    maps = [{"task_id": t.options["task_id"]} for t in pinned if t.difficulty == args.eval_size]
    return [maps[i % len(maps)] for i in range(args.eval_episodes)]


def _record(evals: list[dict[str, Any]], result: Any, update: int, started: float) -> None:
    low, high = result.interval
    evals.append(
        {
            "update": update,
            "success": result.success_rate,
            "interval": [low, high],
            "episodes": result.judged,
            "train_s": time.perf_counter() - started,
        }
    )


def _one(args: argparse.Namespace, curriculum: str, seed: int, root: Path) -> dict[str, Any]:
    """Train and evaluate one (curriculum, seed) until the target or the last update."""
    out = root / f"{curriculum}-seed{seed}"
    run = _run_config(args, curriculum, seed, out)
    _prepare_out(run, out)
    trainer, source = _build(run, out)
    options = _eval_options(args, run)
    evals: list[dict[str, Any]] = []
    held_out: list[dict[str, Any]] = []
    reached = None
    started = time.perf_counter()
    try:
        for upto in range(args.eval_every, args.updates + args.eval_every, args.eval_every):
            fit(trainer, source, steps=min(upto, args.updates), checkpoint_every=10**9)
            result = _evaluate(run, trainer, options)
            _record(evals, result, trainer.step_count, started)
            print(f"  {curriculum} seed {seed} update {trainer.step_count}: "
                  f"{result.describe()}", flush=True)
            if result.success_rate >= args.target:
                reached = trainer.step_count
                break
        if options is not None:
            result = _evaluate(run, trainer)
            _record(held_out, result, trainer.step_count, started)
            print(f"  {curriculum} seed {seed} update {trainer.step_count}, held-out maps: "
                  f"{result.describe()}", flush=True)
    finally:
        run_sync(trainer.engine.close())
    levels = {}
    for line in (out / "tasks.jsonl").read_text().splitlines():
        level = json.loads(line)["difficulty"]
        levels[level] = levels.get(level, 0) + 1
    return {"curriculum": curriculum, "seed": seed, "reached": reached, "evals": evals,
            "held_out": held_out, "groups_per_level": dict(sorted(levels.items()))}


def _table(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n{'curriculum':<10} {'seed':>4} {'updates to ' + str(args.target):>16} "
          f"{'last eval (Wilson 95%)':>28}  groups per size")
    for r in results:
        last = r["evals"][-1]
        reached = str(r["reached"]) if r["reached"] is not None else f">{last['update']}"
        low, high = last["interval"]
        interval = f"{last['success']:.3f} ({low:.3f}-{high:.3f}) @{last['update']}"
        print(f"{r['curriculum']:<10} {r['seed']:>4} {reached:>16} {interval:>28}  "
              f"{r['groups_per_level']}")
        for h in r.get("held_out", []):
            low, high = h["interval"]
            print(f"{'':<10} {'':>4} {'held out':>16} "
                  f"{h['success']:.3f} ({low:.3f}-{high:.3f}) @{h['update']:>5}")
    means = {}
    for name in dict.fromkeys(r["curriculum"] for r in results):
        runs = [r for r in results if r["curriculum"] == name]
        means[name] = statistics.mean(r["reached"] or args.updates for r in runs)
        censored = sum(r["reached"] is None for r in runs)
        note = f" ({censored} of {len(runs)} never reached it: counted as {args.updates})"
        print(f"{name}: mean updates to {args.target}: {means[name]:.1f}"
              f"{note if censored else ''}")
    for name, mean in means.items():
        if name != "uniform" and "uniform" in means:
            print(f"ratio uniform / {name} (updates to {args.target}): "
                  f"{means['uniform'] / mean:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--curricula", nargs="+", default=["uniform", "adaptive", "schedule"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--updates", type=int, default=150, help="most updates per run")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--eval-episodes", type=int, default=128)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--sizes", nargs="+", type=int, default=[3, 4, 5, 6])
    parser.add_argument("--tasks-per-level", type=int, default=4,
                        help="pinned maps per size (0: any map of a size, held-out evaluation)")
    parser.add_argument("--eval-size", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=None, help="default: the recipe's")
    parser.add_argument("--max-turns", type=int, default=None, help="default: the env's own")
    parser.add_argument("--curriculum-kwargs", action="append", default=None, metavar="JSON|K=V")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a trainer setting over the recipe's")
    parser.add_argument("--option", dest="option_pairs", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="a trainer option over the recipe's (e.g. decay_steps=800)")
    parser.add_argument("--out", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--tables", type=Path, nargs="+", default=None, metavar="JSON",
                        help="print the table of these --json files, train nothing")
    args = parser.parse_args()
    if args.tables:
        _table([r for path in args.tables for r in json.loads(path.read_text())], args)
        return
    root = args.out or Path(tempfile.mkdtemp(prefix="curriculum-"))
    results = []
    for seed in args.seeds:
        for curriculum in args.curricula:
            results.append(_one(args, curriculum, seed, root))
    _table(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
