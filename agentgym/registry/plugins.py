"""Plugin discovery: installed distributions that register envs through an entry point.

A plugin declares, in its own ``pyproject.toml``::

    [project.entry-points."agentgym.envs"]
    theirns = "theirpkg.register:register_envs"

``import agentgym`` loads every entry point in the ``agentgym.envs`` group; if the loaded object is
callable it is called (typically it calls ``agentgym.register``). A plugin that fails to import or
raises warns with ``PluginWarning`` and is skipped: one broken plugin never breaks agentgym.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from importlib.metadata import entry_points

from agentgym.core.errors import PluginWarning

__all__ = ["ENTRY_POINT_GROUP", "PluginStatus", "load_plugins", "plugins"]

ENTRY_POINT_GROUP = "agentgym.envs"


@dataclass(frozen=True)
class PluginStatus:
    name: str
    value: str
    distribution: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


_LOADED: dict[str, PluginStatus] = {}


def load_plugins() -> list[PluginStatus]:
    """Load every ``agentgym.envs`` entry point not loaded yet; returns the new statuses."""
    new: list[PluginStatus] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        key = f"{ep.name}={ep.value}"
        if key in _LOADED:
            continue
        dist = ep.dist.name if ep.dist is not None else None
        try:
            loaded = ep.load()
            if callable(loaded):
                loaded()
            status = PluginStatus(ep.name, ep.value, dist)
        except Exception as e:  # a broken plugin must not break `import agentgym`
            status = PluginStatus(ep.name, ep.value, dist, f"{type(e).__name__}: {e}")
            warnings.warn(
                f"agentgym plugin {ep.name!r} ({ep.value}, from {dist or 'unknown distribution'}) "
                f"failed to load and its envs are unavailable: {status.error}",
                PluginWarning,
                stacklevel=2,
            )
        _LOADED[key] = status
        new.append(status)
    return new


def plugins() -> list[PluginStatus]:
    """Every plugin seen so far, loaded or failed."""
    return list(_LOADED.values())
