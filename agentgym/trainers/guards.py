"""Failure-mode guards: monitors over a run's metrics, each with a declared action.

::

    guards = Guards(GuardsConfig.from_dict({"entropy_collapse": {"action": "stop"}}))
    fit(trainer, source, steps=150, out="runs/r1", guards=guards)
    guards.events  # [{"update": 61, "monitor": "entropy_collapse", "action": "rollback", ...}]

After every update each monitor compares one metric with its threshold; a monitor trips when the
metric has been on the wrong side for ``patience`` updates in a row, and then acts once per such
streak:

- ``warn``: an event is recorded, training goes on;
- ``stop``: the run checkpoints and ends;
- ``rollback``: the run goes back to the newest checkpoint written before the streak began (its
  policy produced the last good update), the learning rate is multiplied by ``lr_factor``, the
  checkpoints after it are deleted and the metrics rows after it are set aside by ``fit``'s
  recorder (``agentgym train``: to ``metrics.rolled_back.jsonl``); after ``max_rollbacks``
  rollbacks, or with no such checkpoint, the run stops instead.

Events go to ``Guards.events``, to ``fit``'s recorder (``agentgym train``: ``guards.jsonl``, one
line each) and, through ``agentgym train``, to ``summary.json`` and the curves. The guards' state
(streaks, baselines, rollbacks done, the learning-rate scale, events) is part of every
checkpoint, so a run resumed
after a rollback continues exactly as if it had not stopped. The monitors, their defaults and
why they are conservative: ``docs/guards.md``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgym.core.types import Episode
from agentgym.trainers.guard_config import MONITORS, GuardsConfig, MonitorConfig
from agentgym.trainers.recorder import Recorder

__all__ = ["MONITORS", "Guards", "GuardsConfig", "MonitorConfig"]


def _fresh_counts() -> dict[str, float]:
    """Episode counts toward the next update's ``guards/*`` rates."""
    return dict.fromkeys(("episodes", "infra", "void", "flagged", "valid", "judged", "excess"), 0.0)


def _fresh_monitor_state() -> dict[str, Any]:
    return {"streak": 0, "start": None, "history": []}


def _no_target(bound: int) -> str:
    """Why no checkpoint can be rolled back to: the good one would be of update ``bound``."""
    if bound < 1:  # the trouble began within the first updates: no checkpoint precedes it
        return "no checkpoint from before the trouble began: stopping instead of rolling back"
    return (
        f"no checkpoint of update {bound} or earlier (before the trouble began) is kept: "
        "stopping instead of rolling back"
    )


class Guards:
    """The monitors of ``config`` over one run; pass it to ``fit(..., guards=...)``."""

    def __init__(
        self,
        config: GuardsConfig | None = None,
        *,
        reward_range: tuple[float, float] | None = None,
    ) -> None:
        self.config = config or GuardsConfig()
        settings = self.config.settings
        self.reward_range = settings.reward_range or reward_range
        self.monitors = {
            name: cfg
            for name, cfg in self.config.monitors.items()
            if cfg.action != "off" and settings.enabled
        }
        if self.reward_range is None:
            self.monitors.pop("reward_range", None)
        self.rollbacks, self.lr_scale = 0, 1.0
        self.events: list[dict[str, Any]] = []
        self.state: dict[str, dict[str, Any]] = {n: _fresh_monitor_state() for n in self.monitors}
        self.recorder: Recorder | None = None
        self.rank = 0
        self._pending = _fresh_counts()

    @property
    def enabled(self) -> bool:
        return bool(self.monitors)

    # -- episodes -------------------------------------------------------------------------

    def episode_metrics(self, episodes: Sequence[Episode], update: bool) -> dict[str, float]:
        """Rates over the episodes collected for an update (several collect calls when DAPO's
        dynamic sampling asks for more): ``guards/infra_error_rate``, ``guards/flagged_rate``,
        ``guards/valid_action_rate`` (of steps that say ``invalid_action``),
        ``guards/void_rate`` (episodes whose every step was an invalid action: outcome
        ``invalid``) and
        ``guards/return_excess`` (how far a return lies outside ``reward_range``, when there is
        one). Empty until ``update`` (a step that updated the policy, or one whose every
        episode was dropped: its row counts too)."""
        if not self.enabled:
            return {}
        low, high = self.reward_range or (float("-inf"), float("inf"))
        counts = self._pending
        for episode in episodes:
            infos = [episode.reset_info, *(t.info for t in episode.turns)]
            judged = [bool(i["invalid_action"]) for i in infos if "invalid_action" in i]
            total = episode.total_reward
            counts["episodes"] += 1
            counts["infra"] += float(episode.infra_error)
            counts["void"] += float(episode.outcome == "invalid")
            counts["flagged"] += float(any(i.get(k) for i in infos for k in self.config.flag_keys))
            counts["valid"] += len(judged) - sum(judged)
            counts["judged"] += len(judged)
            if not episode.infra_error:
                counts["excess"] = max(counts["excess"], total - high, low - total)
        if not update or not counts["episodes"]:
            return {}
        self._pending = _fresh_counts()
        metrics = {
            "guards/infra_error_rate": counts["infra"] / counts["episodes"],
            "guards/void_rate": counts["void"] / counts["episodes"],
            "guards/flagged_rate": counts["flagged"] / counts["episodes"],
        }
        if self.reward_range is not None:
            metrics["guards/return_excess"] = counts["excess"]
        if counts["judged"]:
            metrics["guards/valid_action_rate"] = counts["valid"] / counts["judged"]
        return metrics

    # -- checks ---------------------------------------------------------------------------

    def _limit(self, name: str, cfg: MonitorConfig, history: list[float]) -> float | None:
        """The monitor's limit now, from its history of earlier values; None: not yet."""
        if name == "entropy_collapse":
            if cfg.relative is None or not history:
                return cfg.threshold
            early = statistics.fmean(history[: cfg.warmup])
            return max(cfg.threshold, cfg.relative * early)
        if name == "length_blowup":
            if len(history) < cfg.warmup or cfg.relative is None:
                return None
            return cfg.relative * statistics.median(history[-4 * cfg.warmup :])
        if name == "valid_action_drop":
            return max(history) - cfg.threshold if history else None
        return cfg.threshold

    def _bad(self, name: str, cfg: MonitorConfig, value: float, limit: float, metrics: Any) -> bool:
        bad = value < limit if MONITORS[name].below else value > limit
        if name == "entropy_collapse" and cfg.min_success is not None:
            success = metrics.get("success_rate")
            bad = bad and (success is None or success < cfg.min_success)
        return bad

    def _observe(self, name: str, cfg: MonitorConfig, metrics: Mapping[str, float]) -> Any:
        """Update ``name``'s streak with this update; the event when it trips now, else None."""
        metric = cfg.metric or MONITORS[name].metric
        value = metrics.get(metric)
        if value is None:
            return None
        state, step = self.state[name], int(metrics["step"])
        limit = self._limit(name, cfg, state["history"])
        state["history"] = (state["history"] + [float(value)])[-max(4 * cfg.warmup, 1) :]
        if name == "entropy_collapse":  # keep the early values: its baseline
            state["history"] = state["history"][: cfg.warmup]
        if limit is None or not self._bad(name, cfg, value, limit, metrics):
            state["streak"], state["start"] = 0, None
            return None
        state["streak"] += 1
        state["start"] = step if state["start"] is None else state["start"]
        if state["streak"] != cfg.patience:
            return None
        return {
            "update": step,
            "monitor": name,
            "metric": metric,
            "value": float(value),
            "threshold": float(limit),
            "since_update": state["start"],
            "action": cfg.action,
        }

    def good_step(self, step: int) -> int:
        """The newest checkpoint step a rollback may return to: before the earliest open
        streak of a rollback monitor (whose first bad update was sampled by the checkpoint
        just before it), minus ``rollback_margin``."""
        starts = [
            s["start"]
            for name, s in self.state.items()
            if s["start"] is not None and self.monitors[name].action == "rollback"
        ]
        first_bad = min(starts, default=step + 1)
        return first_bad - 2 - self.config.settings.rollback_margin

    def protected(self, directory: Path, step: int) -> int | None:
        """The checkpoint step that pruning must keep: the one a rollback would return to."""
        if not any(cfg.action == "rollback" for cfg in self.monitors.values()):
            return None
        from agentgym.trainers.rollback import protected_step

        return protected_step(directory, self.good_step(step))

    def check(self, metrics: Mapping[str, float], run: Any, source: Any) -> str | None:
        """Observe one step's metrics row (an update's, or an empty step's: ``fit`` passes
        both); record what trips and act on it. Returns ``"stop"``, ``"rollback"`` (done: the
        run is back at its good checkpoint) or None."""
        events = [e for n, c in self.monitors.items() if (e := self._observe(n, c, metrics))]
        verdict = None
        for event in events:
            if event["action"] == "stop":
                verdict = "stop"
            elif event["action"] == "rollback" and verdict is None:
                verdict = "rollback"
        target = None
        if verdict == "rollback":
            target, why = self._rollback_target(run, int(metrics["step"]))
            if target is None:
                verdict = "stop"
                for event in events:
                    if event["action"] == "rollback":
                        event.update(action="stop", reason=why)
        if target is None:
            self._record(events)
            return verdict
        from agentgym.trainers.rollback import roll_back

        roll_back(self, run, source, target, events)
        return verdict

    def _rollback_target(self, run: Any, step: int) -> tuple[Path | None, str]:
        """The checkpoint to roll back to (None, and why not); rank 0's choice on every rank
        (collective), so that the ranks roll back together or stop together."""
        found = self._find_target(run, step)
        if run is not None and run.trainer.backend.world_size > 1:
            found = run.trainer.backend.broadcast_object(found)
        return found

    def _find_target(self, run: Any, step: int) -> tuple[Path | None, str]:
        settings = self.config.settings
        if self.rollbacks >= settings.max_rollbacks:
            return None, f"max_rollbacks={settings.max_rollbacks} already taken"
        if run is None or run.checkpoints is None:
            return None, "the run has no checkpoints (out=None) to roll back to"
        from agentgym.trainers.rollback import checkpoint_at_or_before

        bound = self.good_step(step)
        target = checkpoint_at_or_before(run.checkpoints, bound)
        if target is None:
            return None, _no_target(bound)
        return target, ""

    def _record(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.events.append(event)
            shown = f"{event['value']:.4g} vs {event['threshold']:.4g}"
            self.say(
                f"guard {event['monitor']} at update {event['update']}: {event['metric']} "
                f"{shown} since update {event['since_update']}: {event['action']}"
                + (f" ({event['reason']})" if event.get("reason") else "")
            )
            if self.recorder is not None:
                self.recorder.event(event)

    def summary(self) -> dict[str, Any]:
        """What ``summary.json`` holds of the guards: the events, rollbacks taken, the final
        learning-rate scale, and whether a guard stopped the run."""
        return {
            "enabled": self.enabled,
            "events": [dict(e) for e in self.events],
            "rollbacks": self.rollbacks,
            "lr_scale": self.lr_scale,
            "stopped": any(e["action"] == "stop" for e in self.events),
        }

    # -- state ----------------------------------------------------------------------------

    def attach(self, recorder: Recorder | None, rank: int) -> None:
        """Record events with ``recorder`` (rank 0 only)."""
        self.recorder, self.rank = (recorder if rank == 0 else None), rank

    def say(self, text: str) -> None:
        """Print ``text`` on rank 0."""
        if self.rank == 0:
            print(text, flush=True)

    def state_dict(self) -> dict[str, Any]:
        return {
            "rollbacks": self.rollbacks,
            "lr_scale": self.lr_scale,
            "events": [dict(e) for e in self.events],
            "monitors": json.loads(json.dumps(self.state)),
        }

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        """Continue from ``state_dict`` (None: a fresh run)."""
        state = state or {}
        self.rollbacks = int(state.get("rollbacks", 0))
        self.lr_scale = float(state.get("lr_scale", 1.0))
        self.events = [dict(e) for e in state.get("events", [])]
        self.load_monitors(state.get("monitors", {}))
        self._pending = _fresh_counts()

    def load_monitors(self, monitors: Mapping[str, Any]) -> None:
        fresh = {n: _fresh_monitor_state() for n in self.monitors}
        self.state = {n: json.loads(json.dumps(monitors.get(n, fresh[n]))) for n in fresh}
