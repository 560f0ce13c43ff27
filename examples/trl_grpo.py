"""TRL's GRPOTrainer on agentgym/FrozenLake-v0, through agentgym's rollout_func.

    python examples/trl_grpo.py --steps 20

TRL owns the training loop (GRPOConfig, GRPOTrainer, its optimizer and logging); agentgym plays
the episodes: each dataset row is a task key (env id and reset seed), TRL repeats it
`group_size` times, and `AgentGymRollout` plays that many multi-turn FrozenLake episodes on
the task with the tiny default policy, sampling every turn with TRL's own generation. TRL
trains on each episode's sampled tokens (the board the env wrote between turns is in the
sequence but masked out of the loss) with the episode's return as its reward. Runs on a CPU in
seconds per step; nothing is downloaded. Needs `pip install 'agentgymnasium[trl]'`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentgym import models
from agentgym.core.config import field_docs
from agentgym.integrations.trl import AgentGymRollout, env_reward, env_success, task_dataset


@dataclass
class Args:
    out: str = "runs/trl-grpo-frozenlake"
    """TRL's output_dir (no checkpoints are saved; TRL writes its run state there)."""
    steps: int = 10
    """Optimizer steps (each on a fresh batch of episodes)."""
    tasks_per_step: int = 4
    """FrozenLake maps per step."""
    group_size: int = 4
    """Episodes per map (TRL's num_generations); their returns are compared with each other."""
    max_turns: int = 6
    """Most moves per episode."""
    learning_rate: float = 1e-3
    """AdamW learning rate (a tiny policy, not a billion-parameter one)."""
    seed: int = 0
    """Seed of TRL's sampling and of the maps (reset seeds seed, seed+1, ...)."""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field, help_text in zip(dataclasses.fields(Args), field_docs(Args).values(), strict=True):
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, type=type(field.default), default=field.default, help=help_text)
    return Args(**vars(parser.parse_args()))


def main() -> None:
    args = parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental"
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = models.load()  # the tiny policy: answers a turn with a fenced move
    start = [p.detach().clone() for p in model.parameters()]
    batch = args.tasks_per_step * args.group_size
    config = GRPOConfig(
        output_dir=args.out,
        use_cpu=True,
        per_device_train_batch_size=batch,
        num_generations=args.group_size,
        max_completion_length=8,  # per turn: a move is ```down``` plus the end-of-turn token
        temperature=1.0,
        beta=0.0,  # no reference model
        learning_rate=args.learning_rate,
        max_steps=args.steps,
        reward_weights=[1.0, 0.0],  # train on the return; log the success rate beside it
        scale_rewards="none",  # mean-only group advantages (Dr. GRPO)
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=args.seed,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[env_reward, env_success],
        args=config,
        train_dataset=task_dataset("agentgym/FrozenLake-v0", args.steps * args.tasks_per_step,
                                   seed=args.seed),
        rollout_func=AgentGymRollout(
            max_turns=args.max_turns,
            # Text moves, and penalties for holes and the edge: an informative return from the
            # first steps (FrozenLake's own reward is 1 at the goal and 0 elsewhere).
            env_kwargs={"tool": False, "hole_reward": -1.0, "edge_reward": -0.5},
        ),
    )
    trainer.train()

    steps = [row for row in trainer.state.log_history if "rewards/env_reward/mean" in row]
    for row in steps:
        print(f"step {row['step']:4d}  return {row['rewards/env_reward/mean']:+.3f}  "
              f"success {row['rewards/env_success/mean']:.3f}", flush=True)
    print(json.dumps(summary(steps, start, model, args)))


def summary(steps: list[dict[str, Any]], start: list[torch.Tensor], model: Any, args: Args) -> dict:
    changed = any(not torch.equal(a, p) for a, p in zip(start, model.parameters(), strict=True))
    return {
        "steps": len(steps),
        "return_first": steps[0]["rewards/env_reward/mean"] if steps else None,
        "return_last": steps[-1]["rewards/env_reward/mean"] if steps else None,
        "weights_changed": changed,
        "out": str(Path(args.out).resolve()),
    }


if __name__ == "__main__":
    main()
