"""agentgym/SWE-v0 on the local backend: reset, each tool, turn handling, validation, cleanup."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from swe_steps import call, step, submit

import agentgym
from agentgym.core import run_sync
from agentgym.core.parsing import call_format
from agentgym.envs.swe import SWEEnv, SWEInstance, as_action, gold_tool_calls, read_instances
from agentgym.error import ConfigError, EnvStateError, SandboxError
from agentgym.sandbox import Sandbox
from agentgym.utils import check_env

TOOLS = {"view", "search", "edit", "create", "bash", "run_tests", "submit"}


@pytest.fixture
def env(calc_jsonl: Path, local_only: None) -> Iterator[SWEEnv]:
    made = SWEEnv(tasks=str(calc_jsonl), sandbox="local", command_timeout=5)
    made.reset(seed=0)
    yield made
    made.close()


def test_reset_shows_the_problem_statement_and_declares_the_tools(
    calc_jsonl: Path, calc_record: dict[str, Any], local_only: None
) -> None:
    env = gym.make("agentgym/SWE-v0", tasks=str(calc_jsonl), sandbox="local")
    try:
        obs, info = env.reset(seed=1)
        again = env.reset(seed=1)
    finally:
        env.close()
    assert [m["role"] for m in obs] == ["system", "user"]
    assert obs[1]["content"] == calc_record["problem_statement"]
    assert {t["function"]["name"] for t in info["tools"]} == TOOLS
    assert info["task_id"] == "calc__calc-1"
    assert info["backend"] == "local"
    assert info["infra_error"] is False
    assert again == (obs, info)


def test_view_numbers_lines_lists_directories_and_reports_mistakes(env: SWEEnv) -> None:
    listing = call(env, "view", path=".")
    assert listing.splitlines()[:4] == ["calc/", "calc/__init__.py", "calc/ops.py", "tests/"]
    assert ".git" not in listing
    assert call(env, "view", path="calc/ops.py", start_line=5, end_line=6) == (
        "     5\tdef mean(values):\n     6\t    if not values:\n(lines 5-6 of 8)"
    )
    assert "does not exist" in call(env, "view", path="nope.py")
    assert "past the end" in call(env, "view", path="calc/ops.py", start_line=99)
    call(env, "bash", command="printf 'a\\0b' > blob.bin")
    assert "binary file" in call(env, "view", path="blob.bin")


def test_search_finds_lines_and_bounds_its_output(env: SWEEnv) -> None:
    found = call(env, "search", pattern="def mean")
    assert found == "calc/ops.py:5:def mean(values):"
    assert len(call(env, "search", pattern="mea+n\\(", regex=True).splitlines()) == 2
    assert call(env, "search", pattern="zzz_not_there").startswith("No matches")
    call(env, "bash", command="seq 1000 | sed 's/^/hit /' > many.txt")
    many = call(env, "search", pattern="hit", path="many.txt")
    assert many.count("\n") == 200
    assert "more than 200 matches" in many


def test_edit_replaces_one_exact_occurrence(env: SWEEnv) -> None:
    twice = call(env, "edit", path="calc/ops.py", old_str="return", new_str="yield")
    assert "occurs 2 times" in twice
    assert "lines 2, 8" in twice
    missing = call(env, "edit", path="calc/ops.py", old_str="return  a + b", new_str="x")
    assert "was not found" in missing
    assert "empty" in call(env, "edit", path="calc/ops.py", old_str="", new_str="x")
    assert "not a file" in call(env, "edit", path="calc/nope.py", old_str="a", new_str="b")
    done = call(env, "edit", path="calc/ops.py", old_str="a + b", new_str="b + a")
    assert done.startswith("Edited calc/ops.py")
    assert "     2\t    return b + a" in done
    assert "b + a" in call(env, "bash", command="git diff")


def test_create_refuses_an_existing_file_unless_asked(env: SWEEnv) -> None:
    assert "Created calc/sub/new.py (2 lines)" in call(
        env, "create", path="calc/sub/new.py", content="x = 1\ny = 2\n"
    )
    refused = call(env, "create", path="calc/ops.py", content="")
    assert "already exists" in refused
    assert "overwrite" in refused
    assert call(env, "create", path="calc/ops.py", content="z = 3\n", overwrite=True).startswith(
        "Replaced"
    )
    assert call(env, "view", path="calc/ops.py") == "     1\tz = 3"


def test_bash_reports_output_exit_code_and_timeouts(env: SWEEnv) -> None:
    answer = call(env, "bash", command="echo out; echo err >&2; cd calc; exit 3")
    assert answer == "out\n[stderr]\nerr\n(exit code 3)"
    assert call(env, "bash", command="pwd").endswith("/repo\n(exit code 0)")  # a fresh shell
    slow, _, _, _, info = step(env, ("bash", {"command": "sleep 60 & sleep 60"}))
    assert "timed out after 5 s" in slow[0]["content"]
    assert info["timed_out"] is True  # the model's own sleep: scored, never dropped
    assert info["infra_error"] is False
    alive, _, _, _, info = step(env, ("bash", {"command": "echo alive"}))
    assert alive[0]["content"] == "alive\n(exit code 0)"
    assert (info["timed_out"], info["invalid_action"]) == (False, False)
    assert "no network" not in call(env, "bash", command="python3 -c 'print(1)'")


def test_run_tests_runs_pytest_on_given_ids(env: SWEEnv) -> None:
    whole = call(env, "run_tests")
    assert "2 passed" in whole
    assert whole.endswith("(exit code 0)")
    one = call(env, "run_tests", tests=["tests/test_ops.py::test_add"])
    assert "1 passed" in one
    assert "exit code 4" in call(env, "run_tests", tests=["tests/test_nope.py"])


def test_malformed_unknown_and_missing_calls_are_observations(env: SWEEnv) -> None:
    obs, reward, terminated, truncated, info = env.step("<tool_call>{not json</tool_call>")
    assert "malformed" in obs[0]["content"]
    assert not terminated
    assert not truncated
    assert info["invalid_action"] is True
    (answer,), _, _, _, info = step(env, ("rm_rf", {}))
    assert "unknown tool" in answer["content"]
    assert info["invalid_action"] is True
    (answer,), _, _, _, info = step(env, ("view", {"path": 3}))
    assert "invalid arguments" in answer["content"]
    assert info["invalid_action"] is True
    obs, reward, terminated, truncated, info = env.step("I think the bug is in mean().")
    assert obs[0]["role"] == "user"
    assert "No tool call" in obs[0]["content"]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["invalid_action"] is True
    # One valid call beside a malformed one: the step did something, it is not void.
    _, _, _, _, info = step(env, ("view", {"path": 3}), ("view", {"path": "calc"}))
    assert info["invalid_action"] is False


def test_calls_of_one_turn_run_in_order(env: SWEEnv) -> None:
    obs, *_ = step(
        env,
        ("create", {"path": "notes.txt", "content": "one\n"}),
        ("edit", {"path": "notes.txt", "old_str": "one", "new_str": "two"}),
        ("view", {"path": "notes.txt"}),
    )
    assert [m["name"] for m in obs] == ["create", "edit", "view"]
    assert obs[2]["content"] == "     1\ttwo"


def test_calls_after_submit_in_the_same_turn_do_not_run(env: SWEEnv) -> None:
    obs, reward, terminated, _, info = step(
        env, ("submit", {}), ("create", {"path": "late.txt", "content": "x"})
    )
    assert terminated
    assert reward == 0.0
    assert "already submitted" in obs[1]["content"]
    assert "late.txt" not in info["agent_diff"]


def test_the_system_message_says_how_to_write_a_tool_call(env: SWEEnv) -> None:
    obs, _ = env.reset(seed=0)
    assert obs[0]["role"] == "system"
    assert obs[0]["content"].endswith(call_format("hermes"))
    assert "<tool_call>" in obs[0]["content"]


def test_submit_says_submitted_once(env: SWEEnv) -> None:
    """The submit tool answered "Submitted." and the verdict began with it again."""
    obs, _, terminated, _, _ = step(env, ("submit", {}))
    assert terminated
    assert [m["role"] for m in obs] == ["tool", "user"]
    assert obs[0]["content"] == "Submitted."
    assert sum(str(m["content"]).count("Submitted") for m in obs) == 1
    assert obs[1]["content"] == "2 of the 3 tests that judge the fix pass: not resolved."


def test_submit_with_the_gold_patch_resolves(env: SWEEnv) -> None:
    instance = env.instances[0]
    obs, *_ = step(env, *((c["name"], c["arguments"]) for c in gold_tool_calls(instance)))
    assert obs[0]["content"].startswith("Edited calc/ops.py")
    reward, info = submit(env)
    assert reward == 1.0
    assert info["resolved"]
    assert info["success"] is True  # the info contract's success: the same as resolved
    assert info["grade_reason"] == "resolved"
    assert info["reward_components"] == {"resolved": 1.0}
    assert info["tests"]["FAIL_TO_PASS"] == {"tests/test_ops.py::test_mean_float": "passed"}
    assert "-    return sum(values) // len(values)" in info["graded_diff"]
    assert info["agent_diff"] == info["graded_diff"]
    assert info["dropped_files"] == {}
    with pytest.raises(EnvStateError, match="after the episode ended"):
        env.step("more")


def test_the_turn_limit_truncates_and_grades(calc_jsonl: Path, local_only: None) -> None:
    env = SWEEnv(tasks=str(calc_jsonl), sandbox="local", max_turns=2)
    try:
        env.reset(seed=0)
        calls = gold_tool_calls(env.instances[0])
        first = step(env, *((c["name"], c["arguments"]) for c in calls))
        assert first[2:4] == (False, False)
        obs, reward, terminated, truncated, info = env.step("done, I think")
    finally:
        env.close()
    assert (reward, terminated, truncated) == (1.0, False, True)
    assert info["truncation_reason"] == "max_turns"
    assert "turn limit" in obs[-1]["content"]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"sandbox": "podman"}, "sandbox='podman'"),
        ({"max_turns": 0}, "max_turns=0"),
        ({"test_timeout": -1}, "test_timeout=-1"),
        ({"max_diff_bytes": 10}, "max_diff_bytes=10"),
        ({"backend": "local"}, "backend='local'"),
        ({"backend_options": [1]}, "backend_options=[1]"),
        ({"tool_parser": "nope"}, "nope"),
    ],
)
def test_bad_arguments_raise_config_errors(
    calc_jsonl: Path, kwargs: dict[str, Any], words: str
) -> None:
    with pytest.raises(agentgym.error.Error, match=words.replace("[", r"\[")):
        SWEEnv(tasks=str(calc_jsonl), **kwargs)


def test_reset_options_pin_a_task_and_reject_unknown_ids(env: SWEEnv) -> None:
    assert env.reset(options={"task_id": "calc__calc-1"})[1]["task_id"] == "calc__calc-1"
    with pytest.raises(ConfigError, match="names no task"):
        env.reset(options={"task_id": "nope"})
    with pytest.raises(EnvStateError, match="before reset"):
        SWEEnv(tasks=env.instances[0:1] and [env.instances[0].to_dict()]).step("x")


def test_passes_the_env_checker_on_the_local_backend(calc_jsonl: Path, local_only: None) -> None:
    check_env(gym.make("agentgym/SWE-v0", tasks=str(calc_jsonl), sandbox="local"))


def test_close_removes_every_sandbox(calc_jsonl: Path, local_only: None) -> None:
    env = SWEEnv(tasks=str(calc_jsonl), sandbox="local")
    env.reset(seed=0)
    sandbox = env._episode.sandbox  # type: ignore[union-attr]
    assert sandbox is not None
    assert os.path.isdir(sandbox._base)
    env.reset(seed=0)  # the previous episode's sandbox is given back
    assert not os.path.exists(sandbox._base)  # type: ignore[attr-defined]
    current = env._episode.sandbox  # type: ignore[union-attr]
    env.close()
    env.close()
    assert not os.path.exists(current._base)  # type: ignore[union-attr]


def test_a_cancelled_step_ends_the_episode_and_frees_its_sandbox(env: SWEEnv) -> None:
    sandbox = env._episode.sandbox  # type: ignore[union-attr]
    assert sandbox is not None
    sleep = as_action([{"name": "bash", "arguments": {"command": "sleep 300"}}])
    with pytest.raises(TimeoutError):
        run_sync(asyncio.wait_for(env.astep(sleep), 1))
    assert not os.path.exists(sandbox._base)  # type: ignore[attr-defined]  # before any reset
    with pytest.raises(EnvStateError, match="last step was cancelled"):
        env.step("more")
    env.reset(seed=0)
    assert "still works" in call(env, "bash", command="echo still works")


class _BrokenBackend:
    name = "broken"

    def __init__(self) -> None:
        self.closed = False

    async def acquire(self, instance: SWEInstance) -> Sandbox:
        raise SandboxError("the daemon went away")

    async def release(self, sandbox: Sandbox) -> None:
        pass

    async def aclose(self) -> None:
        self.closed = True


def test_a_failing_backend_is_an_infra_error_not_a_crash(calc_jsonl: Path) -> None:
    backend = _BrokenBackend()
    env = SWEEnv(tasks=str(calc_jsonl), backend=backend)
    _, info = env.reset(seed=0)
    assert info["infra_error"] is True
    obs, reward, terminated, truncated, info = step(env, ("view", {"path": "."}))
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["infra_error"] is True
    assert "not your fault" in obs[0]["content"]
    env.close()
    assert not backend.closed  # a backend passed in belongs to the caller


def test_instances_may_be_a_list_of_dicts(calc_jsonl: Path) -> None:
    records = [i.to_dict() for i in read_instances(calc_jsonl)]
    env = SWEEnv(tasks=records, backend=_BrokenBackend())
    assert env.instances == read_instances(calc_jsonl)
    env.close()
