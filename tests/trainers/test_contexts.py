"""Episodes collected with a history window train one model row per context."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agentgym import models
from agentgym.core.aio import run_sync
from agentgym.core.types import Episode
from agentgym.error import ConfigError
from agentgym.inference.hf import HFEngine
from agentgym.rollout import collect
from agentgym.trainers import make
from agentgym.trainers.batch import TrainBatch
from agentgym.trainers.rows import RowLayout

from .ds_step import synthetic_episodes


@pytest.fixture(scope="module")
def windowed() -> list[Episode]:
    model, tokenizer = models.load(seed=0)
    engine = HFEngine(model, tokenizer, seed=0)
    try:
        episodes = collect(
            engine,
            "agentgym/FrozenLake-v0",
            8,
            seed=4,
            group_size=4,
            max_turns=4,
            history_turns=0,
            sampling_seed=4,
            temperature=1.0,
            max_tokens=8,
        )
    finally:
        run_sync(engine.close())
    assert sum(len(e.turns) for e in episodes) > len(episodes)  # multi-turn episodes
    return episodes


def engine_logprob_trainer(**overrides):
    """A GRPO trainer on the seed-0 tiny policy whose π_old is the engine's sampling logprobs:
    its approx_kl measures how far its own scoring is from the engine's."""
    config = {
        "group_size": 4,
        "batch_size": 8,
        "num_minibatches": 1,
        "learning_rate": 1e-6,
        "tis_cap": None,
        "scale_by_std": False,
        **overrides,
    }
    return make(
        "grpo", policy=models.load(seed=0), config=config, options={"old_logprobs": "engine"}
    )


def reward_success_with_a_spread(episodes):
    """Each turn's reward is its success, and group 0's first episode wins: a non-zero
    advantage somewhere."""
    for episode in episodes:
        for turn in episode.turns:
            turn.reward = float(turn.info["success"])
    episodes[0].turns[-1].reward = 1.0


def test_each_context_is_scored_as_the_engine_saw_it(windowed):
    # The ratio between the trainer's logprobs and the engine's sampling logprobs is 1 only if
    # every turn is scored in its own context; scored as one long sequence, later turns would
    # also see the earlier turns' contexts.
    reward_success_with_a_spread(windowed)
    own = engine_logprob_trainer().step(windowed, push_weights=False)
    assert own["approx_kl"] < 1e-4
    assert own["clip_fraction"] == 0.0
    flat = [dataclasses.replace(e, context_starts=[]) for e in windowed]
    joined = engine_logprob_trainer().step(flat, push_weights=False)
    assert joined["approx_kl"] > 100 * own["approx_kl"]


def test_contexts_are_collated_into_rows_and_go_back_to_episode_rows():
    episodes = synthetic_episodes(2, 2, seed=3, turns=3)
    # cut episode 1 into contexts at its turn boundaries (each starts on env tokens)
    cut = episodes[1]
    starts = [0, *(end for _, end in cut.turn_spans[:-1])]
    episodes[1] = dataclasses.replace(cut, context_starts=starts)
    rows = TrainBatch.collate(episodes, pad_token_id=0)
    layout = rows.rows
    assert layout.windowed
    assert layout.episode_rows == ((0,), (1, 2, 3), (4,), (5,))
    assert layout.rows_of([1, 3]) == [1, 2, 3, 5]
    assert rows.token_ids.shape[0] == 6
    assert rows.lengths == [end - start for e in episodes for start, end in e.contexts]
    whole = TrainBatch.collate([dataclasses.replace(e, context_starts=[]) for e in episodes], 0)
    for name in ("token_ids", "loss_mask", "sampling_logprobs"):
        packed = layout.to_episodes(getattr(rows, name))
        torch.testing.assert_close(packed, getattr(whole, name) * whole.attention_mask)
        torch.testing.assert_close(
            layout.to_rows(packed), getattr(rows, name) * rows.attention_mask
        )
    second = rows.token_ids[2, : rows.lengths[2]].tolist()
    assert second == cut.token_ids[starts[1] : starts[2]]


def test_whole_conversation_episodes_are_a_row_each():
    batch = TrainBatch.collate(synthetic_episodes(1, 2), pad_token_id=0)
    assert not batch.rows.windowed
    assert batch.rows.episode_rows == ((0,), (1,))
    assert batch.rows.to_rows(batch.loss_mask) is batch.loss_mask  # nothing to convert


@pytest.mark.parametrize(
    ("starts", "rule"),
    [([3], "start at 0"), ([0, 0], "increase strictly"), ([0, 10_000], "< len")],
)
def test_bad_context_starts_are_refused(starts, rule):
    (episode,) = synthetic_episodes(1, 1)
    bad = dataclasses.replace(episode, context_starts=starts)
    with pytest.raises(ConfigError, match=rule):
        RowLayout.of([bad])


def test_a_context_cannot_begin_with_a_sampled_token():
    (episode,) = synthetic_episodes(1, 1)
    first_sampled = episode.turn_spans[0][0]
    bad = dataclasses.replace(episode, context_starts=[0, first_sampled])
    with pytest.raises(ConfigError, match="begin with a sampled token"):
        RowLayout.of([bad])
