"""Does a FrozenLake policy read the board? P(direction) grouped by what lies that way.

For states reached by a few random down/right moves on generated maps, the policy's probability
of each direction token (right after the opening fence) is averaged per (direction, what is
there: ice / hole / edge / goal). A policy that reads the "Around you" line gives a hole or an
edge a lower probability than ice; a board-independent one gives the same number in each row.

    python scripts/probe_frozenlake_policy.py                       # the shipped tiny weights
    python scripts/probe_frozenlake_policy.py runs/<run>/checkpoints/step-00000020
    python scripts/probe_frozenlake_policy.py runs/<run> --history-turns 0    # a windowed policy
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict

import gymnasium as gym
import torch

import agentgym  # noqa: F401  (registers the envs)
from agentgym.envs.frozenlake.text import DIRECTIONS
from agentgym.models import load


def surroundings(content: str) -> dict[str, str]:
    line = content.rsplit("Around you:", 1)[1].split("\n", 1)[0].strip().rstrip(".")
    return dict(part.strip().split(" ", 1) for part in line.split(","))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=None, help="a checkpoint directory")
    parser.add_argument("--maps", type=int, default=150)
    parser.add_argument(
        "--history-turns",
        type=int,
        default=None,
        help="the policy's history window (as trained with --history-turns); default: all",
    )
    args = parser.parse_args()
    torch.set_num_threads(2)
    model, tokenizer = load(args.model)
    model.eval()
    ids = {d: tokenizer.encode(d, add_special_tokens=False)[0] for d in DIRECTIONS}
    env = gym.make("agentgym/FrozenLake-v0").unwrapped
    rng = random.Random(0)
    probs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for seed in range(args.maps):
        observation, info = env.reset(seed=seed)
        messages, over = list(observation), False
        for _ in range(rng.randint(0, 3)):
            move = f"```{rng.choice(['down', 'right'])}```"
            messages.append({"role": "assistant", "content": move})
            observation, _, terminated, truncated, _ = env.step(move)
            messages += list(observation)
            if over := terminated or truncated:
                break
        if over:
            continue
        shown = messages
        if args.history_turns is not None:  # system, then the observation k turns back, ...
            user_at = [i for i, m in enumerate(messages) if m["role"] == "user"]
            first = user_at[max(0, len(user_at) - 1 - args.history_turns)]
            shown = [messages[0], *messages[first:]]
        text = tokenizer.apply_chat_template(
            shown, tools=info["tools"], add_generation_prompt=True, tokenize=False
        )
        prompt = torch.tensor([tokenizer.encode(text + "```", add_special_tokens=False)])
        with torch.no_grad():
            p = torch.softmax(model(prompt).logits[0, -1].float(), -1)
        for direction, cell in surroundings(messages[-1]["content"]).items():
            probs[(direction, cell)].append(p[ids[direction]].item())
    print(f"{'direction':<10} {'there':<6} {'states':>6}  P(direction)")
    for (direction, cell), values in sorted(probs.items()):
        print(f"{direction:<10} {cell:<6} {len(values):>6}  {sum(values) / len(values):.3f}")


if __name__ == "__main__":
    main()
