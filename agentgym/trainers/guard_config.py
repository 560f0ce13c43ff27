"""The settings of the failure-mode guards (``agentgym.trainers.guards``): the monitors with
their metrics, directions and defaults, and the ``[guards]`` table of a run file. Needs no
torch: a run's ``[guards]`` table is checked when the run is resolved."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from agentgym.core.config import Config
from agentgym.core.errors import ConfigError

__all__ = ["MONITORS", "GuardsConfig", "MonitorConfig"]


@dataclass(frozen=True, kw_only=True)
class MonitorConfig(Config):
    """One monitor's settings (a ``[guards.<monitor>]`` table); each monitor's defaults are in
    ``MONITORS``."""

    action: Literal["warn", "stop", "rollback", "off"] = "warn"
    """What a trip does: warn (record an event), stop, rollback, or off (not checked)."""
    threshold: float = 0.0
    """The limit (its meaning per monitor: docs/guards.md)."""
    patience: int = 1
    """Updates in a row on the wrong side of the limit before the monitor trips."""
    relative: float | None = None
    """entropy_collapse: also trips below this fraction of the early entropy; length_blowup:
    the ratio to the recent median that trips it."""
    warmup: int = 5
    """Updates that set a baseline (the early entropy; the window of recent lengths is 4x)."""
    min_success: float | None = None
    """entropy_collapse: only counts updates whose batch success rate is below this (a policy
    that solves its tasks may be nearly deterministic); None: every update."""
    metric: str | None = None
    """The metric watched; None: the monitor's own (e.g. kl_spike with metric = "kl" watches
    the KL to the reference policy instead of approx_kl)."""

    _bounds: ClassVar[dict[str, str]] = {"patience": ">= 1", "warmup": ">= 1", "relative": "> 0"}

    @classmethod
    def _unknown_key_rule(cls) -> str:
        return "is not a monitor setting"


@dataclass(frozen=True)
class _Monitor:
    metric: str
    below: bool  # trips below the limit (else above)
    defaults: MonitorConfig


MONITORS: dict[str, _Monitor] = {
    "entropy_collapse": _Monitor(
        "entropy",
        True,
        MonitorConfig(
            action="rollback", threshold=0.05, relative=0.04, patience=5, min_success=0.5
        ),
    ),
    "kl_spike": _Monitor("approx_kl", False, MonitorConfig(threshold=1.0)),
    "reward_range": _Monitor("guards/return_excess", False, MonitorConfig(threshold=1e-6)),
    "length_blowup": _Monitor(
        "response_tokens_mean", False, MonitorConfig(relative=4.0, patience=3)
    ),
    "valid_action_drop": _Monitor(
        "guards/valid_action_rate", True, MonitorConfig(threshold=0.3, patience=5)
    ),
    "infra_errors": _Monitor(
        "guards/infra_error_rate", False, MonitorConfig(action="stop", threshold=0.5, patience=3)
    ),
    "infra_spike": _Monitor("guards/infra_error_rate", False, MonitorConfig(threshold=0.2)),
    "void_episodes": _Monitor("guards/void_rate", False, MonitorConfig(threshold=0.5, patience=3)),
    "reward_hacking": _Monitor("guards/flagged_rate", False, MonitorConfig(threshold=0.0)),
}
"""The monitors by name: the metric each watches, its direction and its defaults."""


@dataclass(frozen=True, kw_only=True)
class _Settings(Config):
    enabled: bool = True
    """False (agentgym train --guards off): no monitor runs."""
    max_rollbacks: int = 2
    """Rollbacks a run may take; a trip after them stops the run."""
    lr_factor: float = 0.5
    """Each rollback multiplies the learning rate by this."""
    rollback_margin: int = 0
    """Extra updates a rollback goes back beyond the last good one."""
    reward_range: tuple[float, float] | None = None
    """[low, high] of an episode's return; None: the env's registered range where the run
    plays it with its default rewards (agentgym train), else reward_range is not checked."""
    max_empty_steps: int = 3
    """Steps in a row whose every episode was dropped (infrastructure failures, exceptions in
    the env's code) before the run stops, naming the causes; applies with enabled = false too."""

    _bounds: ClassVar[dict[str, str]] = {
        "max_empty_steps": ">= 1",
        "max_rollbacks": ">= 0",
        "lr_factor": "in (0, 1)",
        "rollback_margin": ">= 0",
    }

    @classmethod
    def _unknown_key_rule(cls) -> str:
        return f"is not a guards setting or monitor ({', '.join(MONITORS)})"


@dataclass(frozen=True)
class GuardsConfig:
    """The run's ``[guards]`` table: settings, and a table per monitor over its defaults."""

    settings: _Settings = field(default_factory=_Settings)
    monitors: Mapping[str, MonitorConfig] = field(
        default_factory=lambda: {name: m.defaults for name, m in MONITORS.items()}
    )
    flag_keys: tuple[str, ...] = ("tampering",)
    """Info keys by which envs flag reward hacking (a truthy value on any step flags the
    episode); reward_hacking watches the fraction of flagged episodes."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | str | None) -> GuardsConfig:
        """From a ``[guards]`` table, or ``"default"`` / ``"off"`` / None (default)."""
        if data is None or data == "default":
            data = {}
        elif data == "off":
            data = {"enabled": False}
        if not isinstance(data, Mapping):
            raise ConfigError("guards", data, "is not default, off or a table", "pass off")
        monitors = {}
        for name, monitor in MONITORS.items():
            table = data.get(name, {})
            if not isinstance(table, Mapping):
                raise ConfigError(f"guards.{name}", table, "is not a table", "write a table")
            try:
                merged = {**dataclasses.asdict(monitor.defaults), **table}
                monitors[name] = MonitorConfig.from_dict(merged)
            except ConfigError as error:
                name_ = f"guards.{name}.{error.name}"
                raise ConfigError(name_, error.value, error.rule, error.fix) from None
        rest = {k: v for k, v in data.items() if k not in MONITORS and k != "flag_keys"}
        keys = data.get("flag_keys", ("tampering",))
        if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
            raise ConfigError("guards.flag_keys", keys, "is not a list of info keys", "e.g. []")
        try:
            settings = _Settings.from_dict(rest)
        except ConfigError as error:
            raise ConfigError(f"guards.{error.name}", error.value, error.rule, error.fix) from None
        return cls(settings, monitors, tuple(keys))
