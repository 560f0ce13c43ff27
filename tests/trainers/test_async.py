"""Asynchronous training (``max_staleness``): no sample older than k policy versions reaches the
loss, the collector samples from weights of its own, and a resumed run repeats the straight one."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
import torch

from agentgym import models
from agentgym.error import ConfigError
from agentgym.rollout.sharded_source import ShardedSource
from agentgym.trainers import fit, make
from agentgym.trainers import trainer as trainer_module
from agentgym.trainers.episodes import admit, oldest_version
from agentgym.trainers.pipeline import AsyncSource, pipelined

from .ds_step import SyntheticSource, synthetic_episodes

CONFIG: dict[str, Any] = {
    "group_size": 4,
    "batch_size": 20,
    "learning_rate": 1e-3,
    "temperature": 0.9,
    "aggregation": "token-mean",
}
OFFSETS = (0, 0, 1, 2, 3)
"""Group ``i`` of a batch is stamped ``OFFSETS[i]`` versions older than the policy collecting."""


class VersionedSource(SyntheticSource):
    """Synthetic episodes stamped with chosen policy versions: group ``i`` of each batch
    ``OFFSETS[i]`` older than the trainer's step count when it is collected, one episode of the
    second group with an unknown version (None) on its first turn, and each episode's second
    turn one version newer than its first (the oldest turn counts)."""

    def __init__(self, trainer: Any) -> None:
        super().__init__(CONFIG["group_size"])
        self.trainer = trainer
        self.threads: set[str] = set()

    def collect(self, num_groups: int) -> list:
        self.threads.add(threading.current_thread().name)
        now = self.trainer.step_count
        episodes = super().collect(num_groups)
        size = self.group_size
        for i, episode in enumerate(episodes):
            first = now - OFFSETS[i // size % len(OFFSETS)]
            episode.weight_versions = [first, first + 1]
        episodes[size].weight_versions = [None, now]
        return episodes


def trained_versions(monkeypatch) -> list[tuple[int, list[int | None]]]:
    """Records, for each update that reaches the loss, the update's index and the oldest
    version of every episode in its batch."""
    seen: list[tuple[int, list[int | None]]] = []
    run_update = trainer_module.run_update

    def spy(inputs: Any, batch: list, step: int) -> dict[str, float]:
        seen.append((step, [oldest_version(s.episode) for s in batch]))
        return run_update(inputs, batch, step)

    monkeypatch.setattr(trainer_module, "run_update", spy)
    return seen


@pytest.mark.parametrize(
    ("algo", "overrides", "k"),
    [
        ("grpo", {}, 1),
        ("grpo", {}, 2),
        ("grpo", {"step_credit": 1.0}, 1),  # GiGPO's step credit
        ("dapo", {}, 1),  # dynamic sampling: refill rounds take batches without an update
    ],
)
def test_no_sample_older_than_k_versions_reaches_the_loss(algo, overrides, k, monkeypatch):
    seen = trained_versions(monkeypatch)
    config = {**CONFIG, **overrides, "max_staleness": k}
    trainer = make(algo, policy=models.load(seed=0), config=config)
    source = VersionedSource(trainer)
    history = fit(trainer, source, steps=4)

    assert [step for step, _ in seen] == [0, 1, 2, 3]
    for step, versions in seen:
        assert None not in versions
        assert min(versions) >= step - k, (step, versions)
    assert all(m["stale_groups"] >= 1 for m in history[k:])  # old groups were dropped
    assert any(min(v) == step - k for step, v in seen[k:])  # k old is allowed
    assert threading.current_thread().name not in source.threads  # collected in the background
    if algo == "dapo":  # stale groups dropped, the batch was refilled from later rounds
        assert all(m["dynamic_sampling/rounds"] >= 2 for m in history)


def test_admit_drops_groups_with_an_old_or_unknown_turn():
    episodes = synthetic_episodes(3, 2)
    versions = [[5, 5], [5, 6], [4, 6], [5, 5], [5, None], [6, 6]]
    for episode, turns in zip(episodes, versions, strict=True):
        episode.weight_versions = turns
    admitted = admit(episodes, 2, min_version=5)
    assert admitted.groups == [episodes[:2]]
    assert admitted.stale_groups == 2
    assert admit(episodes, 2).stale_groups == 0  # synchronous: no version check


def test_max_staleness_turns_on_truncated_importance_sampling():
    trainer = make("grpo", policy=models.load(seed=0), config={**CONFIG, "max_staleness": 1})
    assert trainer.config.tis_cap == 2.0  # the ratio's π_old is not the policy that sampled
    engine_old = make(
        "grpo",
        policy=models.load(seed=0),
        config={**CONFIG, "max_staleness": 1},
        options={"old_logprobs": "engine"},
    )
    assert engine_old.config.tis_cap is None  # the ratio is against the sampling logprobs
    assert make("grpo", policy=models.load(seed=0), config=CONFIG).config.tis_cap is None


def test_async_source_refuses_k_0_and_sharded_sources_wrap_inside():
    trainer = make("grpo", policy=models.load(seed=0), config=CONFIG)
    with pytest.raises(ConfigError, match="max_staleness"):
        AsyncSource(SyntheticSource(4), trainer)
    plain = SyntheticSource(4)
    assert pipelined(plain, trainer, engine=None) is plain  # k = 0

    class OneRank:  # a process group of one: the sharded source's gather stays in this thread
        rank, world_size = 0, 1

        def all_gather_object(self, obj: Any) -> list[Any]:
            return [obj]

    k1 = make("grpo", policy=models.load(seed=0), config={**CONFIG, "max_staleness": 1})
    outer = ShardedSource(SyntheticSource(4), OneRank())
    assert pipelined(outer, k1, engine=None) is outer
    assert isinstance(outer.local, AsyncSource)


class StampedSource(SyntheticSource):
    """Synthetic batch ``p`` stamped policy version ``max(0, p - k)``, as the pipeline binds
    them, whatever the timing."""

    def __init__(self, k: int) -> None:
        super().__init__(CONFIG["group_size"])
        self.k = k

    def collect(self, num_groups: int) -> list:
        version = max(0, self.position - self.k)
        episodes = super().collect(num_groups)
        for episode in episodes:
            episode.weight_versions = [version] * len(episode.turns)
        return episodes


def test_episodes_without_versions_are_refused():
    trainer = make("grpo", policy=models.load(seed=0), config={**CONFIG, "max_staleness": 1})
    with pytest.raises(ConfigError, match="weight_versions"):
        fit(trainer, SyntheticSource(4), steps=1)


def test_a_resumed_async_run_trains_on_the_batches_the_straight_run_did(tmp_path, monkeypatch):
    """Checkpoints persist the batches collected ahead: killed after update 2 and resumed, the
    run trains updates 3-5 on the same episodes, to the same weights."""
    config = {**CONFIG, "max_staleness": 2}

    def run(out, steps: int) -> list[dict[str, float]]:
        trainer = make("grpo", policy=models.load(seed=0), config=config)
        history = fit(trainer, StampedSource(2), steps=steps, out=out, checkpoint_every=1)
        run.weights = trainer.policy_state_dict()  # type: ignore[attr-defined]
        return history

    straight = run(tmp_path / "straight", 5)
    straight_weights = run.weights  # type: ignore[attr-defined]
    run(tmp_path / "resumed", 2)
    resumed = run(tmp_path / "resumed", 5)
    timings = {"step_s", "tokens_per_s"}
    assert [{k: v for k, v in m.items() if k not in timings} for m in resumed] == [
        {k: v for k, v in m.items() if k not in timings} for m in straight[2:]
    ]
    for name, tensor in straight_weights.items():
        assert torch.equal(run.weights[name], tensor), name  # type: ignore[attr-defined]


@pytest.mark.slow
def test_frozenlake_collects_on_a_copy_with_the_weights_of_the_version_it_records():
    """The engine sharing the trainer's parameters is swapped, for background collection, for
    one on a copy; each batch is sampled by the snapshot of the version its episodes record,
    while the optimizer moves the trainer's own; ``close`` puts the shared engine back."""
    from agentgym.core.aio import run_sync
    from agentgym.rollout.collector_source import CollectorSource
    from agentgym.trainers.colocate import colocated_engine

    config = {"group_size": 4, "batch_size": 8, "learning_rate": 1e-3, "max_new_tokens": 8}
    trainer = make("grpo", policy=models.load(seed=0), config={**config, "max_staleness": 1})
    shared, _ = colocated_engine(trainer)
    collector = CollectorSource(
        shared,
        "agentgym/FrozenLake-v0",
        group_size=4,
        env_kwargs={"tool": False, "hole_reward": -1.0, "edge_reward": -0.5},  # rewards differ
        max_turns=4,
        history_turns=0,
        action_choices=True,
        max_tokens=8,
    )
    source = AsyncSource(collector, trainer, engine=shared)
    snapshots = [{k: v.clone() for k, v in trainer.policy_state_dict().items()}]
    try:
        batches = []
        for _ in range(3):
            batches.append(source.collect(2))
            trainer.step(batches[-1])
            snapshots.append({k: v.clone() for k, v in trainer.policy_state_dict().items()})
        copy = collector.engine
        assert copy is not shared
        assert copy.model is not trainer.module.policy
        # batch 2 was queued after update 1: sampled by the weights of version 1, not 2 or 3
        assert {v for e in batches[2] for v in e.weight_versions} == {1}
        assert [{v for e in b for v in e.weight_versions} for b in batches[:2]] == [{0}, {0}]
        # the batch queued after update 2 (collected once state_dict returns) had version 2
        ahead = source.state_dict()["ready"][0][0][1]  # rank 0's first batch: (groups, batch)
        assert {v for e in ahead for v in e.weight_versions} == {2}
        for name, tensor in copy.model.state_dict().items():
            if name in snapshots[2]:
                assert torch.equal(tensor, snapshots[2][name]), name
        for a, b in itertools.pairwise(snapshots):  # each update moved the trainer's weights
            assert any(not torch.equal(a[n], t) for n, t in b.items())
    finally:
        source.close()
        run_sync(shared.close())
    assert collector.engine is shared
    assert trainer.engine is shared


def test_agentgym_train_takes_async_collection_from_a_server():
    from agentgym.recipes.config import Layer, resolve_run

    settings = {"engine": "sglang", "engine_url": "http://127.0.0.1:1", "action_choices": False}
    run = resolve_run(Layer("--set", {**settings, "config": {"max_staleness": 1}}))
    assert (run.engine, run.config.max_staleness) == ("sglang", 1)
    assert resolve_run(Layer("--set", {"config": {"max_staleness": 2}})).config.max_staleness == 2


def test_a_synchronous_resume_of_an_async_checkpoint_names_max_staleness() -> None:
    from agentgym.rollout.collector_source import CollectorSource

    source = CollectorSource(None, "agentgym/FrozenLake-v0", group_size=2)  # type: ignore[arg-type]
    ahead = {"source": {"seed": 0, "position": 4}, "ready": [[(2, [])]]}
    with pytest.raises(ConfigError, match="max_staleness"):
        source.load_state_dict(ahead)
    source.load_state_dict({"seed": 0, "position": 4})  # a synchronous checkpoint loads
    assert source.position == 4
