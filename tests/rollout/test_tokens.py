"""Token-in, token-out: the ids under the loss mask are the sampled ids, their logprobs are the
sampling logprobs, and delta rendering tokenizes the conversation as a full render would."""

from __future__ import annotations

import functools
from collections import Counter

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym.core.aio import run_sync
from agentgym.core.types import Episode, assistant, user
from agentgym.inference import Completion, HFEngine, sampling_logprobs
from agentgym.inference.chat import render_ids
from agentgym.models import load, load_tokenizer
from agentgym.rollout import ChatRenderer, collect
from agentgym.vector import AgentVectorEnv

from .toys import ALPHABET, Call, ChattyEnv, Recorder, ScriptedEngine

torch.set_num_threads(1)


EOS_BOOST = 4.0  # makes ~4% of sampled tokens EOS, so that turns also end on <|im_end|>


@functools.cache
def tiny() -> tuple[torch.nn.Module, object]:
    """The tiny policy, sharpened (so that top-k / top-p cut real mass) and likelier to stop."""
    model, tok = load(seed=0)
    with torch.no_grad():
        model.model.norm.weight.mul_(8)
    bias = torch.zeros(model.config.vocab_size)
    bias[tok.eos_token_id] = EOS_BOOST
    model.lm_head.register_forward_hook(lambda module, args, logits: logits + bias)
    return model, tok


def check_alignment(episode: Episode) -> None:
    n = len(episode.token_ids)
    assert len(episode.loss_mask) == len(episode.logprobs) == n
    assert len(episode.turn_spans) == len(episode.turns)
    sampled = {i for start, end in episode.turn_spans for i in range(start, end)}
    assert all(start < end for start, end in episode.turn_spans)
    assert [i for i in range(n) if episode.loss_mask[i]] == sorted(sampled)
    assert all(episode.logprobs[i] == 0.0 for i in range(n) if not episode.loss_mask[i])


Sample = tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]


def spans_as_samples(episodes: list[Episode]) -> Counter[Sample]:
    """(prompt ids, sampled ids, their logprobs) of every assistant turn, as collected."""
    return Counter(
        (
            tuple(e.token_ids[:start]),
            tuple(e.token_ids[start:end]),
            tuple(e.logprobs[start:end]),
        )
        for e in episodes
        for start, end in e.turn_spans
    )


def calls_as_samples(calls: list[Call]) -> Counter[Sample]:
    """(prompt ids, sampled ids, their logprobs) of every engine call."""
    return Counter(
        (tuple(c.prompt), tuple(c.completion.token_ids), tuple(c.completion.logprobs))
        for c in calls
    )


def teacher_forced(model: torch.nn.Module, episode: Episode, sampling) -> torch.Tensor:
    """Sampling logprobs of the sampled tokens from one forward pass over the whole episode,
    closest to the engine's ``episode.logprobs``.

    A token whose probability mass sits within float rounding of the top-p cut is kept by one
    float computation and dropped by another, which moves every logprob at that position by about
    that token's mass (1e-4 to 1e-3 here). Such positions are compared with the top-p sets that
    rounding could have chosen (``top_p`` ± 1e-5); elsewhere all three candidates agree.
    """
    ids = torch.tensor([episode.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0]  # [T, V]
    positions = torch.tensor([i for i, m in enumerate(episode.loss_mask) if m])  # [N]
    targets = ids[0, positions][:, None]  # [N, 1]
    nudges = [0.0, -1e-5, 1e-5] if sampling.top_p < 1 else [0.0]
    candidates = torch.stack(
        [
            sampling_logprobs(
                logits[positions - 1],
                sampling.temperature,
                sampling.top_k,
                min(1.0, sampling.top_p + nudge),
            ).gather(-1, targets)[:, 0]
            for nudge in nudges
        ]
    )  # [C, N]
    engine = torch.tensor(episode.logprobs)[positions]  # [N]
    closest = (candidates - engine).abs().argmin(dim=0)  # [N]
    return candidates.gather(0, closest[None])[0]


def round_trips(tok, completion: Completion) -> bool:
    """Whether re-encoding the completion's text gives back its sampled ids (EOS aside)."""
    if isinstance(completion.stop, str):
        return False  # its text is cut before the stop string
    body = completion.token_ids
    if completion.finish_reason == "stop":
        body = body[:-1]
    return list(tok.encode(completion.text, add_special_tokens=False)) == body


def completions_of(episode: Episode, calls: list[Call]) -> list[Call]:
    """The engine calls that produced ``episode``'s turns, in order."""
    by_ids = {(tuple(c.prompt), tuple(c.completion.token_ids)): c for c in calls}
    ids = episode.token_ids
    return [by_ids[tuple(ids[:start]), tuple(ids[start:end])] for start, end in episode.turn_spans]


def conversation_through_last_turn(episode: Episode) -> list:
    last = max(i for i, m in enumerate(episode.messages) if m["role"] == "assistant")
    return episode.messages[: last + 1]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    frozenlake=st.booleans(),
    temperature=st.sampled_from([0.7, 1.0, 1.5]),
    top_k=st.sampled_from([0, 5, 50]),
    top_p=st.sampled_from([1.0, 0.9, 0.6]),
    max_tokens=st.integers(1, 12),
    stop=st.sampled_from([(), ("\n",), ("F",)]),
    max_turns=st.integers(1, 4),
    group_size=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**20),
)
def test_loss_mask_ids_are_sampled_ids_and_logprobs_match_a_teacher_forced_pass(
    frozenlake, temperature, top_k, top_p, max_tokens, stop, max_turns, group_size, seed
):
    """Random multi-turn episodes of FrozenLake or of a chatty toy env with the tiny policy."""
    model, tok = tiny()
    engine = Recorder(HFEngine(model, tok, max_batch_size=8, seed=seed))
    env = (
        AgentVectorEnv.from_id(
            "agentgym/FrozenLake-v0", num_envs=2 * group_size, group_size=group_size
        )
        if frozenlake
        else AgentVectorEnv(
            [lambda: ChattyEnv(max_len=5)] * (2 * group_size), group_size=group_size
        )
    )
    sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, max_tokens=max_tokens)
    try:
        episodes = collect(
            engine, env, 4 * group_size, seed, max_turns=max_turns, stop=stop, **sampling
        )
    finally:
        env.close()
        run_sync(engine.close())

    assert len(episodes) == 4 * group_size
    # Every sampled id with its logprob, exactly, in the context it was sampled in; nothing else.
    assert spans_as_samples(episodes) == calls_as_samples(engine.calls)
    params = engine.calls[0].sampling
    for episode in episodes:
        check_alignment(episode)
        assert 1 <= len(episode.turns) <= max_turns
        expected = teacher_forced(model, episode, params)
        sampled = torch.tensor(
            [lp for lp, m in zip(episode.logprobs, episode.loss_mask, strict=True) if m]
        )
        assert torch.isfinite(expected).all()
        torch.testing.assert_close(sampled, expected, rtol=0, atol=1e-4)
        if all(round_trips(tok, c.completion) for c in completions_of(episode, engine.calls)):
            tools = episode.reset_info.get("tools")
            full = render_ids(tok, conversation_through_last_turn(episode), tools=tools)
            assert full[: len(episode.token_ids)] == episode.token_ids


_reply = st.text(alphabet=[c for c in ALPHABET if c not in "<|>"], max_size=30)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    replies=st.lists(_reply, min_size=1, max_size=8),
    max_tokens=st.sampled_from([3, 6, 64]),
    seed=st.integers(0, 2**20),
)
def test_delta_rendering_equals_the_full_render_when_sampled_ids_round_trip(
    replies, max_tokens, seed
):
    """Scripted replies are canonical encodings that end on EOS, or are cut by ``max_tokens``
    (which may split a character: those do not round-trip)."""
    tok = load_tokenizer()
    engine = ScriptedEngine(tok, reply=lambda prompt, n: replies[n % len(replies)])
    env = AgentVectorEnv([lambda: ChattyEnv(max_len=5)] * 3)
    episodes = collect(engine, env, 3, seed, max_tokens=max_tokens)
    env.close()
    assert spans_as_samples(episodes) == calls_as_samples(engine.calls)
    checked = 0
    for episode in episodes:
        check_alignment(episode)
        if all(round_trips(tok, c.completion) for c in completions_of(episode, engine.calls)):
            full = render_ids(
                tok, conversation_through_last_turn(episode), tools=episode.reset_info["tools"]
            )
            assert full[: len(episode.token_ids)] == episode.token_ids
            checked += 1
    if max_tokens == 64:  # every reply fits and ends on EOS
        assert checked == len(episodes)


@pytest.mark.parametrize(
    ("finish", "stop", "starts"),
    [
        ("stop", 2, "\n<|im_start|>user\n"),  # EOS sampled: only the newline is the env's
        ("length", None, "<|im_end|>\n<|im_start|>user\n"),  # cut off: the close is the env's
        ("stop", "\n", "<|im_end|>\n<|im_start|>user\n"),  # stop string: likewise
    ],
)
def test_the_end_of_the_assistant_turn_belongs_to_the_delta_unless_sampled(finish, stop, starts):
    tok = load_tokenizer()
    ids = [*tok.encode("hi", add_special_tokens=False), 2] if stop == 2 else [5, 6]
    completion = Completion(ids, [0.0] * len(ids), finish, text="hi", stop=stop)
    text = ChatRenderer(tok).delta_text([user("go")], [user("next")], None, completion)
    assert text == starts + "next<|im_end|>\n<|im_start|>assistant\n"
    full = render_ids(tok, [user("go"), assistant("hi"), user("next")], add_generation_prompt=True)
    prompt = render_ids(tok, [user("go")], add_generation_prompt=True)
    if stop == 2:  # a round-tripping reply: prompt + sampled + delta is the full render
        assert prompt + ids + ChatRenderer(tok).encode(text) == full
