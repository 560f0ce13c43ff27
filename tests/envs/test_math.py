"""agentgym/Math-v0 and Math-Python-v0: grading, boxed-answer rules, data files, the tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.core import call_format, run_sync
from agentgym.core.info import outcome_of
from agentgym.envs.math import MathEnv, all_boxed, generate_tasks, grade, last_boxed
from agentgym.error import ConfigError, EnvStateError


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
    env = gym.make("agentgym/Math-v0", tasks=write_jsonl(tmp_path / "gsm8k.jsonl", rows))
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
    env = MathEnv(tasks=path, question_key="problem", answer_key="solution")
    env.reset(options={"task_id": 0})
    assert env.step("\\boxed{0.5}")[1] == 1.0
    env.close()
    with pytest.raises(ConfigError, match="question_key"):
        MathEnv(tasks=path)  # the default columns are not there


def test_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"question": ["1+1?"], "answer": ["2"]}), path)
    env = MathEnv(tasks=str(path))
    env.reset(options={"task_id": 0})
    assert env.step("\\boxed{2}")[1] == 1.0
    env.close()


# --- local Hugging Face dataset directories (built with pyarrow, as `datasets` writes them) ---


def save_dataset(folder: Path, columns: dict[str, list[Any]], split: str, shards: int = 1) -> None:
    """What ``datasets.Dataset.save_to_disk`` writes: Arrow IPC streams + state.json + info."""
    folder.mkdir(parents=True)
    table = pa.table(columns)
    size = -(-table.num_rows // shards)
    names = [f"data-{i:05d}-of-{shards:05d}.arrow" for i in range(shards)]
    for i, name in enumerate(names):
        with (
            pa.OSFile(str(folder / name), "wb") as sink,
            pa.ipc.new_stream(sink, table.schema) as writer,
        ):
            writer.write_table(table.slice(i * size, size))
    features = {k: {"dtype": "string", "_type": "Value"} for k in columns}
    (folder / "dataset_info.json").write_text(json.dumps({"citation": "", "features": features}))
    state = {
        "_data_files": [{"filename": name} for name in names],
        "_fingerprint": "0123456789abcdef",
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": split,
    }
    (folder / "state.json").write_text(json.dumps(state, indent=2))


def questions_and_answers(env: MathEnv) -> list[tuple[str, str, str]]:
    return [(t.task_id, t.question, t.answer) for t in env.tasks]


def boxed_scores(env: Any, task_id: int, answer: str) -> float:
    env.reset(options={"task_id": task_id})
    return float(env.step(f"So \\boxed{{{answer}}}")[1])


def test_saved_dataset_directory_in_shard_order(tmp_path: Path) -> None:
    questions = [f"{i}+{i}?" for i in range(5)]
    columns = {"question": questions, "answer": [f"...\n#### {2 * i}" for i in range(5)]}
    save_dataset(tmp_path / "ds", columns, "test", shards=2)
    env = gym.make("agentgym/Math-v0", tasks=str(tmp_path / "ds"))
    try:
        expected = [(str(i), f"{i}+{i}?", str(2 * i)) for i in range(5)]
        assert questions_and_answers(env.unwrapped) == expected
        assert boxed_scores(env, 3, "6") == 1.0
        assert boxed_scores(env, 3, "7") == 0.0
    finally:
        env.close()
    with pytest.raises(ConfigError, match="split 'test'"):
        MathEnv(tasks=str(tmp_path / "ds"), split="train")


def test_dataset_dict_directory_picks_the_split(tmp_path: Path) -> None:
    root = tmp_path / "dd"
    save_dataset(root / "train", {"problem": ["Train?"], "solution": ["$\\boxed{1}$"]}, "train")
    test = {"problem": ["A?", "B?"], "solution": ["$\\boxed{\\frac{1}{2}}$", "$\\boxed{3}$"]}
    save_dataset(root / "test", test, "test")
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    keys = {"question_key": "problem", "answer_key": "solution"}
    env = MathEnv(tasks=str(root), **keys)  # default: the test split
    assert questions_and_answers(env) == [("0", "A?", "\\frac{1}{2}"), ("1", "B?", "3")]
    assert boxed_scores(env, 0, "0.5") == 1.0
    env.close()
    train = MathEnv(tasks=str(root), split="train", **keys)
    assert questions_and_answers(train) == [("0", "Train?", "1")]
    train.close()
    with pytest.raises(ConfigError, match=r"split='validation'.*\['test', 'train'\]"):
        MathEnv(tasks=str(root), split="validation", **keys)


def test_gsm8k_like_hub_snapshot(tmp_path: Path) -> None:
    for config in ("main", "socratic"):
        for split, base in (("train", 100), ("test", 0)):
            rows = {
                "question": [f"{config} {split} {i}?" for i in range(3)],
                "answer": [f"Work.\n#### {base + 40 + i}" for i in range(3)],
            }
            (tmp_path / config).mkdir(exist_ok=True)
            pq.write_table(pa.table(rows), tmp_path / config / f"{split}-00000-of-00001.parquet")
    (tmp_path / "README.md").write_text("# gsm8k")
    env = gym.make("agentgym/Math-v0", tasks=str(tmp_path / "main"))
    try:
        assert questions_and_answers(env.unwrapped) == [
            (str(i), f"main test {i}?", str(40 + i)) for i in range(3)
        ]
        assert boxed_scores(env, 2, "42") == 1.0
        assert boxed_scores(env, 1, "42") == 0.0
    finally:
        env.close()
    train = MathEnv(tasks=str(tmp_path / "main"), split="train")
    assert [t.answer for t in train.tasks] == ["140", "141", "142"]
    train.close()
    with pytest.raises(ConfigError, match="several folders"):
        MathEnv(tasks=str(tmp_path))  # main/ and socratic/ both hold a test split


def test_snapshot_shards_are_read_in_sorted_order(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "train-00001-of-00002.jsonl", [{"question": "second?", "answer": "2"}])
    write_jsonl(data / "train-00000-of-00002.jsonl", [{"question": "first?", "answer": "1"}])
    write_jsonl(data / "validation.jsonl", [{"question": "val?", "answer": "9"}])
    env = MathEnv(tasks=str(tmp_path))  # no test split: train
    assert questions_and_answers(env) == [("0", "first?", "1"), ("1", "second?", "2")]
    env.close()
    assert [t.answer for t in MathEnv(tasks=str(tmp_path), split="validation").tasks] == ["9"]


@pytest.mark.parametrize(
    ("layout", "kwargs", "match"),
    [
        ("empty", {}, "matches no dataset layout"),
        ("only_validation", {}, r"split=None.*\['validation'\]"),
        ("bad_state", {}, "_data_files"),
        ("file", {"split": "test"}, "only to a dataset directory"),
        ("none", {"split": "test"}, "only to a data directory"),
    ],
)
def test_unusable_dataset_directories_raise_config_error(
    tmp_path: Path, layout: str, kwargs: dict[str, Any], match: str
) -> None:
    data: str | None = str(tmp_path)
    if layout == "only_validation":
        write_jsonl(
            tmp_path / "validation-00000-of-00001.jsonl", [{"question": "q", "answer": "1"}]
        )
    elif layout == "bad_state":
        (tmp_path / "state.json").write_text(json.dumps({"_split": None}))
    elif layout == "file":
        data = write_jsonl(tmp_path / "t.jsonl", [{"question": "q", "answer": "1"}])
    elif layout == "none":
        data = None
    with pytest.raises(ConfigError, match=match):
        MathEnv(tasks=data, **kwargs)


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
        {"tasks": "/nonexistent.jsonl"},
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


def test_with_the_python_tool_the_prompt_says_how_to_write_a_call() -> None:
    for parser in ("hermes", "pythonic"):
        env = MathEnv(python_tool=True, size=5, tool_parser=parser)
        try:
            rules = env.reset(seed=0)[0][0]["content"]
        finally:
            env.close()
        assert rules.endswith(call_format(parser))
    plain = MathEnv(size=5)
    assert "tool" not in plain.reset(seed=0)[0][0]["content"]
    plain.close()


def test_python_tool_episode_truncates_after_max_turns() -> None:
    env = MathEnv(python_tool=True, max_turns=2, size=5, python_timeout=2)
    env.reset(options={"task_id": 0})
    observation, _, _, _, info = env.step(call("while True: pass"))
    assert observation[0]["content"].endswith("(timed out)")
    assert info["timed_out"] is True  # the model's own loop: scored, never an infra error
    assert info["infra_error"] is False
    _, reward, terminated, truncated, info = env.step(call("print(1)"))
    assert info["timed_out"] is False
    assert (reward, terminated, truncated, info["truncation_reason"]) == (
        0.0,
        False,
        True,
        "max_turns",
    )
    env.close()


def test_each_way_an_answer_ends_lands_in_its_outcome(tmp_path: Path) -> None:
    rows = [{"question": "2+2?", "answer": "#### 4"}]
    path = write_jsonl(tmp_path / "one.jsonl", rows)
    env = gym.make("agentgym/Math-v0", tasks=path)
    slow = gym.make("agentgym/Math-v0", tasks=path, grade_timeout=1e-6)
    try:
        for made, answer, outcome in [
            (env, "\\boxed{4}", "success"),
            (env, "\\boxed{5}", "failed"),
            (env, "four", "invalid"),  # nothing boxed: a format error, scored 0
            (slow, "\\boxed{4}", "timeout"),  # the grader's deadline on the answer: scored 0
        ]:
            made.reset(options={"task_id": 0})
            _, reward, terminated, truncated, info = made.step(answer)
            assert terminated
            assert not truncated
            assert outcome_of({}, [info], truncated=False) == outcome, answer
            assert reward == (1.0 if outcome == "success" else 0.0)
            assert not info["infra_error"]
    finally:
        env.close()
        slow.close()
