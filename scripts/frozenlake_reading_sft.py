"""How fast does a policy learn to READ the FrozenLake board when told the answer?

A diagnostic for the learning problem, not a training recipe: supervised cross-entropy on one
decision per example, the label drawn uniformly among the safe moves (ice or goal) named by the
board's "Around you" line. If a model needs many hundreds of such steps to put its probability on
safe moves, RL (whose signal is far noisier) will first find board-independent shortcuts (a
down/right preference, or walking into the edge where that is safe) before it reads the board.

Each example is a state reached by 0-4 random safe moves on a generated map. ``--prompt``:

- ``full``: system prompt with the tool schema, then the conversation so far (what RL sees);
- ``single``: system prompt, then only the current board;
- ``text``: as ``single`` from ``FrozenLake-v0(tool=False)``: no tool schema (~115 tokens);
- ``bare``: only the current board, no system prompt, no tools (~60 tokens).

``--bandit`` replaces the labels with a reward, as RL sees it, in its most favourable form:
REINFORCE over the four direction tokens, one sampled move per state, +1 if safe and -1 if not,
with the state's exact expected reward as the baseline. It separates reading from the output
format (the softmax is over the four directions only), so a random network can be measured.

Every ``--every`` steps it prints the loss and the *safe mass*: the share of the four direction
tokens' probability on safe moves, over 150 held-out states (1.0: reads the board perfectly), and
first the best safe mass a policy that ignores the board can have: only above it does a model read.

    python scripts/frozenlake_reading_sft.py                       # shipped weights, full prompts
    python scripts/frozenlake_reading_sft.py --random-init --prompt bare --lr 3e-3 --steps 300
    python scripts/frozenlake_reading_sft.py --random-init --prompt text --bandit --steps 30
    python scripts/frozenlake_reading_sft.py --random-init --prompt text --tiny-config \
        hidden_size=256,intermediate_size=1024,num_attention_heads=8,num_key_value_heads=4
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import gymnasium as gym
import torch
from probe_frozenlake_policy import surroundings  # this folder is on sys.path when run

import agentgym  # noqa: F401  (registers the envs)
from agentgym.envs.frozenlake.text import DIRECTIONS
from agentgym.models import load, tiny_config

SAFE = ("ice", "goal")


def safe_moves(content: str) -> list[str]:
    cells = surroundings(content)
    return [d for d in DIRECTIONS if cells[d] in SAFE]


def example(env: Any, tokenizer: Any, seed: int, rng: random.Random, prompt: str) -> Any:
    """``(prompt ids ending in the opening fence, safe moves)`` for one state, or None."""
    observation, info = env.reset(seed=seed)
    messages = list(observation)
    for _ in range(rng.randint(0, 4)):
        moves = safe_moves(messages[-1]["content"])
        if not moves:
            break
        move = f"```{rng.choice(moves)}```"
        observation, _, terminated, truncated, _ = env.step(move)
        if terminated or truncated:
            break
        if prompt == "full":
            messages += [{"role": "assistant", "content": move}, *observation]
        else:
            messages = [messages[0], *observation]
    moves = safe_moves(messages[-1]["content"])
    if not moves:
        return None
    shown, tools = (messages[-1:], None) if prompt == "bare" else (messages, info["tools"])
    text = tokenizer.apply_chat_template(
        shown, tools=tools, add_generation_prompt=True, tokenize=False
    )
    return tokenizer.encode(text + "```", add_special_tokens=False), moves


@torch.no_grad()
def safe_mass(model: Any, ids: dict[str, int], states: list[Any]) -> float:
    model.eval()
    total = 0.0
    for prompt, moves in states:
        p = torch.softmax(model(torch.tensor([prompt])).logits[0, -1].float(), -1)
        directions = sum(p[ids[d]] for d in DIRECTIONS)
        total += float(sum(p[ids[d]] for d in moves) / directions)
    return total / len(states)


def bandit_loss(logits: torch.Tensor, batch: list[Any], ids: dict[str, int]) -> torch.Tensor:
    """REINFORCE over the four direction tokens: one sampled move per state, reward +1 if it is
    safe and -1 if not, minus the state's exact expected reward (the best possible baseline)."""
    logp = torch.log_softmax(logits[:, [ids[d] for d in DIRECTIONS]].float(), -1)
    rows = torch.arange(len(batch))
    with torch.no_grad():
        reward = torch.tensor(
            [[1.0 if d in moves else -1.0 for d in DIRECTIONS] for _, moves in batch]
        )
        action = torch.multinomial(logp.exp(), 1)[:, 0]
        advantage = reward[rows, action] - (logp.exp() * reward).sum(-1)
    return -(advantage * logp[rows, action]).mean()


def step(
    model: Any, optimizer: Any, batch: list[Any], ids: dict[str, int], pad: int, rng, bandit: bool
) -> float:
    model.train()
    length = max(len(p) for p, _ in batch)
    x = torch.full((len(batch), length), pad)
    attention = torch.zeros((len(batch), length), dtype=torch.long)
    for row, (prompt, _) in enumerate(batch):
        x[row, : len(prompt)] = torch.tensor(prompt)
        attention[row, : len(prompt)] = 1
    last = torch.tensor([len(p) - 1 for p, _ in batch])
    logits = model(input_ids=x, attention_mask=attention).logits[torch.arange(len(batch)), last]
    if bandit:
        loss = bandit_loss(logits, batch, ids)
    else:
        labels = torch.tensor([ids[rng.choice(moves)] for _, moves in batch])
        loss = torch.nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=None, help="a model directory (default tiny)")
    parser.add_argument("--random-init", action="store_true", help="tiny policy, random weights")
    parser.add_argument(
        "--tiny-config",
        default="",
        metavar="K=V,...",
        help="with --random-init: tiny config fields to change, e.g. "
        "hidden_size=256,intermediate_size=1024,num_attention_heads=8,num_key_value_heads=4",
    )
    parser.add_argument("--prompt", choices=["full", "single", "text", "bare"], default="full")
    parser.add_argument(
        "--bandit",
        action="store_true",
        help="learn from a reward instead of labels: sample one of the four directions, +1 if "
        "safe, -1 if not (the best case for RL's signal: immediate, exact baseline)",
    )
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    if args.random_init:
        pairs = [p.split("=", 1) for p in args.tiny_config.split(",") if p]
        config = tiny_config(**{k: int(v) for k, v in pairs}) if pairs else None
        model, tokenizer = load(seed=args.seed, config=config)
    else:
        model, tokenizer = load(args.model)
    ids = {d: tokenizer.encode(d, add_special_tokens=False)[0] for d in DIRECTIONS}
    env = gym.make("agentgym/FrozenLake-v0", tool=args.prompt != "text").unwrapped
    data = [example(env, tokenizer, s, rng, args.prompt) for s in range(6000)]
    held = [example(env, tokenizer, s, rng, args.prompt) for s in range(900_000, 900_150)]
    data, held = [x for x in data if x], [x for x in held if x]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    mean_len = sum(len(p) for p, _ in data) / len(data)
    print(f"{len(data)} states, prompts {mean_len:.0f} tokens on average")
    # A policy that ignores the board puts its mass on the direction safe most often.
    shortcut = max(sum(d in moves for _, moves in held) / len(held) for d in DIRECTIONS)
    print(f"board-independent best: safe mass {shortcut:.3f} (above it, the model reads)")
    print(f"step 0 safe mass {safe_mass(model, ids, held):.3f}", flush=True)
    started = time.monotonic()
    for n in range(1, args.steps + 1):
        batch = rng.sample(data, args.batch_size)
        loss = step(model, optimizer, batch, ids, tokenizer.pad_token_id, rng, args.bandit)
        if n % args.every == 0:
            mass = safe_mass(model, ids, held)
            elapsed = time.monotonic() - started
            print(f"step {n} loss {loss:.3f} safe mass {mass:.3f} ({elapsed:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
