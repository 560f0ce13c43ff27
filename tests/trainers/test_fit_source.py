"""What ``fit`` and ``AsyncSource`` read of a source is what ``SourceBase`` declares: a stand-in
with only ``collect``/``state_dict``/``load_state_dict`` trains, in step and collected ahead, and
nothing it did not declare is read; the async source samples with the engine it was given."""

from __future__ import annotations

from typing import Any

import pytest

from agentgym import models
from agentgym.core.aio import run_sync
from agentgym.error import ConfigError
from agentgym.inference.hf import HFEngine
from agentgym.rollout.source import SourceBase
from agentgym.trainers import fit, make
from agentgym.trainers.pipeline import AsyncSource

from .ds_step import SyntheticSource

CONFIG: dict[str, Any] = {"group_size": 4, "batch_size": 8, "learning_rate": 1e-3}


class Undeclared(SyntheticSource):
    """Three methods, episodes stamped with the policy version (for collecting ahead), and
    members named like ``SourceBase``'s that it does not declare."""

    def __init__(self, stamp: Any = None) -> None:
        super().__init__(CONFIG["group_size"])
        self.stamp = stamp  # the engine whose weight_version the episodes record
        self.engine = "not an engine"
        self.stats = {"undeclared_s": 1.0}

    def collect(self, num_groups: int) -> list:
        episodes = super().collect(num_groups)
        version = 0 if self.stamp is None else self.stamp.weight_version
        for episode in episodes:
            episode.weight_versions = [version] * len(episode.turns)
        return episodes


class Declared(Undeclared, SourceBase):
    """The same, declaring its stats."""


@pytest.mark.parametrize("max_staleness", [0, 1])
def test_fit_trains_from_three_methods_and_reads_only_declared_members(max_staleness):
    config = {**CONFIG, "max_staleness": max_staleness}
    trainer = make("grpo", policy=models.load(seed=0), config=config)
    rows = fit(trainer, Undeclared(), steps=2)
    assert trainer.step_count == 2
    assert all("undeclared_s" not in row for row in rows)
    if max_staleness == 0:  # collected ahead, a source's stats are not the running batch's
        declared = fit(make("grpo", policy=models.load(seed=0), config=config), Declared(), steps=1)
        assert declared[0]["undeclared_s"] == 1.0


def test_the_async_source_samples_with_the_engine_it_was_given():
    trainer = make("grpo", policy=models.load(seed=0), config={**CONFIG, "max_staleness": 1})
    given = HFEngine(*models.load(seed=1))
    source = AsyncSource(Undeclared(stamp=given), trainer, engine=given)
    try:
        batch = source.collect(2)
    finally:
        source.close()
        run_sync(given.close())
    assert given.weight_version == 1  # the policy's weights of version 0 were loaded into it
    policy = trainer.policy_state_dict()
    for name, tensor in given.model.state_dict().items():
        if name in policy:
            assert tensor.equal(policy[name]), name
    assert {v for e in batch for v in e.weight_versions} == {0}  # policy version 0


def test_the_async_source_refuses_an_engine_that_is_not_the_declared_one():
    trainer = make("grpo", policy=models.load(seed=0), config={**CONFIG, "max_staleness": 1})
    source = Declared()
    source.engine = HFEngine(*models.load(seed=1))  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=r"engine=source\.engine"):
        AsyncSource(source, trainer)
    run_sync(source.engine.close())
