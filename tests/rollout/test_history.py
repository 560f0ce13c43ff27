"""History windows: each turn sees the system messages, the observation k turns back and the
turns since, as a context of its own, with earlier turns' sampled ids reused as sampled."""

from __future__ import annotations

import pytest

from agentgym.core.types import Episode, Message
from agentgym.inference import Completion
from agentgym.inference.chat import render_text
from agentgym.models import load_tokenizer
from agentgym.rollout import collect

from .test_collector import chatty
from .toys import TOOL, ScriptedEngine


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def window_messages(episode: Episode, turn: int, history: int | None) -> list[Message]:
    """The messages turn ``turn`` (0-based) should see under a window of ``history`` turns."""
    first_action = next(i for i, m in enumerate(episode.messages) if m["role"] == "assistant")
    reset = episode.messages[:first_action]
    system = [m for m in reset if m["role"] == "system"]
    observations = [[m for m in reset if m["role"] != "system"]]
    observations += [list(t.observation) for t in episode.turns]
    first = 0 if history is None else max(0, turn - history)
    shown: list[Message] = [*system, *observations[first]]
    for j in range(first, turn):
        shown += [episode.turns[j].action, *observations[j + 1]]
    return shown


@pytest.mark.parametrize("history", [0, 1, 2])
def test_each_turn_sees_its_window_rendered_by_the_template_and_nothing_else(tok, history):
    engine = ScriptedEngine(tok, reply=lambda prompt, n: f"move {n}")
    episodes = collect(engine, chatty(4, max_len=6), 8, seed=3, history_turns=history)
    prompts = {tuple(call.prompt) for call in engine.calls}
    assert len(engine.calls) == sum(len(e.turns) for e in episodes)
    assert max(len(e.turns) for e in episodes) >= 4  # windows that drop turns were exercised
    for episode in episodes:
        assert len(episode.context_starts) == len(episode.turns)
        assert episode.contexts[0][0] == 0
        assert episode.contexts[-1][1] == len(episode.token_ids)
        for turn, ((start, end), (first, last)) in enumerate(
            zip(episode.contexts, episode.turn_spans, strict=True)
        ):
            assert start < first < last == end  # a context: its prompt, then its turn's sample
            prompt = episode.token_ids[start:first]
            assert tuple(prompt) in prompts  # exactly what the engine was asked
            shown = window_messages(episode, turn, history)
            expected = render_text(tok, shown, tools=[TOOL], add_generation_prompt=True)
            assert tok.decode(prompt) == expected
            assert set(episode.loss_mask[start:first]) <= {0}
            assert set(episode.loss_mask[first:last]) == {1}


def test_earlier_turns_keep_their_sampled_ids_even_when_they_would_not_round_trip(tok):
    # "go" sampled as two tokens "g", "o": re-tokenizing the text would give the one token "go"
    sampled = [*(tok.encode(c, add_special_tokens=False)[0] for c in "go"), tok.eos_token_id]
    assert tok.encode("go", add_special_tokens=False) != sampled[:2]

    async def generate(prompt, sampling):
        return Completion(sampled, [-0.5] * 3, "stop", text="go", stop=tok.eos_token_id)

    engine = ScriptedEngine(tok)
    engine.generate = generate  # type: ignore[method-assign]
    (episode,) = collect(engine, chatty(1, max_len=6), 1, seed=5, history_turns=2)
    assert len(episode.turns) >= 3
    for turn, ((start, _), (first, _)) in enumerate(
        zip(episode.contexts, episode.turn_spans, strict=True)
    ):
        prompt = episode.token_ids[start:first]
        found = sum(prompt[i : i + 3] == sampled for i in range(len(prompt)))
        assert found == min(turn, 2)  # each earlier turn in the window, as it was sampled


def test_the_whole_conversation_is_one_context_by_default(tok):
    engine = ScriptedEngine(tok)
    episodes = collect(engine, chatty(2, max_len=4), 2, seed=1)
    assert all(e.context_starts == [] and e.contexts == [(0, len(e.token_ids))] for e in episodes)
    for episode in episodes:
        start, _ = episode.turn_spans[-1]
        shown = window_messages(episode, len(episode.turns) - 1, None)
        expected = render_text(tok, shown, tools=[TOOL], add_generation_prompt=True)
        assert tok.decode(episode.token_ids[:start]) == expected


def test_the_context_limit_applies_to_each_window(tok):
    engine = ScriptedEngine(tok, reply=lambda prompt, n: "word " * 3)
    venv = chatty(1, max_len=12)
    (whole,) = collect(engine, venv, 1, seed=2, max_tokens=8)
    assert len(whole.turns) >= 6
    limit = len(whole.token_ids) // 2  # far below the conversation, above any one window
    (cut,) = collect(engine, venv, 1, seed=2, max_tokens=8, max_context_tokens=limit)
    (windowed,) = collect(
        engine, venv, 1, seed=2, max_tokens=8, max_context_tokens=limit, history_turns=0
    )
    assert cut.turns[-1].info["truncation_reason"] == "context_length"
    assert len(windowed.turns) == len(whole.turns)
    assert max(end - start for start, end in windowed.contexts) < limit
    venv.close()
