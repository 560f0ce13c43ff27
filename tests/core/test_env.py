"""AgentEnv: the tool plumbing, seeding, the sync adapter and the closed state."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from agentgym.core import (
    AgentEnv,
    Observation,
    StepResult,
    ToolCallFailed,
    assistant,
    tool,
    tool_call,
    user,
)
from agentgym.error import ConfigError, EnvDefinitionError, EnvStateError, UnknownParserError


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


@tool
async def slow() -> str:
    """Take far longer than the tool timeout."""
    await asyncio.sleep(10)
    return "too late"


ARRIVED: list[int] = []


@tool
async def rendezvous() -> str:
    """Wait until three calls are running at the same time."""
    ARRIVED.append(1)
    while len(ARRIVED) < 3:  # calls run one after another would never get past this
        await asyncio.sleep(0.001)
    return "met"


@tool
def crash() -> str:
    """Fail with a bug."""
    raise ZeroDivisionError("division by zero")


@tool
def refuse(reason: str) -> str:
    """Refuse, reporting the model's mistake.

    Args:
        reason: why.
    """
    raise ToolCallFailed(reason)


class ToolEnv(AgentEnv):
    """Answers every tool call; the task number comes from the seeded generator."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(tools=[add, slow, crash, refuse], tool_timeout=0.2, **kwargs)
        self.closed_count = 0

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        self.task = int(self.np_random.integers(0, 1_000_000))
        return (user(f"task {self.task}"),), {"tools": self.tool_schemas()}

    async def astep(self, action: Any) -> StepResult:
        messages = await self.run_tool_calls(self.parse(action))
        return messages, 0.0, False, False, {}

    async def aclose(self) -> None:
        self.closed_count += 1
        await super().aclose()


def _hermes(name: str, arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture
def env() -> ToolEnv:
    env = ToolEnv()
    env.reset(seed=0)
    return env


def test_run_tool_calls_answers_every_call_in_order(
    env: ToolEnv, caplog: pytest.LogCaptureFixture
) -> None:
    action = "".join(
        [
            _hermes("slow", {}),
            _hermes("add", {"a": 2, "b": 3}),
            _hermes("nope", {}),
            _hermes("add", {"a": "two"}),
            "<tool_call>{broken</tool_call>",
            _hermes("crash", {}),
            _hermes("refuse", {"reason": "not allowed"}),
        ]
    )
    obs, *_ = env.step(action)
    assert [(m["tool_call_id"], m["name"]) for m in obs] == [
        ("call_1_0", "slow"),
        ("call_1_1", "add"),
        ("call_1_2", "nope"),
        ("call_1_3", "add"),
        ("call_1_4", "invalid"),
        ("call_1_5", "crash"),
        ("call_1_6", "refuse"),
    ]
    contents = [m["content"] for m in obs]
    assert contents[0] == "Error: tool slow did not finish within its 0.2 s deadline"
    assert contents[1] == "5"
    assert contents[2] == "Error: unknown tool 'nope'; available tools: add, slow, crash, refuse"
    assert contents[3].startswith("Error: invalid arguments for add: ")
    assert "'b' is a required property" in contents[3]
    assert contents[4].startswith("Error: malformed tool call: the tool call is not valid JSON")
    assert contents[5] == "Error: tool crash failed: ZeroDivisionError: division by zero"
    assert contents[6] == "Error: not allowed"
    assert all(m["role"] == "tool" for m in obs)
    assert obs in env.observation_space
    assert "tool crash raised" in caplog.text  # a tool bug is logged loudly


def test_tools_run_concurrently() -> None:
    ARRIVED.clear()
    env = ToolEnv()
    env.tools = (rendezvous,)
    env.tool_timeout = 5.0
    env.reset()
    obs = asyncio.run(env.run_tool_calls(env.parse(_hermes("rendezvous", {}) * 3)))
    assert [m["content"] for m in obs] == ["met", "met", "met"]


def test_structured_calls_are_answered_with_their_ids(env: ToolEnv) -> None:
    obs, *_ = env.step(assistant(None, [tool_call("mine", "add", {"a": 1, "b": 1})]))
    assert obs == ({"role": "tool", "content": "2", "tool_call_id": "mine", "name": "add"},)


def test_call_ids_are_unique_within_an_episode(env: ToolEnv) -> None:
    first, *_ = env.step(_hermes("add", {"a": 1, "b": 1}))
    second, *_ = env.step(_hermes("add", {"a": 1, "b": 1}))
    assert first[0]["tool_call_id"] != second[0]["tool_call_id"]


def test_huge_model_output_is_not_echoed_back(env: ToolEnv) -> None:
    obs, *_ = env.step(_hermes("x" * 1_000_000, {}) + _hermes("add", {"a": "y" * 1_000_000}))
    assert sum(len(m["content"]) + len(m["name"]) for m in obs) < 10_000


def test_tool_schemas_are_fresh_copies_of_the_declared_tools(env: ToolEnv) -> None:
    schemas = env.tool_schemas()
    assert [s["function"]["name"] for s in schemas] == ["add", "slow", "crash", "refuse"]
    schemas[0]["function"]["parameters"]["properties"].clear()
    assert env.tool_schemas()[0] == add.schema()


def test_spaces_know_the_tool_names(env: ToolEnv) -> None:
    assert env.action_space.tool_names == ("add", "slow", "crash", "refuse")


def test_seeding_goes_through_super_areset() -> None:
    env = ToolEnv()
    assert env.reset(seed=7)[0] == env.reset(seed=7)[0]
    tasks = {env.reset(seed=s)[0][0]["content"] for s in range(5)}
    assert len(tasks) == 5


def test_close_is_idempotent_and_reset_after_close_raises() -> None:
    env = ToolEnv()
    env.reset(seed=0)
    env.close()
    env.close()
    assert env.closed_count == 1
    with pytest.raises(EnvStateError, match="closed"):
        env.reset()


def test_render_ansi_shows_the_last_observation() -> None:
    env = ToolEnv(render_mode="ansi")
    env.reset(seed=3)
    assert env.render() == f"[user]\ntask {env.task}"


def test_render_human_prints(capsys: pytest.CaptureFixture[str]) -> None:
    env = ToolEnv(render_mode="human")
    env.reset(seed=3)
    assert env.render() is None
    assert capsys.readouterr().out == f"[user]\ntask {env.task}\n"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"render_mode": "rgb_array"}, ConfigError, "render_mode"),
        ({"tool_timeout": 0}, ConfigError, "tool_timeout"),
        ({"tool_parser": "hermez"}, UnknownParserError, "Did you mean 'hermes'"),
    ],
)
def test_bad_constructor_arguments_raise(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        AgentEnv(**kwargs)


def test_a_class_without_either_step_fails_at_construction_naming_both_styles() -> None:
    class Empty(AgentEnv):
        pass

    with pytest.raises(EnvDefinitionError, match=r"async def astep.*def step\(self, action\)"):
        Empty()
    with pytest.raises(TypeError):  # what Gymnasium code expects of a bad class
        AgentEnv()


# --- the step-after-end guard: written once in AgentEnv, for both styles ----------------------


class _Script:
    """Steps by the action: "end" terminates, "cut" truncates, "boom" raises, "hang" waits for
    ``release``; anything else continues. ``reset(options={"fail": True})`` raises."""

    def _reset(self, options: dict[str, Any] | None) -> tuple[Observation, dict[str, Any]]:
        if options and options.get("fail"):
            raise RuntimeError("reset failed")
        return (user("go"),), {"tools": []}

    def _step(self, action: str) -> StepResult:
        if action == "boom":
            raise RuntimeError("step failed")
        return (user("ok"),), 0.0, action == "end", action == "cut", {}


class AsyncScript(_Script, AgentEnv):
    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        return self._reset(options)

    async def astep(self, action: str) -> StepResult:
        if action == "hang":
            await asyncio.Event().wait()
        return self._step(action)


class SyncScript(_Script, AgentEnv):
    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        return self._reset(options)

    def step(self, action: str) -> StepResult:
        if action == "hang":
            self.release.wait(60)
        return self._step(action)


STYLES = [AsyncScript, SyncScript]


@pytest.mark.parametrize("style", STYLES)
def test_the_base_refuses_a_step_before_reset_after_the_end_and_after_close(
    style: type[AgentEnv],
) -> None:
    env = style()
    name = style.__name__
    with pytest.raises(EnvStateError, match=rf"^{name}.step\(\) called before reset\(\); call"):
        env.step("go")
    for last in ("end", "cut"):
        env.reset(seed=0)
        assert env.step("go")[2:4] == (False, False)
        env.step(last)
        with pytest.raises(EnvStateError, match=r"after the episode ended; call reset\(\) first"):
            env.step("go")
    env.reset(seed=0)
    assert env.step("go")[0] == (user("ok"),)  # a reset starts a new episode
    env.close()
    with pytest.raises(EnvStateError, match=rf"^{name} was closed; make a new env"):
        env.step("go")


@pytest.mark.parametrize("style", STYLES)
def test_the_base_refuses_a_step_after_a_step_or_a_reset_that_raised(
    style: type[AgentEnv],
) -> None:
    env = style()
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match="step failed"):
        env.step("boom")
    with pytest.raises(EnvStateError, match="its last step was cancelled or failed midway"):
        env.step("go")
    with pytest.raises(RuntimeError, match="reset failed"):
        env.reset(seed=0, options={"fail": True})
    with pytest.raises(EnvStateError, match=r"after a reset\(\) that raised"):
        env.step("go")
    env.reset(seed=0)
    env.step("go")


@pytest.mark.parametrize("style", STYLES)
def test_the_guard_holds_through_the_async_api(style: type[AgentEnv]) -> None:
    env = style()

    async def play() -> None:
        with pytest.raises(EnvStateError, match="before reset"):
            await env.astep("go")
        await env.areset(seed=0)
        await env.astep("end")
        with pytest.raises(EnvStateError, match="after the episode ended"):
            await env.astep("go")

    asyncio.run(play())


@pytest.mark.parametrize("style", STYLES)
def test_a_cancelled_step_ends_the_episode(style: type[AgentEnv]) -> None:
    env = style()
    env.reset(seed=0)

    async def give_up() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(env.astep("hang"), 0.05)  # "hang" waits until released

    asyncio.run(give_up())
    if isinstance(env, SyncScript):
        env.release.set()  # the abandoned step ends in its thread, and changes nothing
    with pytest.raises(EnvStateError, match="its last step was cancelled"):
        env.step("go")
