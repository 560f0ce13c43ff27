"""Scaffolds: the default is today's collector bit for bit; every scaffold is token-exact (the
ids under the loss mask are the sampled ids, their logprobs match a teacher-forced pass, each
prompt is the template's render of the scaffold's messages); ReAct's actions and observations."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import Counter

import pytest
import torch

from agentgym.core.aio import run_sync
from agentgym.core.types import Episode, Message, tool_message, user
from agentgym.error import ConfigError, Error
from agentgym.inference import HFEngine
from agentgym.inference.chat import render_ids, render_text
from agentgym.models import load_tokenizer
from agentgym.rollout import (
    ChatScaffold,
    EpisodeMemory,
    MemoryScaffold,
    ReActScaffold,
    Scaffold,
    collect,
    history_window,
    make_scaffold,
)
from agentgym.vector import AgentVectorEnv

from .test_tokens import (
    Sample,
    calls_as_samples,
    check_alignment,
    completions_of,
    round_trips,
    teacher_forced,
    tiny,
)
from .toys import TOOL, ChattyEnv, Recorder, ScriptedEngine

torch.set_num_threads(1)

SCAFFOLDS = {
    "default": ChatScaffold(),
    "window-1": history_window(1),
    "react": ReActScaffold(),
    "react-window-0": ReActScaffold(history_turns=0),
    "memory": MemoryScaffold(),
    "memory-window-1": MemoryScaffold(history_turns=1, max_entries=1, excerpt_chars=12),
}


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def fingerprint(episodes: list[Episode]) -> str:
    digest = hashlib.sha256()
    for e in episodes:
        turns = [
            [t.action, list(t.observation), t.reward, t.terminated, t.truncated] for t in e.turns
        ]
        record = [e.token_ids, e.loss_mask, e.logprobs, e.turn_spans, e.context_starts]
        record += [e.messages, turns, e.group, e.seed]
        digest.update(json.dumps(record, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


# Fingerprints of these collect calls taken on the collector before scaffolds existed (99cf709^).
BEFORE_SCAFFOLDS = {None: "06515660da7e8aed", 0: "5f08e7349e7199be", 2: "69e1f78c82b51cbd"}


@pytest.mark.parametrize("history", [None, 0, 2])
@pytest.mark.parametrize("how", ["implicit", "explicit"])
def test_the_default_scaffold_gives_the_episodes_of_the_collector_before_scaffolds(
    tok, history, how
):
    engine = ScriptedEngine(tok, reply=lambda prompt, n: f"move {n % 5} 🙂")
    venv = AgentVectorEnv([lambda: ChattyEnv(max_len=5)] * 4, group_size=2)
    if how == "implicit":
        kwargs: dict[str, object] = {"history_turns": history}
    else:
        kwargs = {"scaffold": history_window(history)}
    episodes = collect(engine, venv, 8, seed=11, max_tokens=6, **kwargs)  # type: ignore[arg-type]
    venv.close()
    assert fingerprint(episodes) == BEFORE_SCAFFOLDS[history]


def spans_as_samples(episodes: list[Episode]) -> Counter[Sample]:
    """(prompt ids in the turn's context, sampled ids, their logprobs) of every turn."""
    samples: Counter[Sample] = Counter()
    for e in episodes:
        for start, end in e.turn_spans:
            context = max(c for c, _ in e.contexts if c <= start)
            ids, logprobs = e.token_ids, e.logprobs
            sample = (tuple(ids[context:start]), tuple(ids[start:end]), tuple(logprobs[start:end]))
            samples[sample] += 1
    return samples


def shown_before(episode: Episode, turn: int, scaffold: Scaffold) -> list[Message]:
    """The recorded (scaffold's) messages turn ``turn`` should see under ``scaffold``'s window,
    with its memory of the turns before the window (a memory scaffold's)."""
    history = scaffold.history_turns
    assistants = [i for i, m in enumerate(episode.messages) if m["role"] == "assistant"]
    bounds = [*assistants, len(episode.messages)]
    reset = episode.messages[: bounds[0]]
    system = [m for m in reset if m["role"] == "system"]
    observations = [[m for m in reset if m["role"] != "system"]]
    observations += [episode.messages[a + 1 : b] for a, b in itertools.pairwise(bounds)]
    first = 0 if history is None else max(0, turn - history)
    memory: tuple[Message, ...] = ()
    if isinstance(scaffold, EpisodeMemory):
        memory = scaffold.memory_messages(episode.turns[:first])
    shown: list[Message] = [*system, *memory, *observations[first]]
    for j in range(first, turn):
        shown += [episode.messages[assistants[j]], *observations[j + 1]]
    return shown


@pytest.mark.parametrize("name", SCAFFOLDS)
def test_each_prompt_is_the_template_render_of_the_scaffold_messages(tok, name):
    scaffold = SCAFFOLDS[name]
    engine = ScriptedEngine(tok, reply=lambda prompt, n: f"Thought: t{n}\nAction: a{n} é")
    venv = AgentVectorEnv([lambda: ChattyEnv(max_len=5)] * 3)
    episodes = collect(engine, venv, 6, seed=4, max_tokens=32, scaffold=scaffold)
    venv.close()
    assert spans_as_samples(episodes) == calls_as_samples(engine.calls)
    assert max(len(e.turns) for e in episodes) >= 3
    for episode in episodes:
        check_alignment(episode)
        starts = [start for start, _ in episode.contexts] * len(episode.turn_spans)
        if scaffold.history_turns is not None:
            assert len(episode.contexts) == len(episode.turn_spans)
        for turn, (first, _) in enumerate(episode.turn_spans):
            start = starts[turn] if scaffold.history_turns is not None else 0
            shown = shown_before(episode, turn, scaffold)
            expected = render_text(tok, shown, tools=[TOOL], add_generation_prompt=True)
            assert tok.decode(episode.token_ids[start:first]) == expected
        if scaffold.history_turns is None and all(
            round_trips(tok, c.completion) for c in completions_of(episode, engine.calls)
        ):
            last = max(i for i, m in enumerate(episode.messages) if m["role"] == "assistant")
            full = render_ids(tok, episode.messages[: last + 1], tools=[TOOL])
            assert full[: len(episode.token_ids)] == episode.token_ids


@pytest.mark.parametrize("name", SCAFFOLDS)
@pytest.mark.parametrize("frozenlake", [True, False])
def test_sampled_ids_and_logprobs_match_a_teacher_forced_pass_under_every_scaffold(
    name, frozenlake
):
    model, tok = tiny()
    recorder = Recorder(HFEngine(model, tok, max_batch_size=8, seed=3))
    env = (
        AgentVectorEnv.from_id("agentgym/FrozenLake-v0", num_envs=2)
        if frozenlake
        else AgentVectorEnv([lambda: ChattyEnv(max_len=4)] * 2)
    )
    try:
        episodes = collect(
            recorder, env, 4, 5, max_turns=3, temperature=1.0, top_p=0.9, max_tokens=10,
            scaffold=SCAFFOLDS[name],
        )
    finally:
        env.close()
        run_sync(recorder.close())
    assert spans_as_samples(episodes) == calls_as_samples(recorder.calls)
    params = recorder.calls[0].sampling
    for episode in episodes:
        check_alignment(episode)
        sampled = torch.tensor(
            [lp for lp, m in zip(episode.logprobs, episode.loss_mask, strict=True) if m]
        )
        for start, end in episode.contexts:  # each context is a sequence of its own
            part = Episode(
                None,
                token_ids=episode.token_ids[start:end],
                loss_mask=episode.loss_mask[start:end],
                logprobs=episode.logprobs[start:end],
            )
            if not any(part.loss_mask):
                continue
            expected = teacher_forced(model, part, params)
            mask = part.loss_mask
            got = torch.tensor([lp for lp, m in zip(part.logprobs, mask, strict=True) if m])
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)
        assert len(sampled) == sum(end - start for start, end in episode.turn_spans)


def test_react_gives_the_env_the_action_and_the_model_the_observation(tok):
    replies = ["Thought: the goal is right.\nAction: ```right```\nObservation: I win", "no format"]
    engine = ScriptedEngine(tok, reply=lambda prompt, n: replies[n % 2])
    (episode,) = collect(
        engine, "agentgym/FrozenLake-v0", 1, seed=0, max_turns=2, max_tokens=64,
        env_kwargs={"tool": False, "size": 4, "hole_prob": 0.0}, scaffold=ReActScaffold(),
    )
    first, second = episode.turns
    assert first.info["invalid_action"] is False  # the env got "```right```" alone
    assert second.info["invalid_action"] is True  # no Action line: the env got ""
    assert first.action["content"] == replies[0]  # the model's text, as it wrote it
    system = episode.messages[0]
    assert system["role"] == "system"
    assert system["content"].endswith(ReActScaffold().instructions)
    observed = [m for m in episode.messages if m["content"].startswith("Observation: ")]
    assert [m["content"] for m in observed] == [
        "Observation: " + "\n".join(m["content"] for m in t.observation) for t in episode.turns
    ]
    assert all(not m["content"].startswith("Observation") for t in episode.turns
               for m in t.observation)  # the turns keep what the env said


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("Thought: hm\nAction: left", "left"),
        ("Action: up\nThought: no\n  Action:  ```down```  ", "```down```"),
        ("Thought: x\nAction: right\nObservation: you won\nAction: up", "up"),
        ("Thought: x\nAction: right\nObservation: you won", "right"),
        ("I will say Action: left inline", ""),
        ("", ""),
    ],
)
def test_react_reads_the_last_action_line(text, action):
    assert ReActScaffold().action(text) == action


def test_react_messages():
    react = ReActScaffold(instructions="FORMAT")
    assert react.reset_messages((user("board"),), {}) == (
        {"role": "system", "content": "FORMAT"},
        user("board"),
    )
    step = (user("moved"), tool_message("", "c1", "move"), tool_message("ok", "c2", "move"))
    assert react.step_messages(step, {}) == (user("Observation: moved\nok"),)
    assert isinstance(react, Scaffold)
    assert isinstance(ChatScaffold(), Scaffold)


def test_bad_scaffold_arguments_raise_config_errors(tok):
    engine, venv = ScriptedEngine(tok), AgentVectorEnv([ChattyEnv])
    with pytest.raises(ConfigError, match="history_turns"):
        collect(engine, venv, 1, 0, history_turns=1, scaffold=ReActScaffold(history_turns=2))
    with pytest.raises(ConfigError, match="scaffold"):
        collect(engine, venv, 1, 0, scaffold="react")  # type: ignore[arg-type]
    venv.close()
    with pytest.raises(ConfigError, match="history_turns"):
        ReActScaffold(history_turns=-1)
    with pytest.raises(ConfigError, match="default, react or memory"):
        make_scaffold("recall")
    assert make_scaffold("react", 2) == ReActScaffold(history_turns=2)
    assert make_scaffold("memory") == MemoryScaffold(history_turns=0)
    assert make_scaffold("memory", 2) == MemoryScaffold(history_turns=2)


def test_the_trainers_collector_source_plays_through_its_scaffold(tok):
    from agentgym.rollout.collector_source import CollectorSource

    engine = ScriptedEngine(tok, reply=lambda prompt, n: "Thought: t\nAction: a")
    venv = AgentVectorEnv([lambda: ChattyEnv(max_len=3)] * 2, group_size=2)
    source = CollectorSource(engine, venv, group_size=2, scaffold=ReActScaffold(), max_tokens=16)
    episodes = source.collect(1)
    venv.close()
    assert len(episodes) == 2
    for episode in episodes:
        assert episode.messages[0]["content"].endswith(ReActScaffold().instructions)
        after = episode.messages[episode.messages.index(episode.turns[0].action) + 1]
        assert after["content"].startswith("Observation: ")


def test_a_scaffold_that_would_rewrite_constrained_replies_is_refused(tok):
    engine = ScriptedEngine(tok)
    with pytest.raises(Error, match="action_choices"):
        collect(
            engine, "agentgym/FrozenLake-v0", 1, 0, max_turns=1, action_choices=True,
            env_kwargs={"tool": False}, scaffold=ReActScaffold(),
        )  # fmt: skip
    (episode,) = collect(
        engine, "agentgym/FrozenLake-v0", 1, 0, max_turns=1, action_choices=True,
        env_kwargs={"tool": False}, scaffold=history_window(0),
    )  # fmt: skip
    assert episode.turn_choices
