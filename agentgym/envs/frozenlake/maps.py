"""FrozenLake maps: procedural generation from a task id, user maps, and solvability.

A map is a tuple of equal-length row strings over ``S`` (start), ``F`` (frozen), ``H`` (hole) and
``G`` (goal), written ``"SFFF/FHFH/FFFH/HFFG"`` when it travels as one string. The map of a task
depends only on ``(task_id, size, hole_prob)``: it is drawn from its own generator seeded with
those values, never from the env's ``np_random``, so a task id names the same map in every process.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from agentgym.core.errors import ConfigError

__all__ = [
    "CELLS",
    "NUM_TASKS",
    "find",
    "format_map",
    "generate_map",
    "parse_map",
    "shortest_path_length",
    "squares_reaching_goal",
]

CELLS = frozenset("SFHG")
NUM_TASKS = 2**31
"""Task ids that ``reset(seed=...)`` draws from; any non-negative int is a valid task id."""

MAX_ATTEMPTS = 100
"""Draws tried before a map is made solvable by clearing a random path (high ``hole_prob``)."""

# Keeps this stream apart from any other generator seeded with small integers.
_SALT = 0x46726F7A656E4C6B  # "FrozenLk"

Map = tuple[str, ...]


def _seed_words(task_id: int, size: int, hole_prob: float) -> list[int]:
    # as_integer_ratio is exact: two hole_probs give the same maps only if they are the same float.
    numerator, denominator = float(hole_prob).as_integer_ratio()
    return [_SALT, task_id, size, numerator, denominator]


def _draw(rng: np.random.Generator, size: int, hole_prob: float) -> list[list[str]]:
    holes = rng.random((size, size)) < hole_prob
    grid = [["H" if hole else "F" for hole in row] for row in holes.tolist()]
    grid[0][0], grid[-1][-1] = "S", "G"
    return grid


def _carve(grid: list[list[str]], rng: np.random.Generator) -> list[list[str]]:
    """Clear the holes on a random monotone path from the top-left to the bottom-right."""
    size = len(grid)
    steps = ["down"] * (size - 1) + ["right"] * (size - 1)
    row = col = 0
    for step in rng.permutation(steps).tolist():
        row, col = (row + 1, col) if step == "down" else (row, col + 1)
        if grid[row][col] == "H":
            grid[row][col] = "F"
    return grid


def generate_map(task_id: int, size: int, hole_prob: float) -> Map:
    """The solvable ``size`` x ``size`` map of ``task_id``: start top-left, goal bottom-right.

    Each cell other than S and G is a hole with probability ``hole_prob``; unsolvable draws are
    redrawn. After ``MAX_ATTEMPTS`` unsolvable draws (only likely when ``hole_prob`` is high), the
    last draw gets a random path cleared, so generation always ends.
    """
    rng = np.random.default_rng(_seed_words(task_id, size, hole_prob))
    grid = _draw(rng, size, hole_prob)
    for _ in range(MAX_ATTEMPTS - 1):
        if shortest_path_length(_rows(grid)) is not None:
            return _rows(grid)
        grid = _draw(rng, size, hole_prob)
    if shortest_path_length(_rows(grid)) is None:
        grid = _carve(grid, rng)
    return _rows(grid)


def _rows(grid: list[list[str]]) -> Map:
    return tuple("".join(row) for row in grid)


def find(rows: Sequence[str], cell: str) -> tuple[int, int]:
    """Row and column of the first ``cell`` in ``rows``."""
    for r, row in enumerate(rows):
        c = row.find(cell)
        if c >= 0:
            return r, c
    raise ValueError(f"no {cell!r} on the map")


def shortest_path_length(rows: Sequence[str]) -> int | None:
    """Fewest moves from S to G without entering a hole, or ``None`` when G is unreachable."""
    start, goal = find(rows, "S"), find(rows, "G")
    size = len(rows)
    distance = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return distance[(r, c)]
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            inside = 0 <= nr < size and 0 <= nc < size
            if inside and rows[nr][nc] != "H" and (nr, nc) not in distance:
                distance[(nr, nc)] = distance[(r, c)] + 1
                queue.append((nr, nc))
    return None


def squares_reaching_goal(rows: Sequence[str]) -> list[tuple[int, int]]:
    """The squares other than holes and the goal from which G can be reached, in row order."""
    goal, size = find(rows, "G"), len(rows)
    seen, queue = {goal}, deque([goal])
    while queue:
        r, c = queue.popleft()
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            inside = 0 <= nr < size and 0 <= nc < size
            if inside and rows[nr][nc] != "H" and (nr, nc) not in seen:
                seen.add((nr, nc))
                queue.append((nr, nc))
    return sorted(seen - {goal})


def format_map(rows: Sequence[str]) -> str:
    """``("SF", "FG")`` -> ``"SF/FG"``."""
    return "/".join(rows)


def parse_map(text: object, name: str = "options['map']") -> Map:
    """Rows of a user map written ``"SFFF/FHFH/FFFH/HFFG"`` (``/`` or newlines between rows).

    Raises ``ConfigError`` unless the map is square with exactly one S, one G and only S, F, H,
    G cells. The map need not be solvable.
    """
    fix = "pass rows of S/F/H/G joined by '/', e.g. 'SFFF/FHFH/FFFH/HFFG'"
    if not isinstance(text, str):
        raise ConfigError(name, text, "must be a string", fix)
    rows = tuple(row.strip() for row in text.strip().replace("\n", "/").split("/"))
    bad = sorted(set("".join(rows)) - CELLS)
    if bad:
        raise ConfigError(name, text, f"has cells {bad} other than S, F, H, G", fix)
    if any(len(row) != len(rows) for row in rows):
        raise ConfigError(name, text, f"is not square: row lengths {[len(r) for r in rows]}", fix)
    for cell, what in (("S", "start"), ("G", "goal")):
        count = sum(row.count(cell) for row in rows)
        if count != 1:
            rule = f"has {count} {cell} cells ({what}); exactly 1 is needed"
            raise ConfigError(name, text, rule, fix)
    return rows
