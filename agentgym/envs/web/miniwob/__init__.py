"""``agentgym/MiniWoB-v0``: curated MiniWoB++ tasks from the ``miniwob`` package, served offline.

``MiniWoBEnv`` (the env), ``MiniWoBSite`` (the pages as a ``Site``), ``CURATED`` (the tasks),
``solve`` (a scripted solution for every curated task). Playwright is imported only when a
browser starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentgym.envs.web.miniwob.site import ORIGIN, MiniWoBSite
from agentgym.envs.web.miniwob.tasks import CURATED, MIX, curated_task, select_tasks

if TYPE_CHECKING:
    from agentgym.envs.web.miniwob.env import MiniWoBEnv
    from agentgym.envs.web.miniwob.oracle import solve

__all__ = [
    "CURATED",
    "MIX",
    "ORIGIN",
    "MiniWoBEnv",
    "MiniWoBSite",
    "curated_task",
    "select_tasks",
    "solve",
]

_LAZY = {"MiniWoBEnv": "agentgym.envs.web.miniwob.env", "solve": "agentgym.envs.web.miniwob.oracle"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
