"""One "did you mean" helper and one wording wherever agentgym refuses a name it does not know."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pytest

import agentgym
from agentgym.core.config import Config
from agentgym.core.errors import Error
from agentgym.core.parsing import get_parser
from agentgym.core.suggest import close_matches, did_you_mean, suggestion
from agentgym.registry.lookup import check_env_kwargs
from agentgym.trainers.backends import make_backend
from agentgym.trainers.config import TrainOptions


def test_the_closest_choice_then_every_choice() -> None:
    text = did_you_mean("sise", ["size", "slippery"], kind="arguments")
    assert text == "Did you mean 'size'? Valid arguments: size, slippery"


def test_nothing_close_lists_the_choices_only() -> None:
    assert did_you_mean("zzz", ["size", "slippery"]) == "Valid choices: size, slippery"
    assert did_you_mean("x", [], kind="arguments") == "There are no valid arguments"


def test_case_does_not_hide_a_match() -> None:
    assert close_matches("FROZENLAKE-V0", ["agentgym/x", "FrozenLake-v0"]) == ["FrozenLake-v0"]
    assert close_matches("hermez", ["json", "hermes", "pythonic"], n=3) == ["hermes"]
    assert suggestion([]) == ""


REFUSALS: list[tuple[str, Callable[[], object], str]] = [
    ("env id", lambda: agentgym.make("agentgym/FrozenLke-v0"), "agentgym/FrozenLake-v0"),
    ("parser", lambda: get_parser("hermez"), "hermes"),
    ("config key", lambda: TrainOptions.from_dict({"warmup_step": 3}), "warmup_steps"),
    ("backend", lambda: make_backend("deepspeeed"), "deepspeed"),
    (
        "env argument",
        lambda: check_env_kwargs("agentgym/FrozenLake-v0", {"sise": 5}),
        "size",
    ),
]


@pytest.mark.parametrize(("what", "refuse", "meant"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_every_refusal_says_it_the_same_way(
    what: str, refuse: Callable[[], object], meant: str
) -> None:
    with pytest.raises(Error) as caught:
        refuse()
    assert f"Did you mean {meant!r}?" in str(caught.value)


@dataclass(frozen=True, kw_only=True)
class Pick(Config):
    mode: Literal["token-mean", "seq-mean"] = "token-mean"


def test_config_choices_use_it_too() -> None:
    with pytest.raises(Error, match=r"Did you mean 'seq-mean'\? Valid choices: token-mean, seq"):
        Pick(mode="seq-men")  # type: ignore[arg-type]
