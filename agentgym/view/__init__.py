"""``agentgym view``: a local web app over a run's traces (``docs/view.md``).

::

    from agentgym.view import RunData, make_app

    app = make_app([RunData("runs/fl")])   # a Starlette app; `agentgym view runs/fl` serves it

Reading needs pyarrow (the ``train`` extra); serving needs starlette and uvicorn (``serve``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym.view.data import Filters, RunData, TraceFileError

__all__ = ["Filters", "RunData", "TraceFileError", "make_app"]


def make_app(runs: Sequence[RunData]) -> Any:
    """The viewer's Starlette app (imported on use: it needs starlette)."""
    from agentgym.view.app import make_app as make

    return make(runs)
