"""Evaluate a model on agentgym/Code-v0 (HumanEval), top to bottom.

    python examples/eval_code.py --model runs/<run>/checkpoints/<step> --episodes 164

The model writes a Python function for each task; Code-v0 runs it against the task's hidden
tests in a sandbox and scores 1 if every test passes. The model is a local transformers
directory or a checkpoint of `agentgym train`; nothing is downloaded.

Sandboxes, `--sandbox`:
    auto          bubblewrap where it works, else Docker with agentgym's image, else an error
                  that names the fix (the default)
    local         bubblewrap only (`apt-get install bubblewrap`): no network, read-only system
    docker        Docker only (`bash scripts/docker_setup.sh` as root builds the image)
    unsafe-local  plain processes with resource limits, no isolation: only for code you trust

Needs `pip install 'agentgymnasium[train,code]'`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from dataclasses import dataclass

from agentgym import models
from agentgym.core.config import field_docs
from agentgym.inference import HFEngine
from agentgym.rollout import collect


@dataclass
class Args:
    model: str = ""
    """A local transformers model directory or a checkpoint folder (required)."""
    episodes: int = 16
    """Tasks to play, one episode each (HumanEval has 164)."""
    sandbox: str = "auto"
    """Where the answers run: auto, local (bubblewrap), docker or unsafe-local."""
    max_tokens: int = 512
    """Most tokens in one answer."""
    temperature: float = 0.0
    """Sampling temperature; 0: greedy."""
    seed: int = 0
    """First task's reset seed."""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for field, help_text in zip(dataclasses.fields(Args), field_docs(Args).values(), strict=True):
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, type=type(field.default), default=field.default, help=help_text)
    args = Args(**vars(parser.parse_args()))
    if not args.model:
        parser.error("--model is required (a local model directory or checkpoint)")
    return args


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a success rate: honest for small n and rates near 0 or 1."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def main() -> None:
    args = parse_args()
    engine = HFEngine(*models.load(args.model), seed=args.seed)

    # One episode per task: the model answers once, the env grades in the sandbox and ends it.
    episodes = collect(
        engine,
        "agentgym/Code-v0",
        args.episodes,
        seed=args.seed,
        env_kwargs={"sandbox": args.sandbox},
        temperature=args.temperature,
        max_tokens=args.max_tokens,
    )

    # success is the env's own verdict (info["success"]); None would mean it could not grade.
    graded = [e for e in episodes if e.success is not None]
    passed = sum(bool(e.success) for e in graded)
    low, high = wilson(passed, len(graded))
    for episode in episodes[:3]:
        answer = episode.messages[-2]["content"] if len(episode.messages) >= 2 else ""
        print(f"--- {episode.reset_info.get('task_id')}: success={episode.success}")
        print(answer[:300])
    print(
        json.dumps(
            {
                "episodes": len(episodes),
                "graded": len(graded),
                "passed": passed,
                "success_rate": passed / len(graded) if graded else 0.0,
                "ci95": [round(low, 3), round(high, 3)],
                "sandbox": args.sandbox,
            }
        )
    )


if __name__ == "__main__":
    main()
