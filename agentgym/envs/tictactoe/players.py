"""Scripted tic-tac-toe players: the fixed opponents a trained role plays against.

Each reads the ``board`` its info carries (9 characters, ``X``/``O``/``.``, row by row) and
answers an action text (```` ```5``` ````); randomness comes from the ``rng`` the rollout
seeds, so a game is a function of its seeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["LINES", "heuristic_move", "random_move", "winner"]

LINES = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),
    (0, 3, 6), (1, 4, 7), (2, 5, 8),
    (0, 4, 8), (2, 4, 6),
)  # fmt: skip


def winner(board: str) -> str | None:
    """``"X"`` or ``"O"`` when that mark holds a line, else None."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


def _free(board: str) -> list[int]:
    return [i for i, cell in enumerate(board) if cell == "."]


def _action(cell: int) -> str:
    return f"```{cell + 1}```"


def random_move(observation: Any, info: Mapping[str, Any], rng: np.random.Generator) -> str:
    """A free cell drawn uniformly."""
    free = _free(str(info["board"]))
    return _action(free[int(rng.integers(len(free)))])


def heuristic_move(observation: Any, info: Mapping[str, Any], rng: np.random.Generator) -> str:
    """Win if it can, else block the opponent's win, else the centre, else a random free
    cell."""
    board, mark = str(info["board"]), str(info["mark"])
    other = "O" if mark == "X" else "X"
    free = _free(board)
    for who in (mark, other):
        for cell in free:
            if winner(board[:cell] + who + board[cell + 1 :]) == who:
                return _action(cell)
    if 4 in free:
        return _action(4)
    return _action(free[int(rng.integers(len(free)))])
