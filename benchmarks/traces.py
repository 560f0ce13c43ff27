"""Episode traces: the main job's update time with traces on and off, and bytes per token on disk.

The main job is ``agentgym train``'s FrozenLake GRPO recipe (the tiny policy, random init,
``history_turns = 0``, action choices), built exactly as ``agentgym train`` builds it. Its
collector first plays ``--updates`` batches with the initial policy; then ``fit`` trains fresh
trainers (same seed) on those same batches, replayed, with ``--trace all`` and ``--trace off``
in turn and then in reverse order (on off off on ...), ``--rounds`` times, so that a drift of
load on a shared machine hits both. Replaying takes collection out of both sides (it is the
same either way): the ratio is that of the training loop alone, the strictest comparison.

Per mode it prints the mean wall time per update (after each fit's first, which warms up), the
overhead of tracing, and for the trace: bytes per token of the update files (text included:
the token text is a per-run vocabulary table, reported apart) and the writer's time per update
(off the training thread) and the training thread's own time handing an update over.

    .venv/bin/python benchmarks/traces.py
    .venv/bin/python benchmarks/traces.py --updates 6 --batch-size 32 --rounds 2 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import torch

from agentgym import models
from agentgym.recipes.config import Layer, resolve_run
from agentgym.recipes.run import _build
from agentgym.rollout import traces
from agentgym.rollout.traces import Trace
from agentgym.trainers import fit, make


class TimedTrace(Trace):
    """A ``Trace`` that adds up the training thread's time in ``write`` (the hand-over)."""

    handoff_s: ClassVar[list[float]] = []

    def write(self, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        super().write(*args, **kwargs)
        TimedTrace.handoff_s.append(time.perf_counter() - started)


class Replay:
    """An ``EpisodeSource`` that hands out the same collected batches, in order."""

    def __init__(self, batches: list[list[Any]]) -> None:
        self.batches, self.position = batches, 0

    def collect(self, num_groups: int) -> list[Any]:
        batch = self.batches[self.position % len(self.batches)]
        self.position += 1
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = int(state["position"])


def _run(args: argparse.Namespace, out: Path) -> Any:
    config = {"group_size": args.group_size, "batch_size": args.batch_size}
    values = {"env": "agentgym/FrozenLake-v0", "algo": "grpo", "out": str(out)}
    values |= {"max_turns": args.max_turns, "eval_episodes": 0, "config": config}
    return resolve_run(Layer("benchmark", values))


def _train(run: Any, batches: list[list[Any]], out: Path, trace: str) -> list[float]:
    """Seconds per update of one fit over ``batches`` with ``--trace trace``."""
    trainer = make(
        "grpo",
        policy=models.load(seed=run.seed),
        config=run.config,
        options=run.options,
        micro_batch_tokens=run.micro_batch_tokens,
    )
    stamps = [time.perf_counter()]
    fit(
        trainer,
        Replay(batches),
        steps=len(batches),
        out=out,
        checkpoint_every=len(batches),
        on_metrics=lambda _: stamps.append(time.perf_counter()),
        trace=TimedTrace(out, trace),
    )
    stamps.append(time.perf_counter())  # the last trace file written
    times = [b - a for a, b in itertools.pairwise(stamps)]
    return times[1 : len(batches)]  # the first update warms up


def _bytes_per_token(out: Path) -> dict[str, float]:
    files = sorted((out / "traces").glob("update-*.parquet"))
    rows = traces.read(out, columns=["token_ids"])
    tokens = int(sum(len(t) for t in rows["token_ids"]))
    size = sum(f.stat().st_size for f in files)
    vocab = (out / "traces" / "_vocab.parquet").stat().st_size
    return {"tokens": tokens, "bytes": size, "bytes_per_token": size / tokens, "vocab_bytes": vocab}


def _writer_seconds(out: Path, batches: list[list[Any]]) -> float:
    """The writer's time per update (building the table, compressing, fsync), measured alone."""
    trace = Trace(out / "writer", "all")
    started = time.perf_counter()
    for update, batch in enumerate(batches, start=1):
        trace.write(update, batch, group_size=1)
    trace.close()
    return (time.perf_counter() - started) / len(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=4, help="updates per fit")
    parser.add_argument("--rounds", type=int, default=1, help="(on, off, off, on) rounds")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run = _run(args, root / "collect")
        (root / "collect").mkdir()
        _, source = _build(run, root / "collect")
        started = time.perf_counter()
        batches = [source.collect(run.config.groups_per_batch) for _ in range(args.updates)]
        collect_s = (time.perf_counter() - started) / args.updates
        source.close()
        times: dict[str, list[float]] = {"all": [], "off": []}
        order = ["all", "off", "off", "all"] * args.rounds
        for k, mode in enumerate(order):
            times[mode] += _train(run, batches, root / f"{mode}-{k}", mode)
        disk = _bytes_per_token(root / "all-0")
        writer_s = _writer_seconds(root, batches)
    on, off = statistics.mean(times["all"]), statistics.mean(times["off"])
    result = {
        "settings": vars(args) | {"json": None},
        "collect_s_per_update": collect_s,
        "update_s": {"trace_all": on, "trace_off": off},
        "update_s_each": times,
        "overhead": on / off - 1,
        "trace": disk | {"writer_s_per_update": writer_s},
        "handoff_s_per_update": statistics.mean(TimedTrace.handoff_s),
    }
    print(f"collection (not in the loop below): {collect_s:.2f} s per update")
    print(f"update time, trace all: {on:.3f} s   off: {off:.3f} s   overhead {on / off - 1:+.1%}")
    print(f"  (n = {len(times['all'])} and {len(times['off'])} updates)")
    print(
        f"trace: {disk['bytes_per_token']:.2f} bytes per token ({disk['bytes']} bytes, "
        f"{disk['tokens']} tokens); vocabulary table {disk['vocab_bytes']} bytes once per run; "
        f"writer {writer_s * 1000:.0f} ms per update, off the training thread"
    )
    handoff = statistics.mean(TimedTrace.handoff_s)
    print(f"the training thread's hand-over: {handoff * 1000:.2f} ms per update")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
