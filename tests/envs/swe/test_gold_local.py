"""Acceptance on the local backend: for every shipped task, the gold patch applied through the
env's own edit/create tools and submitted scores 1; submitting no change scores 0."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from swe_steps import step, submit

from agentgym.envs.swe import SWEEnv, SWEInstance, gold_tool_calls, read_instances

INSTANCES = read_instances()


@pytest.fixture(scope="module")
def env(local_only: None) -> Iterator[SWEEnv]:
    made = SWEEnv(sandbox="local")
    yield made
    made.close()


@pytest.mark.slow
@pytest.mark.parametrize("instance", INSTANCES, ids=[i.instance_id for i in INSTANCES])
def test_gold_patch_through_the_tools_scores_1_and_no_change_scores_0(
    env: SWEEnv, instance: SWEInstance
) -> None:
    task_id = instance.instance_id
    calls = gold_tool_calls(instance)
    env.reset(options={"task_id": task_id})
    answers = step(env, *((c["name"], c["arguments"]) for c in calls))[0]
    for answer in answers:
        assert not answer["content"].startswith("Error"), answer["content"]
    reward, info = submit(env)
    assert reward == 1.0, (info["grade_reason"], info["tests"], info["test_output"][-2000:])
    assert info["dropped_files"] == {}
    assert info["graded_diff"] == info["agent_diff"]

    env.reset(options={"task_id": task_id})
    reward, info = submit(env)
    assert reward == 0.0
    assert info["grade_reason"] == "tests_failed"
    failed = [t for t, outcome in info["tests"]["FAIL_TO_PASS"].items() if outcome != "passed"]
    assert failed, "a FAIL_TO_PASS test passes without the fix"
