"""Bring your own site: tasks from JSONL or dicts, graded by url/text/js/answer/http checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from agentgym.core.errors import ConfigError
from agentgym.envs.web.checks import load_tasks


def test_tasks_load_from_jsonl(tmp_path: Path) -> None:
    from web_helpers import TASKS

    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in TASKS) + "\n\n")
    tasks = load_tasks(path)
    assert [t.task_id for t in tasks] == ["form", "press", "answer"]
    assert tasks[0].data["start_path"] == "/form.html"
    assert tasks[1].data["start_path"] == "/"


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ({"checks": [{"text": "x"}]}, "no instruction"),
        ({"instruction": "x"}, "no list of checks"),
        ({"instruction": "x", "checks": [{"css": "a"}]}, "a check is one of"),
        ({"instruction": "x", "checks": [{"text": "a", "url": "/"}]}, "a check is one of"),
        ({"instruction": "x", "checks": [{"text": "a"}], "colour": 1}, "unknown keys"),
        ({"instruction": "x", "checks": [{"text": 3}]}, "a check is one of"),
    ],
)
def test_bad_tasks_are_config_errors(task: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_tasks([task])


def test_a_bad_jsonl_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"instruction": "x", "checks": [{"text": "a"}]}\n{oops\n')
    with pytest.raises(ConfigError, match="line 2"):
        load_tasks(path)
    with pytest.raises(ConfigError, match="repeats a task_id"):
        load_tasks([{"task_id": "a", "instruction": "x", "checks": [{"text": "a"}]}] * 2)


def test_url_and_text_checks_end_the_episode_when_they_pass(make_env: Any) -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": "form"})
    env.step('fill(1, "Bob")')
    _, reward, terminated, _, info = env.step("click(4)")  # on /done.html, but "Hello, Bob (S)"
    assert not terminated
    assert reward == 0.0
    _, reward, terminated, _, info = env.step('stop("")')
    assert terminated
    assert reward == 0.0
    assert info["success"] is False


def test_answer_and_http_checks(make_env: Any, site: Any) -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": "answer"})
    _, reward, terminated, _, info = env.step('stop("41")')
    assert (terminated, reward, info["success"]) == (True, 0.0, False)
    env.reset(seed=0, options={"task_id": "answer"})
    before = site.hits.count("/grade")
    _, reward, terminated, _, info = env.step('stop(" 42 ")')
    assert (terminated, reward, info["success"]) == (True, 1.0, True)
    assert site.hits.count("/grade") == before + 1


def test_js_checks_run_on_the_page(make_env: Any) -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": "press"})
    _, reward, terminated, _, _ = env.step("click(3)")
    assert (terminated, reward) == (False, 0.0)
    _, reward, terminated, _, info = env.step("click(3)")
    assert (terminated, reward, info["success"]) == (True, 1.0, True)


def test_gym_make_with_a_jsonl_path(chromium: str, site_url: str, tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"task_id": "home", "instruction": "Open the form.",
                                "checks": [{"url": "/form.html"}]}) + "\n")
    env = gym.make("agentgym/Web-v0", start_url=site_url, tasks=str(path))
    try:
        observation, info = env.reset(seed=0)
        assert info["task_id"] == "home"
        assert "Open the form." in observation[1]["content"]
        _, reward, terminated, _, info = env.step("click(1)")
        assert (terminated, reward, info["success"]) == (True, 1.0, True)
    finally:
        env.close()
