"""FrozenLake maps: generation from a task id, solvability, and user maps."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentgym.envs.frozenlake import (
    generate_map,
    parse_map,
    shortest_path_length,
    squares_reaching_goal,
)
from agentgym.error import ConfigError


def reachable(rows: tuple[str, ...]) -> set[tuple[int, int]]:
    """Cells reachable from S without entering a hole (a flood fill, independent of the env)."""
    size = len(rows)
    start = next((r, row.index("S")) for r, row in enumerate(rows) if "S" in row)
    seen, stack = {start}, [start]
    while stack:
        r, c = stack.pop()
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < size and 0 <= nc < size and rows[nr][nc] != "H" and (nr, nc) not in seen:
                seen.add((nr, nc))
                stack.append((nr, nc))
    return seen


@pytest.mark.parametrize("size", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("hole_prob", [0.0, 0.2, 0.5, 0.9])
def test_generated_maps_are_solvable(size, hole_prob):
    for task_id in range(60):
        rows = generate_map(task_id, size, hole_prob)
        assert len(rows) == size
        assert all(len(row) == size for row in rows)
        assert rows[0][0] == "S"
        assert rows[-1][-1] == "G"
        assert set("".join(rows)) <= set("SFHG")
        assert "".join(rows).count("S") == "".join(rows).count("G") == 1
        assert (size - 1, size - 1) in reachable(rows), (task_id, rows)


def test_hole_prob_controls_holes():
    def hole_fraction(p: float) -> float:
        cells = "".join("".join(generate_map(t, 6, p)) for t in range(100))
        return cells.count("H") / len(cells)

    assert hole_fraction(0.0) == 0.0
    assert 0.05 < hole_fraction(0.2) < 0.25
    assert hole_fraction(0.2) < hole_fraction(0.4)


def test_task_map_is_the_same_in_another_process():
    cases = [(0, 4, 0.2), (123456, 5, 0.3), (2**31 - 1, 7, 0.5)]
    code = (
        "import json, sys; from agentgym.envs.frozenlake import generate_map; "
        "print(json.dumps([generate_map(*c) for c in json.loads(sys.argv[1])]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(cases)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert json.loads(result.stdout) == [list(generate_map(*c)) for c in cases]


def test_very_high_hole_prob_still_gives_solvable_maps_with_holes():
    for task_id in range(20):
        rows = generate_map(task_id, 10, 0.99)
        assert (9, 9) in reachable(rows)
        assert "".join(rows).count("H") > 40


def test_map_depends_on_task_id_size_and_hole_prob():
    base = generate_map(3, 6, 0.3)
    assert generate_map(3, 6, 0.3) == base
    assert generate_map(4, 6, 0.3) != base
    assert generate_map(3, 6, 0.35) != base
    assert len(generate_map(3, 7, 0.3)) == 7


@pytest.mark.parametrize(
    ("rows", "length"),
    [
        (("SF", "FG"), 2),
        (("SH", "HG"), None),
        (("GFS", "FFF", "FFF"), 2),
        (("SHG", "FHF", "FFF"), 6),
    ],
)
def test_shortest_path_length(rows, length):
    assert shortest_path_length(rows) == length


@pytest.mark.parametrize(
    ("rows", "squares"),
    [
        (("SF", "FG"), [(0, 0), (0, 1), (1, 0)]),
        (("SH", "HG"), []),  # nothing reaches the goal
        (("SFH", "HHF", "FFG"), [(1, 2), (2, 0), (2, 1)]),  # S and its pocket are cut off
    ],
)
def test_squares_reaching_goal(rows, squares):
    assert squares_reaching_goal(rows) == squares


def test_squares_reaching_goal_agree_with_a_flood_fill_from_the_start():
    for task_id in range(50):
        rows = generate_map(task_id, 4, 0.3)
        expected = {cell for cell in reachable(rows) if rows[cell[0]][cell[1]] != "G"}
        assert set(squares_reaching_goal(rows)) == expected  # a solvable map: one component


def test_parse_map_accepts_slashes_and_newlines():
    assert parse_map("SF/FG") == ("SF", "FG")
    assert parse_map(" SFH\nFFG\nHHF \n") == ("SFH", "FFG", "HHF")
    assert parse_map("GH/HS") == ("GH", "HS")  # need not be solvable or start top-left


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "not square"),
        ("S", "0 G cells"),
        ("SFF/FFG", "not square"),
        ("SF/FG/", "not square"),
        ("sf/fg", "other than S, F, H, G"),
        ("SFF/FXF/FFG", "'X'"),
        ("SFF/FSF/FFG", "2 S cells"),
        ("SFF/FGF/FFG", "2 G cells"),
        (["SF", "FG"], "must be a string"),
    ],
)
def test_parse_map_rejects_bad_maps(text, complaint):
    with pytest.raises(ConfigError, match=complaint) as caught:
        parse_map(text)
    assert "Fix:" in str(caught.value)
