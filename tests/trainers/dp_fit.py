"""Data-parallel ``fit`` on the CPU: each rank collects its share of every batch.

Run by ``test_data_parallel.py`` (and by hand) as::

    .venv/bin/torchrun --standalone --nproc_per_node 2 tests/trainers/dp_fit.py --out /tmp/dp

For GRPO and PPO (``ds_step.CONFIGS``, micro-batched) every rank builds the DeepSpeed trainer
(ZeRO 0) and runs ``fit`` on a ``ShardedSource`` over ``ShardSource``: 2 updates with a
checkpoint after each, then a trainer from other initial weights resumes the run to 3 updates;
and a run of 3 updates without a stop. Rank 0 writes ``<out>/<algo>/metrics.jsonl`` (the resumed
run's), ``<out>/<algo>/final.pt`` and ``straight.pt`` (the policy's weights after the resumed
and the straight third update); the test compares them with each other and with one process
training on the whole batches.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ds_step import CONFIGS, MICRO_BATCH_TOKENS, synthetic_episodes

from agentgym.core.types import Episode


class ShardSource:
    """Synthetic groups by global index: group ``g`` of the run is the same wherever it is
    played. With ``world_size`` ranks, ``collect(G)`` returns rank ``rank``'s share, as
    ``CollectorSource`` does; the position counts groups of the whole batch."""

    def __init__(self, group_size: int, rank: int = 0, world_size: int = 1) -> None:
        self.group_size, self.rank, self.world_size = group_size, rank, world_size
        self.position = 0

    def collect(self, num_groups: int) -> list[Episode]:
        share = num_groups // self.world_size
        first = self.position + self.rank * share
        self.position += num_groups
        return [
            episode
            for group in range(first, first + share)
            for episode in synthetic_episodes(1, self.group_size, seed=1000 + group)
        ]

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = int(state["position"])


def run(algo: str, out: Path, backend: str = "deepspeed", seed: int = 0, steps: int = 3) -> Any:
    """``fit`` for ``steps`` updates (resuming from ``out``), checkpoint after each; returns
    the trainer."""
    from agentgym import models
    from agentgym.recipes.run_folder import RunFolder
    from agentgym.rollout.sharded_source import ShardedSource
    from agentgym.trainers import fit, make

    options: dict[str, Any] = {"micro_batch_tokens": MICRO_BATCH_TOKENS, "precision": "fp32"}
    if backend == "deepspeed":
        options["zero_stage"] = 0
    trainer = make(algo, backend, policy=models.load(seed=seed), config=CONFIGS[algo], **options)
    rank, world = trainer.backend.rank, trainer.backend.world_size
    local = ShardSource(trainer.config.group_size, rank, world)
    source: Any = local if world == 1 else ShardedSource(local, trainer.backend)
    fit(
        trainer,
        source,
        steps=steps,
        out=out,
        checkpoint_every=1,
        keep_checkpoints=5,
        recorder=RunFolder(out),  # metrics.jsonl: used on rank 0 only
    )
    return trainer


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--algos", nargs="+", default=sorted(CONFIGS))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for algo in args.algos:
        out = args.out / algo
        run(algo, out, steps=2)
        resumed = run(algo, out, seed=1, steps=3)  # other initial weights: all from the checkpoint
        straight = run(algo, args.out / f"{algo}-straight", steps=3)
        for trainer, name in ((resumed, "final.pt"), (straight, "straight.pt")):
            weights = trainer.policy_state_dict()
            if trainer.backend.rank == 0:
                kept = {k: v.float().cpu().clone() for k, v in weights.items()}
                torch.save(kept, out / name)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # gloo's threads can abort interpreter teardown (see ds_step.py)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
