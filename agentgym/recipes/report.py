"""Evaluation and reporting: success rates with Wilson intervals, and the learning-curve PNG.

::

    result = evaluate(engine, "agentgym/FrozenLake-v0", 256, seed=10**9, temperature=1.0)
    print(result.describe())           # success 0.914 [0.873, 0.943] (234/256), return 0.89
    unseen = result.only(lambda key: key not in seen_tasks)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.core.types import Episode
from agentgym.inference.base import InferenceEngine
from agentgym.trainers.collector import episode_task

__all__ = ["EvalResult", "evaluate", "plot_curves", "succeeded", "wilson_interval"]


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% for the default ``z``)."""
    if trials <= 0:
        return 0.0, 1.0
    p, n = successes / trials, trials
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def succeeded(episode: Episode) -> bool | None:
    """The env's ``info["success"]`` on the last turn; ``None`` when the env does not say
    (``Episode.success``: success is never guessed from the reward)."""
    return episode.success


@dataclass(frozen=True)
class EvalResult:
    """Per-episode outcomes of an evaluation, keyed by the map (or task) each one played."""

    outcomes: list[tuple[str | None, bool | None, float]] = field(default_factory=list)
    """``(map key, success, return)`` per episode; success ``None``: the env did not say."""

    @property
    def episodes(self) -> int:
        return len(self.outcomes)

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
        return sum(r for *_, r in self.outcomes) / self.episodes if self.episodes else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.judged)

    def only(self, keep: Callable[[str | None], bool]) -> EvalResult:
        """The episodes whose task key ``keep`` accepts (e.g. tasks never seen in training)."""
        return EvalResult([o for o in self.outcomes if keep(o[0])])

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "episodes": self.episodes,
            "success_unknown": self.episodes - self.judged,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "ci95": [low, high],
            "mean_return": self.mean_return,
        }

    def describe(self) -> str:
        low, high = self.interval
        return (
            f"success {self.success_rate:.3f} [95% CI {low:.3f}, {high:.3f}] "
            f"({self.successes}/{self.judged}), mean return {self.mean_return:.3f}"
        )


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
) -> EvalResult:
    """Play ``episodes`` episodes (reset seeds ``seed``, ``seed + 1``, ...) and score them.

    ``temperature=0`` decodes greedily. Sampling is seeded from ``seed`` too. ``history_turns``
    is the policy's history window (as it was trained; None: the whole conversation), and
    ``action_choices`` whether it samples only among the env's offered actions (as trained).
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
    )
    return EvalResult([(episode_task(e), succeeded(e), e.total_reward) for e in played])


def _read_metrics(path: Path) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_curves(metrics_path: Path, png_path: Path, title: str = "") -> Path | None:
    """Reward and success per step from ``metrics.jsonl`` to a PNG; None with no data yet."""
    rows = _read_metrics(metrics_path)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    steps = [r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for key, label in (("success_rate", "success"), ("reward_mean", "reward (mean)")):
        if any(key in r for r in rows):
            ax.plot(steps, [r.get(key, math.nan) for r in rows], label=label)
    ax.set_xlabel("training step")
    ax.set_ylim(min(-0.1, ax.get_ylim()[0]), 1.05)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(title)
    fig.tight_layout()
    tmp = png_path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(png_path)
    return png_path
