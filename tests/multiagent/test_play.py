"""A person plays some roles of a multi-agent env (``agentgym play``): who plays which role,
and a game driven through a scripted terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest

from agentgym.core.errors import ConfigError
from agentgym.core.multiagent import MultiAgentEnv
from agentgym.core.types import user
from agentgym.multiagent import make
from agentgym.multiagent.play import GamePlayer, seat
from agentgym.multiagent.policies import ScriptedPolicy

TTT = "agentgym/TicTacToe-v0"


class Script:
    """A terminal whose person types ``lines`` in order; what it is shown is kept in ``out``."""

    def __init__(self, *lines: str) -> None:
        self.lines, self.out = list(lines), []

    def say(self, text: str = "") -> None:
        self.out.append(text)

    def show(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.out.extend(str(m["content"]) for m in messages)

    def read_line(self) -> str | None:
        return self.lines.pop(0) if self.lines else None

    read_action = read_line


class Echo(MultiAgentEnv):
    """Two roles without scripted players: each says one thing, then the game ends."""

    possible_agents: ClassVar[tuple[str, ...]] = ("a", "b")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        super().reset(seed=seed)
        for agent in self.agents:
            self.tell(agent, user(f"you are {agent}"))

    def step(self, action: Any) -> None:
        if self.dead_step(action):
            return
        agent = self.begin_turn()
        if agent == "a":
            self.tell("b", user(f"a said {action}"))
            self.end_turn("b")
        else:
            self.reward("b", 1.0)
            self.end_game({})


def test_the_person_plays_the_first_role_and_the_env_defaults_the_rest():
    seats = seat(make(TTT))
    assert seats["x"] is None
    assert isinstance(seats["o"], ScriptedPolicy)
    assert seats["o"].name == "random"
    seats = seat(make(TTT), ["o"], opponent="heuristic")
    assert seats["o"] is None
    assert seats["x"].name == "heuristic"
    assert seat(make(TTT), ["x", "o"]) == {"x": None, "o": None}


def test_roles_without_a_scripted_player_are_played_by_the_person():
    assert seat(Echo(), ["b"]) == {"a": None, "b": None}


@pytest.mark.parametrize(
    ("roles", "opponent", "named"), [(["z"], None, "'z'"), ([], "nobody", "'nobody'")]
)
def test_an_unknown_role_or_opponent_is_refused_with_the_choices(roles, opponent, named):
    with pytest.raises(ConfigError, match=named) as caught:
        seat(make(TTT), roles, opponent)
    assert "Fix: use one of" in str(caught.value)


def test_a_hot_seat_game_to_the_end():
    terminal = Script("5", "1", "4", "2", "6", ":q")  # x takes the middle row
    env = make(TTT)
    assert GamePlayer(env, terminal, seat(env, ["x", "o"])).run(seed=0) == 0
    assert "Game over. Returns: x 1, o -1" in terminal.out
    assert sum("Your move." in line for line in terminal.out) == 5


def test_against_the_scripted_player_the_person_sees_only_its_role():
    terminal = Script(*"123456789", ":q")
    env = make(TTT)
    GamePlayer(env, terminal, seat(env)).run(seed=0)
    shown = "\n".join(terminal.out)
    assert "=== New game: you play x; o is random" in shown
    assert "You play X." in shown
    assert "You play O." not in shown
    assert "O played" in shown
    assert "Game over. Returns: x " in shown


def test_restart_and_quit():
    terminal = Script("hello", ":r", "there", "friend")  # then the end of input
    assert GamePlayer(Echo(), terminal, seat(Echo(), ["a"])).run(seed=1) == 0
    assert terminal.out.count("=== New game: you play a, b") == 2  # :r in b's turn restarts
    assert "a said hello" in terminal.out
    assert "a said there" in terminal.out
    assert "Game over. Returns: a 0, b 1" in terminal.out
