"""Episode traces: every episode a run plays, tokens and all, in its run folder
(``docs/traces.md``).

::

    from agentgym.rollout.traces import Trace, read

    fit(trainer, source, steps=100, out="runs/fl", trace=Trace("runs/fl"))
    read("runs/fl")               # a pandas DataFrame, one row per episode

Writing needs pyarrow (the ``train`` extra); reading into DataFrames needs pandas too.
"""

from __future__ import annotations

from agentgym.rollout.traces.reader import messages, read, tokens, vocabulary
from agentgym.rollout.traces.records import SCHEMA
from agentgym.rollout.traces.writer import (
    TRACES,
    Trace,
    TraceBudgetWarning,
    TraceMode,
    parse_mode,
)

__all__ = [
    "SCHEMA",
    "TRACES",
    "Trace",
    "TraceBudgetWarning",
    "TraceMode",
    "messages",
    "parse_mode",
    "read",
    "tokens",
    "vocabulary",
]
