"""Failure-mode guards: the monitors, their defaults against real FrozenLake runs, rollback to a
good checkpoint, and exact resume after a rollback."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agentgym import models
from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode, Turn, assistant
from agentgym.recipes.run_folder import EVENTS_FILE, ROLLED_BACK_FILE, RunFolder
from agentgym.rollout import traces
from agentgym.rollout.traces import Trace
from agentgym.trainers import fit, make
from agentgym.trainers.guards import Guards, GuardsConfig

from .ds_step import FIT_CONFIG, NOT_COMPARED, SyntheticSource

DATA = Path(__file__).parent / "data" / "frozenlake_metrics.json"
"""Per-update metrics of FrozenLake runs (4 significant digits): six healthy runs of the
shipped recipes (GRPO, DAPO, PPO, GRPO with max_staleness=1, GRPO with Ray env workers, GRPO with
the guards on and their guards/* metrics; success 0.93-0.99 at the end, entropy as low as 0.02)
and two runs of an earlier revision that collapsed
(entropy to ~0, batch success to 0 from update ~55 on)."""


def replay(guards: Guards, columns: dict[str, list[float]]) -> list[dict[str, Any]]:
    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(len(columns["step"])):
            guards.check({k: v[i] for k, v in columns.items()}, None, None)
    return guards.events


def rows(**series: list[float]) -> dict[str, list[float]]:
    length = len(next(iter(series.values())))
    return {"step": [float(i + 1) for i in range(length)], **series}


def test_the_defaults_do_not_trip_on_healthy_frozenlake_runs():
    runs = json.loads(DATA.read_text())
    healthy = [name for name in runs if not name.startswith("collapsed")]
    assert len(healthy) == 6
    for name in healthy:
        assert replay(Guards(), runs[name]) == [], name


@pytest.mark.parametrize("name", ["collapsed_grpo", "collapsed_ppo"])
def test_the_defaults_catch_the_collapsed_runs(name):
    events = replay(Guards(), json.loads(DATA.read_text())[name])
    collapse = [e for e in events if e["monitor"] == "entropy_collapse"]
    assert collapse
    assert collapse[0]["update"] <= 65
    # no checkpoints here: the rollback it asks for becomes a stop, and says why
    assert collapse[0]["action"] == "stop"
    assert "no checkpoints" in collapse[0]["reason"]


def test_patience_trips_once_per_streak():
    config = GuardsConfig.from_dict({"kl_spike": {"patience": 2, "action": "stop"}})
    events = replay(Guards(config), rows(approx_kl=[0.1, 2.0, 3.0, 4.0, 0.1, 5.0, 0.2]))
    assert [(e["update"], e["since_update"], e["action"]) for e in events] == [(3, 2, "stop")]
    assert events[0]["value"] == 3.0
    assert events[0]["threshold"] == 1.0


def test_entropy_collapse_spares_a_policy_that_succeeds():
    low = [1.2] * 5 + [0.01] * 6
    assert replay(Guards(), rows(entropy=low, success_rate=[0.95] * 11)) == []
    events = replay(Guards(), rows(entropy=low, success_rate=[0.2] * 11))
    assert [(e["update"], e["since_update"]) for e in events] == [(10, 6)]


def test_entropy_collapse_relative_to_its_early_level():
    config = GuardsConfig.from_dict({"entropy_collapse": {"threshold": 0.0, "relative": 0.1}})
    series = [3.0] * 5 + [0.5] * 5 + [0.2] * 5  # 0.3 is the limit: 10% of the early 3.0
    events = replay(Guards(config), rows(entropy=series))
    assert [(e["since_update"], e["threshold"]) for e in events] == [(11, pytest.approx(0.3))]


def test_length_blowup_against_the_recent_median():
    lengths = [6.0] * 10 + [30.0] * 3
    events = replay(Guards(), rows(response_tokens_mean=lengths))
    assert [(e["monitor"], e["update"], e["threshold"]) for e in events] == [
        ("length_blowup", 13, 24.0)
    ]


def test_off_and_per_monitor_off():
    spikes = rows(approx_kl=[5.0] * 3, entropy=[0.0] * 3)
    assert not Guards(GuardsConfig.from_dict("off")).enabled
    assert replay(Guards(GuardsConfig.from_dict("off")), spikes) == []
    config = GuardsConfig.from_dict({"kl_spike": {"action": "off"}})
    assert "kl_spike" not in Guards(config).monitors


def test_bad_settings_name_the_field():
    with pytest.raises(ConfigError, match=r"guards\.kl_spike\.patiance.*patience"):
        GuardsConfig.from_dict({"kl_spike": {"patiance": 2}})
    with pytest.raises(ConfigError, match=r"guards\.entropy_collapse\.action"):
        GuardsConfig.from_dict({"entropy_collapse": {"action": "explode"}})
    with pytest.raises(ConfigError, match=r"guards\.lr_factor"):
        GuardsConfig.from_dict({"lr_factor": 2.0})


def episode(reward: float, **info: Any) -> Episode:
    turns = [Turn(assistant("x"), (), reward, True, False, dict(info))]
    return Episode(env_id="t", turns=turns, token_ids=[1, 2], loss_mask=[0, 1], logprobs=[0, 0])


def test_episode_rates_accumulate_until_an_update():
    guards = Guards(reward_range=(-1.0, 1.0))
    first = [episode(0.5, invalid_action=True), episode(3.0, invalid_action=False)]
    assert guards.episode_metrics(first, update=False) == {}  # DAPO: more groups wanted
    second = [episode(0.0, infra_error=True, error="sandbox"), episode(0.0, tampering=["x"])]
    metrics = guards.episode_metrics(second, update=True)
    assert metrics == {
        "guards/infra_error_rate": 0.25,
        "guards/void_rate": 0.25,  # the first episode: its every step an invalid action
        "guards/flagged_rate": 0.25,
        "guards/return_excess": 2.0,
        "guards/valid_action_rate": 0.5,
    }
    assert "guards/valid_action_rate" not in guards.episode_metrics([episode(0.0)], update=True)
    no_range = Guards().episode_metrics([episode(9.0)], update=True)
    assert "guards/return_excess" not in no_range
    assert Guards(GuardsConfig.from_dict("off")).episode_metrics([episode(0.0)], True) == {}


def test_reward_hacking_and_infra_defaults():
    guards = Guards()
    events = replay(
        guards,
        rows(**{"guards/flagged_rate": [0.0, 0.1, 0.0], "guards/infra_error_rate": [0.6] * 3}),
    )
    assert [(e["monitor"], e["update"], e["action"]) for e in events] == [
        ("infra_spike", 1, "warn"),  # the first update above 0.2 warns at once
        ("reward_hacking", 2, "warn"),
        ("infra_errors", 3, "stop"),  # above 0.5 for 3 updates in a row stops
    ]


def test_void_episodes_warn_after_three_updates_mostly_void():
    events = replay(Guards(), rows(**{"guards/void_rate": [0.6, 0.9, 0.4, 0.7, 0.8, 0.9, 1.0]}))
    assert [(e["monitor"], e["update"], e["action"]) for e in events] == [
        ("void_episodes", 6, "warn")  # the streak 0.7, 0.8, 0.9 (the 0.4 broke the first one)
    ]


class FlaggingSource(SyntheticSource):
    """Synthetic batches whose episodes are flagged as reward hacking in batch ``at`` until the
    guards have rolled back once (the guards' state is checkpointed, so this is deterministic
    across a resume)."""

    def __init__(self, guards: Guards, at: int, staleness: int) -> None:
        super().__init__(4)
        self.guards, self.at, self.staleness = guards, at, staleness

    def collect(self, num_groups: int) -> list[Episode]:
        position = self.position
        batch = super().collect(num_groups)
        if self.staleness:  # collected ahead: the version the pipeline binds batch p to
            for episode in batch:
                episode.weight_versions = [max(0, position - self.staleness)] * 2
        if position == self.at and self.guards.rollbacks == 0:
            batch[0].turns[-1].info["tampering"] = ["edited the tests"]
        return batch


def rollback_guards() -> Guards:
    return Guards(GuardsConfig.from_dict({"reward_hacking": {"action": "rollback"}}))


def run_to(
    out: Path, steps: int, kill_at: tuple[int, int] | None = None, keep: int = 2, staleness: int = 0
) -> Any:
    """fit with the flagging source; ``kill_at=(rollbacks, step)`` raises out of the loop when
    that update is done (before its metrics are logged), like a kill. ``staleness``: the
    trainer's max_staleness (batches collected ahead in a background thread)."""
    config = {**FIT_CONFIG, "max_staleness": staleness}
    trainer = make("grpo", policy=models.load(seed=0), config=config)
    guards = rollback_guards()

    def maybe_kill(metrics: dict[str, float]) -> None:
        if kill_at == (guards.rollbacks, int(metrics["step"])):
            raise KeyboardInterrupt

    source = FlaggingSource(guards, at=4, staleness=staleness)  # the 5th batch: update 5
    with contextlib.suppress(KeyboardInterrupt), contextlib.redirect_stdout(io.StringIO()):
        fit(
            trainer,
            source,
            steps=steps,
            out=out,
            checkpoint_every=1,
            keep_checkpoints=keep,
            on_metrics=maybe_kill,
            guards=guards,
            recorder=RunFolder(out),
            trace=Trace(out),
        )
    return trainer, guards


def lines(path: Path) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in NOT_COMPARED} for row in found]


def test_rollback_returns_to_a_good_checkpoint_with_a_lower_learning_rate(tmp_path):
    trainer, guards = run_to(tmp_path, steps=7)
    assert trainer.step_count == 7
    (event,) = guards.events
    assert (event["update"], event["action"], event["to_update"]) == (5, "rollback", 3)
    assert guards.rollbacks == 1
    assert trainer.lr_scale == 0.5
    logged = lines(tmp_path / "metrics.jsonl")
    assert [row["step"] for row in logged] == [1, 2, 3, 4, 5, 6, 7]
    assert logged[4]["lr"] == pytest.approx(logged[2]["lr"] / 2, rel=0.02)
    discarded = lines(tmp_path / ROLLED_BACK_FILE)
    assert [row["step"] for row in discarded] == [4, 5]
    assert discarded[1]["guards/flagged_rate"] > 0
    assert json.loads((tmp_path / EVENTS_FILE).read_text()) == event
    # the trace: updates 1-7 once each; the discarded 4 and 5 set aside, the flag in 5
    assert traces.read(tmp_path)["update"].unique().tolist() == [1, 2, 3, 4, 5, 6, 7]
    aside = traces.read(tmp_path / "traces" / "_rolled_back" / "rollback-1")
    assert aside["update"].unique().tolist() == [4, 5]
    flagged = aside[aside["infos"].str.contains("edited the tests")]
    assert flagged["update"].tolist() == [5]


def test_pruning_keeps_the_checkpoint_a_rollback_needs(tmp_path):
    trainer, guards = run_to(tmp_path, steps=5, keep=1)  # the newest alone would be update 4's
    (event,) = guards.events
    assert (event["action"], event["to_update"]) == ("rollback", 3)
    assert trainer.step_count == 5


def test_a_monitor_can_watch_another_metric():
    config = GuardsConfig.from_dict({"kl_spike": {"metric": "kl", "threshold": 0.5}})
    events = replay(Guards(config), rows(kl=[0.1, 0.7], approx_kl=[0.0, 0.0]))
    assert [(e["metric"], e["update"]) for e in events] == [("kl", 2)]


@pytest.mark.parametrize(("kill_at", "staleness"), [((1, 4), 0), ((1, 6), 0), ((1, 5), 1)])
def test_resume_after_a_rollback_is_exact(tmp_path, kill_at, staleness):
    straight, first = run_to(tmp_path / "straight", steps=7, staleness=staleness)
    assert first.rollbacks == 1
    killed, _ = run_to(tmp_path / "run", steps=7, kill_at=kill_at, staleness=staleness)
    assert killed.step_count == kill_at[1]
    resumed, guards = run_to(tmp_path / "run", steps=7, staleness=staleness)
    assert guards.rollbacks == 1
    assert resumed.lr_scale == 0.5
    for name in ("metrics.jsonl", ROLLED_BACK_FILE):
        assert lines(tmp_path / "run" / name) == lines(tmp_path / "straight" / name), name
    assert len(lines(tmp_path / "run" / EVENTS_FILE)) == 1
    for folder in ("traces", "traces/_rolled_back/rollback-1"):
        ours, theirs = (traces.read(tmp_path / r / folder) for r in ("run", "straight"))
        assert ours["update"].tolist() == theirs["update"].tolist(), folder
        for name in ("token_ids", "trainer_logprobs", "advantages"):
            for a, b in zip(ours[name], theirs[name], strict=True):
                np.testing.assert_array_equal(a, b)
    for name, tensor in straight.policy_state_dict().items():
        assert torch.equal(resumed.policy_state_dict()[name], tensor), name
