"""An evaluation's summary counts the episodes that failed outside the model apart from those
the model played: by cause, with one example each, never as a NaN or a 0/0 success rate."""

from __future__ import annotations

import json

import pytest

from agentgym.core.types import Episode, Turn
from agentgym.recipes.evaluation import EvalRun
from agentgym.recipes.report import EvalResult, NothingJudged

REFUSED = "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 9)"


def _played(group: int, sample: int, success: bool) -> Episode:
    info = {"success": success}
    turn = Turn({"role": "assistant", "content": "x"}, (), float(success), True, False, info)
    episode = Episode("agentgym/FrozenLake-v0", group=group, seed=group)
    episode.turns = [turn]
    episode.reset_info = {"task_id": f"t{group}"}
    episode.metrics = {"sample": float(sample), "sampled_tokens": 2.0}
    return episode


def _failed(group: int, sample: int, error: str, kind: str | None = None) -> Episode:
    """An episode whose reset failed (``kind`` None: an env that does not say whose fault)."""
    episode = Episode("agentgym/FrozenLake-v0", group=group, seed=group)
    episode.reset_info = {"infra_error": True, "error": error}
    if kind is not None:
        episode.reset_info |= {"error_kind": kind, "error_at": "MyEnv.reset"}
    episode.metrics = {"sample": float(sample), "sampled_tokens": 0.0}
    return episode


def _mixed() -> EvalRun:
    """3 tasks x 2 samples: task 0 judged (1 of 2), task 1 judged (2 of 2), task 2 one sample
    judged and one refused; plus a task 3 whose env raised twice."""
    episodes = [
        _played(0, 0, True), _played(0, 1, False), _played(1, 0, True), _played(1, 1, True),
        _played(2, 0, False), _failed(2, 1, REFUSED),
        _failed(3, 0, "ZeroDivisionError: division by zero", "env"),
        _failed(3, 1, "ZeroDivisionError: division by zero", "env"),
    ]  # fmt: skip
    return EvalRun(episodes, samples=2, seconds=1.0, api="tokens")


def test_a_mix_of_judged_and_failed_episodes_is_summarised_with_its_causes():
    run = _mixed()
    result = run.result
    assert (result.episodes, result.judged, result.successes) == (8, 5, 3)
    assert result.mean_return == pytest.approx(3 / 5)  # the failures' 0 is not a return
    assert result.causes() == [
        ("env", 2, "MyEnv.reset raised ZeroDivisionError: division by zero"),
        ("infra", 1, REFUSED),
    ]
    table = run.table((1, 2))
    assert "(3/5)" in table
    assert "failed          3 episodes, not judged" in table
    assert "2 x env: MyEnv.reset raised ZeroDivisionError: division by zero" in table
    assert f"1 x infra: {REFUSED}" in table
    assert "pass@1          0.750 (over 2 of 4 tasks)" in table  # tasks 2 and 3 left out
    assert "nan" not in table
    summary = run.to_dict((1, 2))
    assert summary["failed"] == 3
    assert summary["tasks_judged"] == 2
    assert summary["failure_causes"][1] == {"kind": "infra", "episodes": 1, "example": REFUSED}
    assert result.unjudged() is None
    result.refuse_unjudged("the evaluation")  # some were judged: no error
    json.dumps(summary)


def test_nothing_judged_says_why_without_nan():
    run = EvalRun([_failed(t, 0, REFUSED) for t in range(3)], samples=1, seconds=0.1, api="tokens")
    result = run.result
    assert (
        result.describe()
        == "success unknown: none of 3 episodes judged; 3 failed outside the model"
    )
    table = run.table((1,))
    assert "nan" not in table.lower()
    assert "pass@1          n/a" in table
    summary = run.to_dict((1,))
    assert summary["success_rate"] is None
    assert summary["pass_at_k"] == {"1": None}
    assert "3 failed outside the model" in (result.unjudged() or "")
    with pytest.raises(NothingJudged, match="ConnectionRefusedError") as refused:
        result.refuse_unjudged("the evaluation before training")
    assert "the evaluation before training: no episode could be judged" in str(refused.value)


def test_an_env_that_never_says_success_is_unjudged_but_not_refused():
    unknown = _played(0, 0, True)
    unknown.turns[0].info.clear()
    result = EvalResult.of([unknown])
    assert result.judged == 0
    assert "without info['success']" in (result.unjudged() or "")
    result.refuse_unjudged("the evaluation before training")  # its returns still mean something
