"""``agentgym view`` on a large trace: the first page and one episode's page, beside plain pandas.

Synthesizes a trace of ``--episodes`` episodes (default 100,000) in the trace's own schema
(``agentgym.rollout.traces.SCHEMA``), ``--per-update`` to a file, each with ``--tokens`` tokens
(a quarter sampled) and a conversation of about 600 characters, plus a run folder's
``metrics.jsonl`` and ``run.json``. Then, through the viewer's HTTP app (in process, Starlette's
test client: the server's own code, no socket):

- first page: what the browser fetches to show the run (``/``, ``/api/run``, ``/api/updates``)
  and the first page of the episode list (``/api/episodes``), on a fresh app (nothing cached);
- the list again with a filter (``outcome=success``), warm;
- episode page: ``/api/episode`` for one episode in the middle of the trace;
- the look-here lists (``/api/look``) on a fresh app: they read the mask and logprob columns.

The peer baseline does the same with plain pandas: ``pd.read_parquet(folder)`` (every column)
then the first 50 rows; and ``pd.read_parquet(folder, filters=...)`` for one episode. Each figure
is the median of ``--repeats`` runs. Goals: first page <= 1 s, episode page <= 200 ms.

    .venv/bin/python benchmarks/view.py
    .venv/bin/python benchmarks/view.py --episodes 20000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from starlette.testclient import TestClient

from agentgym.rollout.traces import SCHEMA
from agentgym.view import RunData, make_app

OUTCOMES = ["success", "failed", "invalid", "timeout", "truncated", "infra"]


def _lists(rows: int, length: int, values: np.ndarray, kind: pa.DataType) -> pa.Array:
    offsets = np.arange(rows + 1, dtype=np.int32) * length
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, kind))


def synthesize(folder: Path, episodes: int, per_update: int, tokens: int, seed: int = 0) -> None:
    """A run folder whose ``traces/`` holds ``episodes`` synthetic episodes."""
    rng = np.random.default_rng(seed)
    traces = folder / "traces"
    traces.mkdir(parents=True)
    vocab = 2000
    pq.write_table(
        pa.table({"id": np.arange(vocab, dtype=np.int32), "token": [f"t{i}" for i in range(vocab)],
                  "text": [f" w{i}" for i in range(vocab)]}),
        traces / "_vocab.parquet",
    )  # fmt: skip
    updates = -(-episodes // per_update)
    metrics = []
    for update in range(1, updates + 1):
        n = min(per_update, episodes - (update - 1) * per_update)
        size = n * tokens
        sampled = np.zeros(tokens, bool)
        sampled[-tokens // 4 :] = True
        mask = np.tile(sampled, n)
        ids = rng.integers(0, vocab, size, dtype=np.int32)
        spans = pa.array([[[tokens - tokens // 4, tokens]]] * n, pa.list_(pa.list_(pa.int32())))
        logprobs = np.where(mask, -rng.exponential(0.5, size), 0).astype(np.float32)
        reward = rng.choice([0.0, 1.0], n)
        advantage = np.repeat(reward - reward.mean(), tokens).astype(np.float32) * mask
        message = json.dumps([
            {"role": "system", "content": "Reach the goal. " * 10},
            {"role": "user", "content": "P F F H\nF F F F\nH F H F\nF H H G\n" * 4},
            {"role": "assistant", "content": "```down```"},
        ])  # fmt: skip
        columns: dict[str, Any] = {
            "update": pa.array(np.full(n, update, np.int32)),
            "index": pa.array(np.arange(n, dtype=np.int32)),
            "trained": pa.array(np.ones(n, bool)),
            "env_id": pa.array(["agentgym/FrozenLake-v0"] * n),
            "task_id": pa.array([str(t) for t in rng.integers(0, 5000, n)]),
            "seed": pa.array(np.arange(n, dtype=np.int64) + update * per_update),
            "group": pa.array(np.arange(n, dtype=np.int32) // 8),
            "outcome": pa.array(rng.choice(OUTCOMES, n).tolist()),
            "cause": pa.array([None] * n, pa.string()),
            "success": pa.array(reward > 0),
            "reward": pa.array(reward),
            "turns": pa.array(np.full(n, 3, np.int32)),
            "rewards": pa.array([[0.0, 0.0, r] for r in reward], pa.list_(pa.float64())),
            "reward_components": pa.array(['[{"goal": 0}, {"goal": 0}, {"goal": 1}]'] * n),
            "versions": pa.array([[update - 1] * 3] * n, pa.list_(pa.int64())),
            "llm_s": pa.array(rng.random(n)),
            "env_s": pa.array(rng.random(n) / 100),
            "messages": pa.array([message] * n),
            "reset_info": pa.array(['{"task_id": 1}'] * n),
            "infos": pa.array(['[{"success": false}]'] * n),
            "token_ids": _lists(n, tokens, ids, pa.int32()),
            "loss_mask": _lists(n, tokens, mask, pa.bool_()),
            "logprobs": _lists(n, tokens, logprobs, pa.float32()),
            "trainer_logprobs": _lists(n, tokens, logprobs + 1e-3 * mask, pa.float32()),
            "advantages": _lists(n, tokens, advantage, pa.float32()),
            "turn_spans": spans,
            "context_starts": pa.array([[0]] * n, pa.list_(pa.int32())),
        }  # fmt: skip
        table = pa.table([columns[name] for name in SCHEMA.names], schema=SCHEMA)
        pq.write_table(table, traces / f"update-{update:08d}.parquet", compression="zstd")
        metrics.append({"step": update, "reward_mean": float(reward.mean()),
                        "success_rate": float((reward > 0).mean())})  # fmt: skip
    (folder / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (folder / "run.json").write_text(json.dumps({"run": {"env": "agentgym/FrozenLake-v0"}}))


def timed(work: Callable[[], Any], repeats: int) -> float:
    """The median seconds of ``repeats`` calls of ``work``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(folder: Path, update: int, index: int, repeats: int) -> dict[str, float]:
    def first_page() -> None:
        client = TestClient(make_app([RunData(folder)]))  # fresh: nothing cached
        for path in ("/", "/api/run", "/api/updates", "/api/episodes?limit=50"):
            assert client.get(path).status_code == 200, path

    warm = TestClient(make_app([RunData(folder)]))
    warm.get("/api/episodes")

    def filtered() -> None:
        assert warm.get("/api/episodes", params={"outcome": "success"}).json()["total"] > 0

    def episode() -> None:
        found = warm.get("/api/episode", params={"update": update, "index": index}).json()
        assert (found["update"], found["index"]) == (update, index)

    def look() -> None:
        client = TestClient(make_app([RunData(folder)]))  # fresh: the lists read token columns
        assert client.get("/api/look").json()["largest drift"]

    def pandas_first_page() -> None:
        frame = pd.read_parquet(folder / "traces")
        assert len(frame.head(50)) == 50

    def pandas_episode() -> None:
        filters = [("update", "==", update), ("index", "==", index)]
        assert len(pd.read_parquet(folder / "traces", filters=filters)) == 1

    return {
        "view_first_page_s": timed(first_page, repeats),
        "view_filtered_page_warm_s": timed(filtered, repeats),
        "view_episode_page_s": timed(episode, repeats),
        "view_look_here_cold_s": timed(look, repeats),
        "pandas_first_page_s": timed(pandas_first_page, repeats),
        "pandas_episode_s": timed(pandas_episode, repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--per-update", type=int, default=1000, help="episodes per update file")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per episode")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "run"
        start = time.perf_counter()
        synthesize(folder, args.episodes, args.per_update, args.tokens)
        size = sum(p.stat().st_size for p in (folder / "traces").iterdir())
        print(f"trace: {args.episodes} episodes x {args.tokens} tokens, "
              f"{size / 1e6:.0f} MB, written in {time.perf_counter() - start:.1f} s")  # fmt: skip
        middle = args.episodes // 2
        figures = measure(folder, middle // args.per_update + 1, middle % args.per_update,
                          args.repeats)  # fmt: skip
    print(f"{'':28}{'agentgym view':>15}{'plain pandas':>15}")
    print(f"{'first page':28}{figures['view_first_page_s'] * 1e3:>12.0f} ms"
          f"{figures['pandas_first_page_s'] * 1e3:>12.0f} ms")  # fmt: skip
    print(f"{'filtered page (warm)':28}{figures['view_filtered_page_warm_s'] * 1e3:>12.0f} ms")
    print(f"{'one episode page':28}{figures['view_episode_page_s'] * 1e3:>12.0f} ms"
          f"{figures['pandas_episode_s'] * 1e3:>12.0f} ms")  # fmt: skip
    print(f"{'look-here lists (cold)':28}{figures['view_look_here_cold_s'] * 1e3:>12.0f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({**vars(args), **figures, "bytes": size}, indent=2))


if __name__ == "__main__":
    main()
