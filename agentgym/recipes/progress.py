"""What a training run shows while it runs: progress, TensorBoard, W&B, the PNG.

``RunMonitor`` is the ``on_metrics`` callback of ``fit``: each update's metrics go to the
terminal (reward, success, KL, entropy, tokens/s, episodes/s), to TensorBoard events in the run
folder, to W&B when asked for, and every ``plot_every`` updates to ``curves.png``.

On a terminal the terminal shows a rich progress bar, and warnings and log records (Python's
``warnings``, transformers' and torch's loggers) print above it instead of through it. Anywhere
else (``> log.txt``, CI) a live bar would show nothing until the run ends: one plain line per
update is printed instead, flushed at once.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from agentgym.recipes.report import plot_curves

__all__ = ["RunMonitor"]

_BAR_FIELDS = (
    ("reward", "reward_mean", "{:+.2f}"),
    ("success", "success_rate", "{:.2f}"),
    ("kl", "kl", "{:.3f}"),
    ("entropy", "entropy", "{:.3f}"),
    ("tok/s", "tokens_per_s", "{:.0f}"),
    ("ep/s", "episodes_per_s", "{:.2f}"),
)

_BAR_WIDTH = 20


def _last_elapsed(path: Path) -> float:
    lines = path.read_text().splitlines() if path.is_file() else []
    return float(json.loads(lines[-1]).get("elapsed_s", 0.0)) if lines else 0.0


def _bar_text(metrics: dict[str, float]) -> str:
    if "empty_steps" in metrics:  # no update: every episode of the step was dropped
        kinds = [f"{k.removeprefix('dropped/')} {v:.0f}" for k, v in metrics.items()
                 if k.startswith("dropped/")]  # fmt: skip
        dropped = metrics.get("dropped_episodes", 0.0)
        return f"nothing to train on: all {dropped:.0f} episodes dropped ({', '.join(kinds)})"
    parts = [
        f"{label} {fmt.format(metrics[key])}" for label, key, fmt in _BAR_FIELDS if key in metrics
    ]
    return "  ".join(parts)


def _fit(text: str, room: int) -> str:
    """The leading whole fields of ``text`` that fit in ``room`` columns: rich would squeeze
    the bar's other columns to "3…" first, and a field cut in half reads wrong."""
    parts = text.split("  ")
    while parts and len("  ".join(parts)) > room:
        parts.pop()
    return "  ".join(parts)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _line_text(metrics: dict[str, float], total: int) -> str:
    """One update as a plain log line: ``update 3/150  reward -2.66  ...  elapsed 0:01:38``."""
    head = f"update {int(metrics['step'])}/{total}"
    tail = f"elapsed {_clock(metrics['elapsed_s'])}" if "elapsed_s" in metrics else ""
    return "  ".join(part for part in (head, _bar_text(metrics), tail) if part)


class RunMonitor:
    """Progress, TensorBoard, optional W&B and the periodic PNG of a run folder ``out``.

    ``show_bar=False`` prints no progress at all; otherwise ``stream`` (default: stdout) gets a
    live bar when it is a terminal and one line per update when it is not.
    """

    def __init__(
        self,
        out: Path,
        *,
        total_steps: int,
        start_step: int = 0,
        title: str = "",
        plot_every: int = 5,
        show_bar: bool = True,
        wandb_project: str | None = None,
        wandb_config: dict[str, Any] | None = None,
        stream: IO[str] | None = None,
    ) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.out, self.title, self.plot_every = out, title, plot_every
        self.writer = SummaryWriter(log_dir=str(out / "tensorboard"))
        self.wandb = _start_wandb(wandb_project, out, wandb_config) if wandb_project else None
        self.display = _start_display(total_steps, start_step, stream) if show_bar else None
        self.last = time.perf_counter()
        self.elapsed: float | None = None

    def restart_clock(self) -> None:
        """Start timing the next update from now (after an evaluation, say)."""
        self.last = time.perf_counter()

    def __call__(self, metrics: dict[str, float]) -> None:
        """Adds ``wall_s`` (this update, collection included), ``collect_s``, ``elapsed_s``
        (training time of the run so far, resumed parts included) and ``episodes_per_s``."""
        now = time.perf_counter()
        if self.elapsed is None:  # fit has cut metrics.jsonl back to the checkpoint by now
            self.elapsed = _last_elapsed(self.out / "metrics.jsonl")
        wall = now - self.last
        self.last, self.elapsed = now, self.elapsed + wall
        metrics.update(
            wall_s=wall,
            collect_s=max(0.0, wall - metrics.get("step_s", 0.0)),
            elapsed_s=self.elapsed,
            episodes_per_s=metrics.get("episodes_sampled", metrics.get("episodes", 0.0))
            / max(wall, 1e-9),
        )
        step = int(metrics["step"])
        for key, value in metrics.items():
            if isinstance(value, int | float):
                self.writer.add_scalar(f"train/{key}", value, step)
        if self.wandb is not None:
            self.wandb.log(metrics, step=step)
        if self.display is not None:
            self.display.update(step, metrics)
        if step % self.plot_every == 0:
            self.plot()

    def plot(self) -> Path | None:
        return plot_curves(self.out, title=self.title)

    def log_eval(self, name: str, values: dict[str, Any], step: int) -> None:
        """An evaluation's numbers, as ``eval/<name>/<key>`` scalars."""
        for key, value in values.items():
            if isinstance(value, int | float):
                self.writer.add_scalar(f"eval/{name}/{key}", value, step)
        if self.wandb is not None:
            self.wandb.log({f"eval/{name}/{k}": v for k, v in values.items()}, step=step)

    def close(self) -> None:
        if self.display is not None:
            self.display.stop()
            self.display = None
        self.writer.close()
        if self.wandb is not None:
            self.wandb.finish()
            self.wandb = None

    def __enter__(self) -> RunMonitor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Lines:
    """Progress where no terminal shows it: one flushed line per update."""

    def __init__(self, total: int, done: int, stream: IO[str]) -> None:
        self.total, self.stream = total, stream
        remaining = f", from update {done}" if done else ""
        self._print(f"train: {total} updates{remaining}; a line after each")

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def update(self, step: int, metrics: dict[str, float]) -> None:
        self._print(_line_text(metrics, self.total))

    def stop(self) -> None:
        pass


class _Bar:
    """A rich progress bar; what the run prints, warns or logs meanwhile goes above it."""

    def __init__(self, total: int, done: int, console: Any) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        # stderr is drawn above the bar only when it shares the terminal with it; a
        # redirected stderr cannot break the bar, and its file should keep its lines.
        self.routes_stderr = sys.stderr.isatty()
        # train, the bar, "  3/150", "0:01:38" and the spaces between them; the stats get the rest
        self.fixed = len("train") + _BAR_WIDTH + 2 * len(str(total)) + 1 + len("0:00:00") + 4
        self.progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(bar_width=_BAR_WIDTH),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[stats]}"),
            console=console,
            redirect_stderr=self.routes_stderr,
        )
        self.task = self.progress.add_task("train", total=total, completed=done, stats="collecting")
        self.progress.start()
        self._restore = _route_output(console) if self.routes_stderr else None

    def update(self, step: int, metrics: dict[str, float]) -> None:
        room = self.progress.console.width - self.fixed
        self.progress.update(self.task, completed=step, stats=_fit(_bar_text(metrics), room))

    def stop(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None
        self.progress.stop()


def _start_display(total: int, done: int, stream: IO[str] | None) -> _Bar | _Lines:
    from rich.console import Console

    console = Console(file=stream or sys.stdout)
    if console.is_terminal or console.is_jupyter:
        return _Bar(total, done, console)
    return _Lines(total, done, stream or sys.stdout)


def _route_output(console: Any) -> Any:
    """Send warnings and the records of loggers that write to the terminal's stderr through
    ``console`` (above its live bar); returns the function that undoes it.

    Live display redirects ``sys.stderr`` itself, but a ``logging.StreamHandler`` keeps the
    stream it was made with (transformers makes its own at import), and writes through the bar.
    """
    from rich.file_proxy import FileProxy

    terminal = {id(sys.__stderr__), id(sys.__stdout__)}
    proxied = getattr(sys.stderr, "rich_proxied_file", sys.stderr)
    terminal.add(id(proxied))
    proxy = FileProxy(console, proxied)
    moved: list[tuple[logging.StreamHandler[Any], IO[str]]] = []
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if type(handler) is logging.StreamHandler and id(handler.stream) in terminal:
                moved.append((handler, handler.setStream(proxy)))  # type: ignore[arg-type]
    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: IO[str] | None = None,
        line: str | None = None,
    ) -> None:
        text = warnings.formatwarning(message, category, filename, lineno, line)
        proxy.write(text if text.endswith("\n") else text + "\n")

    warnings.showwarning = show

    def restore() -> None:
        warnings.showwarning = shown
        for handler, stream in moved:
            handler.setStream(stream)
        proxy.flush()

    return restore


def _start_wandb(project: str, out: Path, config: dict[str, Any] | None) -> Any:
    try:
        import wandb
    except ImportError:
        from agentgym.core.errors import ConfigError

        raise ConfigError(
            "--wandb", project, "needs the wandb package", "pip install wandb, or drop --wandb"
        ) from None
    return wandb.init(project=project, dir=str(out), config=config or {}, name=out.name)
