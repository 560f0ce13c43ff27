"""The memory scaffold: the memory's exact text after scripted moves, folding and the env's
summary, one memory per episode when many play at once, and its bad arguments; ReAct's text
tool calls handed to the env as structured ones. (Token-exactness under the memory scaffold is
tested with the other scaffolds in test_scaffold.py.)"""

from __future__ import annotations

import pytest

from agentgym.core.types import Turn, assistant, tool_message, user
from agentgym.error import ConfigError
from agentgym.inference.chat import render_text
from agentgym.models import load_tokenizer
from agentgym.rollout import MemoryScaffold, ReActScaffold, collect
from agentgym.vector import AgentVectorEnv

from .toys import ScriptedEngine

OPEN_LAKE = {"tool": False, "size": 4, "hole_prob": 0.0}


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def test_the_memory_of_scripted_frozenlake_moves(tok):
    moves = ["left", "```right```", "go right!", "down", "down"]
    engine = ScriptedEngine(tok, reply=lambda prompt, n: moves[n])
    scaffold = MemoryScaffold(max_entries=3, excerpt_chars=40)
    (episode,) = collect(
        engine, "agentgym/FrozenLake-v0", 1, seed=0, max_turns=5, max_tokens=16,
        env_kwargs=OPEN_LAKE, scaffold=scaffold,
    )  # fmt: skip
    assert len(episode.turns) == 5
    assert len(episode.context_starts) == 5  # every turn a context of its own
    assert scaffold.memory_messages(episode.turns[:4]) == (
        user(
            "Earlier in this episode:\n"
            "turn 1: 1 action, 0 invalid, reward 0\n"
            "2. ```right``` -> You moved right.\n"
            "3. go right! -> Invalid action: no fenced block with... (reward -0.1)\n"
            "4. down -> You moved down."
        ),
    )
    # the last turn's context: system, the memory of turns 1-4, the latest observation
    start, end = episode.context_starts[-1], episode.turn_spans[-1][0]
    system, board = episode.messages[0], episode.turns[3].observation
    expected = render_text(
        tok, [system, *scaffold.memory_messages(episode.turns[:4]), *board],
        add_generation_prompt=True,
    )  # fmt: skip
    assert tok.decode(episode.token_ids[start:end]) == expected
    assert "1. left -> You moved left into the edge and stayed." in tok.decode(
        episode.token_ids[episode.context_starts[1] : episode.turn_spans[1][0]]
    )


def turn(action: str, said: str, reward: float = 0.0, **info: object) -> Turn:
    return Turn(assistant(action), (user(said),), reward, False, False, dict(info))


def test_folding_the_summary_and_the_excerpts():
    turns = [
        turn("a", "one", invalid_action=True, summary="old"),
        turn("b", "", -0.5),
        turn("c  \n d", "\n  first   line \nsecond", 1.0, summary=" at (2, 3) "),
    ]
    memory = MemoryScaffold(max_entries=1, excerpt_chars=8)
    (message,) = memory.memory_messages(turns)
    assert message["content"] == (
        "Earlier in this episode:\n"
        "turns 1-2: 2 actions, 1 invalid, reward -0.5\n"
        "3. c d -> first... (reward 1)\n"
        "Summary: at (2, 3)"
    )
    (every,) = MemoryScaffold(max_entries=4).memory_messages(turns)  # 4 > 3 turns: all listed
    assert [line[:3] for line in every["content"].splitlines()[1:4]] == ["1. ", "2. ", "3. "]
    (listed,) = MemoryScaffold(max_entries=5).memory_messages(turns[:2])
    assert listed["content"].splitlines()[1:] == [
        "1. a -> invalid action: one",
        "2. b -> (no answer) (reward -0.5)",
    ]  # the summary of the last turn only: turn 2 offers none
    (counted,) = MemoryScaffold(max_entries=0).memory_messages(turns)
    assert counted["content"].splitlines()[1:] == [
        "turns 1-3: 3 actions, 1 invalid, reward 0.5",
        "Summary: at (2, 3)",
    ]
    tool_turn = Turn(assistant(""), (tool_message("moved", "c1", "move"),), 0.0, False, False)
    (told,) = MemoryScaffold().memory_messages([tool_turn])
    assert told["content"].endswith("1. (empty reply) -> moved")
    assert MemoryScaffold().memory_messages([]) == ()


def test_episodes_played_at_once_keep_their_own_memories(tok):
    words = ["left", "right", "up", "down", "jump"]
    engine = ScriptedEngine(tok, reply=lambda prompt, n: words[(n * 7 // 3) % 5])
    venv = AgentVectorEnv.from_id("agentgym/FrozenLake-v0", num_envs=4, **OPEN_LAKE)
    scaffold = MemoryScaffold(max_entries=20)
    try:
        episodes = collect(engine, venv, 8, seed=3, max_turns=6, max_tokens=8, scaffold=scaffold)
    finally:
        venv.close()
    actions = [[t.action["content"] for t in e.turns] for e in episodes]
    assert len({tuple(a) for a in actions}) > 1  # the episodes played different moves
    checked = 0
    for episode, played in zip(episodes, actions, strict=True):
        starts = [*episode.context_starts]
        for k in range(1, len(episode.turns)):
            prompt = tok.decode(episode.token_ids[starts[k] : episode.turn_spans[k][0]])
            memory = prompt.split("Earlier in this episode:\n")[1].split("<|im_end|>")[0]
            assert [line.split(". ", 1)[1].split(" -> ")[0] for line in memory.splitlines()] == (
                played[:k]
            )
            checked += 1
    assert checked >= 8


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_entries": -1}, "max_entries"),
        ({"excerpt_chars": 3}, "excerpt_chars"),
        ({"history_turns": None}, "history_turns"),
        ({"history_turns": -2}, "history_turns"),
        ({"max_entries": True}, "max_entries"),
    ],
)
def test_bad_memory_arguments_raise_config_errors_naming_value_and_fix(kwargs, name):
    with pytest.raises(ConfigError, match=name) as caught:
        MemoryScaffold(**kwargs)
    assert repr(next(iter(kwargs.values()))) in str(caught.value)
    assert "pass an int" in str(caught.value)


@pytest.mark.parametrize("tool_calls", [True, False])
def test_react_can_hand_a_text_call_to_the_env_as_a_structured_tool_call(tok, tool_calls):
    reply = 'Thought: go right.\nAction: move(direction="right")'
    engine = ScriptedEngine(tok, reply=lambda prompt, n: reply)
    (episode,) = collect(
        engine, "agentgym/FrozenLake-v0", 1, seed=0, max_turns=1, max_tokens=64,
        env_kwargs={**OPEN_LAKE, "tool": True}, scaffold=ReActScaffold(tool_calls=tool_calls),
    )  # fmt: skip
    (played,) = episode.turns
    assert played.info["invalid_action"] is not tool_calls
    answer = played.observation[0]
    if tool_calls:  # the env ran its move tool and answered the call
        assert answer["role"] == "tool"
        assert answer["content"].startswith("You moved right")
    assert played.action["content"] == reply  # the model's text, as it wrote it
    shown = episode.messages[-1]["content"]
    assert shown.startswith("Observation: ")
    assert ("You moved right" in shown) is tool_calls


def test_react_tool_calls_leave_other_actions_as_text():
    react = ReActScaffold(tool_calls=True)
    assert react.action("Action: down") == "down"
    assert react.action("Action: move(direction=down)") == "move(direction=down)"  # not literal
    assert react.action("Action: a(x=1) b()") == "a(x=1) b()"
    (call,) = react.action("Action: look()")["tool_calls"]  # type: ignore[index]
    assert call["function"] == {"name": "look", "arguments": "{}"}
