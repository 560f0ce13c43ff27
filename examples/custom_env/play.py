"""Register the GuessNumber env (unless its plugin already did) and play it, top to bottom.

    python examples/custom_env/play.py --episodes 3

The player is a scripted binary search, not a model: it shows the env's contract (messages in,
text out, hints, `info["success"]`) without anything to download. Swap it for a model with
`agentgym.rollout.collect(engine, "example/GuessNumber-v0", n)`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym

import agentgym  # loads installed plugins: with this package installed, the env is registered
from agentgym.core.config import field_docs
from agentgym.utils import check_env

ENV_ID = "example/GuessNumber-v0"


@dataclass
class Args:
    episodes: int = 3
    """Episodes to play."""
    seed: int = 0
    """Reset seed of the first episode (the secret is drawn from it)."""
    high: int = 100
    """Largest secret number."""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field, help_text in zip(dataclasses.fields(Args), field_docs(Args).values(), strict=True):
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, type=type(field.default), default=field.default, help=help_text)
    return Args(**vars(parser.parse_args()))


def main() -> None:
    args = parse_args()

    # Installed (`pip install ./examples/custom_env`), the package's entry point has registered
    # the env during `import agentgym`; run from a clone, register it here the same way.
    registered_by = "plugin"
    if ENV_ID not in {info.id for info in agentgym.list_envs()}:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from guess_number import register_envs

        register_envs()
        registered_by = "script"

    check_env(gym.make(ENV_ID))  # seeding, spaces, info contract, garbage actions

    env = gym.make(ENV_ID, high=args.high)
    results = []
    for episode in range(args.episodes):
        obs, info = env.reset(seed=args.seed + episode)
        print(f"--- episode {episode}: {obs[-1]['content']}")
        low, high = 1, args.high
        done = False
        while not done:
            guess = (low + high) // 2
            obs, reward, terminated, truncated, info = env.step(f"My guess: {guess}")
            hint = obs[-1]["content"]
            print(f"{guess:>4} -> {hint}")
            if hint == "Higher.":
                low = guess + 1
            elif hint == "Lower.":
                high = guess - 1
            done = terminated or truncated
        results.append({"reward": float(reward), "success": info["success"]})
    env.close()
    print(json.dumps({"registered_by": registered_by, "episodes": results}))


if __name__ == "__main__":
    main()
