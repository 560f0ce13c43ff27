"""Curricula: the samplers' statistics and draws, determinism, exact resume, and the uniform
default playing exactly the episodes the collector played before curricula."""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from agentgym import models
from agentgym.core.errors import ConfigError
from agentgym.rollout import collect
from agentgym.rollout.collector_source import CollectorSource
from agentgym.rollout.curriculum import (
    Adaptive,
    Schedule,
    Task,
    make_curriculum,
    task_set,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "rollout"))
from toys import ScriptedEngine

ENV = "agentgym/FrozenLake-v0"
LEVELS = [Task(f"difficulty={v}", v, {"difficulty": v}) for v in (3, 4, 5, 6)]
DIRECTIONS = ("left", "down", "right", "up")


def _engine() -> ScriptedEngine:
    """Moves read off the prompt (a hash of it): the same prompt, the same move, in any order."""
    tokenizer = models.load_tokenizer()
    return ScriptedEngine(
        tokenizer, reply=lambda prompt, n: f"```{DIRECTIONS[zlib.crc32(prompt.encode()) % 4]}```"
    )


def _outcomes(task: Task, batch: int) -> list[bool]:
    """Synthetic results: small maps are solved more often, and more so later."""
    level = task.difficulty or 4
    rate = min(1.0, (7 - level) * 0.15 + batch * 0.05)
    rng = np.random.default_rng([level, batch])
    return list(rng.random(8) < rate)


def _play(curriculum: object, batches: range, groups: int = 6) -> list[str]:
    drawn = []
    for batch in batches:
        tasks = curriculum.next_tasks(groups)  # type: ignore[attr-defined]
        for task in tasks:
            curriculum.update(task, _outcomes(task, batch))  # type: ignore[attr-defined]
        drawn += [t.key for t in tasks]
    return drawn


def test_task_set_reads_frozenlake_sizes_as_difficulty_levels():
    assert task_set(ENV, {"sizes": [5, 3, 4, 6]}) == LEVELS
    assert task_set(ENV, {}) == [Task("difficulty=4", 4, {"difficulty": 4})]
    pinned = task_set(ENV, {"sizes": [3, 4]}, tasks_per_level=2, seed=1)
    assert [t.difficulty for t in pinned] == [3, 3, 4, 4]
    assert all(set(t.options) == {"difficulty", "task_id"} for t in pinned)
    assert pinned == task_set(ENV, {"sizes": [3, 4]}, tasks_per_level=2, seed=1)


def test_uniform_over_pinned_tasks_draws_each_equally_and_over_levels_lets_the_seed_pick():
    pinned = task_set(ENV, {"sizes": [3, 4, 5, 6]}, tasks_per_level=2, seed=0)
    drawn = _play(make_curriculum("uniform", pinned, seed=0), range(400), groups=8)
    counts = np.array([drawn.count(t.key) for t in pinned])
    assert counts.sum() == 3200
    assert counts.min() > 306  # 400 each; 5 sigma is ~94
    assert counts.max() < 494
    assert drawn == _play(make_curriculum("uniform", pinned, seed=0), range(400), groups=8)
    levels = make_curriculum("uniform", LEVELS, seed=0)
    assert levels.next_tasks(3) == [Task("all")] * 3


def test_adaptive_weighs_by_learnability_retires_solved_and_keeps_a_floor():
    curriculum = Adaptive(LEVELS, seed=0, min_tries=16, floor=0.1, revisit=0.05, decay=1.0)
    curriculum.update(LEVELS[0], [True] * 40)  # solved: retired
    curriculum.update(LEVELS[1], [True, False] * 10)  # p = 0.5: the most learnable
    curriculum.update(LEVELS[2], [True] + [False] * 19)  # rarely solved
    # LEVELS[3]: never tried, prior p = 0.5
    assert curriculum.retired(LEVELS[0])
    assert not curriculum.retired(LEVELS[1])
    probs = curriculum.probabilities()
    rates = np.array([2 / 22, 0.5, 0.5])  # (s + 1) / (n + 2) of levels 2, 1, 3
    learn = rates * (1 - rates)
    expected = 0.95 * (0.9 * learn / learn.sum() + 0.1 / 3)
    np.testing.assert_allclose(probs[[2, 1, 3]], expected)
    assert probs[0] == pytest.approx(0.05)  # the retired level: revisited only
    assert probs[2] >= 0.95 * 0.1 / 3  # a failing task keeps its floor
    curriculum.update(LEVELS[0], [False] * 40)  # forgotten: back in play
    assert not curriculum.retired(LEVELS[0])


def test_adaptive_draws_follow_its_probabilities():
    curriculum = Adaptive(LEVELS, seed=3, min_tries=8, decay=1.0)
    curriculum.update(LEVELS[0], [True] * 30)
    curriculum.update(LEVELS[3], [False] * 30)
    curriculum.decay = 1.0
    probs = curriculum.probabilities()
    counts = {t.key: 0 for t in LEVELS}
    for task in curriculum.next_tasks(4000):
        counts[task.key] += 1
    for p, task in zip(probs, LEVELS, strict=True):
        assert counts[task.key] / 4000 == pytest.approx(p, abs=0.03)


def test_schedule_moves_on_by_success_and_reviews_earlier_levels():
    curriculum = Schedule(LEVELS, seed=0, threshold=0.8, min_tries=16, review=0.25, decay=1.0)
    assert {t.difficulty for t in curriculum.next_tasks(20)} == {3}
    curriculum.update(LEVELS[0], [True] * 10 + [False] * 6)  # 0.61 with the prior
    assert {t.difficulty for t in curriculum.next_tasks(20)} == {3}
    curriculum.update(LEVELS[0], [True] * 30)
    drawn = [t.difficulty for t in curriculum.next_tasks(400)]
    assert curriculum.level == 1
    assert set(drawn) == {3, 4}
    assert drawn.count(3) / 400 == pytest.approx(0.25, abs=0.06)


def test_schedule_by_updates_and_stays_at_the_last_level():
    curriculum = Schedule(LEVELS, seed=0, updates_per_level=2, review=0.0)
    levels = [curriculum.next_tasks(3)[0].difficulty for _ in range(10)]
    assert levels == [3, 3, 4, 4, 5, 5, 6, 6, 6, 6]


@pytest.mark.parametrize("name", ["uniform", "schedule", "adaptive"])
def test_draws_are_seeded_and_resume_exactly(name):
    params = {} if name == "uniform" else {"min_tries": 8}
    straight = make_curriculum(name, LEVELS, seed=7, **params)
    again = make_curriculum(name, LEVELS, seed=7, **params)
    other = make_curriculum(name, LEVELS, seed=8, **params)
    drawn = _play(straight, range(12))
    assert drawn == _play(again, range(12))
    if name != "uniform":
        assert drawn != _play(other, range(12))
        assert len(set(drawn)) > 1
    first = make_curriculum(name, LEVELS, seed=7, **params)
    head = _play(first, range(5))
    state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint holds it
    resumed = make_curriculum(name, LEVELS, seed=7, **params)
    resumed.load_state_dict(state)
    assert head + _play(resumed, range(5, 12)) == drawn


def test_resume_refuses_another_curriculum():
    state = make_curriculum("adaptive", LEVELS).state_dict()
    with pytest.raises(ConfigError, match="--curriculum adaptive"):
        make_curriculum("schedule", LEVELS).load_state_dict(state)


def test_bad_parameters_name_the_fix():
    with pytest.raises(ConfigError, match="floor"):
        make_curriculum("adaptive", LEVELS, floor=2.0)
    with pytest.raises(ConfigError, match="curriculum_kwargs"):
        make_curriculum("adaptive", LEVELS, thresold=0.5)
    with pytest.raises(ConfigError, match="difficulty levels"):
        make_curriculum("schedule", [Task("all")])


def test_uniform_collects_exactly_the_episodes_of_the_collector_before_curricula():
    kwargs = {"tool": False, "sizes": [3, 4, 5, 6]}
    engine = _engine()
    source = CollectorSource(
        engine, ENV, group_size=2, seed=5, env_kwargs=kwargs, max_turns=4, max_tokens=8
    )
    batches = [source.collect(3), source.collect(3)]
    before = []  # what CollectorSource.collect ran before curricula
    for position in (0, 3):
        before.append(
            collect(
                engine, ENV, 6, 5 + position, group_size=2, max_turns=4, env_kwargs=kwargs,
                num_envs=6, sampling_seed=5 * 1_000_003 + position, first_group=0, max_tokens=8,
            )
        )
    for now, then in zip(batches, before, strict=True):
        assert [e.token_ids for e in now] == [e.token_ids for e in then]
        assert [e.reset_info["map"] for e in now] == [e.reset_info["map"] for e in then]
    assert {e.reset_info["size"] for b in batches for e in b} != {4}  # sizes were drawn


def test_collector_plays_the_curriculum_and_resumes_exactly():
    kwargs = {"tool": False, "sizes": [3, 4, 5, 6]}

    def source(records: list) -> CollectorSource:
        curriculum = make_curriculum("adaptive", task_set(ENV, kwargs), seed=1, min_tries=4)
        return CollectorSource(
            _engine(), ENV, group_size=2, seed=1, env_kwargs=kwargs, max_turns=3,
            max_tokens=8, curriculum=curriculum,
            on_records=lambda rows, first: records.__setitem__(slice(first, None), rows),
        )

    straight: list = []
    one = source(straight)
    for _ in range(4):
        episodes = one.collect(4)
    assert [e.reset_info["difficulty"] for e in episodes[::2]] == [
        r["difficulty"] for r in straight[-4:]
    ]
    assert all(r["curriculum_task"] == f"difficulty={r['difficulty']}" for r in straight)
    assert len({r["difficulty"] for r in straight}) > 1
    resumed_rows: list = []
    two = source(resumed_rows)
    two.collect(4)
    two.collect(4)
    state = json.loads(json.dumps(two.state_dict()))
    three = source(resumed_rows)
    three.load_state_dict(state)
    three.collect(4)
    three.collect(4)
    assert resumed_rows == straight
    assert three.state_dict() == one.state_dict()
