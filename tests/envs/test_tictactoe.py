"""TicTacToe-v0 reads a move from an action's text, as every env reads it
(``agentgym.core.action_text``); the game itself is tested in tests/multiagent/test_env.py."""

from __future__ import annotations

from typing import Any

import pytest

from agentgym.envs.tictactoe.env import read_move


@pytest.mark.parametrize(
    ("action", "cell"),
    [
        ("5", 4),
        ("I take the middle:\n```\n5\n```", 4),
        ({"role": "assistant", "content": "9"}, 8),
        ({"role": "assistant", "content": [{"type": "text", "text": "1"}]}, 0),  # content parts
        ({"role": "assistant", "content": None}, None),
        ({"role": "user", "content": "5"}, None),  # not a turn: no text
        ("the middle", None),
    ],
)
def test_a_move_is_read_from_the_actions_text(action: Any, cell: int | None) -> None:
    assert read_move(action) == cell
