"""What a training run shows while it runs: a rich progress bar, TensorBoard, W&B, the PNG.

``RunMonitor`` is the ``on_metrics`` callback of ``fit``: each update's metrics go to the bar
(reward, success, KL, entropy, tokens/s, episodes/s), to TensorBoard events in the run folder,
to W&B when asked for, and every ``plot_every`` updates to ``curves.png``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import TracebackType
from typing import Any

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


def _last_elapsed(path: Path) -> float:
    lines = path.read_text().splitlines() if path.is_file() else []
    return float(json.loads(lines[-1]).get("elapsed_s", 0.0)) if lines else 0.0


def _bar_text(metrics: dict[str, float]) -> str:
    parts = [
        f"{label} {fmt.format(metrics[key])}" for label, key, fmt in _BAR_FIELDS if key in metrics
    ]
    return "  ".join(parts)


class RunMonitor:
    """Progress bar, TensorBoard, optional W&B and the periodic PNG of a run folder ``out``."""

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
    ) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.out, self.title, self.plot_every = out, title, plot_every
        self.writer = SummaryWriter(log_dir=str(out / "tensorboard"))
        self.wandb = _start_wandb(wandb_project, out, wandb_config) if wandb_project else None
        self.progress, self.task = _start_bar(total_steps, start_step) if show_bar else (None, None)
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
        if self.progress is not None:
            self.progress.update(self.task, completed=step, stats=_bar_text(metrics))
        if step % self.plot_every == 0:
            self.plot()

    def plot(self) -> Path | None:
        return plot_curves(self.out / "metrics.jsonl", self.out / "curves.png", self.title)

    def log_eval(self, name: str, values: dict[str, Any], step: int) -> None:
        """An evaluation's numbers, as ``eval/<name>/<key>`` scalars."""
        for key, value in values.items():
            if isinstance(value, int | float):
                self.writer.add_scalar(f"eval/{name}/{key}", value, step)
        if self.wandb is not None:
            self.wandb.log({f"eval/{name}/{k}": v for k, v in values.items()}, step=step)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
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


def _start_bar(total: int, done: int) -> tuple[Any, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("[bold]train"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[stats]}"),
    )
    task = progress.add_task("train", total=total, completed=done, stats="collecting...")
    progress.start()
    return progress, task


def _start_wandb(project: str, out: Path, config: dict[str, Any] | None) -> Any:
    try:
        import wandb
    except ImportError:
        from agentgym.core.errors import ConfigError

        raise ConfigError(
            "--wandb", project, "needs the wandb package", "pip install wandb, or drop --wandb"
        ) from None
    return wandb.init(project=project, dir=str(out), config=config or {}, name=out.name)
