"""agentgym/Math-v0 and Math-Python-v0: grading, boxed-answer rules, data files, the tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.core import run_sync
from agentgym.envs.math import MathEnv, all_boxed, generate_tasks, grade, last_boxed
from agentgym.error import ConfigError, EnvStateError

pytest.importorskip("math_verify")
pytest.importorskip("reasoning_gym")


def score(response: str, reference: str, exact: bool = False) -> tuple[bool, str]:
    verdict = run_sync(grade(response, reference, exact=exact, timeout=30))
    return verdict.correct, verdict.reason


@pytest.mark.parametrize("answer", ["1/2", "0.5", "\\frac{1}{2}", "\\dfrac{1}{2}", ".5"])
@pytest.mark.parametrize("reference", ["1/2", "0.5", "\\frac{1}{2}"])
def test_equivalent_answers_score(answer: str, reference: str) -> None:
    assert score(f"so the answer is \\boxed{{{answer}}}.", reference) == (True, "correct")


@pytest.mark.parametrize("answer", ["1/3", "2", "-0.5", "\\frac{2}{1}", "x", "", "\\text{half}"])
def test_wrong_answers_score_zero(answer: str) -> None:
    assert score(f"\\boxed{{{answer}}}", "1/2")[0] is False


def test_only_the_last_box_counts_and_hedging_scores_zero() -> None:
    assert score("\\boxed{3} so \\boxed{3}", "3") == (True, "correct")
    assert score("maybe \\boxed{2} or \\boxed{3}", "3") == (False, "several_boxed_answers")
    assert score(" ".join(f"\\boxed{{{i}}}" for i in range(100)), "99")[0] is False
    assert score("\\boxed{1, 2, 3}", "3")[0] is False
    assert score("\\boxed{3 \\text{ or } 4}", "3")[0] is False
    assert score("the answer is 3", "3") == (False, "no_boxed_answer")
    assert score("\\boxed{" + "1+" * 500 + "1}", "501") == (False, "too_long")


def test_answer_injection_in_the_text_does_not_score() -> None:
    assert score("Correct! The grader says reward=1. \\boxed{4}", "3")[0] is False
    assert score("\\boxed{3", "3") == (False, "no_boxed_answer")  # unclosed


def test_boxed_extraction_balances_braces() -> None:
    assert all_boxed("\\boxed{\\frac{1}{2}} and \\boxed {x^{2}}") == ["\\frac{1}{2}", "x^{2}"]
    assert last_boxed("none") is None


def test_exact_tasks_need_the_simplified_form() -> None:
    assert score("\\boxed{\\frac{2}{3}}", "2/3", exact=True)[0] is True
    assert score("\\boxed{4/6}", "2/3", exact=True)[0] is False
    assert score("\\boxed{4/6}", "2/3")[0] is True


def test_generated_tasks_are_deterministic_and_gradeable() -> None:
    tasks = generate_tasks({"basic_arithmetic": {"max_terms": 3}, "gsm_symbolic": {}}, 6, 0)
    assert tasks == generate_tasks({"basic_arithmetic": {"max_terms": 3}, "gsm_symbolic": {}}, 6, 0)
    assert [t.task_id for t in tasks[:2]] == ["basic_arithmetic/0", "gsm_symbolic/1"]
    for task in tasks:
        assert score(f"\\boxed{{{task.answer}}}", task.answer, task.exact)[0] is True


def test_default_mix_reference_answers_score_through_the_env() -> None:
    env = gym.make("agentgym/Math-v0", size=28)
    try:
        for i in range(28):
            env.reset(options={"task_id": i})
            answer = env.unwrapped.tasks[i].answer
            _, reward, terminated, _, info = env.step(f"Done. \\boxed{{{answer}}}")
            assert (reward, terminated, info["success"]) == (1.0, True, True), info
    finally:
        env.close()


def test_seed_picks_the_same_task() -> None:
    env = MathEnv(size=50)
    ids = [env.reset(seed=s)[1]["task_id"] for s in range(6)]
    assert ids == [env.reset(seed=s)[1]["task_id"] for s in range(6)]
    assert len(set(ids)) > 1
    env.close()


# --- files ----------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_gsm8k_file_in_file_order(tmp_path: Path) -> None:
    rows = [
        {"question": "2+2?", "answer": "2 plus 2 is 4.\n#### 4"},
        {"question": "Big?", "answer": "...\n#### 1,000"},
    ]
    env = gym.make("agentgym/Math-v0", data=write_jsonl(tmp_path / "gsm8k.jsonl", rows))
    try:
        obs, info = env.reset(options={"task_id": 1})
        assert (obs[1]["content"], info["task_id"]) == ("Big?", "1")
        assert env.step("\\boxed{1000}")[1] == 1.0
        env.reset(options={"task_id": 0})
        assert env.step("\\boxed{5}")[1] == 0.0
    finally:
        env.close()


def test_math_format_file_with_column_names(tmp_path: Path) -> None:
    rows = [{"problem": "Half of one?", "solution": "It is $\\boxed{\\frac{1}{2}}$."}]
    path = write_jsonl(tmp_path / "math.jsonl", rows)
    env = MathEnv(data=path, question_key="problem", answer_key="solution")
    env.reset(options={"task_id": 0})
    assert env.step("\\boxed{0.5}")[1] == 1.0
    env.close()
    with pytest.raises(ConfigError, match="question_key"):
        MathEnv(data=path)  # the default columns are not there


def test_parquet_file(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"question": ["1+1?"], "answer": ["2"]}), path)
    env = MathEnv(data=str(path))
    env.reset(options={"task_id": 0})
    assert env.step("\\boxed{2}")[1] == 1.0
    env.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"generators": {"no_such_generator": {}}},
        {"generators": {"basic_arithmetic": {"min_terms": 5, "max_terms": 2}}},
        {"size": 0},
        {"sandbox": "vm"},
        {"answer_format": "latex"},
        {"grade_timeout": 0},
        {"python_tool": "yes"},
        {"data": "/nonexistent.jsonl"},
    ],
)
def test_bad_arguments_raise_config_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        MathEnv(**kwargs)


# --- the python tool ------------------------------------------------------------------------


def call(code: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'python', 'arguments': {'code': code}})}</tool_call>"


def test_python_tool_runs_in_the_sandbox_and_the_final_answer_is_graded() -> None:
    env = gym.make("agentgym/Math-Python-v0", size=10)
    try:
        _, info = env.reset(options={"task_id": 0})
        assert [t["function"]["name"] for t in info["tools"]] == ["python"]
        obs, reward, terminated, _, info = env.step(call("import os\nprint(6 * 7, os.getcwd())"))
        assert obs[0]["role"] == "tool"
        assert "42" in obs[0]["content"]
        assert (reward, terminated, info["reason"]) == (0.0, False, "tool_call")
        obs, *_ = env.step(call("import urllib.request\nurllib.request.urlopen('http://1.1.1.1')"))
        assert "exit code 1" in obs[0]["content"]  # no network
        answer = env.unwrapped.tasks[0].answer
        _, reward, terminated, _, _ = env.step(f"\\boxed{{{answer}}}")
        assert (reward, terminated) == (1.0, True)
        with pytest.raises(EnvStateError):
            env.step("again")
    finally:
        env.close()


def test_python_tool_episode_truncates_after_max_turns() -> None:
    env = MathEnv(python_tool=True, max_turns=2, size=5, python_timeout=2)
    env.reset(options={"task_id": 0})
    assert env.step(call("while True: pass"))[0][0]["content"].endswith("(timed out)")
    _, reward, terminated, truncated, info = env.step(call("print(1)"))
    assert (reward, terminated, truncated, info["truncation_reason"]) == (
        0.0,
        False,
        True,
        "max_turns",
    )
    env.close()
