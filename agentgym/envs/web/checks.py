"""Bring your own site: tasks as JSONL with end-state checks, and the ``Site`` that runs them.

A task line::

    {"task_id": "signup", "instruction": "Create an account for Ada.", "start_path": "/",
     "difficulty": 1, "checks": [{"url": "/welcome"}, {"text": "Hello, Ada"}]}

Checks, all of which must pass for ``success`` (the reward is the product of their scores):

- ``{"url": "..."}``: the page's URL equals it (whole URL, or path with query), or fully matches
  it as a regular expression;
- ``{"text": "..."}``: the text is on the page (``document.body.innerText``);
- ``{"js": "() => boolean"}``: a predicate, your own JS for your own site, run on the page;
- ``{"answer": "..."}``: the ``stop(answer)`` text equals it (case and outer spaces ignored) or
  fully matches it as a regular expression;
- ``{"http": "/grade"}``: a POST of ``{"task_id", "url", "answer"}`` as JSON to that URL
  (relative to ``start_url``); the site answers ``{"reward": float, "success": bool}``.

By default the episode ends as soon as every check passes or when the agent calls ``stop``; a task
with ``"until_stop": true`` is graded only when the agent stops (for checks that pass early).
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from agentgym.core.aio import deadline
from agentgym.core.errors import ConfigError
from agentgym.envs.web.actions import origin_of
from agentgym.envs.web.site import Evaluation, WebTask

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

__all__ = ["CHECK_KINDS", "OwnSite", "load_tasks"]

CHECK_KINDS = ("url", "text", "js", "answer", "http")
_TASK_KEYS = {"task_id", "instruction", "start_path", "checks", "difficulty", "until_stop"}
_FIX = (
    'write {"task_id": "t1", "instruction": "...", "start_path": "/", "checks": [{"url": "/done"}]}'
)


def _task(raw: object, where: str) -> WebTask:
    if not isinstance(raw, Mapping):
        raise ConfigError("tasks", raw, f"{where} is not a JSON object", _FIX)
    unknown = sorted(set(raw) - _TASK_KEYS)
    if unknown:
        raise ConfigError("tasks", dict(raw), f"{where} has unknown keys {unknown}", _FIX)
    if not isinstance(raw.get("instruction"), str) or not raw["instruction"].strip():
        raise ConfigError("tasks", dict(raw), f"{where} has no instruction", _FIX)
    checks = raw.get("checks")
    if not isinstance(checks, list) or not checks:
        raise ConfigError("tasks", dict(raw), f"{where} has no list of checks", _FIX)
    for check in checks:
        ok = isinstance(check, Mapping) and len(check) == 1
        kind, value = next(iter(check.items())) if ok else (None, None)
        if kind not in CHECK_KINDS or not isinstance(value, str):
            rule = f"{where} has check {check!r}; a check is one of {CHECK_KINDS} with a string"
            raise ConfigError("tasks", dict(raw), rule, _FIX)
    start = raw.get("start_path", "/")
    if not isinstance(start, str):
        raise ConfigError("tasks", dict(raw), f"{where}: start_path must be a string", _FIX)
    difficulty = raw.get("difficulty", 0)
    if isinstance(difficulty, bool) or not isinstance(difficulty, int):
        raise ConfigError("tasks", dict(raw), f"{where}: difficulty must be an int", _FIX)
    data = {"start_path": start, "checks": tuple(dict(c) for c in checks),
            "until_stop": bool(raw.get("until_stop", False))}
    return WebTask(str(raw.get("task_id", where)), raw["instruction"], difficulty, data)


def load_tasks(tasks: str | Path | Sequence[Mapping[str, Any]]) -> tuple[WebTask, ...]:
    """Tasks from a JSONL file or a list of dicts (validated; ``ConfigError`` naming the line)."""
    if isinstance(tasks, str | Path):
        path = Path(tasks)
        if not path.is_file():
            raise ConfigError("tasks", str(tasks), "is not a file", "pass a path to a .jsonl file")
        lines = [(i, line) for i, line in enumerate(path.read_text("utf-8").splitlines(), 1)]
        raws: list[tuple[str, object]] = []
        for number, line in lines:
            if not line.strip():
                continue
            try:
                raws.append((f"line {number} of {path}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise ConfigError("tasks", line, f"line {number} is not JSON ({e})", _FIX) from e
    else:
        raws = [(f"task {i}", raw) for i, raw in enumerate(tasks)]
    loaded = tuple(_task(raw, where) for where, raw in raws)
    if not loaded:
        raise ConfigError("tasks", tasks, "holds no task", _FIX)
    ids = [t.task_id for t in loaded]
    if len(set(ids)) != len(ids):
        raise ConfigError("tasks", sorted(ids), "repeats a task_id", "give each task its own id")
    return loaded


def _matches(pattern: str, *candidates: str) -> bool:
    if pattern in candidates:
        return True
    try:
        return any(re.fullmatch(pattern, c) for c in candidates)
    except re.error:
        return False


def _post(url: str, payload: dict[str, Any], timeout: float) -> tuple[float, bool]:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        verdict = json.loads(response.read())
    return float(verdict["reward"]), bool(verdict["success"])


async def _predicate(page: Page, source: str, timeout: float) -> bool:
    """A ``js`` check: the predicate's truth; one that throws (the page is not in the state it
    expects) fails, unless the browser itself is gone."""
    from playwright.async_api import Error as PlaywrightError

    from agentgym.envs.web.browser import is_browser_gone

    try:
        async with deadline(timeout, "js check"):
            return bool(await page.evaluate(source))
    except PlaywrightError as e:
        if is_browser_gone(e):
            raise
        return False


class OwnSite:
    """A site of the user's: a real server at ``start_url`` with tasks graded by checks."""

    name = "own"

    def __init__(
        self, start_url: str, tasks: str | Path | Sequence[Mapping[str, Any]], timeout: float = 10.0
    ) -> None:
        parts = urlsplit(start_url) if isinstance(start_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                "start_url", start_url, "is not an http(s) URL", "pass e.g. 'http://127.0.0.1:8000/'"
            )
        self.start_url = start_url
        self.timeout = timeout
        self._tasks = load_tasks(tasks)

    def tasks(self) -> Sequence[WebTask]:
        return self._tasks

    def allowed_origins(self) -> tuple[str, ...]:
        return (origin_of(self.start_url),)

    async def open(self, context: BrowserContext, page: Page, task: WebTask, seed: int) -> str:
        return urljoin(self.start_url, str(task.data.get("start_path", "/")))

    async def evaluate(self, page: Page, task: WebTask, answer: str | None) -> Evaluation:
        stopped = answer is not None
        reward, success = 1.0, True
        for check in task.data["checks"]:
            score, passed = await self._check(page, task, check, answer)
            reward *= score
            success = success and passed
        done = stopped or (success and not task.data.get("until_stop"))
        reward = reward if done else 0.0
        return Evaluation(reward, success and done, done, {"checks": reward})

    async def _check(
        self, page: Page, task: WebTask, check: Mapping[str, str], answer: str | None
    ) -> tuple[float, bool]:
        kind, value = next(iter(check.items()))
        if kind == "url":
            parts = urlsplit(page.url)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            passed = _matches(value, page.url, path, parts.path)
        elif kind == "answer":
            given = (answer or "").strip()
            same = given.lower() == value.strip().lower()
            passed = answer is not None and (same or _matches(value, given))
        elif kind == "text":
            async with deadline(self.timeout, "text check"):
                passed = value in await page.evaluate("() => document.body?.innerText ?? ''")
        elif kind == "js":
            passed = await _predicate(page, value, self.timeout)
        else:
            payload = {"task_id": task.task_id, "url": page.url, "answer": answer}
            async with deadline(self.timeout + 1, "http check"):
                url = urljoin(self.start_url, value)
                return await asyncio.to_thread(_post, url, payload, self.timeout)
        return (1.0 if passed else 0.0), passed

    async def close(self, context: BrowserContext) -> None:
        return None
