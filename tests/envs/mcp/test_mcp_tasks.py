"""Task loading and the verifiers of answers and end states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym.envs.mcp.store_tasks import generate_store_tasks
from agentgym.envs.mcp.tasks import Check, answer_correct, load_tasks, value_matches
from agentgym.error import ConfigError


@pytest.mark.parametrize(
    ("text", "expected", "match", "correct"),
    [
        ("<answer>north</answer>", "north", "text", True),
        ("It is the North warehouse.", "north", "text", False),
        ("<answer> North. </answer>", "north", "text", True),
        ("<answer>south</answer> no, <answer>north</answer>", "north", "text", True),
        ("The North warehouse.", "north", "contains", True),
        ("<answer>$1,234.50</answer>", "1234.5", "number", True),
        ("<answer>1234.49</answer>", "1234.5", "number", False),
        ("3 warehouses hold <answer>45</answer>", "45", "number", True),
        ("no number", "45", "number", False),
    ],
)
def test_answer_rules(text: str, expected: str, match: str, correct: bool) -> None:
    assert answer_correct(text, expected, match) is correct  # type: ignore[arg-type]


def test_state_checks() -> None:
    orders = {"result": [{"status": "pending", "items": [{"sku": "A", "quantity": 2}], "total": 3}]}
    assert value_matches(Check("t", path="result", contains={"items": [{"sku": "A"}]}), orders, "")
    assert not value_matches(
        Check("t", path="result", contains={"items": [{"sku": "B"}]}), orders, ""
    )
    assert value_matches(Check("t", path="result.0.total", equals=3.0), orders, "")
    assert not value_matches(Check("t", path="result.1.total", equals=3), orders, "")
    assert value_matches(Check("t", contains="hello"), None, "say hello")
    assert value_matches(Check("t", path="a", equals=1), None, '{"a": 1}')  # JSON text
    assert not value_matches(Check("t", path="a", equals=True), {"a": 1}, "")


def test_load_jsonl_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    rows = [
        {"prompt": "p0", "answer": 3, "match": "number"},
        {"id": "x", "prompt": "p1", "checks": [{"tool": "t", "arguments": {"a": 1}, "equals": 2}]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    first, second = load_tasks(path)
    assert (first.task_id, first.answer, first.match) == ("0", "3", "number")
    assert second.task_id == "x"
    assert second.checks[0].arguments == {"a": 1}
    path.write_text("{not json\n")
    with pytest.raises(ConfigError, match="is not JSON"):
        load_tasks(path)
    for bad, message in [
        ([{"answer": "1"}], "'prompt' string"),
        ([{"prompt": "p", "answer": "1", "match": "regex"}], "must be one of"),
        ([{"prompt": "p", "answer": "1", "extra": 1}], "unknown keys"),
        ([{"prompt": "p", "checks": [{"tool": "t"}]}], "exactly one of equals/contains"),
        ([{"id": "a", "prompt": "p", "answer": "1"}] * 2, "repeats task ids"),
        ([], "holds no tasks"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_tasks(bad)
    with pytest.raises(ConfigError, match="is not a file"):
        load_tasks(tmp_path / "missing.jsonl")


def test_store_tasks_are_many_distinct_seeded_and_multi_call() -> None:
    tasks = generate_store_tasks()
    assert len(tasks) >= 100
    assert len({t.prompt for t in tasks}) == len(tasks)
    assert tasks == generate_store_tasks()
    assert tasks != generate_store_tasks(seed=1)
    assert all(sum(len(turn) for turn in t.solution) >= 2 for t in tasks)
    assert all(t.answer is not None or t.checks for t in tasks)
    assert {t.task_id.split("/")[1] for t in tasks} == {
        "category_stock", "customer_spend", "best_warehouse", "latest_order_item",
        "stock_value", "place_order", "top_up",
    }  # fmt: skip
