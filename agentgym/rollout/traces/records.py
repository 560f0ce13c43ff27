"""Episodes as rows of a trace file: the Parquet schema and the conversion (``docs/traces.md``).

One row per episode. Token columns are lists aligned with ``token_ids``; the text of each token
is one join away, in the run's vocabulary table (``_vocab.parquet``: ``id``, ``text``), so a
token costs its id and numbers only. Conversations, infos and reward components are JSON text
(their shapes differ per env); an info's JSON is cut at ``INFO_LIMIT`` characters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from agentgym.core.errors import Error
from agentgym.core.info import REWARD_COMPONENTS, TASK_ID
from agentgym.core.jsonsafe import json_safe
from agentgym.core.types import Episode

__all__ = ["INFO_LIMIT", "SCHEMA", "EpisodeTokens", "to_table"]

INFO_LIMIT = 4096
"""Most characters of one info's JSON kept in a trace (a longer one keeps its head)."""

_INT_LIST = pa.list_(pa.int32())
_FLOAT_LIST = pa.list_(pa.float32())

SCHEMA = pa.schema(
    [
        ("update", pa.int32()),
        ("index", pa.int32()),
        ("trained", pa.bool_()),
        ("env_id", pa.string()),
        ("task_id", pa.string()),
        ("seed", pa.int64()),
        ("group", pa.int32()),
        ("outcome", pa.string()),
        ("cause", pa.string()),
        ("success", pa.bool_()),
        ("reward", pa.float64()),
        ("turns", pa.int32()),
        ("rewards", pa.list_(pa.float64())),
        ("reward_components", pa.string()),
        ("versions", pa.list_(pa.int64())),
        ("llm_s", pa.float64()),
        ("env_s", pa.float64()),
        ("messages", pa.string()),
        ("reset_info", pa.string()),
        ("infos", pa.string()),
        ("token_ids", _INT_LIST),
        ("loss_mask", pa.list_(pa.bool_())),
        ("logprobs", _FLOAT_LIST),
        ("trainer_logprobs", _FLOAT_LIST),
        ("advantages", _FLOAT_LIST),
        ("turn_spans", pa.list_(_INT_LIST)),
        ("context_starts", _INT_LIST),
    ]
)
"""A trace file's columns; ``docs/traces.md`` says what each holds."""


@dataclass(frozen=True)
class EpisodeTokens:
    """The trainer's numbers for one trained episode: per token, aligned with ``token_ids``."""

    logprobs: np.ndarray
    advantages: np.ndarray


def _json(value: Any, limit: int | None = None) -> str:
    text = json.dumps(json_safe(value), ensure_ascii=False)
    if limit is not None and len(text) > limit:
        return json.dumps({"truncated_from_chars": len(text), "head": text[:limit]})
    return text


def _lists(arrays: Sequence[np.ndarray | None], dtype: Any, kind: pa.DataType) -> pa.Array:
    """A list column from one array per row (None: a null row), built from flat values."""
    lengths = np.array([0 if a is None else len(a) for a in arrays], dtype=np.int32)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [a for a in arrays if a is not None]
    flat = np.concatenate(present).astype(dtype) if present else np.zeros(0, dtype)
    nulls = pa.array([a is None for a in arrays])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, kind.value_type), mask=nulls)


def _scalars(episode: Episode) -> dict[str, Any]:
    task = episode.reset_info.get(TASK_ID)
    infos = [t.info for t in episode.turns]
    return {
        "env_id": episode.env_id,
        "task_id": None if task is None else str(task),
        "seed": episode.seed,
        "group": episode.group,
        "outcome": str(episode.outcome),
        "cause": episode.cause,
        "success": episode.success,
        "reward": episode.total_reward,
        "turns": len(episode.turns),
        "rewards": episode.rewards,
        "reward_components": _json([i.get(REWARD_COMPONENTS) for i in infos]),
        "versions": list(episode.weight_versions),
        "llm_s": episode.metrics.get("llm_time"),
        "env_s": episode.metrics.get("env_time"),
        "messages": _json(episode.messages),
        "reset_info": _json(episode.reset_info, INFO_LIMIT),
        "infos": "[" + ", ".join(_json(i, INFO_LIMIT) for i in infos) + "]",
        "turn_spans": [list(span) for span in episode.turn_spans],
        "context_starts": list(episode.context_starts),
    }


def to_table(
    update: int,
    episodes: Sequence[Episode],
    trained: Sequence[EpisodeTokens | None],
    indices: Sequence[int],
) -> pa.Table:
    """The rows of ``episodes`` (collected for ``update``; ``indices``: their places in what
    was collected), with the trainer's numbers where ``trained`` has them."""
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    if len(indices) != len(episodes):
        raise Error(f"to_table got {len(indices)} indices for {len(episodes)} episodes")
    for episode in episodes:
        for name, value in _scalars(episode).items():
            columns[name].append(value)
    n = len(episodes)
    arrays: dict[str, pa.Array] = {
        "update": pa.array([update] * n, pa.int32()),
        "index": pa.array(list(indices), pa.int32()),
        "trained": pa.array([t is not None for t in trained]),
        "token_ids": _lists([np.asarray(e.token_ids) for e in episodes], np.int32, _INT_LIST),
        "loss_mask": _lists(
            [np.asarray(e.loss_mask, dtype=bool) for e in episodes], bool, pa.list_(pa.bool_())
        ),
        "logprobs": _lists([np.asarray(e.logprobs) for e in episodes], np.float32, _FLOAT_LIST),
        "trainer_logprobs": _lists(
            [None if t is None else t.logprobs for t in trained], np.float32, _FLOAT_LIST
        ),
        "advantages": _lists(
            [None if t is None else t.advantages for t in trained], np.float32, _FLOAT_LIST
        ),
    }
    for field in SCHEMA:
        if field.name not in arrays:
            arrays[field.name] = pa.array(columns[field.name], field.type)
    return pa.table([arrays[name] for name in SCHEMA.names], schema=SCHEMA)
