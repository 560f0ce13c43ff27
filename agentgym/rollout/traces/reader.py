"""Reading a run's trace in a notebook (``docs/traces.md``)::

    from agentgym.rollout import traces

    episodes = traces.read("runs/fl")               # a DataFrame, one row per episode
    tokens = traces.tokens("runs/fl", update=3, index=0)   # one row per token, with its text
    traces.messages(episodes.iloc[0])               # the conversation, as Python

The files are plain Parquet: ``pandas.read_parquet("runs/fl/traces")`` reads the same rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from agentgym.core.errors import ConfigError
from agentgym.rollout.traces.writer import TRACES, VOCAB

__all__ = ["messages", "read", "tokens", "vocabulary"]


def _folder(run: str | os.PathLike[str]) -> Path:
    path = Path(run)
    folder = path / TRACES if (path / TRACES).is_dir() else path
    if not any(folder.glob("update-*.parquet")):
        raise ConfigError(
            "run", str(run), "holds no trace (no traces/update-*.parquet)",
            "pass a run folder that agentgym train or agentgym eval --output wrote with --trace "
            "all or sample:N",
        )  # fmt: skip
    return folder


def read(run: str | os.PathLike[str], columns: list[str] | None = None) -> Any:
    """The trace of the run folder ``run`` (or a trace folder itself, as ``agentgym eval``
    writes) as a pandas DataFrame, one row per episode, in update order (``columns``: only
    these)."""
    table = ds.dataset(_folder(run), format="parquet").to_table(columns=columns)
    if "update" in table.column_names and "index" in table.column_names:
        table = table.sort_by([("update", "ascending"), ("index", "ascending")])
    return table.to_pandas()


def vocabulary(run: str | os.PathLike[str]) -> list[str]:
    """The text of each token id (``vocabulary(run)[id]``), from the run's ``_vocab.parquet``."""
    path = _folder(run) / VOCAB
    if not path.is_file():
        raise ConfigError(
            "run", str(run), "holds no token vocabulary (traces/_vocab.parquet)",
            "read the trace's token ids with read(); the vocabulary is written at the run's start",
        )  # fmt: skip
    table = pq.read_table(path, columns=["id", "text"]).sort_by("id")
    return [str(t) for t in table.column("text").to_pylist()]


def tokens(run: str | os.PathLike[str], update: int, index: int) -> Any:
    """One episode's tokens as a DataFrame, one row per token: ``id``, ``text``, ``loss_mask``,
    ``logprob`` (the sampler's), ``trainer_logprob`` and ``advantage`` (NaN where the update
    did not train on the episode)."""
    import pandas as pd

    found = ds.dataset(_folder(run), format="parquet").to_table(
        filter=(ds.field("update") == update) & (ds.field("index") == index)
    )
    if found.num_rows == 0:
        raise ConfigError(
            "update, index", (update, index), "is not an episode of the trace",
            "pick one from read(run)[['update', 'index']]",
        )  # fmt: skip
    row = found.slice(0, 1).to_pylist()[0]
    text = vocabulary(run)
    n = len(row["token_ids"])
    missing = [float("nan")] * n
    return pd.DataFrame(
        {
            "id": row["token_ids"],
            "text": [text[i] if 0 <= i < len(text) else None for i in row["token_ids"]],
            "loss_mask": row["loss_mask"],
            "logprob": row["logprobs"],
            "trainer_logprob": row["trainer_logprobs"] or missing,
            "advantage": row["advantages"] or missing,
        }
    )


def messages(row: Any) -> list[dict[str, Any]]:
    """An episode row's conversation (its ``messages`` JSON) as a list of messages."""
    return list(json.loads(row["messages"]))
