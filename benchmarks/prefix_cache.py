"""Multi-turn collection with HFEngine's prefix cache on vs off, side by side in one run.

Each side collects the same FrozenLake episodes (same seeds, same sampling seeds, the tiny
policy, temperature 1, the env's own 32-turn limit) with ``agentgym.rollout.collect``; with the
cache a turn prefills only the tokens the env added since the previous turn. Reported: wall
time, episodes/s and prompt tokens prefilled, alternating the two sides ``--rounds`` times::

    .venv/bin/python benchmarks/prefix_cache.py --episodes 64 --rounds 3 --out prefix.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

from agentgym.inference import HFEngine
from agentgym.models import load
from agentgym.rollout import collect

ENV_ID = "agentgym/FrozenLake-v0"


def run_side(cache_bytes: int, episodes: int, seed: int) -> dict[str, Any]:
    model, tokenizer = load()
    engine = HFEngine(model, tokenizer, seed=seed, prefix_cache_bytes=cache_bytes)
    started = time.perf_counter()
    result = collect(engine, ENV_ID, episodes, seed=seed, tokenizer=tokenizer, temperature=1.0)
    wall = time.perf_counter() - started
    turns = sum(len(e.turns) for e in result)
    return {
        "wall_s": wall,
        "episodes_per_s": episodes / wall,
        "turns": turns,
        "tokens_reused": engine.stats.prefix_tokens,
        "prefix_hits": engine.stats.prefix_hits,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sides: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for _ in range(args.rounds):
        sides["off"].append(run_side(0, args.episodes, args.seed))
        sides["on"].append(run_side(256 * 2**20, args.episodes, args.seed))
    summary = {
        name: {
            "wall_s_median": statistics.median(r["wall_s"] for r in runs),
            "turns": runs[0]["turns"],
            "prefix_hits": runs[0]["prefix_hits"],
            "tokens_reused": runs[0]["tokens_reused"],
        }
        for name, runs in sides.items()
    }
    speedup = summary["off"]["wall_s_median"] / summary["on"]["wall_s_median"]
    report = {"episodes": args.episodes, "threads": args.threads, "sides": summary}
    report["speedup"] = speedup
    print(json.dumps(report, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**report, "runs": sides}, f, indent=2)


if __name__ == "__main__":
    main()
