"""The collector: concurrency, groups, raggedness, how episodes end, errors."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest
import torch

from agentgym.core.aio import run_sync
from agentgym.error import ConfigError, Error
from agentgym.inference import Completion, HFEngine
from agentgym.models import load, load_tokenizer
from agentgym.rollout import acollect, collect
from agentgym.vector import AgentVectorEnv

from .toys import ChattyEnv, Recorder, ScriptedEngine

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def chatty(num_envs: int, group_size: int = 1, **kwargs: object) -> AgentVectorEnv:
    venv_kwargs = {k: kwargs.pop(k) for k in ("max_episode_steps",) if k in kwargs}
    return AgentVectorEnv(
        [lambda: ChattyEnv(**kwargs)] * num_envs,  # type: ignore[arg-type]
        group_size=group_size,
        **venv_kwargs,  # type: ignore[arg-type]
    )


def test_64_frozenlake_episodes_run_concurrently_in_groups_with_the_tiny_policy():
    model, tokenizer = load(seed=0)
    hf = HFEngine(model, tokenizer, max_batch_size=64)
    # Every call waits until 64 are in flight: only a collector that runs all 64 envs at once
    # gets past the first turn (one that does not fails on the recorder's timeout).
    engine = Recorder(hf, open_at=64)
    try:
        episodes = collect(
            engine, "agentgym/FrozenLake-v0", 64, seed=7, group_size=8, max_turns=2, max_tokens=8
        )
    finally:
        run_sync(engine.close())
    assert len(episodes) == 64
    assert engine.most_in_flight == 64
    assert hf.stats.max_rows == 64  # and the engine decoded them as one batch
    assert all(e.env_id == "agentgym/FrozenLake-v0" and e.trainable for e in episodes)
    assert [e.group for e in episodes] == [g for g in range(8) for _ in range(8)]
    for g in range(8):
        members = episodes[8 * g : 8 * g + 8]
        assert {e.seed for e in members} == {7 + g}
        assert len({e.reset_info["map"] for e in members}) == 1  # one task per group
        first_prompts = {tuple(e.token_ids[: e.turn_spans[0][0]]) for e in members}
        assert len(first_prompts) == 1
    assert len({e.reset_info["map"] for e in episodes}) > 1


def test_groups_restart_on_their_envs_until_every_episode_is_played(tok):
    engine = ScriptedEngine(tok)
    venv = chatty(4, group_size=2)
    episodes = collect(engine, venv, 12, seed=100, temperature=0.7, max_tokens=16)
    assert len(episodes) == 12
    assert [e.group for e in episodes] == [g for g in range(6) for _ in range(2)]
    assert [e.seed for e in episodes] == [100 + g for g in range(6) for _ in range(2)]
    for a, b in zip(episodes[::2], episodes[1::2], strict=True):
        assert a.messages[:2] == b.messages[:2]  # the task of the group
    assert venv.pending == 0
    venv.close()


def test_a_sampling_seed_gives_each_request_its_own_reproducible_seed(tok):
    def request_seeds() -> list[int | None]:
        engine = ScriptedEngine(tok)
        collect(engine, chatty(2, group_size=2, max_len=3), 4, seed=0, sampling_seed=5)
        return sorted(c.sampling.seed for c in engine.calls)

    seeds = request_seeds()
    assert len(set(seeds)) == len(seeds) > 4  # group members do not sample alike
    assert request_seeds() == seeds


def test_an_env_that_finishes_its_turn_early_does_not_wait_for_the_others(tok):
    """Task 0's first generation is held until task 1 has played three turns: a lockstep
    collector would wait for task 0 forever (and fail on the timeout)."""
    task1_turns = 0
    released = asyncio.Event()

    async def gate(prompt: str) -> None:
        nonlocal task1_turns
        if "task 1\n" in prompt:
            task1_turns += 1
            if task1_turns == 3:
                released.set()
        elif "task 0\n" in prompt and not released.is_set():
            await asyncio.wait_for(released.wait(), 10)

    engine = ScriptedEngine(tok, gate=gate)
    venv = AgentVectorEnv([lambda: ChattyEnv(max_len=1000)] * 2)
    episodes = collect(engine, venv, 2, seed=0, max_turns=3, max_tokens=16)
    assert sorted(len(e.turns) for e in episodes) == [3, 3]
    venv.close()


def test_episodes_come_as_they_finish_and_an_early_stop_leaves_the_vector_env_usable(tok):
    engine = ScriptedEngine(tok)
    venv = chatty(3, max_len=3)

    async def first_two() -> list[int]:
        got = []
        async with aclosing(acollect(engine, venv, 6, seed=0, max_tokens=16)) as episodes:
            async for episode in episodes:
                got.append(episode.seed)
                if len(got) == 2:
                    break
        return got

    assert len(run_sync(first_two())) == 2
    assert venv.pending == 0
    assert len(collect(engine, venv, 3, seed=0, max_tokens=16)) == 3
    venv.close()


def test_the_context_limit_caps_generations_and_truncates_cleanly(tok):
    engine = ScriptedEngine(tok, reply=lambda prompt, n: "word " * 20)
    venv = chatty(1, max_len=1000)
    (probe,) = collect(engine, venv, 1, seed=0, max_tokens=8, max_turns=1)
    prompt_len = probe.turn_spans[0][0]
    engine.calls.clear()
    (episode,) = collect(engine, venv, 1, seed=0, max_tokens=8, max_context_tokens=prompt_len + 5)
    # The first turn's generation is capped to the 5 tokens left; then no room is left for the
    # env's answer and one more token, so the episode ends before the second generation.
    assert [c.sampling.max_tokens for c in engine.calls] == [5]
    assert episode.turn_spans == [(prompt_len, prompt_len + 5)]
    assert len(episode.token_ids) == prompt_len + 5
    assert episode.truncated
    assert not episode.terminated
    assert episode.trainable
    assert episode.turns[-1].info["truncation_reason"] == "context_length"
    assert episode.messages[-1] == episode.turns[-1].observation[-1]  # the env's answer is kept
    venv.close()


def test_a_first_prompt_longer_than_the_context_gives_an_empty_untrainable_episode(tok):
    engine = ScriptedEngine(tok)
    (episode,) = collect(engine, chatty(1, pad=50), 1, seed=0, max_context_tokens=20)
    assert episode.turns == []
    assert episode.token_ids == []
    assert not episode.trainable
    assert episode.reset_info["truncation_reason"] == "context_length"
    assert engine.calls == []


def test_env_truncation_and_max_turns_end_episodes(tok):
    engine = ScriptedEngine(tok)
    by_env = collect(engine, chatty(2, max_len=1000, max_episode_steps=2), 2, seed=0)
    assert all(len(e.turns) == 2 and e.truncated for e in by_env)
    assert all("truncation_reason" not in e.turns[-1].info for e in by_env)  # as TimeLimit
    by_collector = collect(engine, chatty(2, max_len=1000), 2, seed=0, max_turns=3)
    assert all(len(e.turns) == 3 and e.truncated for e in by_collector)
    assert {e.turns[-1].info["truncation_reason"] for e in by_collector} == {"max_turns"}
    assert all(e.trainable for e in by_env + by_collector)


def test_infra_errors_end_the_episode_and_make_it_untrainable(tok):
    engine = ScriptedEngine(tok)
    (step_failed,) = collect(engine, chatty(1, max_len=5, fail_on="step", fail_at=2), 1, seed=0)
    assert len(step_failed.turns) == 2
    assert step_failed.turns[-1].info["infra_error"]
    assert step_failed.infra_error
    assert not step_failed.trainable
    (reset_failed,) = collect(engine, chatty(1, fail_on="reset"), 1, seed=0)
    assert reset_failed.turns == []
    assert reset_failed.infra_error
    assert not reset_failed.trainable
    (fine,) = collect(engine, chatty(1, max_len=2), 1, seed=0)
    assert fine.trainable
    assert not fine.infra_error


def test_untrainable_completions_make_the_episode_untrainable(tok):
    engine = ScriptedEngine(tok, trainable=False)
    (episode,) = collect(engine, chatty(1, max_len=2), 1, seed=0)
    assert not episode.trainable
    assert not episode.infra_error


def test_metrics(tok):
    engine = ScriptedEngine(tok)
    (episode,) = collect(engine, chatty(1, max_len=3), 1, seed=3, max_tokens=16)
    m = episode.metrics
    assert m["turns"] == len(episode.turns) >= 1
    assert m["sampled_tokens"] == sum(episode.loss_mask)
    assert m["prompt_tokens"] + m["sampled_tokens"] == m["total_tokens"] == len(episode.token_ids)
    assert m["return"] == pytest.approx(episode.total_reward)
    assert m["success"] == float(episode.turns[-1].info["success"])
    assert m["llm_time"] >= 0
    assert m["env_time"] >= 0


def test_an_engine_failure_propagates_with_context_and_does_not_hang(tok):
    engine = ScriptedEngine(tok, fail_at=3)
    with pytest.raises(RuntimeError, match="the engine broke") as caught:
        collect(engine, chatty(2, max_len=1000), 4, seed=0)
    assert any("engine.generate failed for env" in note for note in caught.value.__notes__)


def test_an_aborted_completion_is_an_error_not_an_action(tok):
    class Closed(ScriptedEngine):
        async def generate(self, prompt_token_ids, sampling):
            return Completion([], [], "abort")

    with pytest.raises(Error, match="finish_reason 'abort' for env 0"):
        collect(Closed(tok), chatty(1), 1, seed=0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_episodes": 6, "group_size": 4}, "num_episodes"),
        ({"num_episodes": 0}, "num_episodes"),
        ({"num_episodes": 2, "temprature": 1.0}, "sampling"),
        ({"num_episodes": 2, "max_turns": 0}, "max_turns"),
        ({"num_episodes": 2, "temperature": -1.0}, "temperature"),
        ({"num_episodes": 2, "history_turns": -1}, "history_turns"),
        ({"num_episodes": 2, "history_turns": 1.5}, "history_turns"),
    ],
)
def test_bad_arguments_raise_config_errors(tok, kwargs, name):
    with pytest.raises(ConfigError) as caught:
        collect(ScriptedEngine(tok), "agentgym/FrozenLake-v0", **kwargs)
    assert caught.value.name == name


def test_a_vector_env_with_another_group_size_is_refused(tok):
    venv = chatty(4, group_size=2)
    with pytest.raises(ConfigError, match="group_size"):
        collect(ScriptedEngine(tok), venv, 4, group_size=4)
    venv.close()
