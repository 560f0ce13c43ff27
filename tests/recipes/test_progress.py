"""Run progress where no terminal shows a bar, output routed above a live bar, the curves PNG."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import warnings

import pytest

from agentgym.recipes.progress import RunMonitor, _route_output
from agentgym.recipes.report import EvalResult, curves_figure, plot_curves


def _metrics(step: int) -> dict[str, float]:
    return {
        "step": float(step),
        "reward_mean": -2.0 + 0.5 * step,
        "shaped_reward_mean": -2.0 + 0.5 * step,
        "success_rate": 0.1 * step,
        "kl": 0.01 * step,
        "approx_kl": 0.02,
        "entropy": 1.3 - 0.1 * step,
        "tokens_per_s": 5000.0 + step,
        "episodes": 64.0,
    }


def test_without_a_terminal_each_update_logs_one_flushed_line(tmp_path):
    stream = io.StringIO()  # not a TTY, like `> log.txt` or CI
    with RunMonitor(tmp_path, total_steps=3, stream=stream, plot_every=100) as monitor:
        for step in (1, 2, 3):
            monitor(_metrics(step))
            lines = stream.getvalue().splitlines()
            assert len(lines) == 1 + step  # the line is there before the next update starts
    lines = stream.getvalue().splitlines()
    assert "3 updates" in lines[0]
    for step, line in enumerate(lines[1:], start=1):
        assert line.startswith(f"update {step}/3")
        fields = dict(part.split(" ", 1) for part in line.split("  "))
        assert float(fields["reward"]) == pytest.approx(-2.0 + 0.5 * step, abs=0.01)
        assert float(fields["success"]) == pytest.approx(0.1 * step, abs=0.01)
        assert float(fields["kl"]) == pytest.approx(0.01 * step, abs=0.001)
        assert float(fields["entropy"]) == pytest.approx(1.3 - 0.1 * step, abs=0.001)
        assert fields["tok/s"] == f"{5000 + step}"
        assert fields["elapsed"].count(":") == 2
    assert "\x1b[" not in stream.getvalue()  # no terminal control codes in a log file


def test_a_step_with_nothing_to_train_on_says_why(tmp_path):
    stream = io.StringIO()
    empty = {"step": 0.0, "empty_steps": 1.0, "dropped_episodes": 8.0, "dropped_groups": 2.0,
             "dropped/infra": 6.0, "dropped/env": 2.0}  # fmt: skip
    with RunMonitor(tmp_path, total_steps=3, stream=stream, plot_every=100) as monitor:
        monitor(empty)
    line = stream.getvalue().splitlines()[1]
    said = "nothing to train on: all 8 episodes dropped (infra 6, env 2)"
    assert line.startswith(f"update 0/3  {said}")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [80, 60])
def test_on_a_terminal_the_bar_keeps_its_count_and_drops_whole_fields(
    tmp_path, monkeypatch, columns
):
    monkeypatch.setenv("COLUMNS", str(columns))
    screen = _Terminal()
    with RunMonitor(tmp_path, total_steps=150, stream=screen, plot_every=1000) as monitor:
        monitor(_metrics(3))
    last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue()).strip().splitlines()[-1]
    assert "update 3/150" not in screen.getvalue()  # a bar, not log lines
    assert len(last) <= columns
    assert "3/150" in last
    assert "…" not in last
    assert "reward +" in last or "reward -" in last
    fields = last.split("  ")
    assert all(" " in field for field in fields[1:])  # "success 0.30", never "succ"


def test_no_progress_prints_nothing(tmp_path):
    stream = io.StringIO()
    with RunMonitor(tmp_path, total_steps=2, stream=stream, show_bar=False) as monitor:
        monitor(_metrics(1))
    assert stream.getvalue() == ""


def test_warnings_and_log_records_print_through_the_console_and_are_restored():
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=200)
    # transformers makes its handler at import, holding the terminal's stderr itself.
    handler = logging.StreamHandler(sys.__stderr__)
    logger = logging.getLogger("agentgym-test-routing")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            restore = _route_output(console)
            try:
                warnings.warn("a deprecation the user should see", UserWarning, stacklevel=1)
                logger.warning("a transformers log record")
            finally:
                restore()
            assert handler.stream is sys.__stderr__
    finally:
        logger.removeHandler(handler)
    shown = screen.getvalue()
    assert "UserWarning: a deprecation the user should see" in shown
    assert "a transformers log record" in shown


def _run_folder(tmp_path, steps: int, *, evals: bool, shaped: bool = False):
    rows = [_metrics(step) for step in range(1, steps + 1)]
    if shaped:
        for row in rows:
            row["shaped_reward_mean"] -= 0.25
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = {"env": "agentgym/FrozenLake-v0", "algo": "grpo", "train_env_kwargs": {"hole_reward": -1}}
    (tmp_path / "run.json").write_text(json.dumps({"run": run}))
    if evals:
        start = EvalResult([("a", True, 1.0)] + [("b", False, 0.0)] * 15).to_dict()
        end = EvalResult([("a", True, 1.0)] * 12 + [("b", False, 0.0)] * 4).to_dict()
        (tmp_path / "start_eval.json").write_text(json.dumps(start))
        (tmp_path / "summary.json").write_text(json.dumps({"steps": steps, "end": end}))
    return tmp_path


def _legend(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def test_curves_have_labelled_panels_and_mark_the_evaluations(tmp_path):
    run = _run_folder(tmp_path, 4, evals=True)
    fig = curves_figure(run)
    success, reward, entropy, kl = fig.axes
    assert {ax.get_xlabel() for ax in fig.axes} == {"update"}
    assert success.get_ylabel() == "success rate"
    assert "return" in reward.get_ylabel()
    assert "entropy" in entropy.get_ylabel()
    assert "KL" in kl.get_ylabel()
    labels = _legend(success)
    before = next(text for text in labels if "before training" in text)
    after = next(text for text in labels if "after training" in text)
    assert "0.06" in before
    assert "16 episodes" in before
    assert "0.75" in after  # 12 of 16
    low, high = EvalResult([("a", True, 1.0)] * 12 + [("b", False, 0.0)] * 4).interval
    assert f"{low:.2f}, {high:.2f}" in after
    marked = [line for line in success.get_lines() if list(line.get_xdata()) == [4.0]]
    assert marked
    assert marked[0].get_ydata()[0] == pytest.approx(0.75)
    assert any("hole_reward=-1" in text for text in _legend(reward))
    assert not any("shaped" in text for text in _legend(reward))  # same as the env's here
    assert len(_legend(kl)) == 2
    assert fig.get_suptitle() == "agentgym/FrozenLake-v0 grpo"


def test_curves_without_evaluations_show_shaping_when_it_changed_the_reward(tmp_path):
    fig = curves_figure(_run_folder(tmp_path, 3, evals=False, shaped=True))
    success, reward = fig.axes[:2]
    assert not any("eval" in text for text in _legend(success))
    assert any("shaped" in text for text in _legend(reward))


def test_plot_curves_writes_a_png_from_the_run_folder_alone(tmp_path):
    assert plot_curves(tmp_path) is None  # no update yet
    run = _run_folder(tmp_path, 2, evals=True)
    png = plot_curves(run)
    assert png == run / "curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = plot_curves(run / "metrics.jsonl", run / "other.png", "a title")
    assert other == run / "other.png"
    assert other.is_file()
