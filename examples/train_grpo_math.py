"""GRPO on agentgym/Math-v0, top to bottom.

    python examples/train_grpo_math.py --model-dir path/to/model --updates 50

The model is a local transformers directory (config, weights, tokenizer with a chat template);
nothing is downloaded. Each update samples `groups` questions, `group_size` answers to each,
scores them with Math-v0's grader (math-verify: 1 for a correct boxed answer, else 0), and takes
a GRPO step: each answer's advantage is its reward minus its group's mean, so a group whose
answers all score the same teaches nothing. Needs `pip install 'agentgymnasium[train,math]'`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from agentgym import models
from agentgym.core.config import field_docs
from agentgym.inference import HFEngine
from agentgym.recipes.run_folder import RunFolder
from agentgym.rollout.collector_source import CollectorSource
from agentgym.trainers import fit, make


@dataclass
class Args:
    model_dir: str = ""
    """A local transformers model directory (required)."""
    out: str = "runs/grpo-math"
    """Run folder: checkpoints (fit) and metrics.jsonl (RunFolder); a rerun resumes."""
    updates: int = 20
    """GRPO updates (optimizer steps on fresh episodes)."""
    groups: int = 4
    """Questions per update."""
    group_size: int = 4
    """Answers sampled per question; their rewards are compared with each other."""
    max_tokens: int = 256
    """Most tokens in one answer."""
    learning_rate: float = 1e-6
    """AdamW learning rate (GRPO's 1e-6 suits billion-parameter models; a tiny one needs more)."""
    temperature: float = 1.0
    """Sampling temperature of the answers."""
    seed: int = 0
    """Seed of the question order and the sampling."""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field, help_text in zip(dataclasses.fields(Args), field_docs(Args).values(), strict=True):
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, type=type(field.default), default=field.default, help=help_text)
    args = Args(**vars(parser.parse_args()))
    if not args.model_dir:
        parser.error("--model-dir is required (a local transformers model directory)")
    return args


def main() -> None:
    args = parse_args()

    # The trainer owns one copy of the model; the engine samples from another and receives the
    # trainer's weights after every update.
    model, tokenizer = models.load(args.model_dir)
    engine = HFEngine(*models.load(args.model_dir), seed=args.seed)
    trainer = make(
        "grpo",
        policy=(model, tokenizer),
        engine=engine,
        config={
            "group_size": args.group_size,
            "batch_size": args.groups * args.group_size,
            "max_new_tokens": args.max_tokens,
            "learning_rate": args.learning_rate,
            "temperature": args.temperature,
            "seed": args.seed,
        },
    )

    # Episodes: group j answers the question of reset seed `seed + j`, so a resumed run
    # continues with the questions the stopped one had not reached yet.
    episodes = CollectorSource(
        engine,
        "agentgym/Math-v0",
        group_size=args.group_size,
        seed=args.seed,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
    )

    def report(metrics: dict[str, float]) -> None:
        step, reward = int(metrics["step"]), metrics["reward_mean"]
        print(f"update {step:4d}  reward {reward:.3f}  loss {metrics['loss']:+.4f}", flush=True)

    history = fit(
        trainer,
        episodes,
        steps=args.updates,
        out=args.out,  # checkpoints/
        recorder=RunFolder(args.out),  # metrics.jsonl, cut back to the checkpoint on resume
        on_metrics=report,
    )

    summary = {"updates": trainer.step_count, "out": str(Path(args.out).resolve())}
    if history:
        summary["last_reward_mean"] = history[-1]["reward_mean"]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
