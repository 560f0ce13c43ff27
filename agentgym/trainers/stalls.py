"""Steps that teach nothing, and what the training loop does about them.

- An *empty* step: every episode collected for it was dropped (``admit``: an infrastructure
  failure, an exception in the env's own code, an untrainable or stale episode). It makes no
  update, but it counts: ``fit`` writes its metrics row (``empty_steps``, ``dropped/<kind>``)
  and the guards see it. ``max_empty_steps`` of them in a row stop the run with
  ``NoTrainableEpisodes``, which counts the dropped episodes by cause and names the fix. DAPO's
  rounds that keep no group because every group was flat are not empty: they sample more,
  within ``max_sampling_rounds``.
- A *flat* update: every group's rewards were equal (``flat_group_rate`` 1), so every
  group-relative advantage is 0 and the policy-gradient term with it. ``NoLearningSignalWarning``
  names the likely causes at the first such update, then at the 10th, 20th, 40th, ...
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from agentgym.core.errors import NoLearningSignalWarning, NoTrainableEpisodes
from agentgym.core.types import Episode
from agentgym.trainers.episodes import drop_cause

__all__ = ["DEFAULT_MAX_EMPTY_STEPS", "EmptySteps", "FlatSteps"]

DEFAULT_MAX_EMPTY_STEPS = 3
"""Empty steps in a row that stop a run, unless the guards' ``max_empty_steps`` says otherwise."""

_LABELS = {"infra": "infra", "env": "env bug", "untrainable": "untrainable", "stale": "stale"}

_FIXES = {
    "infra": "infra: bring up what the env depends on (its server, sandbox or browser) and "
    "check that this machine reaches it",
    "env": "env bug: fix the env's code (its traceback is logged above, once); "
    "agentgym.utils.check_env reproduces it without training",
    "untrainable": "untrainable: give the prompts room (raise max_context_tokens, shorten the "
    "task's prompt) and check that the engine returns token ids and logprobs",
    "stale": "stale: raise max_staleness, or set it to 0 to collect with the current policy",
}

_SHOWN = 5
"""Causes a stop message lists one by one; the rest are summed up."""


class EmptySteps:
    """Counts the empty steps in a row and why their episodes were dropped; ``check`` raises
    ``NoTrainableEpisodes`` once there are ``limit`` of them."""

    def __init__(self, limit: int = DEFAULT_MAX_EMPTY_STEPS) -> None:
        self.limit = limit
        self.streak = 0
        self.episodes = 0
        self.causes: Counter[tuple[str, str]] = Counter()

    def observe(
        self, batch: Sequence[Episode], metrics: dict[str, Any], empty: bool, group_size: int
    ) -> None:
        """Count a step (``empty``: every episode of ``batch`` was dropped); an empty step's
        row gets ``empty_steps``, the streak so far. A step that trains ends the streak."""
        if not empty:
            self.streak, self.episodes = 0, 0
            self.causes.clear()
            return
        self.streak += 1
        self.episodes += len(batch)
        metrics["empty_steps"] = float(self.streak)
        for episode in batch:
            cause = drop_cause(episode)
            if cause is not None:
                self.causes[cause] += 1
        stale = int(metrics.get("stale_groups", 0)) * group_size
        if stale:
            self.causes["stale", "sampled by a policy more than max_staleness updates old"] += stale

    def check(self, stopping: bool = False) -> None:
        """Raise ``NoTrainableEpisodes`` when the streak reached the limit, or when the run
        is ``stopping`` (a guard's verdict) on an empty step."""
        if self.streak >= self.limit or (stopping and self.streak):
            raise NoTrainableEpisodes(
                self.message(), steps=self.streak, causes=self.counts_by_cause()
            )

    def counts_by_cause(self) -> dict[str, int]:
        """``"<what> (<kind>)"``: dropped episodes, most frequent first."""
        return {f"{what} ({_LABELS[kind]})": n for (kind, what), n in self.causes.most_common()}

    def message(self) -> str:
        steps = f"{self.streak} training steps in a row" if self.streak > 1 else "a training step"
        lines = [
            f"{steps} had no episode to train on: all {self.episodes} episodes collected were "
            f"dropped (max_empty_steps = {self.limit}, a [guards] setting). Causes:"
        ]
        counted = list(self.counts_by_cause().items())
        lines += [f"  {n} episodes: {cause}" for cause, n in counted[:_SHOWN]]
        rest = counted[_SHOWN:]
        if rest:
            lines.append(f"  {sum(n for _, n in rest)} episodes: {len(rest)} other causes")
        kinds = dict.fromkeys(kind for kind, _ in self.causes)
        fixes = "; ".join(_FIXES[kind] for kind in kinds) or "check the env and the engine"
        lines.append(f"Fix: {fixes}")
        return "\n".join(lines)


class FlatSteps:
    """Warns (``NoLearningSignalWarning``) about updates with no learning signal; see the
    module docstring. ``enabled``: the algorithm's advantages are group-relative."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.flat = 0
        self.updates = 0
        self.next_warning = 1

    def observe(self, metrics: Mapping[str, float]) -> None:
        if "empty_steps" in metrics:
            return
        self.updates += 1
        if metrics.get("flat_group_rate") != 1.0:
            return
        self.flat += 1
        if not self.enabled or self.flat < self.next_warning:
            return
        self.next_warning = 10 if self.flat < 10 else 2 * self.flat
        warnings.warn(self.message(int(metrics.get("step", 0))), NoLearningSignalWarning, 2)

    def message(self, step: int) -> str:
        return (
            f"update {step}: no learning signal: the rewards within every group were equal, so "
            f"every advantage was 0 ({self.flat} of the {self.updates} updates so far). Likely "
            "causes: the tasks are too hard or too easy for the policy (every try fails, or "
            "every one succeeds: pick a difficulty where it sometimes succeeds, or a curriculum); "
            "the env's reward is constant; the policy emits the same text every time (a low "
            "temperature, or a policy that cannot read these prompts: the tiny default policy "
            "learns FrozenLake-like prompts only; train another with --model). Next warning at "
            f"the {self.next_warning}th such update"
        )
