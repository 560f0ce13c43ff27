"""Compact filtering (``mask_outcomes``, DeepSWE): episodes that ran out of budget stay in their
group's baseline and leave the loss."""

from __future__ import annotations

import pytest
import torch

from agentgym import models
from agentgym.core.types import Episode
from agentgym.error import ConfigError
from agentgym.trainers import make, make_config, update
from agentgym.trainers.config import config_from_dict

from .ds_step import fresh, synthetic_episodes


@pytest.fixture(scope="module")
def tiny():
    return models.load(seed=0)


def ended(episode: Episode, how: str, reward: float) -> Episode:
    """End ``episode`` as ``how`` (success, failed, truncated, timeout) with ``reward``."""
    last = episode.turns[-1]
    last.reward, last.terminated, last.truncated = reward, how != "truncated", how == "truncated"
    last.info = {"success": how == "success", "timed_out": how == "timeout"}
    if how == "truncated" and reward > 0:  # graded at the turn limit, and resolved
        last.info["success"] = True
    for turn in episode.turns[:-1]:
        turn.reward = 0.0
    return episode


def group(endings: list[tuple[str, float]], seed: int = 0) -> list[Episode]:
    episodes = synthetic_episodes(1, len(endings), seed=seed)
    return [ended(e, how, r) for e, (how, r) in zip(episodes, endings, strict=True)]


@pytest.mark.parametrize("value", [[], ["truncated"], ["truncated", "timeout"]])
def test_mask_outcomes_takes_budget_outcomes_from_a_file(value):
    config = make_config("grpo", mask_outcomes=value)
    assert config.mask_outcomes == tuple(value)
    assert config_from_dict(config.to_dict()) == config  # round-trips through a file


@pytest.mark.parametrize("outcome", ["failed", "success", "invalid", "infra", "truncation"])
def test_mask_outcomes_refuses_outcomes_that_say_what_the_episode_achieved(outcome):
    with pytest.raises(ConfigError, match=outcome) as error:
        make_config("grpo", mask_outcomes=["truncated", outcome])
    assert "truncated" in str(error.value.fix) or "timeout" in str(error.value.fix)


def test_masked_episodes_keep_their_reward_in_the_baseline_and_leave_the_loss(tiny, monkeypatch):
    seen = []
    train = update._train_minibatch
    monkeypatch.setattr(
        update,
        "_train_minibatch",
        lambda inputs, batch, *a: seen.append(batch) or train(inputs, batch, *a),
    )
    config = {
        "group_size": 4,
        "batch_size": 4,
        "advantage_estimator": "rloo",
        "kl_beta": 0.0,
        "mask_outcomes": ["truncated", "timeout"],
    }
    trainer = make("grpo", policy=fresh(tiny), config=config)
    # success 1, failed 0, truncated at the turn limit 0, and a resolved truncated episode 1:
    # only the unresolved truncated one is masked (a success is never masked)
    episodes = group([("success", 1.0), ("failed", 0.0), ("truncated", 0.0), ("truncated", 1.0)])
    assert [e.outcome for e in episodes] == ["success", "failed", "truncated", "success"]
    metrics = trainer.step(episodes)
    assert metrics["masked_episodes"] == 1
    (batch,) = seen
    original = [
        torch.tensor(e.loss_mask + [0] * (batch.loss_mask.shape[1] - len(e.loss_mask)))
        for e in episodes
    ]
    for row in (0, 1, 3):
        assert torch.equal(batch.loss_mask[row], original[row])
    assert batch.loss_mask[2].sum() == 0
    assert original[2].sum() > 0
    # RLOO over all four rewards (1, 0, 0, 1): the masked episode's 0 is in the others'
    # baselines. Without it, episode 1's baseline would be (1 + 1) / 2 = 1, not 2/3.
    expected = [1 - 1 / 3, 0 - 2 / 3, None, 1 - 1 / 3]
    for row, value in enumerate(expected):
        if value is not None:
            on = batch.loss_mask[row].bool()
            assert torch.allclose(
                batch.advantages[row][on], torch.tensor(value, dtype=batch.advantages.dtype)
            )
    assert metrics["sampled_tokens"] == sum(int(original[r].sum()) for r in (0, 1, 3))


def test_a_batch_of_masked_episodes_moves_no_weight_and_unmasked_it_does(tiny):
    endings = [("truncated", 0.0), ("timeout", 0.0), ("success", 1.0), ("truncated", 0.0)]
    moved = {}
    for mask in ([], ["truncated"], ["truncated", "timeout"]):
        config = {"group_size": 4, "batch_size": 4, "kl_beta": 0.0, "mask_outcomes": mask}
        trainer = make("grpo", policy=fresh(tiny), config=config)
        before = {k: v.clone() for k, v in trainer.policy_state_dict().items()}
        # the success is the only informative episode: mask it by hand to leave the masked ones
        episodes = group(endings, seed=5)
        episodes[2].loss_mask = [0] * len(episodes[2].loss_mask)
        metrics = trainer.step(episodes)
        after = trainer.policy_state_dict()
        moved[tuple(mask)] = max(float((after[k] - before[k]).abs().max()) for k in before)
        assert metrics.get("masked_episodes", 0.0) == {0: 0, 1: 2, 2: 3}[len(mask)]
    assert moved[()] > 0  # the failures' negative advantages train
    assert moved[("truncated",)] > 0  # the timeout's still does
    assert moved[("truncated", "timeout")] == 0


def test_an_update_whose_every_episode_is_masked_takes_no_optimizer_step(tiny):
    config = {"group_size": 4, "batch_size": 4, "kl_beta": 0.0, "mask_outcomes": ["truncated"]}
    trainer = make("grpo", policy=fresh(tiny), config=config)
    trainer.keep_tokens()
    first = trainer.step(group([("success", 1.0), ("failed", 0.0)] * 2, seed=1))
    assert first["optimizer_steps"] > 0
    assert "skipped_update" not in first
    lr = trainer.backend.learning_rate()
    before = {k: v.clone() for k, v in trainer.policy_state_dict().items()}
    # after a real step AdamW's momentum alone would move every weight on an all-zero loss
    metrics = trainer.step(group([("truncated", 0.0), ("truncated", -1.0)] * 2, seed=2))
    after = trainer.policy_state_dict()
    assert metrics["skipped_update"] == 1
    assert metrics["optimizer_steps"] == 0
    assert metrics["masked_episodes"] == 4
    assert metrics["sampled_tokens"] == 0
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert trainer.backend.learning_rate() == lr  # the schedule did not advance
    assert trainer.step_count == 2  # still an update: the episodes were consumed and traced
    tokens = trainer.last_tokens
    assert tokens is not None
    assert len(tokens.episodes) == 4
    assert all(float(t.abs().sum()) == 0 for t in tokens.advantages)
