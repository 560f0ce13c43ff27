"""``agentgym swe export-sft``: gold trajectories as tool-call conversations. Every exported
trajectory, replayed through SWE-v0 from the file, scores 1; a task whose gold episode does not
is left out and reported; the file loads with ``datasets`` and renders with a chat template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from swe_steps import replay_gold

from agentgym import models
from agentgym.cli import main
from agentgym.envs.swe import SWEEnv, read_instances
from agentgym.envs.swe.sft import gold_turns
from agentgym.error import ConfigError

TOOL_NAMES = {"view", "search", "edit", "create", "bash", "run_tests", "submit"}


def _calls(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    calls = message.get("tool_calls") or []
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


def test_a_gold_episode_views_the_files_patches_runs_the_tests_and_submits(calc_jsonl: Path):
    (calc,) = read_instances(calc_jsonl)
    record = calc.to_dict()
    # a PASS_TO_PASS test the test patch adds, and one of a file the checkout lacks: not run
    record["PASS_TO_PASS"] += ["tests/test_ops.py::test_mean_float", "tests/test_x.py::test_x"]
    (instance,) = read_instances([record])
    turns = gold_turns(instance)
    assert [m["role"] for m in turns] == ["assistant"] * 4
    assert _calls(turns[0]) == [("view", {"path": "calc/ops.py"})]
    ((name, arguments),) = _calls(turns[1])
    assert name == "edit"
    assert "//" in arguments["old_str"]
    assert "//" not in arguments["new_str"]
    passing = ["tests/test_ops.py::test_add", "tests/test_ops.py::test_mean_int"]
    assert _calls(turns[2]) == [("run_tests", {"tests": passing})]
    assert _calls(turns[3]) == [("submit", {})]
    ids = [c["id"] for m in turns for c in m["tool_calls"]]
    assert len(set(ids)) == len(ids)  # a tool answer names the one call it answers


def test_bad_input_names_the_value_and_a_task_without_a_patch_is_refused(
    calc_jsonl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    missing = tmp_path / "nope.jsonl"
    assert main(["swe", "export-sft", "--tasks", str(missing), "--out", str(tmp_path / "o")]) == 2
    assert str(missing) in capsys.readouterr().err
    with pytest.raises(ConfigError, match="patch"):
        gold_turns(read_instances([{**read_instances(calc_jsonl)[0].to_dict(), "patch": None}])[0])


def _tasks(calc_jsonl: Path, tmp_path: Path) -> Path:
    """The calc task, a copy whose gold patch breaks a passing test, and a shipped task."""
    (calc,) = read_instances(calc_jsonl)
    broken = calc.to_dict()
    broken["instance_id"] = "calc__calc-broken"
    fixed = "+    return sum(values) / len(values)"
    assert fixed in broken["patch"]
    broken["patch"] = broken["patch"].replace(fixed, "+    return sum(values) // len(values) + 0.5")
    shipped = read_instances()[0].to_dict()
    path = tmp_path / "tasks.jsonl"
    lines = [json.dumps(record) for record in (calc.to_dict(), broken, shipped)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow  # 35-45 s on 2 busy cores: 3 gold episodes exported, 2 replayed, each graded
def test_exported_trajectories_replay_to_1_and_a_gold_that_fails_is_reported(
    local_only: None, calc_jsonl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    tasks, out = _tasks(calc_jsonl, tmp_path), tmp_path / "sft.jsonl"
    argv = ["swe", "export-sft", "--tasks", str(tasks), "--out", str(out), "--sandbox", "local"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["exported"] == 2
    assert list(summary["rejected"]) == ["calc__calc-broken"]
    assert "run_tests before submitting did not pass" in summary["rejected"]["calc__calc-broken"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    shipped = read_instances()[0].instance_id
    assert [r["task_id"] for r in records] == ["calc__calc-1", shipped]

    env = SWEEnv(tasks=tasks, sandbox="local")
    try:
        assert [replay_gold(env, record) for record in records] == [1.0, 1.0]
    finally:
        env.close()

    # TRL's SFTTrainer format: datasets loads the file, and a chat template renders each
    # conversation with the tools (decoded from their JSON string) and every tool call
    from datasets import load_dataset

    rows = load_dataset("json", data_files=str(out), split="train")
    _, tokenizer = models.load()
    for row, record in zip(rows, records, strict=True):
        assert _same_messages(row, record)
        tools = json.loads(row["tools"])
        assert {t["function"]["name"] for t in tools} == TOOL_NAMES
        text = tokenizer.apply_chat_template(row["messages"], tools=tools, tokenize=False)
        calls = [c for m in record["messages"] for c in m.get("tool_calls") or []]
        for call in calls:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            assert f'<tool_call>{{"name": "{name}", "arguments": {arguments}}}</tool_call>' in text


def _same_messages(row: dict[str, Any], record: dict[str, Any]) -> bool:
    """Arrow adds the keys a message lacks (as None); nothing else may differ."""
    for got, want in zip(row["messages"], record["messages"], strict=True):
        if {k: v for k, v in got.items() if v is not None} != want:
            return False
    return len(row["messages"]) == len(record["messages"])
