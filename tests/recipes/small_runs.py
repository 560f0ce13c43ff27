"""The command line of a small FrozenLake GRPO run (a few seconds an update on a CPU), shared by
the run-folder tests: ``[*train_args(), "--steps", "2", "--out", str(out)]``."""

from __future__ import annotations


def train_args(
    *extra: str, group_size: int = 4, batch_size: int = 8, max_turns: int = 8,
    checkpoint_every: int = 1,
) -> list[str]:
    """``agentgym train`` arguments for a small FrozenLake GRPO run, then ``extra``."""
    return [
        "train", "--env", "agentgym/FrozenLake-v0", "--algo", "grpo",
        "--group-size", str(group_size), "--batch-size", str(batch_size),
        "--max-turns", str(max_turns), "--eval-episodes", "0",
        "--checkpoint-every", str(checkpoint_every), "--no-progress", *extra,
    ]  # fmt: skip
