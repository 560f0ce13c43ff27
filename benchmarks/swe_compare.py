"""What the graded tests' comparisons cost: ``runner_compare.Plain.plain`` on typical operands.

Every comparison in a graded test module first looks for a forged object reachable from each
operand (``agentgym.envs.swe.runner_compare``); an operand with none is used as written. This
times that search (the median of ``--repeats`` runs) on operands of growing size: builtin data,
objects of a repository class, and one forged value among them (then rebuilt as plain data).

    python benchmarks/swe_compare.py
    python benchmarks/swe_compare.py --repeats 20
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from agentgym.envs.swe.runner_compare import MAX_VISITS, Plain


class _Origins:
    """Code from this file is the graded diff's; everything else is unchanged code."""

    root = "/nonexistent"
    changed: frozenset[str] = frozenset()

    def value_problem(self, value: object) -> str | None:
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        return "the diff's" if code is not None and code.co_filename == __file__ else None


class Point:
    """Stands in for a repository class: no comparison of its own, so never forged."""

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y


class Liar(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


CASES: dict[str, Callable[[int], Any]] = {
    "ints": lambda n: list(range(n)),
    "str->int dicts": lambda n: [{"k": str(i), "v": i} for i in range(n // 2)],
    "objects": lambda n: [Point(i, i) for i in range(n // 3)],
    "ints + one forged str": lambda n: [*range(n), Liar("x")],
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    plain = Plain(_Origins())
    print(f"MAX_VISITS = {MAX_VISITS}")
    print("| operand | size | plain() median ms | left as written |")
    print("| --- | ---: | ---: | --- |")
    for name, make in CASES.items():
        for size in (1_000, 10_000, 100_000):
            data = make(size)
            times = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                result = plain.plain(data)
                times.append(time.perf_counter() - started)
            median = statistics.median(times) * 1000
            print(f"| {name} | {size} | {median:.2f} | {result is data} |")


if __name__ == "__main__":
    main()
