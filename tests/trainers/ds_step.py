"""A two-process DeepSpeed training step on the CPU; the synthetic episodes, episode source and
kill-and-resume worker the trainer tests share.

Run by ``test_backends.py`` (and by hand) as::

    .venv/bin/torchrun --nproc_per_node 2 tests/trainers/ds_step.py --out /tmp/ds
    .venv/bin/deepspeed --num_gpus 2 tests/trainers/ds_step.py --out /tmp/ds    # same, slower
    .venv/bin/torchrun --nproc_per_node 2 tests/trainers/ds_step.py --out /tmp/ds --precision bf16

Without CUDA, DeepSpeed picks its CPU accelerator and the backend uses gloo. For each ZeRO stage
and algorithm (``CONFIGS``) the script builds the same micro-batched trainer and takes three steps
on the synthetic batches, saving a checkpoint after the second that a second trainer resumes
from (``run_stage``). Rank 0 writes ``<out>/results.json`` (each step's metrics, the resumed
step's, the largest weight gap after it) and ``<out>/<algo>-zero<stage>.pt`` (the policy's
gathered weights after the steps).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import torch

from agentgym.core.types import Episode, Turn, assistant

CONFIGS: dict[str, dict[str, Any]] = {
    # token-mean: the loss is not ~0 at ratio 1, and the normaliser spans ranks; TIS on the
    # made-up sampling logprobs; k3 KL in the loss against a reference model.
    "grpo": {
        "group_size": 4,
        "batch_size": 8,
        "num_minibatches": 2,
        "learning_rate": 1e-5,
        "temperature": 0.9,
        "aggregation": "token-mean",
        "tis_cap": 2.0,
    },
    # a value model next to the policy; k1 KL in the reward (π_old and π_ref before the update).
    "ppo": {"batch_size": 8, "num_minibatches": 2, "learning_rate": 1e-5, "kl_beta": 0.05},
}
"""Overrides of the presets for the cross-backend comparison."""
MICRO_BATCH_TOKENS = 64
"""Small enough that each rank runs several micro-batches of the 8-episode batch."""


def fresh(tiny: tuple[Any, Any]) -> tuple[Any, Any]:
    """A trainable copy of the tiny policy ``tiny`` (a trainer trains its policy in place)."""
    from agentgym import models

    model, tokenizer = tiny
    copy, _ = models.load(seed=0)
    copy.load_state_dict(model.state_dict())
    return copy, tokenizer


def synthetic_episodes(
    num_groups: int = 2,
    group_size: int = 4,
    *,
    seed: int = 0,
    turns: int = 2,
    vocab: int = 1264,
    shared_prompts: bool = False,
) -> list[Episode]:
    """Random token ids: a prompt, then per turn sampled tokens (loss mask 1, made-up sampling
    logprobs) followed by env tokens (mask 0). Rewards vary inside each group; the last turn's
    info says ``success``. With ``shared_prompts`` a group's episodes start with one prompt (of
    12-20 tokens), as GRPO's do."""
    rng = random.Random(seed)
    episodes = []
    prompt: list[int] = []
    for i in range(num_groups * group_size):
        if not shared_prompts:
            prompt = [rng.randrange(3, vocab) for _ in range(rng.randint(4, 9))]
        elif i % group_size == 0:
            prompt = [rng.randrange(3, vocab) for _ in range(rng.randint(12, 20))]
        token_ids = list(prompt)
        loss_mask, logprobs = [0] * len(token_ids), [0.0] * len(token_ids)
        spans, records = [], []
        for turn in range(turns):
            start = len(token_ids)
            for _ in range(rng.randint(2, 8)):
                token_ids.append(rng.randrange(3, vocab))
                loss_mask.append(1)
                logprobs.append(-rng.uniform(5.0, 9.0))
            spans.append((start, len(token_ids)))
            last = turn == turns - 1
            success = last and rng.random() < 0.5
            records.append(
                Turn(assistant("…"), (), float(success), last, False, {"success": success})
            )
            if not last:
                env = [rng.randrange(3, vocab) for _ in range(rng.randint(2, 5))]
                token_ids += env
                loss_mask += [0] * len(env)
                logprobs += [0.0] * len(env)
        episodes.append(
            Episode(
                env_id="synthetic",
                turns=records,
                token_ids=token_ids,
                loss_mask=loss_mask,
                logprobs=logprobs,
                turn_spans=spans,
            )
        )
    return episodes


def batches(algo: str) -> list[list[Episode]]:
    """The three batches every backend trains ``algo`` on, in order; the last one's groups share
    their prompts (a forward pass then runs each prompt once where a micro-batch holds a group)."""
    group_size = CONFIGS[algo].get("group_size", 1)
    groups = CONFIGS[algo]["batch_size"] // group_size
    return [
        synthetic_episodes(groups, group_size, seed=seed, shared_prompts=seed == 3)
        for seed in (1, 2, 3)
    ]


class SyntheticSource:
    """An ``EpisodeSource`` of synthetic episodes; its position is the number of batches drawn."""

    def __init__(self, group_size: int, seed: int = 0) -> None:
        self.group_size, self.seed, self.position = group_size, seed, 0

    def collect(self, num_groups: int) -> list[Episode]:
        seed = self.seed * 1_000_003 + self.position
        self.position += 1
        return synthetic_episodes(num_groups, self.group_size, seed=seed)

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = int(state["position"])


FIT_CONFIG: dict[str, Any] = {**CONFIGS["grpo"], "learning_rate": 1e-3, "kl_beta": 0.04}
"""The kill-and-resume runs: GRPO with a reference model, an lr that moves the weights."""


def fit_worker(out: Path, steps: int, kill_in_save: int | None) -> None:
    """``fit(trainer, ...)`` with a checkpoint after every update, resuming from ``out``; with
    ``kill_in_save=k`` the process SIGKILLs itself while saving update k, after the temporary
    directory is complete and before it is renamed into place."""
    import signal

    from agentgym import models
    from agentgym.recipes.run_folder import RunFolder
    from agentgym.rollout.traces import Trace
    from agentgym.trainers import checkpoint, fit, make

    if kill_in_save is not None:
        publish = checkpoint._publish

        def killing_publish(tmp: Path, path: Path) -> None:
            if path.name == f"step-{kill_in_save:08d}":
                os.kill(os.getpid(), signal.SIGKILL)
            publish(tmp, path)

        checkpoint._publish = killing_publish  # type: ignore[assignment]
    trainer = make("grpo", "torch", policy=models.load(seed=0), config=FIT_CONFIG)
    source = SyntheticSource(FIT_CONFIG["group_size"])
    recorder = RunFolder(out)
    fit(
        trainer,
        source,
        steps=steps,
        out=out,
        checkpoint_every=1,
        recorder=recorder,
        trace=Trace(out),
    )
    torch.save(trainer.policy_state_dict(), out / "final.pt")


NOT_COMPARED = frozenset({"step_s", "tokens_per_s"})
"""Wall-clock metrics; every other metric must agree across backends."""


def run_stage(algo: str, stage: int, out: Path, precision: str = "fp32") -> dict[str, Any]:
    """Three steps of ``algo`` at ZeRO ``stage`` in ``precision``, a checkpoint after the
    second, and a trainer from other initial weights that loads it and takes the third step
    again."""
    from agentgym import models
    from agentgym.trainers import make

    def trainer(seed: int) -> Any:
        return make(
            algo,
            "deepspeed",
            policy=models.load(seed=seed),
            config=CONFIGS[algo],
            zero_stage=stage,
            precision=precision,
            micro_batch_tokens=MICRO_BATCH_TOKENS,
        )

    first, (one, two, three) = trainer(0), batches(algo)
    steps = [first.step(one), first.step(two)]
    first.save(out / f"{algo}-zero{stage}-step2")
    steps.append(first.step(three))
    weights = first.policy_state_dict()
    again = trainer(1)
    again.load(out / f"{algo}-zero{stage}-step2")
    resumed = again.step(three)
    resumed_weights = again.policy_state_dict()
    if first.backend.rank == 0:
        kept = {k: v.float().cpu().clone() for k, v in weights.items()}
        torch.save(kept, out / f"{algo}-zero{stage}.pt")
    gap = max((resumed_weights[k] - w).abs().max().item() for k, w in weights.items())
    return {"steps": steps, "resumed": resumed, "resumed_weight_gap": gap}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stages", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--algos", nargs="+", default=list(CONFIGS))
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--local_rank", type=int, default=None)  # passed by `deepspeed`
    parser.add_argument("--fit-worker", action="store_true", help="run fit_worker instead")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--kill-in-save", type=int, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.fit_worker:
        fit_worker(args.out, args.steps, args.kill_in_save)
        return 0

    results: dict[str, Any] = {}
    for algo in args.algos:
        for stage in args.stages:
            results[f"{algo}-zero{stage}"] = run_stage(algo, stage, args.out, args.precision)
    results["world_size"] = torch.distributed.get_world_size()
    if torch.distributed.get_rank() == 0:
        (args.out / "results.json").write_text(json.dumps(results, indent=2))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    # Interpreter teardown with gloo's threads still around aborts now and then ("terminate
    # called without an active exception"); everything is written, so leave at once.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
