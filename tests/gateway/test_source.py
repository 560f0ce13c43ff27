"""``AgentProgramSource``: agent programs as GRPO groups, with the outcome rules of envs, and
``fit`` training through it."""

from __future__ import annotations

import asyncio
import json
import re
from fractions import Fraction

import pytest
import torch

from agentgym import models
from agentgym.core import aio
from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.gateway import source as source_module
from agentgym.gateway.app import Gateway
from agentgym.gateway.source import AgentProgramSource, load_program
from agentgym.inference import HFEngine
from agentgym.inference.base import Completion

torch.set_num_threads(1)


async def behaving(client, task: dict) -> float:
    """Does what its task says: answer (twice), raise, hang, or never call the model."""
    kind = task["kind"]
    if kind == "silent":
        return 1.0
    if kind == "raises":
        raise RuntimeError("the tool server is down")
    messages = [{"role": "user", "content": task["question"]}]
    out = await client.chat.completions.create(
        model="agentgym-tiny", messages=messages, max_tokens=3
    )
    if kind == "hangs":
        await asyncio.sleep(60)
    messages += [out.choices[0].message, {"role": "user", "content": "Sure?"}]
    out = await client.chat.completions.create(
        model="agentgym-tiny", messages=messages, max_tokens=3
    )
    return float(len(out.choices[0].message.content or ""))


@pytest.fixture(scope="module")
def engine():
    model, tok = models.load(seed=0)
    return HFEngine(model, tok, seed=0), tok


def test_programs_play_as_groups_with_the_outcomes_of_envs(engine):
    engine, tok = engine
    tasks = [
        {"task_id": "a", "kind": "answers", "question": "1 + 1?"},
        {"task_id": "r", "kind": "raises", "question": "-"},
        {"task_id": "h", "kind": "hangs", "question": "2 + 2?"},
        {"task_id": "s", "kind": "silent", "question": "-"},
    ]
    source = AgentProgramSource(engine, tok, behaving, tasks, group_size=2, deadline=1.0)
    episodes = source.collect(4)
    assert [e.group for e in episodes] == [0, 0, 1, 1, 2, 2, 3, 3]
    by_task = {e.reset_info["task_id"]: e for e in episodes}
    answered = by_task["a"]
    assert answered.outcome == "failed"
    assert answered.trainable
    assert len(answered.turns) == 2
    assert answered.context_starts == []
    assert answered.total_reward == float(
        len(
            tok.decode(answered.token_ids[slice(*answered.turn_spans[1])], skip_special_tokens=True)
        )
    )
    assert by_task["r"].outcome == "infra"
    assert not by_task["r"].trainable
    assert "RuntimeError: the tool server is down" in by_task["r"].cause
    hung = by_task["h"]
    assert hung.outcome == "timeout"
    assert hung.total_reward == 0.0
    assert len(hung.turns) == 1
    assert by_task["s"].outcome == "infra"
    assert "never called the model" in by_task["s"].cause
    assert source.stats["programs/no_model_call"] == 4.0  # silent and raised ones
    assert source.seen_tasks == {"a", "r", "h", "s"}
    state = source.state_dict()
    assert state["position"] == 4
    again = AgentProgramSource(engine, tok, behaving, tasks, group_size=2)
    again.load_state_dict(state)
    assert [again.task_at(4 + j) for j in range(4)] == [source.task_at(4 + j) for j in range(4)]


def test_an_env_grades_the_programs_answer(engine):
    engine, tok = engine

    async def solver(client, task: dict) -> str:
        out = await client.chat.completions.create(
            model="agentgym-tiny", messages=task["messages"], max_tokens=4
        )
        if not task["solve"]:
            return out.choices[0].message.content
        a, b = re.search(r"(\d+)/(\d+)", task["messages"][-1]["content"]).groups()
        answer = Fraction(int(a), int(b))
        return f"So \\boxed{{{answer.numerator}/{answer.denominator}}}."

    tasks = [{"seed": 0, "solve": True}, {"seed": 0, "solve": False}]  # a fraction to simplify
    source = AgentProgramSource(engine, tok, solver, tasks, group_size=1, reward="agentgym/Math-v0")
    episodes = sorted(source.collect(2), key=lambda e: e.turns[-1].info.get("success", False))
    assert all(e.env_id == "agentgym/Math-v0" and len(e.turns) == 1 for e in episodes)
    assert [e.outcome for e in episodes] == ["invalid", "success"]  # no boxed answer: invalid
    assert [e.total_reward for e in episodes] == [0.0, 1.0]


def test_bad_programs_and_tasks_are_refused_with_the_fix(tmp_path):
    def not_async(client, task):
        return 1.0

    with pytest.raises(ConfigError, match="async def agent"):
        load_program(not_async)
    with pytest.raises(ConfigError, match="module:function"):
        load_program("no_colon")
    with pytest.raises(ConfigError, match="cannot be loaded"):
        load_program("json:no_such_function")
    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"q": 1}\nnot json\n')
    with pytest.raises(ConfigError, match=r"tasks\.jsonl:2"):
        AgentProgramSource(None, None, behaving, bad, group_size=1)
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"q": i}) + "\n" for i in range(3)))
    assert len(AgentProgramSource(None, None, behaving, good, group_size=1).tasks) == 3
    with pytest.raises(ConfigError, match="reward is not an env id"):
        AgentProgramSource(None, None, behaving, good, group_size=1, env_kwargs={"sandbox": "x"})


async def tool_loop(client, task: dict) -> float:
    """A plain OpenAI-SDK tool-calling loop; the reward: how much text it wrote (a signal that
    differs within a group)."""
    tools = [{"type": "function", "function": {"name": "calc", "parameters": {}}}]
    messages: list = [{"role": "user", "content": task["question"]}]
    written = ""
    for _ in range(2):
        out = await client.chat.completions.create(
            model="agentgym-tiny", messages=messages, tools=tools, max_tokens=6, temperature=1.0
        )
        message = out.choices[0].message
        written += message.content or ""
        messages.append(message)
        for call in message.tool_calls or ():
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "7"})
        if not message.tool_calls:
            messages.append({"role": "user", "content": "Check it."})
    return float(len(written))


@pytest.mark.slow  # 14-30 s on 2 shared cores
def test_fit_trains_an_sdk_agent_through_the_gateway():
    from agentgym.trainers import fit, make
    from agentgym.trainers.colocate import colocated_engine

    config = {"group_size": 4, "batch_size": 8, "learning_rate": 1e-3, "temperature": 1.0}
    trainer = make("grpo", policy=models.load(seed=0), config=config)
    engine, _ = colocated_engine(trainer, "cpu")
    before = {k: v.clone() for k, v in trainer.module.policy.state_dict().items()}
    tasks = [{"task_id": str(i), "question": f"What is {i} * 3?"} for i in range(4)]
    source = AgentProgramSource(engine, trainer.tokenizer, tool_loop, tasks, group_size=4)
    seen: list[list[Episode]] = []
    collect = source.collect
    source.collect = lambda n: seen.append(collect(n)) or seen[-1]  # type: ignore[method-assign]
    history = fit(trainer, source, steps=2, engine=engine)
    assert trainer.step_count == 2
    assert len(history) == 2
    after = trainer.module.policy.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    # Each batch was sampled by the policy of its step: versions 0, then 1.
    assert [{v for e in batch for v in e.weight_versions} for batch in seen] == [{0}, {1}]
    assert all(e.trainable and len(e.turns) == 2 for batch in seen for e in batch)


@pytest.mark.slow  # ~25 s on 2 shared cores
def test_agentgym_train_trains_an_agent_program_by_name(tmp_path, capsys):
    from agentgym.cli import main

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task_id": i, "question": f"{i}?"}) + "\n" for i in "ab"))
    out = tmp_path / "run"
    argv = ["train", "--agent", "tests.gateway.agents:chatter", "--tasks", str(tasks)]
    argv += ["--steps", "2", "--out", str(out), "--no-progress", "--checkpoint-every", "2"]
    argv += ["--set", "group_size=2", "--set", "batch_size=4"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    assert json.loads((out / "run.json").read_text())["run"]["agent"] == argv[2]
    assert json.loads((out / "summary.json").read_text())["steps"] == 2
    # The run's trace holds the programs' episodes as it holds an env's (docs/traces.md).
    from agentgym.rollout import traces

    traced = traces.read(out)
    assert sorted(set(traced["update"])) == [1, 2]
    assert set(traced["outcome"]) <= {"success", "failed", "timeout"}
    assert all(len(ids) > 0 for ids in traced["token_ids"])
    assert main(["train", "--agent", "tests.gateway.agents:chatter", "--out", str(out)]) == 2
    assert "tasks=None: is needed" in capsys.readouterr().err


def test_a_curriculum_picks_the_tasks_and_is_checkpointed(engine):
    engine, tok = engine
    tasks = [
        {"task_id": f"{level}-{k}", "difficulty": level, "kind": "answers", "question": "?"}
        for level in (1, 2)
        for k in range(3)
    ]
    source = AgentProgramSource(
        engine, tok, behaving, tasks, group_size=1, curriculum="schedule", seed=3
    )
    episodes = source.collect(4)
    assert {e.reset_info["task_id"][0] for e in episodes} == {"1"}  # the easiest level first
    state = source.state_dict()
    assert "curriculum" in state
    again = AgentProgramSource(
        engine, tok, behaving, tasks, group_size=1, curriculum="schedule", seed=3
    )
    again.load_state_dict(state)
    assert again.curriculum.state_dict() == source.curriculum.state_dict()
    with pytest.raises(ConfigError, match="curriculum"):
        AgentProgramSource(engine, tok, behaving, tasks, group_size=1, curriculum="hardest")


class StallingEngine:
    """Answers at once, except a prompt that holds ``stall``: that call never answers. Counts
    the calls that started, ended and were cancelled."""

    def __init__(self, tokenizer, stall: str) -> None:
        self.tokenizer, self.stall = tokenizer, stall
        self.started = self.ended = self.cancelled = 0

    async def generate(self, prompt, sampling) -> Completion:
        self.started += 1
        try:
            if self.stall in self.tokenizer.decode(prompt):
                await asyncio.Event().wait()  # forever, until cancelled
            ids = self.tokenizer.encode("fine", add_special_tokens=False)
            return Completion(ids, [-0.5] * len(ids), "length", text="fine")
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.ended += 1


@pytest.mark.parametrize("stall", ["Sure?", "1 + 1?"], ids=["second-call", "first-call"])
def test_a_program_blocked_in_a_model_call_at_its_deadline_is_cancelled(stall, engine, monkeypatch):
    _, tok = engine  # its tokenizer; the engine here is the stalling one
    stalling = StallingEngine(tok, stall)
    gateways: list[Gateway] = []

    class Recorded(Gateway):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            gateways.append(self)

    monkeypatch.setattr(source_module, "Gateway", Recorded)
    tasks = [{"task_id": "a", "kind": "answers", "question": "1 + 1?"}]
    source = AgentProgramSource(stalling, tok, behaving, tasks, group_size=2, deadline=0.5)
    episodes = source.collect(1)

    assert stalling.cancelled == 2  # each program's blocked call was cancelled ...
    assert stalling.ended == stalling.started  # ... and no call of the engine is left running
    loop = aio._thread_loop()
    assert [t for t in asyncio.all_tasks(loop) if not t.done()] == []
    [gateway] = gateways
    assert gateway.sessions == {}  # both sessions closed ...
    assert len(gateway.closed) == 2  # ... and later calls to them are answered 409
    for episode in episodes:
        cause = episode.turns[-1].info["error"] if episode.turns else episode.cause
        assert "ran past its deadline of 0.5 s" in str(cause)
        if stall == "Sure?":  # blocked in its second call: scored on the first, reward 0
            assert episode.outcome == "timeout"
            assert len(episode.turns) == 1
            assert episode.total_reward == 0.0
            assert episode.trainable
        else:  # no call answered: nothing to train on, dropped with the cause
            assert episode.outcome == "infra"
            assert episode.turns == []
            assert not episode.trainable
            assert "before any model call answered" in str(cause)
    assert source.stats.get("programs/timeout", 0.0) == (2.0 if stall == "Sure?" else 0.0)
