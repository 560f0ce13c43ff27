"""A person plays some roles of a multi-agent env in a terminal (``agentgym play``).

The person plays the roles they pick (default the env's first role); every other role is
played by a scripted player: the one named by ``opponent``, else the env's
``default_policies`` entry for that role. A role with neither is played by the person too, so
an env without scripted players is played by the person in every role, in turn (hot seat).
The person sees only what the env addresses to their roles (``observe``), as a model would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from agentgym.core.errors import ConfigError
from agentgym.core.multiagent import MultiAgentEnv
from agentgym.multiagent.policies import ScriptedPolicy, resolve_policy

__all__ = ["GamePlayer", "Terminal", "seat"]

HELP_LINE = (
    "Type your role's action: a line, or a ``` fenced block over several lines. "
    ":r starts a new game, :q quits."
)


class Terminal(Protocol):
    """Where the person reads and types (``agentgym.cli``'s terminal)."""

    def say(self, text: str = "") -> None: ...

    def show(self, messages: Sequence[Mapping[str, Any]]) -> None: ...

    def read_line(self) -> str | None: ...

    def read_action(self) -> str | None: ...


def seat(
    env: MultiAgentEnv, roles: Sequence[str] = (), opponent: str | None = None
) -> dict[str, ScriptedPolicy | None]:
    """Role -> its scripted player, ``None`` for the roles the person plays: ``roles`` (default
    the first), and any other role that has no scripted player (``opponent`` or the env's
    default for it)."""
    name = env.spec.id if env.spec is not None else type(env).__name__
    possible = tuple(env.possible_agents)
    unknown = [role for role in roles if role not in possible]
    if unknown:
        raise ConfigError(
            "--role", unknown[0], f"is not a role of {name}", f"use one of {possible}"
        )
    if opponent is not None and opponent not in env.scripted_policies:
        raise ConfigError(
            "--opponent", opponent, f"is not a scripted player of {name}",
            f"use one of {sorted(env.scripted_policies)}, or leave it out for the env's defaults",
        )  # fmt: skip
    people = set(roles or possible[:1])
    seats: dict[str, ScriptedPolicy | None] = {}
    for role in possible:
        given = opponent if opponent is not None else env.default_policies.get(role)
        if role in people or given is None:
            seats[role] = None
            continue
        policy = resolve_policy(env, role, given)  # a name: always a ScriptedPolicy
        seats[role] = policy if isinstance(policy, ScriptedPolicy) else None
    return seats


class GamePlayer:
    """Games of ``env`` between the person (the roles ``seats`` maps to None) and scripted
    players, until ``:q`` or the end of input."""

    def __init__(
        self,
        env: MultiAgentEnv,
        terminal: Terminal,
        seats: Mapping[str, ScriptedPolicy | None],
    ) -> None:
        self.env, self.terminal, self.seats = env, terminal, dict(seats)
        self.returns: dict[str, float] = {}

    def run(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> int:
        """Play until the person quits; the exit status (0)."""
        self.terminal.say(HELP_LINE)
        while True:
            outcome = self.play(seed=seed, options=options)
            seed = None  # later games continue the env's random stream
            if outcome == "quit":
                return 0
            if outcome == "over":
                self.terminal.say("Press Enter for a new game, or :q to quit.")
                answer = self.terminal.read_line()
                if answer is None or answer.strip() == ":q":
                    return 0

    def play(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        """One game: ``"over"`` when it ended, ``"restart"`` on ``:r``, ``"quit"`` on ``:q``."""
        env, say = self.env, self.terminal.say
        env.reset(seed=seed, options=options)
        rng = np.random.default_rng(seed)
        self.returns = dict.fromkeys(env.possible_agents, 0.0)
        say(f"=== New game: {self._describe()}")
        for agent in env.agent_iter():
            observation, reward, terminated, truncated, info = env.last()
            self.returns[agent] += reward
            policy = self.seats[agent]
            if policy is None:
                self._show(agent, observation, reward)
            if terminated or truncated:
                env.step(None)
                continue
            if policy is not None:
                env.step(policy.player(observation, info, rng))
                continue
            action = self.terminal.read_action()
            if action is None or action.strip() in (":q", ":r"):
                return "restart" if action is not None and action.strip() == ":r" else "quit"
            env.step(action)
        results = ", ".join(f"{role} {value:g}" for role, value in self.returns.items())
        say(f"Game over. Returns: {results}")
        return "over"

    def _describe(self) -> str:
        people = [role for role, policy in self.seats.items() if policy is None]
        others = [f"{role} is {policy.name}" for role, policy in self.seats.items() if policy]
        return "; ".join([f"you play {', '.join(people)}", *others])

    def _show(self, agent: str, observation: Sequence[Mapping[str, Any]], reward: float) -> None:
        self.terminal.say(f"--- {agent}")
        self.terminal.show(observation)
        if reward:
            self.terminal.say(f"reward={reward:g}")
