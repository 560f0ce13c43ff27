"""``agentgym view`` driven in Chromium as a person uses it: a real ``agentgym view`` process
on a real tiny run; open the run, find an episode by task id, colour its tokens, filter by
outcome, and follow a run whose next update lands while the page is open.

Screenshots go to ``$AGENTGYM_VIEW_SCREENSHOTS`` when set (``docs/images/`` holds the ones the
docs show), else to the test's temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@contextmanager
def serving(path: Path) -> Iterator[str]:
    """``agentgym view path --port 0`` in its own process, run beside ``path`` (the page shows
    the path as given: ``run``); yields its URL."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "view", path.name, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=path.parent,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if found := re.search(r"open (http://127\.0\.0\.1:\d+/)", line):
                yield found.group(1)
                break
        else:
            pytest.fail(f"agentgym view exited {process.wait()} without serving")
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    from agentgym.envs.web.browser import BROWSER_ARGS

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=list(BROWSER_ARGS))
        yield launched
        launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("AGENTGYM_VIEW_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_open_a_run_find_an_episode_by_task_colour_its_tokens_filter_by_outcome(
    tiny_run, browser, shots
):
    from playwright.sync_api import expect

    from agentgym.rollout import traces

    whole = traces.read(tiny_run)
    task = whole["task_id"].iloc[-1]
    with serving(tiny_run) as url:
        page = browser.new_page(viewport={"width": 1000, "height": 760})
        page.goto(url)
        expect(page.locator("svg.plot circle.point")).to_have_count(2)  # success_rate, 2 updates
        expect(page.locator("#config")).to_contain_text("agentgym/FrozenLake-v0")
        page.select_option("#curve", "reward_mean")
        expect(page.locator("svg.plot circle.point")).to_have_count(2)
        page.screenshot(path=str(shots / "view-run.png"))
        page.locator("svg.plot circle.point").nth(1).click()
        expect(page.locator(".group")).to_have_count(
            int(whole[whole["update"] == 2]["group"].nunique())
        )

        page.click("text=episodes")
        page.fill("#f-task_id", task)
        page.click("#apply")
        rows = page.locator("tr.episode-row")
        expect(rows).to_have_count(int((whole["task_id"] == task).sum()))
        expect(page.locator("#result-count")).to_contain_text(
            f"{(whole['task_id'] == task).sum()} episodes"
        )
        rows.first.locator("a").first.click()
        expect(page.locator("#fact-outcome")).to_have_text(
            whole[whole["task_id"] == task]["outcome"].iloc[0]
        )
        expect(page.locator("#conversation .msg.assistant").first).to_be_visible()
        coloured = page.locator("#tokens span[data-value]")
        expect(coloured).to_have_count(0)
        page.select_option("#colour", "logprob")
        sampled = int(sum(whole[whole["task_id"] == task]["loss_mask"].iloc[0]))
        expect(coloured).to_have_count(sampled)
        assert float(coloured.first.get_attribute("data-value")) <= 0
        page.select_option("#colour", "advantage")
        expect(coloured).to_have_count(sampled)
        page.locator("#colour").evaluate("e => e.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(shots / "view-episode.png"))

        page.goto(url + "#/search")
        outcome = whole["outcome"].value_counts().index[-1]  # the rarest outcome
        page.select_option("#f-outcome", outcome)
        page.click("#apply")
        expect(page.locator("tr.episode-row")).to_have_count(
            int((whole["outcome"] == outcome).sum())
        )
        for value in page.locator("tr.episode-row").evaluate_all(
            "rs => rs.map(r => r.dataset.outcome)"
        ):
            assert value == outcome
        page.screenshot(path=str(shots / "view-search.png"))
    for name in ("view-run.png", "view-episode.png", "view-search.png"):
        assert (shots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_page_follows_a_run_still_training(tiny_run, browser, tmp_path):
    from playwright.sync_api import expect

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("checkpoints", "traces"))
    (run / "traces").mkdir()
    for name in ("_vocab.parquet", "update-00000001.parquet"):
        shutil.copy(tiny_run / "traces" / name, run / "traces" / name)
    rows = (tiny_run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text(rows[0] + "\n")
    with serving(run) as url:
        page = browser.new_page()
        page.goto(url + "#/search")
        expect(page.locator("#result-count")).to_contain_text("4 episodes")
        expect(page.locator("#live-status")).to_contain_text("1 update files, 1 metrics rows")
        # the next update lands as the trace writer writes it: a hidden name, then a rename
        hidden = run / "traces" / ".update-00000002.parquet.tmp"
        shutil.copy(tiny_run / "traces" / "update-00000002.parquet", hidden)
        hidden.rename(run / "traces" / "update-00000002.parquet")
        with (run / "metrics.jsonl").open("a") as file:
            file.write(rows[1] + "\n")
        event = {"update": 2, "monitor": "entropy_collapse", "action": "warn", "message": "low"}
        (run / "guards.jsonl").write_text(json.dumps(event) + "\n")
        expect(page.locator("#live-status")).to_contain_text("2 update files, 2 metrics rows")
        expect(page.locator("#result-count")).to_contain_text("8 episodes")
        page.click("header >> text=run")
        expect(page.locator("#update-links a")).to_have_count(2)
        expect(page.locator("svg.plot circle.point")).to_have_count(2)
        expect(page.locator("svg.plot line.event")).to_have_count(1)  # the guard event, marked
        expect(page.locator("svg.plot line.event title")).to_have_text(
            "guard entropy_collapse: warn — low"
        )
