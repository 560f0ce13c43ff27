"""``TicTacToeEnv``: two roles, ``x`` and ``o``, play tic-tac-toe on a 3x3 text board."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from agentgym.core.errors import ConfigError
from agentgym.core.info import ACTION_CHOICES, SUCCESS
from agentgym.core.multiagent import MultiAgentEnv
from agentgym.core.types import Action, action_text, system, user
from agentgym.envs.tictactoe.players import winner
from agentgym.envs.validate import integer, real

__all__ = ["TicTacToeEnv"]

_MARKS = {"x": "X", "o": "O"}
_FENCE_RE = re.compile(r"```(.*?)```", re.DOTALL)
_BARE_RE = re.compile(r"\s*([1-9])[.!]?\s*")
RULES = (
    "We play tic-tac-toe on a 3x3 board. You play {mark}. Cells are numbered 1-9 row by row; "
    "a free cell shows its number. Get three {mark} in a row, column or diagonal to win. "
    "Each turn write one free cell number in a fenced block like ```5```."
)


def show(board: str) -> str:
    """The board as three lines; a free cell shows its number."""
    cells = [c if c != "." else str(i + 1) for i, c in enumerate(board)]
    return "\n".join(" ".join(cells[r * 3 : r * 3 + 3]) for r in range(3))


def read_move(action: Action) -> int | None:
    """The cell (0-8) of an action: the last fenced block, or text that is only a digit."""
    text = action_text(action)
    blocks = _FENCE_RE.findall(text)
    found = _BARE_RE.fullmatch(blocks[-1] if blocks else text)
    return int(found.group(1)) - 1 if found else None


class TicTacToeEnv(MultiAgentEnv):
    """Tic-tac-toe for two text agents: ``x`` moves first, then ``o``, in turns.

    Description:
        A deterministic game with a clear outcome: three marks in a line win, a full board
        without one is a draw. ``reset(seed=s)`` always starts from the empty board (the seed
        only seeds ``np_random``); ``options={"board": "X.O......"}`` starts from a given
        position (9 characters of ``X``, ``O``, ``.``; the side to move follows from the
        counts). Scripted players (``scripted_policies``: ``random``, ``heuristic``) read
        ``info["board"]``.

    Observation:
        Per role (``observe(role)``): on reset a system message with the rules and its mark;
        before each of its turns a user message with the opponent's last move and the board::

            O played 5.
            X 2 3
            4 O 6
            7 8 9
            Your move.

        After an invalid action, a user message saying what was wrong; at the end, a user
        message with the outcome.

    Action:
        Text whose last fenced block holds one free cell number (```` ```5``` ````), or text that
        is only that digit. Anything else (no number, a taken cell, two digits) is invalid: the
        same role moves again.

    Tools:
        None.

    Reward:
        Per role, at the end: ``win_reward`` (1.0) for the winner, ``-win_reward`` for the
        loser, 0.0 each for a draw; ``invalid_action_reward`` (-0.1) for each invalid action.
        A role's return lies in ``[-1 - max_invalid * 0.1, 1]`` with the defaults.

    Episode end:
        Terminated for both roles on a line or a full board. A role that writes
        ``max_invalid`` invalid actions in a row forfeits: it loses, the other wins.
        ``info["success"]`` is True for the winner, False otherwise (draws included).

    Arguments:
        win_reward: reward of a win (> 0); a loss gets its negative.
        invalid_action_reward: reward of an invalid action (<= 0).
        max_invalid: invalid actions in a row that forfeit the game (>= 1).
        render_mode: ``"ansi"`` returns the board.

    Sandbox:
        None: pure Python.

    Info keys (``infos[role]``, what ``last()`` gives the role before it acts): ``board``,
    ``mark``, ``action_choices`` (the free cells as fenced actions), ``turn``; ``invalid_action``
    after an invalid action (and in the final info of a role that forfeits); at the end
    ``success``, ``outcome`` (``win``/``loss``/``draw``), ``winner`` (``x``, ``o`` or None),
    ``forfeit``.

    Version history:
        v0: first version.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "multi_agent": True}
    possible_agents: ClassVar[tuple[str, ...]] = ("x", "o")
    scripted_policies: ClassVar[dict[str, Any]] = {
        "random": "agentgym.envs.tictactoe.players:random_move",
        "heuristic": "agentgym.envs.tictactoe.players:heuristic_move",
    }
    default_policies: ClassVar[dict[str, str]] = {"x": "random", "o": "random"}

    def __init__(
        self,
        *,
        win_reward: float = 1.0,
        invalid_action_reward: float = -0.1,
        max_invalid: int = 3,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(render_mode=render_mode)
        self.win_reward = real("win_reward", win_reward, "pass a reward > 0, e.g. 1.0")
        if self.win_reward <= 0:
            raise ConfigError("win_reward", win_reward, "must be > 0", "pass e.g. 1.0")
        self.invalid_action_reward = real(
            "invalid_action_reward", invalid_action_reward, "pass a reward <= 0, e.g. -0.1"
        )
        if self.invalid_action_reward > 0:
            raise ConfigError(
                "invalid_action_reward", invalid_action_reward, "must be <= 0", "pass e.g. -0.1"
            )
        self.max_invalid = integer("max_invalid", max_invalid, 1, "pass an int >= 1, e.g. 3")
        self.board = "." * 9
        self.turn = 0
        self.invalid_streak = 0

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> None:
        await super().areset(seed=seed, options=options)
        self.board = _start_board((options or {}).get("board"))
        self.turn, self.invalid_streak = 0, 0
        for agent in self.agents:
            self.tell(agent, system(RULES.format(mark=_MARKS[agent])))
        first = "x" if self.board.count("X") == self.board.count("O") else "o"
        self.agent_selection = first
        self.tell(first, user(f"{show(self.board)}\nYour move."))
        self._offer(first)

    async def astep(self, action: Action | None) -> None:
        if self.dead_step(action):
            return
        agent = self.begin_turn()
        other = "o" if agent == "x" else "x"
        cell = read_move(action) if action is not None else None
        if cell is None or self.board[cell] != ".":
            self._invalid(agent, other, cell)
            return
        self.invalid_streak = 0
        self.turn += 1
        self.board = self.board[:cell] + _MARKS[agent] + self.board[cell + 1 :]
        line = winner(self.board)
        if line is not None or "." not in self.board:
            self._finish(agent if line else None, played=(agent, cell))
            return
        moved = f"{_MARKS[agent]} played {cell + 1}."
        self.tell(other, user(f"{moved}\n{show(self.board)}\nYour move."))
        self._offer(other)
        self.end_turn(other)

    def _offer(self, agent: str) -> None:
        free = [f"```{i + 1}```" for i, c in enumerate(self.board) if c == "."]
        self.infos[agent] = {
            "board": self.board,
            "mark": _MARKS[agent],
            ACTION_CHOICES: free,
            "turn": self.turn,
        }

    def _invalid(self, agent: str, other: str, cell: int | None) -> None:
        self.invalid_streak += 1
        self.reward(agent, self.invalid_action_reward)
        if self.invalid_streak >= self.max_invalid:
            self._finish(other, forfeit=agent)
            return
        why = "no cell number" if cell is None else f"cell {cell + 1} is taken"
        self.tell(
            agent,
            user(f"Invalid move: {why}. Write a free cell number like ```5```.\n"
                 + show(self.board)),
        )
        self._offer(agent)
        self.infos[agent]["invalid_action"] = True

    def _finish(
        self,
        won: str | None,
        *,
        played: tuple[str, int] | None = None,
        forfeit: str | None = None,
    ) -> None:
        infos: dict[str, dict[str, Any]] = {}
        for agent in self.agents:
            outcome = "draw" if won is None else ("win" if agent == won else "loss")
            value = {"win": self.win_reward, "loss": -self.win_reward, "draw": 0.0}[outcome]
            self.reward(agent, value)
            head = ""
            if played is not None and played[0] != agent:
                head = f"{_MARKS[played[0]]} played {played[1] + 1}.\n"
            if forfeit is not None:
                head = f"{_MARKS[forfeit]} forfeits after {self.max_invalid} invalid moves.\n"
            self.tell(agent, user(f"{head}{show(self.board)}\nGame over: you {outcome}."))
            infos[agent] = {
                "board": self.board,
                "mark": _MARKS[agent],
                "turn": self.turn,
                SUCCESS: outcome == "win",
                "outcome": outcome,
                "winner": won,
                "forfeit": forfeit is not None,
            }
            if forfeit == agent:
                infos[agent]["invalid_action"] = True
        self.end_game(infos)

    def render(self) -> str | None:
        return show(self.board)


def _start_board(board: object) -> str:
    if board is None:
        return "." * 9
    text = str(board)
    x, o = text.count("X"), text.count("O")
    if len(text) != 9 or set(text) - set("XO.") or not 0 <= x - o <= 1 or winner(text):
        raise ConfigError(
            "options['board']",
            board,
            "is not a playable position",
            "pass 9 characters of X, O and . with as many X as O (or one more) and no line",
        )
    if "." not in text:
        raise ConfigError("options['board']", board, "is full", "leave at least one free cell")
    return text
