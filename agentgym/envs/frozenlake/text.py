"""What FrozenLake writes and reads: the prompt, the board, move reports and text moves.

Kept short on purpose: a tiny policy trains on these strings, and every character is context.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "DIRECTIONS",
    "INVALID_TOOL_HINT",
    "RULES",
    "TEXT_MOVE_HINT",
    "TEXT_RULES",
    "board",
    "invalid_text",
    "move_report",
    "read_text_move",
    "surroundings",
    "too_many_calls",
]

DIRECTIONS = ("left", "down", "right", "up")
"""Gymnasium FrozenLake's action order: each direction's neighbours in it are perpendicular."""

RULES = (
    "You are on a frozen lake. Reach the goal G without stepping into a hole H. "
    "P is you, F is ice. Each turn move one square: left, right, up or down. "
    "Write the direction in a fenced block like ```down```, or call the move tool."
)

TEXT_RULES = RULES.replace(", or call the move tool.", ".")
"""The rules when the env offers no tool (``FrozenLakeEnv(tool=False)``)."""

TEXT_MOVE_HINT = "There is no tool: write the direction in a fenced block like ```down```."

INVALID_TOOL_HINT = "Call move once with direction left, right, up or down."

_FENCE_RE = re.compile(r"```(.*?)```", re.DOTALL)
_WORD_RE = re.compile(r"\b(left|right|up|down)\b", re.IGNORECASE)
_BARE_RE = re.compile(r"\s*(left|right|up|down)[.!]?\s*", re.IGNORECASE)


_NEIGHBOURS = (("left", 0, -1), ("down", 1, 0), ("right", 0, 1), ("up", -1, 0))
_CELL_NAMES = {"S": "ice", "F": "ice", "H": "hole", "G": "goal"}


def surroundings(rows: Sequence[str], position: tuple[int, int]) -> str:
    """What lies one move away in each direction, e.g. ``Around you: left edge, down ice,
    right hole, up ice.`` It repeats what the board shows, in words a small model reads
    without having to count columns."""
    row, col = position
    parts = []
    for name, dr, dc in _NEIGHBOURS:
        r, c = row + dr, col + dc
        inside = 0 <= r < len(rows) and 0 <= c < len(rows[r])
        parts.append(f"{name} {_CELL_NAMES[rows[r][c]] if inside else 'edge'}")
    return "Around you: " + ", ".join(parts) + "."


def board(rows: Sequence[str], position: tuple[int, int], *, around: bool = False) -> str:
    """The board with the player as ``P`` (the start shows as ice), then (with ``around``) what
    lies next to the player, then where the player is."""
    shown = [["F" if cell == "S" else cell for cell in row] for row in rows]
    row, col = position
    shown[row][col] = "P"
    lines = [" ".join(cells) for cells in shown]
    if around:
        lines.append(surroundings(rows, position))
    return "\n".join(lines) + f"\nYou are at row {row + 1}, column {col + 1}."


def move_report(intended: str, actual: str, *, blocked: bool, cell: str) -> str:
    """One line on what a move did: slipped, hit the edge, fell in, or reached the goal."""
    if actual == intended:
        text = f"You moved {actual}"
    else:
        text = f"You tried {intended} but slipped {actual}"
    if blocked:
        return text + " into the edge and stayed."
    if cell == "H":
        return text + " and fell into a hole. Game over."
    if cell == "G":
        return text + " and reached the goal!"
    return text + "."


def read_text_move(text: str) -> tuple[str | None, str]:
    """The direction a text action asks for, or ``None`` and the reason it names none.

    The last fenced block counts and must hold exactly one direction word; without a fenced
    block, the whole text must be a direction word.
    """
    blocks = _FENCE_RE.findall(text)
    if blocks:
        body = blocks[-1]
    elif _BARE_RE.fullmatch(text):
        body = text
    else:
        return None, "no fenced block with a direction"
    words = _WORD_RE.findall(body)
    if not words:
        return None, "no direction in the fenced block"
    if len(words) > 1:
        return None, "more than one direction"
    return words[0].lower(), ""


def invalid_text(reason: str) -> str:
    return (
        f"Invalid action: {reason}. Reply with one direction (left, right, up or down) "
        "in a fenced block like ```down```, or call move once."
    )


def too_many_calls(count: int) -> str:
    return f"Error: {count} tool calls in one turn, so none ran. Make exactly one move per turn."
