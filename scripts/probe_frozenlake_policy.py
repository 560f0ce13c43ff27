"""Does a FrozenLake policy read the board? P(direction) grouped by what lies that way.

For states reached by a few random down/right moves on generated maps, the policy's probability
of each direction token (at the first position of its answer, right after the opening fence) is
averaged per (direction, what is there: ice / hole / edge / goal). A policy that reads the
"Around you" line gives a hole or an edge a lower probability than ice; a board-independent one
gives the same number in each row. The last line gives the spread (standard deviation over the
states) of each direction's probability: ~0 means the answer does not depend on the board at all.

``--attention`` also prints where the answer position looks: per layer and head, the share of its
attention on the board message and on what follows it (the chat markers and the answer prefix:
six tokens with the fence). A head with ~1.0 on what follows is saturated on text that never
changes; gradients through it toward the board are ~0, so RL cannot teach it to read (see the
README's FrozenLake section). Then, per layer, how much the answer position's hidden state varies
over the states: the mean distance to the states' mean, over the mean's norm (random weights:
~0.02-0.03).

    python scripts/probe_frozenlake_policy.py                       # the shipped tiny weights
    python scripts/probe_frozenlake_policy.py runs/<run>/checkpoints/step-00000020
    python scripts/probe_frozenlake_policy.py runs/<run> --history-turns 0    # a windowed policy
    python scripts/probe_frozenlake_policy.py --attention --history-turns 0
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections import defaultdict
from typing import Any

import gymnasium as gym
import torch

import agentgym  # noqa: F401  (registers the envs)
from agentgym.envs.frozenlake.text import DIRECTIONS
from agentgym.models import load


def surroundings(content: str) -> dict[str, str]:
    line = content.rsplit("Around you:", 1)[1].split("\n", 1)[0].strip().rstrip(".")
    return dict(part.strip().split(" ", 1) for part in line.split(","))


def states(args: argparse.Namespace) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """``(messages shown to the policy, reset info)`` for one state per map."""
    env = gym.make("agentgym/FrozenLake-v0", tool=not args.text_moves).unwrapped
    rng = random.Random(0)
    out = []
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
        out.append((shown, info))
    return out


def attention_shares(attentions: tuple[torch.Tensor, ...], board: slice) -> list[list[tuple]]:
    """Per layer, per head: (share on the board, share on what follows it) of the last
    position's attention."""
    shares = []
    for layer in attentions:
        last = layer[0, :, -1].float()  # [heads, T]
        on_board = last[:, board].sum(-1).tolist()
        on_tail = last[:, board.stop :].sum(-1).tolist()
        shares.append(list(zip(on_board, on_tail, strict=True)))
    return shares


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
    parser.add_argument(
        "--answer-prefix",
        default="```",
        help="what the policy writes before the direction (default the opening fence; '' for "
        "a policy that answers with the bare word)",
    )
    parser.add_argument("--text-moves", action="store_true", help="FrozenLake-v0(tool=False)")
    parser.add_argument("--attention", action="store_true", help="where the answer looks")
    parser.add_argument(
        "--choices",
        action="store_true",
        help="P over the four directions only, as a policy trained with action choices "
        "samples (default: over the whole vocabulary)",
    )
    args = parser.parse_args()
    torch.set_num_threads(2)
    model, tokenizer = load(args.model)
    if args.attention:
        model.config._attn_implementation = "eager"  # sdpa returns no attention weights
    model.eval()
    ids = {d: tokenizer.encode(d, add_special_tokens=False)[0] for d in DIRECTIONS}
    closing = len(tokenizer.encode("<|im_end|>\n", add_special_tokens=False))  # ChatML templates
    probs: dict[tuple[str, str], list[float]] = defaultdict(list)
    per_direction: dict[str, list[float]] = defaultdict(list)
    shares: list[list[list[tuple]]] = []
    hidden: list[torch.Tensor] = []  # per state: [layers + 1, hidden size]
    for shown, info in states(args):
        head, body = (
            tokenizer.apply_chat_template(
                messages, tools=info["tools"], add_generation_prompt=False, tokenize=False
            )
            for messages in (shown[:-1], shown)
        )
        text = tokenizer.apply_chat_template(
            shown, tools=info["tools"], add_generation_prompt=True, tokenize=False
        )
        prompt = tokenizer.encode(text + args.answer_prefix, add_special_tokens=False)
        board = slice(
            len(tokenizer.encode(head, add_special_tokens=False)),
            len(tokenizer.encode(body, add_special_tokens=False)) - closing,
        )
        with torch.no_grad():
            output = model(
                torch.tensor([prompt]),
                output_attentions=args.attention,
                output_hidden_states=args.attention,
            )
        p = torch.softmax(output.logits[0, -1].float(), -1)
        if args.choices:
            p = p / sum(p[ids[d]] for d in DIRECTIONS)
        for direction, cell in surroundings(shown[-1]["content"]).items():
            probs[(direction, cell)].append(p[ids[direction]].item())
            per_direction[direction].append(p[ids[direction]].item())
        if args.attention:
            shares.append(attention_shares(output.attentions, board))
            hidden.append(torch.stack([h[0, -1].float() for h in output.hidden_states]))
    print(f"{'direction':<10} {'there':<6} {'states':>6}  P(direction)")
    for (direction, cell), values in sorted(probs.items()):
        print(f"{direction:<10} {cell:<6} {len(values):>6}  {sum(values) / len(values):.3f}")
    spread = ", ".join(f"{d} {statistics.pstdev(v):.2g}" for d, v in sorted(per_direction.items()))
    print(f"spread over states (std of P): {spread}")
    if shares:
        print("attention of the answer position, share on the board / on what follows it:")
        for layer in range(len(shares[0])):
            cells = []
            for head in range(len(shares[0][layer])):
                on_board = statistics.fmean(s[layer][head][0] for s in shares)
                on_tail = statistics.fmean(s[layer][head][1] for s in shares)
                cells.append(f"{on_board:.2f}/{on_tail:.2f}")
            print(f"  layer {layer}: " + "  ".join(cells))
        states_hidden = torch.stack(hidden)  # [states, layers + 1, hidden size]
        mean = states_hidden.mean(0)  # [layers + 1, hidden size]
        variation = (states_hidden - mean).norm(dim=-1).mean(0) / mean.norm(dim=-1)
        print("hidden state of the answer position, variation over states, per layer output:")
        print("  " + "  ".join(f"{v:.2g}" for v in variation[1:].tolist()))


if __name__ == "__main__":
    main()
