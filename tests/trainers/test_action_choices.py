"""Constrained decoding end to end: the collector samples among the env's offered actions, and
the trainer scores each turn under the same restriction; plus the entropy bonus."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agentgym import models
from agentgym.core.aio import run_sync
from agentgym.core.types import Episode
from agentgym.envs.frozenlake.env import MOVE_CHOICES
from agentgym.error import ConfigError
from agentgym.inference.hf import HFEngine
from agentgym.rollout import collect
from agentgym.trainers.batch import TrainBatch, allowed_tokens
from agentgym.trainers.config import config_from_dict
from agentgym.trainers.modules import restrict_logits, token_logprobs

from .test_contexts import engine_logprob_trainer as _trainer
from .test_contexts import reward_success_with_a_spread


def _collect(history_turns: int | None, seed: int = 5) -> tuple[list[Episode], object]:
    model, tokenizer = models.load(seed=0)
    engine = HFEngine(model, tokenizer, seed=0)
    try:
        episodes = collect(
            engine,
            "agentgym/FrozenLake-v0",
            8,
            seed=seed,
            group_size=4,
            max_turns=6,
            history_turns=history_turns,
            action_choices=True,
            sampling_seed=seed,
            temperature=1.0,
            max_tokens=2,  # shorter than a move: the collector raises it to the longest choice
        )
    finally:
        run_sync(engine.close())
    return episodes, tokenizer


@pytest.fixture(scope="module", params=[0, None], ids=["window0", "whole"])
def constrained(request) -> list[Episode]:
    episodes, _ = _collect(request.param)
    return episodes


def test_a_random_policy_only_ever_plays_the_offered_moves(constrained):
    tokenizer = models.load_tokenizer()
    turns = [t for e in constrained for t in e.turns]
    assert len(turns) > len(constrained)  # multi-turn episodes
    assert {t.action["content"] for t in turns} <= set(MOVE_CHOICES)
    assert not any(t.info["invalid_action"] for t in turns)  # random weights, never invalid
    for episode in constrained:
        assert len(episode.turn_choices) == len(episode.turn_spans) == len(episode.turns)
        for (start, end), choices in zip(episode.turn_spans, episode.turn_choices, strict=True):
            sampled = tuple(episode.token_ids[start:end])
            assert sampled in choices
            assert tokenizer.decode(sampled[:-1]) in MOVE_CHOICES
            assert sampled[-1] == tokenizer.eos_token_id  # the turn ends on end-of-turn
            # one decision per move (the direction); the fences and the end were forced
            assert episode.loss_mask[start:end] == [0, 1, 0, 0]
            assert episode.logprobs[start] == episode.logprobs[end - 1] == 0.0
            assert -5.0 < episode.logprobs[start + 1] < 0  # one of 4, not of ~1264 ids


def test_the_trainer_scores_each_turn_as_the_engine_sampled_it(constrained):
    reward_success_with_a_spread(constrained)
    own = _trainer().step(constrained, push_weights=False)
    assert own["approx_kl"] < 1e-5
    assert own["clip_fraction"] == 0.0
    assert 1.2 < own["entropy"] <= 1.3863  # over 4 moves, not over the vocabulary
    # Scored over the whole vocabulary, the same tokens are far less likely than sampled.
    free = [dataclasses.replace(e, turn_choices=[]) for e in constrained]
    unrestricted = _trainer().step(free, push_weights=False)
    assert unrestricted["approx_kl"] > 1.0
    assert unrestricted["entropy"] > 5.0


def test_allowed_tokens_mark_each_decision_with_its_choices():
    choices = ((7, 1, 9, 2), (7, 3, 9, 2), (7, 4, 2))
    episode = Episode(
        "toy",
        token_ids=[5, 6, 7, 3, 9, 2, 5, 8],
        loss_mask=[0, 0, 0, 1, 1, 0, 0, 1],
        logprobs=[0.0] * 8,
        turn_spans=[(2, 6), (7, 8)],
        turn_choices=[choices, ()],
    )
    allowed = allowed_tokens([episode], 10)
    assert allowed is not None
    assert allowed.shape == (1, 10, 3)
    assert allowed[0, 3].tolist() == [1, 3, 4]
    assert allowed[0, 4].tolist() == [9, -1, -1]
    for position in (0, 1, 2, 5, 6, 7, 8, 9):  # prompt, forced, free and padding
        assert allowed[0, position].tolist() == [-1, -1, -1]
    assert allowed_tokens([dataclasses.replace(episode, turn_choices=[])], 10) is None
    bad = dataclasses.replace(episode, token_ids=[5, 6, 7, 8, 9, 2, 5, 8])
    with pytest.raises(ConfigError, match=r"token_ids\[3\]"):
        allowed_tokens([bad], 10)
    with pytest.raises(ConfigError, match="one entry per turn span"):
        allowed_tokens([dataclasses.replace(episode, turn_choices=[choices])], 10)


def test_restricted_logprobs_are_the_softmax_over_the_allowed_ids():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 11, requires_grad=True)
    token_ids = torch.tensor([[0, 3, 5, 1], [0, 2, 2, 2]])
    allowed = torch.full((2, 4, 3), -1)
    allowed[0, 1] = torch.tensor([3, 6, 9])  # token 1 of row 0 chose among 3, 6, 9
    allowed[1, 3, :2] = torch.tensor([0, 2])
    logp, entropy = token_logprobs(
        logits, token_ids, 0.5, allowed=allowed, entropy_grad=True, with_entropy=True
    )
    sub = torch.log_softmax(logits[0, 0, [3, 6, 9]] / 0.5, -1)
    torch.testing.assert_close(logp[0, 1], sub[0])
    torch.testing.assert_close(entropy[0, 1], -(sub.exp() * sub).sum())
    full = torch.log_softmax(logits[0, 1] / 0.5, -1)
    torch.testing.assert_close(logp[0, 2], full[5])  # an unrestricted token: whole vocabulary
    pair = torch.log_softmax(logits[1, 2, [0, 2]] / 0.5, -1)
    torch.testing.assert_close(logp[1, 3], pair[1])
    assert torch.isfinite(entropy).all()
    (logp.sum() + entropy.sum()).backward()
    assert torch.isfinite(logits.grad).all()
    assert logits.grad[0, 0, [0, 1, 2, 4, 5, 7, 8, 10]].abs().max() == 0  # masked ids


def test_restrict_logits_leaves_unrestricted_rows_alone():
    scaled = torch.randn(3, 5)
    allowed = torch.tensor([[-1, -1], [0, 4], [2, -1]])
    out = restrict_logits(scaled, allowed)
    torch.testing.assert_close(out[0], scaled[0])
    assert torch.isinf(out[1, 1:4]).all()
    assert torch.isfinite(out[1, [0, 4]]).all()
    assert torch.isfinite(out[2]).tolist() == [False, False, True, False, False]


def test_context_rows_carry_their_allowed_ids():
    episodes, _ = _collect(0, seed=9)
    rows = TrainBatch.collate(episodes, pad_token_id=0)
    layout = rows.rows
    assert layout.windowed
    assert rows.allowed is not None
    assert rows.allowed.shape[0] == len(layout.pieces)
    decisions = (rows.allowed >= 0).any(-1)
    torch.testing.assert_close(decisions.float(), rows.loss_mask)
    assert (rows.allowed[decisions] >= 0).sum(-1).eq(4).all()  # the four directions


def test_an_entropy_bonus_raises_the_entropy_of_a_peaked_policy(constrained):
    for episode in constrained:
        for turn in episode.turns:
            turn.reward = 0.0  # no advantage: only the bonus moves the policy
    # token-mean: the bonus is the mean entropy the metrics report; a small, first-order step
    trainer = _trainer(entropy_coef=1.0, learning_rate=1e-6, aggregation="token-mean")
    with torch.no_grad():  # sharpen the policy: every logit x 8
        trainer.module.policy.model.norm.weight *= 8
    first = trainer.step(constrained, push_weights=False)
    assert first["entropy"] < 1.3  # log 4 = 1.386
    assert first["entropy_loss"] == pytest.approx(-first["entropy"], rel=1e-4)
    assert first["grad_norm"] > 0
    second = trainer.step(constrained, push_weights=False)
    assert second["entropy"] > first["entropy"]
    plain = _trainer().step(constrained, push_weights=False)
    assert plain["grad_norm"] == 0.0
    assert "entropy_loss" not in plain


def test_entropy_coef_must_not_be_negative():
    with pytest.raises(ConfigError, match="entropy_coef"):
        config_from_dict({"algo": "grpo", "entropy_coef": -0.1})


def test_the_entropy_bonus_can_fall_linearly_to_zero():
    from agentgym.trainers.losses import entropy_coefficient

    steady = config_from_dict({"algo": "grpo", "entropy_coef": 0.1})
    assert [entropy_coefficient(steady, s) for s in (0, 50, 10_000)] == [0.1, 0.1, 0.1]
    decaying = config_from_dict({"algo": "grpo", "entropy_coef": 0.1, "entropy_decay_steps": 4})
    got = [entropy_coefficient(decaying, s) for s in range(6)]
    assert got == pytest.approx([0.1, 0.075, 0.05, 0.025, 0.0, 0.0])
    with pytest.raises(ConfigError, match="entropy_decay_steps"):
        config_from_dict({"algo": "grpo", "entropy_decay_steps": -1})


def test_the_trainer_uses_the_decayed_coefficient_of_each_update(constrained):
    trainer = _trainer(entropy_coef=0.5, entropy_decay_steps=2, aggregation="token-mean")
    weights = [
        -trainer.step(constrained, push_weights=False).get("entropy_loss", 0.0) for _ in range(3)
    ]
    entropies = [trainer.step(constrained, push_weights=False)["entropy"]]  # lr 1e-6: ~constant
    assert weights[0] == pytest.approx(0.5 * entropies[0], rel=1e-2)
    assert weights[1] == pytest.approx(0.25 * entropies[0], rel=1e-2)
    assert weights[2] == 0.0
