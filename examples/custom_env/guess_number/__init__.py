"""An agentgym env in a package of its own: guess a secret number from higher/lower hints."""

from __future__ import annotations

import re
from typing import Any

import agentgym
from agentgym import AgentEnv
from agentgym.core import Action, Observation, StepResult, system, user

__all__ = ["GuessNumberEnv", "register_envs"]


class GuessNumberEnv(AgentEnv):
    """Guess a secret whole number; each wrong guess is answered "higher" or "lower".

    Description: the secret is drawn from 1..``high`` by the reset seed.
    Observation: a system and a user message on reset; one user message (the hint) per step.
    Action: text containing a whole number (the first one is the guess).
    Tools: none.
    Reward: 1 on the step that guesses right, else 0.
    Episode end: terminated when guessed; truncated after ``max_guesses`` guesses.
    Arguments: ``high`` (largest secret), ``max_guesses``.
    Step info keys: ``success`` on the last step; ``guess`` (None when the text had no number).
    Version history: v0: first version.
    """

    def __init__(self, high: int = 100, max_guesses: int = 7, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        self.high, self.max_guesses = high, max_guesses
        self.secret, self.guesses = 0, 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)  # seeds self.np_random: same seed, same secret
        self.secret = int(self.np_random.integers(1, self.high + 1))
        self.guesses = 0
        task = f"I picked a whole number from 1 to {self.high}. Guess it: answer with one number."
        return (system("You are playing a guessing game."), user(task)), {"tools": []}

    def step(self, action: Action) -> StepResult:
        self.guesses += 1
        found = re.search(r"-?\d+", self.parse(action).content)
        guess = int(found.group()) if found else None
        won = guess == self.secret
        out_of_guesses = not won and self.guesses >= self.max_guesses
        if won:
            hint = "Correct!"
        elif guess is None:
            hint = "That has no number in it."
        else:
            hint = "Higher." if guess < self.secret else "Lower."
        info: dict[str, Any] = {"guess": guess}
        if won or out_of_guesses:
            info["success"] = won  # the one definition of success trainers and eval read
        return (user(hint),), float(won), won, out_of_guesses, info


def register_envs() -> None:
    """The plugin's entry point: ``import agentgym`` calls it once."""
    agentgym.register(
        "example/GuessNumber-v0",
        "guess_number:GuessNumberEnv",
        family="GuessNumber",
        tags=("multi-turn", "example"),
        description="Guess a number from higher/lower hints.",
    )
