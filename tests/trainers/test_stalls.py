"""Steps that teach nothing: a step whose every episode was dropped writes its row, the guards
see it, and a few in a row stop the run naming the causes (DAPO's refill rounds still work);
updates whose groups all had equal rewards warn, ever more rarely; rows have no ``update`` key."""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from agentgym import models
from agentgym.core.errors import NoLearningSignalWarning, NoTrainableEpisodes
from agentgym.core.types import Episode
from agentgym.recipes.run_folder import EVENTS_FILE, RunFolder
from agentgym.trainers import fit, make
from agentgym.trainers.guards import Guards, GuardsConfig
from agentgym.trainers.stalls import FlatSteps

from .ds_step import synthetic_episodes

GROUP = 4
CONFIG = {"group_size": GROUP, "batch_size": 8, "num_minibatches": 1, "learning_rate": 1e-5}


@pytest.fixture(scope="module")
def tiny():
    return models.load(seed=0)


def trainer_for(tiny: Any, algo: str = "grpo", **overrides: Any) -> Any:
    model, tokenizer = tiny
    copy, _ = models.load(seed=0)
    copy.load_state_dict(model.state_dict())
    return make(algo, policy=(copy, tokenizer), config={**CONFIG, **overrides})


def broken(episodes: list[Episode], **info: Any) -> list[Episode]:
    """Every episode's last step failed with ``info``."""
    for episode in episodes:
        episode.turns[-1].info.update(infra_error=True, **info)
    return episodes


def flat(episodes: list[Episode], reward: float = 0.0) -> list[Episode]:
    for episode in episodes:
        for turn in episode.turns:
            turn.reward = reward
    return episodes


DEAD = {"error": "ConnectionRefusedError: [Errno 111] Connect call failed", "error_kind": "infra"}
BUG = {"error": "ZeroDivisionError: division by zero", "error_kind": "env", "error_at": "Bad.step"}


class ScriptedSource:
    """Batches from ``make(position)``; fails the test instead of hanging when the loop asks
    for more than ``limit`` batches (a loop that spins)."""

    def __init__(self, make: Callable[[int], list[Episode]], limit: int = 30) -> None:
        self.make, self.limit, self.position = make, limit, 0

    def collect(self, num_groups: int) -> list[Episode]:
        if self.position >= self.limit:
            pytest.fail(f"the loop asked for {self.position} batches and never stopped")
        self.position += 1
        return self.make(self.position - 1)

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = int(state["position"])


def rows(out: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_steps_that_drop_every_episode_stop_the_run_naming_the_causes(tiny, tmp_path):
    def batch(i: int) -> list[Episode]:
        episodes = synthetic_episodes(2, GROUP, seed=i)
        if i == 0:
            return episodes  # one real update first
        return broken(episodes[:6], **DEAD) + broken(episodes[6:], **BUG)

    guards = Guards()
    source = ScriptedSource(batch)
    with (
        contextlib.redirect_stdout(io.StringIO()) as said,
        pytest.raises(NoTrainableEpisodes) as stopped,
    ):
        fit(trainer_for(tiny), source, steps=20, guards=guards, recorder=RunFolder(tmp_path))
    message = str(stopped.value)
    assert "3 training steps in a row had no episode to train on" in message
    assert "18 episodes: ConnectionRefusedError: [Errno 111] Connect call failed (infra)" in message
    assert "6 episodes: Bad.step raised ZeroDivisionError: division by zero (env bug)" in message
    assert "Fix: infra: bring up what the env depends on" in message
    assert "env bug: fix the env's code" in message
    assert stopped.value.steps == 3

    written = rows(tmp_path)
    assert [r["step"] for r in written] == [1, 1, 1, 1]
    assert all("update" not in r for r in written)
    assert "empty_steps" not in written[0]
    empty = written[1:]
    assert [r["empty_steps"] for r in empty] == [1, 2, 3]
    assert all(r["dropped/infra"] == 6 and r["dropped/env"] == 2 for r in empty)
    assert all(r["guards/infra_error_rate"] == 1.0 for r in empty)
    # the guards saw the empty steps: the spike warned on the first, the infra-error guard
    # tripped on the third
    events = [json.loads(line) for line in (tmp_path / EVENTS_FILE).read_text().splitlines()]
    assert [(e["monitor"], e["action"]) for e in events] == [
        ("infra_spike", "warn"),
        ("infra_errors", "stop"),
    ]
    assert "guard infra_errors" in said.getvalue()


def test_max_empty_steps_is_a_guards_setting(tiny):
    source = ScriptedSource(lambda i: broken(synthetic_episodes(2, GROUP, seed=i), **DEAD))
    settings = {"max_empty_steps": 5, "infra_errors": {"action": "off"}}
    guards = Guards(GuardsConfig.from_dict(settings))
    with pytest.raises(NoTrainableEpisodes) as stopped:
        fit(trainer_for(tiny), source, steps=5, guards=guards)
    assert stopped.value.steps == 5
    assert source.position == 5
    with pytest.raises(NoTrainableEpisodes):  # no guards at all: the default, 3
        fit(trainer_for(tiny), ScriptedSource(source.make), steps=5)


def test_dapo_refills_past_an_empty_round_and_stops_when_every_round_is_empty(tiny):
    def batch(i: int) -> list[Episode]:
        episodes = synthetic_episodes(2, GROUP, seed=i)
        if i == 1:
            return broken(episodes, **DEAD)
        return flat(episodes[:4]) + episodes[4:]  # one informative group of the two needed

    dapo = {"max_sampling_rounds": 3}
    history = fit(trainer_for(tiny, "dapo", **dapo), ScriptedSource(batch), steps=1)
    empty, update = history
    assert empty["empty_steps"] == 1
    assert update["step"] == 1
    assert update["dynamic_sampling/rounds"] == 2  # the empty round was not a sampling round
    assert update["flat_group_rate"] == 0.5

    source = ScriptedSource(lambda i: broken(synthetic_episodes(2, GROUP, seed=i), **DEAD))
    dapo = trainer_for(tiny, "dapo", max_sampling_rounds=10, partial_batches=True)
    with pytest.raises(NoTrainableEpisodes, match="ConnectionRefusedError"):
        fit(dapo, source, steps=2)
    assert source.position == 3


def test_updates_without_signal_warn_naming_the_likely_causes(tiny):
    source = ScriptedSource(lambda i: flat(synthetic_episodes(2, GROUP, seed=i), reward=1.0))
    with pytest.warns(NoLearningSignalWarning) as caught:
        history = fit(trainer_for(tiny), source, steps=3)
    assert [r["flat_group_rate"] for r in history] == [1.0, 1.0, 1.0]
    ours = [w for w in caught if w.category is NoLearningSignalWarning]
    assert len(ours) == 1  # the first flat update; the next warning is at the 10th
    text = str(ours[0].message)
    assert "update 1: no learning signal" in text
    for cause in ("too hard or too easy", "reward is constant", "same text", "FrozenLake"):
        assert cause in text


def test_flat_update_warnings_thin_out():
    steps = FlatSteps(enabled=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(1, 101):
            steps.observe({"step": float(step), "flat_group_rate": 1.0})
        steps.observe({"step": 101.0, "flat_group_rate": 0.5})
    warned = [str(w.message).split(":")[0] for w in caught]
    assert warned == ["update 1", "update 10", "update 20", "update 40", "update 80"]
    assert "(80 of the 80 updates so far)" in str(caught[-1].message)
    quiet = FlatSteps(enabled=False)  # PPO: a critic's advantages are not group-relative
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet.observe({"step": 1.0, "flat_group_rate": 1.0})
    assert caught == []


def test_a_rollback_with_no_checkpoint_yet_never_names_update_minus_one(tmp_path):
    config = GuardsConfig.from_dict(
        {"entropy_collapse": {"patience": 1, "relative": None, "min_success": None}}
    )
    guards = Guards(config)
    backend = SimpleNamespace(world_size=1)
    trainer = SimpleNamespace(backend=backend)
    run = SimpleNamespace(checkpoints=tmp_path / "checkpoints", trainer=trainer)
    with contextlib.redirect_stdout(io.StringIO()) as said:
        assert guards.check({"step": 1.0, "entropy": 0.01}, run, None) == "stop"
    (event,) = guards.events
    assert event["reason"] == (
        "no checkpoint from before the trouble began: stopping instead of rolling back"
    )
    assert "-1" not in said.getvalue()
