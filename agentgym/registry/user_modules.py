"""Importing a module by the name the user gives (``module:Env-v0``, ``--import module``): its
import registers the user's own envs. The one place the registry imports a module it is not
written against."""

from __future__ import annotations

import importlib
import os
import sys

__all__ = ["import_user_module"]


def import_user_module(name: str, *, from_cwd: bool = False) -> None:
    """Import ``name``; ``from_cwd``: from the working directory too, as ``python -m`` would
    (a console script's ``sys.path`` starts at its own folder)."""
    if from_cwd and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    importlib.import_module(name)
