"""WebEnv's constructor helpers: argument checks and the site the arguments name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.core.errors import ConfigError
from agentgym.envs.validate import integer
from agentgym.envs.web.site import Site

__all__ = ["flag", "make_site", "viewport_size"]


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ConfigError(name, value, "must be a bool", "pass True or False")
    return bool(value)


def viewport_size(value: object) -> tuple[int, int]:
    fix = "pass (width, height) in CSS pixels, e.g. viewport=(1280, 720)"
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise ConfigError("viewport", value, "must be a (width, height) pair", fix)
    width = integer("viewport width", value[0], 100, fix)
    return width, integer("viewport height", value[1], 100, fix)


def make_site(
    site: Site | None, start_url: str | None, tasks: str | Path | Sequence[Mapping[str, Any]] | None
) -> Site:
    if site is not None:
        if start_url is not None or tasks is not None:
            raise ConfigError("site", site, "was given with start_url/tasks",
                              "pass either a Site or start_url and tasks")
        if not isinstance(site, Site):
            raise ConfigError("site", site, "is not a Site", "implement agentgym.envs.web.Site")
        return site
    if start_url is not None or tasks is not None:
        if start_url is None or tasks is None:
            raise ConfigError("start_url", start_url, "needs tasks (and tasks needs start_url)",
                              "pass start_url='http://127.0.0.1:8000/' and tasks='tasks.jsonl'")
        from agentgym.envs.web.checks import OwnSite

        return OwnSite(start_url, tasks)
    from agentgym.envs.web.shop import ShopSite  # type: ignore[import-not-found,unused-ignore]

    return ShopSite()
