"""``agentgym/Web-v0``: web tasks in a real Chromium, driven by Playwright's async API.

``WebEnv`` (the env), ``Site``/``WebTask``/``Evaluation`` (the seam a site implements:
:mod:`agentgym.envs.web.site`), ``Node`` (one element of the observation). Playwright is imported
only when a browser starts, so ``import agentgym.envs.web`` works without the ``web`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentgym.envs.web.site import Evaluation, Site, WebTask

if TYPE_CHECKING:
    from agentgym.envs.web.env import WebEnv
    from agentgym.envs.web.observe import Node

__all__ = ["Evaluation", "Node", "Site", "WebEnv", "WebTask"]

_LAZY = {"WebEnv": "agentgym.envs.web.env", "Node": "agentgym.envs.web.observe"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
