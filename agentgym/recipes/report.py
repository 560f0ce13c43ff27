"""Evaluation and reporting: success rates with Wilson intervals, and the learning-curve PNG.

::

    result = evaluate(engine, "agentgym/FrozenLake-v0", 256, seed=10**9, temperature=1.0)
    print(result.describe())           # success 0.914 [0.873, 0.943] (234/256), return 0.89
    unseen = result.only(lambda key: key not in seen_tasks)

An episode that failed outside the model (``info["infra_error"]``: a server down, a sandbox
lost, an exception in the env's own code) is not judged: ``EvalResult.failures`` keeps its cause,
``failure_lines`` groups the causes by kind, and ``unjudged`` says why nothing was judged
(``agentgym.recipes.failures``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.core.types import Episode
from agentgym.inference.base import InferenceEngine
from agentgym.recipes.failures import NothingJudged, by_cause, failure_of, unjudged_reason
from agentgym.rollout.collector_source import episode_task

__all__ = [
    "EvalResult",
    "NothingJudged",
    "curves_figure",
    "evaluate",
    "failure_of",
    "plot_curves",
    "succeeded",
    "wilson_interval",
]


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% for the default ``z``)."""
    if trials <= 0:
        return 0.0, 1.0
    p, n = successes / trials, trials
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # exactly 0 and 1 at the ends: rounding put the low end of 0/6 at 2.8e-17, above its rate
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def succeeded(episode: Episode) -> bool | None:
    """The env's ``info["success"]`` on the last turn; ``None`` when the env does not say
    (``Episode.success``: success is never guessed from the reward)."""
    return episode.success


_NOTABLE = ("timeout", "truncated", "invalid")
"""Outcome classes ``EvalResult.describe`` counts beside the success rate."""


@dataclass(frozen=True)
class EvalResult:
    """Per-episode outcomes of an evaluation, keyed by the map (or task) each one played."""

    outcomes: list[tuple[str | None, bool | None, float]] = field(default_factory=list)
    """``(map key, success, return)`` per episode the model played out; success ``None``: the
    env did not say."""
    failures: list[tuple[str | None, str, str]] = field(default_factory=list)
    """``(map key, kind, error)`` per episode that failed outside the model (``failure_of``):
    not judged, and its return is not counted."""
    classes: dict[str, int] = field(default_factory=dict)
    """Episodes per outcome class (``Episode.outcome``: ``success``, ``failed``, ``invalid``,
    ``timeout``, ``truncated``, ``infra``), the classes no episode ended in left out."""

    @classmethod
    def of(cls, episodes: Sequence[Episode]) -> EvalResult:
        """The result of played ``episodes``: each one an outcome or a failure."""
        outcomes, failures, classes = [], [], Counter(e.outcome for e in episodes)
        for episode in episodes:
            failed = failure_of(episode)
            if failed is None:
                outcomes.append((episode_task(episode), episode.success, episode.total_reward))
            else:
                failures.append((episode_task(episode), *failed))
        return cls(outcomes, failures, dict(classes))

    @property
    def episodes(self) -> int:
        return len(self.outcomes) + len(self.failures)

    @property
    def judged(self) -> int:
        """Episodes whose env said whether they succeeded (the success rate's denominator)."""
        return sum(ok is not None for _, ok, _ in self.outcomes)

    @property
    def successes(self) -> int:
        return sum(bool(ok) for _, ok, _ in self.outcomes)

    @property
    def success_rate(self) -> float:
        return self.successes / self.judged if self.judged else 0.0

    @property
    def mean_return(self) -> float:
        """Over the episodes the model played out (failures left out)."""
        return sum(r for *_, r in self.outcomes) / len(self.outcomes) if self.outcomes else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.judged)

    def only(self, keep: Callable[[str | None], bool]) -> EvalResult:
        """The episodes whose task key ``keep`` accepts (e.g. tasks never seen in training)."""
        return EvalResult(
            [o for o in self.outcomes if keep(o[0])], [f for f in self.failures if keep(f[0])]
        )  # the classes are of the whole evaluation: not kept for a part

    def causes(self) -> list[tuple[str, int, str]]:
        """``(kind, episodes, example error)`` per cause of failure, most frequent first."""
        return by_cause([(kind, error) for _, kind, error in self.failures])

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON; ``success_rate`` is None when no episode was judged."""
        low, high = self.interval
        causes = [{"kind": k, "episodes": n, "example": e} for k, n, e in self.causes()]
        return {
            "episodes": self.episodes,
            "success_unknown": len(self.outcomes) - self.judged,
            "failed": len(self.failures),
            "failure_causes": causes,
            "successes": self.successes,
            "success_rate": self.success_rate if self.judged else None,
            "ci95": [low, high],
            "mean_return": self.mean_return,
            "outcomes": dict(self.classes),
        }

    def describe(self) -> str:
        """One line: the success rate with its 95% interval and the mean return, and how many
        episodes failed outside the model (``failure_lines`` says why)."""
        failed = f"; {len(self.failures)} failed outside the model" if self.failures else ""
        notable = [f"{self.classes[c]} {c}" for c in _NOTABLE if self.classes.get(c)]
        failed = f"; {', '.join(notable)}{failed}" if notable else failed
        if not self.judged:
            return f"success unknown: none of {self.episodes} episodes judged{failed}"
        low, high = self.interval
        return (
            f"success {self.success_rate:.3f} [95% CI {low:.3f}, {high:.3f}] "
            f"({self.successes}/{self.judged}), mean return {self.mean_return:.3f}{failed}"
        )

    def failure_lines(self, indent: str = "  ") -> list[str]:
        """The failures grouped by cause: a line each with its kind, count and one example
        (``infra``: outside the process, e.g. a server down; ``env``: the env's code raised)."""
        return [
            f"{indent}{count} x {kind}: {example[:300]}" for kind, count, example in self.causes()
        ]

    def unjudged(self) -> str | None:
        """Why no episode was judged, with the fix; None when some were."""
        if self.judged:
            return None
        unknown = len(self.outcomes) - self.judged
        return unjudged_reason(self.episodes, [kind for _, kind, _ in self.failures], unknown)

    def lines(self, indent: str = "  ") -> list[str]:
        """``describe`` and, below it, the failures by cause (``failure_lines``)."""
        return [self.describe(), *self.failure_lines(indent + "  ")]

    def refuse_unjudged(self, what: str) -> None:
        """Raise ``NothingJudged`` when failures outside the model left no episode judged
        (``what``: the evaluation, for the message); an env that never says whether an
        episode succeeded is not refused here (its returns still mean something)."""
        if self.judged or not self.failures:
            return
        causes = "\n".join(self.failure_lines("  "))
        raise NothingJudged(f"{what}: {self.unjudged()}. The causes:\n{causes}")


def evaluate(
    engine: InferenceEngine,
    env: str,
    episodes: int,
    *,
    seed: int,
    temperature: float = 1.0,
    max_tokens: int = 16,
    env_kwargs: Mapping[str, Any] | None = None,
    num_envs: int = 64,
    history_turns: int | None = None,
    action_choices: bool = False,
    scaffold: Any = None,
    task_options: Sequence[Mapping[str, Any] | None] | None = None,
) -> EvalResult:
    """Play ``episodes`` episodes (reset seeds ``seed``, ``seed + 1``, ...) and score them.

    ``temperature=0`` decodes greedily. Sampling is seeded from ``seed`` too. ``history_turns``
    is the policy's history window (as it was trained; None: the whole conversation), and
    ``action_choices`` whether it samples only among the env's offered actions (as trained),
    ``scaffold`` the rollout scaffold it was trained with (``agentgym.rollout.scaffold``).
    ``task_options``: episode ``i``'s reset options (e.g. ``{"task_id": 17}``: one map), one
    per episode; None: the seed alone picks each episode's task.
    """
    from agentgym.rollout import collect

    played = collect(
        engine,
        env,
        episodes,
        seed,
        env_kwargs=env_kwargs,
        num_envs=min(episodes, num_envs),
        sampling_seed=seed,
        temperature=temperature,
        max_tokens=max_tokens,
        history_turns=history_turns,
        action_choices=action_choices,
        scaffold=scaffold,
        task_options=task_options,
    )
    return EvalResult.of(played)


def _read_metrics(path: Path) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # not written yet, or being written
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class _EvalPoint:
    label: str
    step: float
    success: float
    ci95: tuple[float, float]
    episodes: int


def _evaluations(out: Path, last_step: float) -> list[_EvalPoint]:
    """The evaluations before training (``start_eval.json``) and after (``summary.json``)."""
    summary = _read_json(out / "summary.json")
    found = [
        ("before training", 0.0, _read_json(out / "start_eval.json") or summary.get("start")),
        ("after training", float(summary.get("steps", last_step)), summary.get("end")),
    ]
    points = []
    for label, step, data in found:
        if isinstance(data, dict) and data.get("success_rate") is not None:
            low, high = data.get("ci95", (data["success_rate"],) * 2)
            points.append(
                _EvalPoint(label, step, data["success_rate"], (low, high), data.get("episodes", 0))
            )
    return points


def _run_settings(out: Path) -> tuple[str, dict[str, Any]]:
    """``("<env> <algo>", training-only env arguments)`` from the folder's ``run.json``."""
    data = _read_json(out / "run.json")
    run = data.get("run") or {}
    spec = data.get("spec") or run  # older run.json files keep env and algo under "spec"
    name = f"{spec.get('env') or ''} {spec.get('algo') or ''}".strip()
    return name, dict(run.get("train_env_kwargs") or {})


def _plot_series(ax: Any, rows: list[dict[str, float]], series: list[tuple[str, str]]) -> None:
    steps = [r["step"] for r in rows]
    drawn = False
    for key, label in series:
        if any(key in r for r in rows):
            ax.plot(steps, [r.get(key, math.nan) for r in rows], label=label)
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)


def _success_panel(ax: Any, rows: list[dict[str, float]], evals: list[_EvalPoint]) -> None:
    _plot_series(ax, rows, [("success_rate", "training batches (sampled)")])
    for point, marker in zip(evals, "os", strict=False):
        low, high = point.ci95
        ax.errorbar(
            [point.step],
            [point.success],
            yerr=[[max(0.0, point.success - low)], [max(0.0, high - point.success)]],
            fmt=marker,
            capsize=4,
            label=f"eval {point.label}: {point.success:.2f} "
            f"[95% CI {low:.2f}, {high:.2f}], {point.episodes} episodes",
        )
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("success rate")
    ax.set_title("success")


def _reward_panel(ax: Any, rows: list[dict[str, float]], train_kwargs: dict[str, Any]) -> None:
    settings = ", ".join(f"{k}={v}" for k, v in train_kwargs.items())
    series = [
        ("reward_mean", f"env reward (training-only {settings})" if settings else "env reward")
    ]
    both = [r for r in rows if "reward_mean" in r and "shaped_reward_mean" in r]
    if any(abs(r["shaped_reward_mean"] - r["reward_mean"]) > 1e-9 for r in both):
        series.append(("shaped_reward_mean", "shaped reward (what the loss saw)"))
    _plot_series(ax, rows, series)
    ax.set_ylabel("mean episode return")
    ax.set_title("reward in training")


def _guard_marks(axes: Any, run: Path) -> None:
    """A vertical line per guard event (``guards.jsonl``) on every panel: red where the run
    stopped or rolled back, orange for a warning; the legend of the first panel names them."""
    path = run / "guards.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    for event in events:
        color = "tab:orange" if event["action"] == "warn" else "tab:red"
        label = f"guard {event['monitor']} at update {event['update']}: {event['action']}"
        if event.get("to_update") is not None:
            label += f" to {event['to_update']}"
        for index, ax in enumerate(axes.flat):
            shown = label if index == 0 else None
            ax.axvline(event["update"], color=color, ls="--", lw=1, label=shown)


def curves_figure(run: Path, title: str | None = None) -> Any:
    """The run folder ``run``'s learning curves as a matplotlib ``Figure``; None before its
    first update. Panels: success (training batches, and the evaluations before and after
    training with their 95% intervals), reward, entropy, KL; x: update. Guard events are
    dashed vertical lines."""
    rows = _read_metrics(run / "metrics.jsonl")
    if not rows:
        return None
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    name, train_kwargs = _run_settings(run)
    fig = Figure(figsize=(11, 7.5), dpi=100, layout="constrained")
    axes = fig.subplots(2, 2, sharex=True)
    _success_panel(axes[0, 0], rows, _evaluations(run, rows[-1]["step"]))
    _reward_panel(axes[0, 1], rows, train_kwargs)
    _plot_series(axes[1, 0], rows, [("entropy", "policy entropy")])
    axes[1, 0].set_ylabel("entropy (nats per token)")
    axes[1, 0].set_title("entropy")
    _plot_series(
        axes[1, 1],
        rows,
        [("kl", "KL to the reference policy"), ("approx_kl", "approx. KL to the sampling policy")],
    )
    axes[1, 1].set_ylabel("KL (nats per token)")
    axes[1, 1].set_title("KL")
    _guard_marks(axes, run)
    for ax in axes.flat:
        ax.set_xlabel("update")
        ax.tick_params(labelbottom=True)  # sharex hides the top row's update numbers
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize="small")
    fig.suptitle(title if title is not None else name)
    return fig


def plot_curves(run: Path, png_path: Path | None = None, title: str = "") -> Path | None:
    """Write ``curves_figure`` of the run folder ``run`` (or of the folder of the
    ``metrics.jsonl`` given) to ``png_path`` (default: ``curves.png`` in the folder); None with
    no update yet. Reads only the folder, so it can be re-run after the final evaluation."""
    run = Path(run)
    folder = run.parent if run.is_file() or run.suffix == ".jsonl" else run
    fig = curves_figure(folder, title or None)
    if fig is None:
        return None
    png_path = Path(png_path) if png_path is not None else folder / "curves.png"
    tmp = png_path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    tmp.replace(png_path)
    return png_path
