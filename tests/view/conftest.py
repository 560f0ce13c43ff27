"""The viewer tests' run: a real tiny ``agentgym train`` (FrozenLake GRPO, 2 updates of 4
episodes; ~15 s on a CPU), made once per session and only read after."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agentgym.cli import main

TRAIN = [
    "train", "--env", "agentgym/FrozenLake-v0", "--algo", "grpo", "--group-size", "2",
    "--batch-size", "4", "--max-turns", "4", "--eval-episodes", "0", "--checkpoint-every", "1",
    "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main([*TRAIN, "--steps", "2", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return out
