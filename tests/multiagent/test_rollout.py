"""Per-role token-exact records: every sampled id lies in exactly one role's episode, under its
loss mask, with its sampling logprob (checked against a teacher-forced pass); each role's ids
are its own conversation; seeded games repeat exactly."""

from __future__ import annotations

import pytest
import torch
from rollout.test_tokens import (
    calls_as_samples,
    check_alignment,
    completions_of,
    conversation_through_last_turn,
    round_trips,
    spans_as_samples,
    teacher_forced,
    tiny,
)
from rollout.toys import Recorder

from agentgym.core.aio import run_sync
from agentgym.core.types import Episode
from agentgym.inference import HFEngine
from agentgym.inference.chat import render_ids
from agentgym.multiagent.policies import EnginePolicy
from agentgym.multiagent.rollout import play_games, role_episodes

TTT = "agentgym/TicTacToe-v0"


def self_play(
    seed: int, roles: tuple[str, str] = ("engine", "engine"), **kwargs
) -> tuple[list[dict[str, Episode]], Recorder]:
    """4 games in groups of 2; a role given as "engine" is played by one shared engine (one
    model, the env's role prompts; o gets a run prompt too), others by that scripted player."""
    model, tok = tiny()
    engine = Recorder(HFEngine(model, tok, max_batch_size=8, seed=seed))
    engines = {"x": EnginePolicy(engine), "o": EnginePolicy(engine, system="Play well.")}
    policies = {
        role: engines[role] if kind == "engine" else kind
        for role, kind in zip(("x", "o"), roles, strict=True)
    }
    try:
        games = play_games(TTT, policies, 4, seed, group_size=2, sampling_seed=seed, **kwargs)
    finally:
        run_sync(engine.close())
    return games, engine


@pytest.mark.parametrize(
    ("roles", "seed"),
    [(("engine", "engine"), 0), (("random", "engine"), 1), (("engine", "heuristic"), 2)],
)
def test_each_roles_masked_ids_are_its_sampled_ids_with_teacher_forced_logprobs(roles, seed):
    """Free sampling: the tiny model writes garbage, so the engine roles' later turns follow
    invalid-move feedback (x forfeits before o moves when both are engines)."""
    model, tok = tiny()
    games, engine = self_play(seed, roles, temperature=1.0, top_k=50, max_tokens=6)
    episodes = [e for game in games for e in game.values()]
    # Every engine call is one turn of exactly one role's episode, with its context as sent.
    assert spans_as_samples(episodes) == calls_as_samples(engine.calls)
    params = engine.calls[0].sampling
    engine_turns = {"x": 0, "o": 0}
    for game in games:
        assert set(game) == {"x", "o"}
        for role, episode in game.items():
            assert episode.reset_info["role"] == role
            assert episode.trainable == (bool(episode.token_ids) and bool(episode.turns))
            if not episode.token_ids:  # scripted, or o never moved (x forfeited first)
                continue
            engine_turns[role] += len(episode.turns)
            check_alignment(episode)
            expected = teacher_forced(model, episode, params)
            mask = episode.loss_mask
            sampled = torch.tensor([lp for lp, m in zip(episode.logprobs, mask, strict=True) if m])
            torch.testing.assert_close(sampled, expected, rtol=0, atol=1e-4)
            if all(round_trips(tok, c.completion) for c in completions_of(episode, engine.calls)):
                full = render_ids(tok, conversation_through_last_turn(episode))
                assert full[: len(episode.token_ids)] == episode.token_ids
        if roles[1] == "engine" and game["o"].messages:
            assert game["o"].messages[0] == {"role": "system", "content": "Play well."}
        assert all("You play O" not in m["content"] for m in game["x"].messages)
    for role, kind in zip(("x", "o"), roles, strict=True):
        if kind == "engine" and not (role == "o" and roles[0] == "engine"):
            assert engine_turns[role] >= 4 * 3  # 3 invalid turns to a forfeit, per game


def test_a_roles_return_is_what_the_env_gave_it_and_rewards_sum_to_zero_without_garbage():
    games, _ = self_play(2, action_choices=True, temperature=1.0, max_tokens=8)
    for game in games:
        x, o = game["x"], game["o"]
        assert x.metrics["return"] == x.total_reward
        assert x.total_reward + o.total_reward == pytest.approx(0.0)  # choices: always valid
        assert x.success is not None
        assert x.success == (x.turns[-1].info["outcome"] == "win")
        for episode in (x, o):
            assert len(episode.turn_choices) == len(episode.turns)
            assert all(choices for choices in episode.turn_choices)


def test_same_seeds_give_the_same_tokens_and_the_trainer_gets_only_chosen_roles():
    a, _ = self_play(3, temperature=1.0, max_tokens=6)
    b, _ = self_play(3, temperature=1.0, max_tokens=6)
    for game_a, game_b in zip(a, b, strict=True):
        for role in ("x", "o"):
            assert game_a[role].token_ids == game_b[role].token_ids
            assert game_a[role].logprobs == game_b[role].logprobs
    chosen = role_episodes(a, ["o"], group_size=2)
    assert [e.reset_info["role"] for e in chosen] == ["o"] * 4
    assert [e.group for e in chosen] == [0, 0, 1, 1]
    both = role_episodes(a, ["x", "o"], group_size=2)
    assert [(e.reset_info["role"], e.group) for e in both] == [
        ("x", 0), ("x", 0), ("o", 1), ("o", 1), ("x", 2), ("x", 2), ("o", 3), ("o", 3)
    ]  # fmt: skip
