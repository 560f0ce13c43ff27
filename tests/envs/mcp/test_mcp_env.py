"""MCPEnv against the toy server: results of every kind, concurrency, deadlines, failures, HTTP,
pooled sessions and process cleanup."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym.core.parsing import call_format
from agentgym.error import EnvStateError

TASKS = [{"id": "t", "prompt": "Add 2 and 3.", "answer": "5", "match": "number"}]


def make(server: dict[str, Any], **kwargs: Any) -> gym.Env:
    kwargs = {"tasks": TASKS, "call_timeout": 3.0, "probe_timeout": 2.0, **kwargs}
    return gym.make("agentgym/MCP-v0", servers=[server], **kwargs)


def calls(*pairs: tuple[str, dict[str, Any]]) -> str:
    return "".join(
        f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in pairs
    )


def contents(observation: tuple) -> list[str]:
    return [m["content"] for m in observation]


def first(step: tuple) -> str:
    """The content of the first message a step returned."""
    return str(step[0][0]["content"])


def test_tools_results_and_reward(toy: dict) -> None:
    env = make(toy)
    try:
        obs, info = env.reset(seed=0)
        names = [t["function"]["name"] for t in info["tools"]]
        assert {"echo", "add", "fail", "slow", "crash", "picture"} <= set(names)
        add = next(t for t in info["tools"] if t["function"]["name"] == "add")
        assert add["function"]["parameters"]["required"] == ["a", "b"]
        assert obs[-1]["content"] == "Add 2 and 3."
        obs, reward, terminated, truncated, info = env.step(
            calls(
                ("add", {"a": 2, "b": 3}), ("echo", {"text": "héllo"}), ("fail", {"message": "no"})
            )
        )
        assert [m["role"] for m in obs] == ["tool"] * 3
        assert json.loads(obs[0]["content"]) == {"sum": 5}  # structured content
        assert obs[1]["content"] == "héllo"
        assert obs[2]["content"].startswith("Error")
        assert "no" in obs[2]["content"]
        assert (reward, terminated, truncated, info["tool_calls"]) == (0.0, False, False, 3)
        obs, *_ = env.step(calls(("picture", {}), ("nope", {}), ("add", {"a": "x", "b": 1})))
        assert obs[0]["content"].startswith("[image: image/png")
        assert "unknown tool 'nope'" in obs[1]["content"]
        assert "invalid arguments for add" in obs[2]["content"]
        obs, reward, terminated, truncated, info = env.step("The sum is <answer>5</answer>")
        assert (contents(obs), reward, terminated, truncated) == (["Correct."], 1.0, True, False)
        assert info["reward_components"] == {"correct": 1.0}
        assert info["answer_correct"] is True
        with pytest.raises(EnvStateError):
            env.step("again")
        env.reset(seed=0)
        assert env.step("<answer>6</answer>")[1] == 0.0
    finally:
        env.close()


def test_structured_tool_calls_and_parsed_text_both_work(toy: dict) -> None:
    env = make(toy)
    try:
        env.reset(seed=0)
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "a1",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"text": "x"}'},
                }
            ],
        }
        obs, *_ = env.step(message)
        assert (obs[0]["content"], obs[0]["tool_call_id"]) == ("x", "a1")
    finally:
        env.close()


def test_the_calls_of_one_turn_run_concurrently(toy: dict) -> None:
    env = make(toy, call_timeout=20.0)
    try:
        env.reset(seed=0)
        # Each barrier call waits until 3 calls are inside the server at once.
        obs, *_ = env.step(calls(*[("barrier", {"parties": 3})] * 3))
        assert contents(obs) == ["together"] * 3
    finally:
        env.close()


def test_a_slow_call_times_out_and_the_episode_goes_on(toy: dict) -> None:
    env = make(toy, call_timeout=1.0)
    try:
        env.reset(seed=0)
        obs, _, _, truncated, info = env.step(calls(("slow", {"seconds": 60})))
        assert "did not answer within 1 s" in obs[0]["content"]
        assert (truncated, info["infra_error"]) == (False, False)
        assert info["timed_out"] is True  # the model's call hung: scored, never dropped
        obs, _, _, _, info = env.step(calls(("echo", {"text": "still here"})))
        assert first((obs, info)) == "still here"
        assert (info["timed_out"], info["invalid_action"]) == (False, False)
        # Only format errors (an unknown tool, arguments that break the schema): invalid.
        _, _, _, _, info = env.step(calls(("no_such_tool", {}), ("echo", {"txt": "x"})))
        assert (info["invalid_action"], info["timed_out"]) == (True, False)
    finally:
        env.close()


@pytest.mark.parametrize(("tool", "arguments"), [("crash", {}), ("freeze", {"seconds": 60})])
def test_a_crashed_or_hung_server_is_an_infra_error_and_reset_recovers(
    toy: dict, tool: str, arguments: dict, child_pids: Any
) -> None:
    env = make(toy, call_timeout=1.0, probe_timeout=1.0)
    try:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(calls((tool, arguments)))
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert info["infra_error"] is True
        assert info["truncation_reason"] == "infra_error"
        assert "not your fault" in obs[0]["content"]
        env.reset(seed=0)
        assert json.loads(first(env.step(calls(("add", {"a": 1, "b": 1}))))) == {"sum": 2}
    finally:
        env.close()
    assert child_pids("toy_server") == []


def test_killing_the_server_mid_episode(toy: dict) -> None:
    env = make(toy)
    try:
        env.reset(seed=0)
        pid = int(first(env.step(calls(("pid", {})))))
        os.kill(pid, signal.SIGKILL)
        *_, truncated, info = env.step(calls(("echo", {"text": "x"})))
        assert truncated
        assert info["infra_error"]
        env.reset(seed=0)
        assert int(first(env.step(calls(("pid", {}))))) != pid
    finally:
        env.close()


def test_each_episode_gets_a_fresh_server_and_close_leaves_no_child(
    toy: dict, child_pids: Any
) -> None:
    env = make(toy)
    try:
        counts = []
        for seed in range(2):
            env.reset(seed=seed)
            env.step(calls(("count", {})))
            counts.append(first(env.step(calls(("count", {})))))
        assert counts == ["2", "2"]  # clean state on every reset
        assert len(child_pids("toy_server")) == 1
    finally:
        env.close()
    assert child_pids("toy_server") == []


def test_pooled_sessions_share_one_server(toy: dict, child_pids: Any) -> None:
    envs = [make(toy, session="pooled") for _ in range(3)]
    try:
        pids = set()
        for env in envs:
            env.reset(seed=0)
            pids.add(first(env.step(calls(("pid", {})))))
        assert len(pids) == 1
        assert len(child_pids("toy_server")) == 1
    finally:
        for env in envs:
            env.close()
    assert child_pids("toy_server") == []


def test_streamable_http(toy_url: str) -> None:
    env = make({"url": toy_url})
    try:
        _, info = env.reset(seed=0)
        assert "add" in [t["function"]["name"] for t in info["tools"]]
        obs, *_ = env.step(calls(("add", {"a": 2, "b": 3}), ("fail", {"message": "bad"})))
        assert json.loads(obs[0]["content"]) == {"sum": 5}
        assert obs[1]["content"].startswith("Error")
        assert env.step("<answer>5</answer>")[1] == 1.0
    finally:
        env.close()


def test_two_servers_with_prefixes(toy: dict) -> None:
    servers = [{**toy, "name": "one", "prefix": "one_"}, {**toy, "name": "two", "prefix": "two_"}]
    env = gym.make("agentgym/MCP-v0", servers=servers, tasks=TASKS)
    try:
        _, info = env.reset(seed=0)
        names = {t["function"]["name"] for t in info["tools"]}
        assert {"one_echo", "two_echo"} <= names
        assert info["servers"] == ["one", "two"]
        obs, *_ = env.step(calls(("one_pid", {}), ("two_pid", {})))
        assert obs[0]["content"] != obs[1]["content"]
    finally:
        env.close()


def test_max_turns_truncates(toy: dict) -> None:
    env = make(toy, max_turns=2)
    try:
        env.reset(seed=0)
        assert env.step(calls(("echo", {"text": "a"})))[3] is False
        *_, truncated, info = env.step(calls(("echo", {"text": "b"})))
        assert truncated
        assert info["truncation_reason"] == "max_turns"
    finally:
        env.close()


@pytest.mark.parametrize(
    ("parser", "action"),
    [
        ("hermes", calls(("add", {"a": 2, "b": 3}))),
        ("json", json.dumps({"name": "add", "arguments": {"a": 2, "b": 3}})),
    ],
    ids=["hermes", "json"],
)
def test_the_system_message_says_how_to_write_a_tool_call(
    toy: dict, parser: str, action: str
) -> None:
    """The prompt named no syntax for a call in text; now it is the selected parser's."""
    env = make(toy, tool_parser=parser)
    try:
        obs, _ = env.reset(seed=0)
        assert obs[0]["role"] == "system"
        assert obs[0]["content"].endswith(call_format(parser))
        assert json.loads(first(env.step(action))) == {"sum": 5}  # written that way, it runs
    finally:
        env.close()
