"""Pre-train the tiny policy on FrozenLake's output FORMAT only, and ship the weights.

RL has to do the learning: these weights know how to answer a FrozenLake turn (one direction word
in a fenced block, then end the turn), not which direction is good. The training data are
episodes played by an engine that picks each direction uniformly at random, independently of the
board, so the best this pre-training can learn about directions is "each is equally likely".
``--check`` reports the pre-trained policy's format validity and success rate.

    python scripts/pretrain_tiny_format.py          # writes agentgym/models/tiny/model.safetensors
    python scripts/pretrain_tiny_format.py --check    # evaluates the shipped weights

Seeded: the same seed, steps and torch version give the same weights.

Experiments (not how the shipped weights were made): ``--freeze-attention`` trains embeddings,
MLPs and norms only, so the attention stays at its random initialisation instead of saturating on
the chat markers and the fence (``probe_frozenlake_policy.py --attention`` shows both);
``--bare-moves`` answers with the bare direction word, a format that needs no attention at all;
``--readout-only`` (with ``--tiny-config tie_word_embeddings=false``) trains only the output layer
and the final norm, so the network under it stays exactly random; ``--direction-loss any``
scores the direction on the total probability of the four (format only, no split taught). None of
these keeps the board readable: after pre-training, P(direction) varies across boards by under
1e-4 (``probe_frozenlake_policy.py``), readout-only aside (4e-3).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from probe_frozenlake_policy import surroundings  # this folder is on sys.path when run

from agentgym.core.types import Episode
from agentgym.envs.frozenlake.text import DIRECTIONS
from agentgym.inference import Completion, HFEngine, SamplingParams
from agentgym.models import TINY_DIR, load, tiny_config
from agentgym.rollout import collect

ENV_ID = "agentgym/FrozenLake-v0"


def on_board_directions(prompt: str) -> list[str]:
    """The directions that do not run into the edge, read from the last "Around you:" line."""
    there = surroundings(prompt)
    return [d for d in DIRECTIONS if there.get(d) != "edge"]


class RandomMoveEngine:
    """An ``InferenceEngine`` that answers every turn with a uniformly random fenced direction:
    any of the four, or (``on_board``) any that does not run into the edge."""

    def __init__(
        self, tokenizer: object, seed: int, *, on_board: bool = False, bare: bool = False
    ) -> None:
        self.rng = random.Random(seed)
        self.tokenizer = tokenizer
        self.eos = tokenizer.eos_token_id  # type: ignore[attr-defined]
        self.on_board = on_board
        self.bare = bare

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        await asyncio.sleep(0)
        choices = list(DIRECTIONS)
        if self.on_board:
            prompt = self.tokenizer.decode(prompt_token_ids)  # type: ignore[attr-defined]
            choices = on_board_directions(prompt)
        direction = self.rng.choice(choices)
        text = direction if self.bare else f"```{direction}```"
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.eos]  # type: ignore[attr-defined]
        return Completion(ids, [-math.log(len(choices))] * len(ids), "stop", text=text)

    async def update_weights(self, weights: object) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        pass


def batches(episodes: list[Episode], size: int, rng: random.Random) -> list[list[Episode]]:
    order = list(episodes)
    rng.shuffle(order)
    return [order[i : i + size] for i in range(0, len(order), size)]


def sft_loss(
    model: torch.nn.Module,
    batch: list[Episode],
    pad: int,
    direction_ids: Sequence[int] = (),
) -> torch.Tensor:
    """Cross-entropy on the sampled tokens, each turn's context as one sequence.

    With ``direction_ids``, a position whose sampled token is a direction is scored on the
    probability of *any* direction, ``-log sum_d p(d)``, not on the one sampled: the loss teaches
    where a direction goes and leaves how the four share that probability as it is.
    """
    rows = [(e, start, end) for e in batch for start, end in e.contexts]
    length = max(end - start for _, start, end in rows)
    ids = torch.full((len(rows), length), pad)
    mask = torch.zeros((len(rows), length))
    attention = torch.zeros((len(rows), length), dtype=torch.long)
    for row, (episode, start, end) in enumerate(rows):
        ids[row, : end - start] = torch.tensor(episode.token_ids[start:end])
        mask[row, : end - start] = torch.tensor(episode.loss_mask[start:end], dtype=torch.float32)
        attention[row, : end - start] = 1
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]  # [B, T-1, V]
    targets = ids[:, 1:]
    nll = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).view(len(rows), -1)  # [B, T-1]
    if direction_ids:
        choice = torch.tensor(list(direction_ids))
        is_direction = torch.isin(targets, choice)
        any_direction = torch.logsumexp(logits, -1) - torch.logsumexp(logits[..., choice], -1)
        nll = torch.where(is_direction, any_direction, nll)
    target_mask = mask[:, 1:]
    return (nll * target_mask).sum() / target_mask.sum()


def _config_value(text: str) -> int | bool:
    return text == "true" if text in ("true", "false") else int(text)


def trainable(model: torch.nn.Module, args: argparse.Namespace) -> list[torch.nn.Parameter]:
    """The parameters the pre-training changes; the others keep their random initialisation."""
    if args.readout_only:
        if model.config.tie_word_embeddings:
            raise SystemExit(
                "--readout-only needs an output layer of its own: add tie_word_embeddings=false to "
                "--tiny-config"
            )
        keep = {"lm_head.weight", "model.norm.weight"}
    else:  # attention left at its random initialisation stays unsaturated
        keep = {
            n for n, _ in model.named_parameters() if not (args.freeze_attention and "attn" in n)
        }
    for name, param in model.named_parameters():
        param.requires_grad_(name in keep)
    return [param for name, param in model.named_parameters() if name in keep]


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    pairs = [pair.split("=", 1) for pair in args.tiny_config.split(",") if pair]
    config = tiny_config(**{k: _config_value(v) for k, v in pairs}) if pairs else None
    model, tokenizer = load(seed=args.seed, config=config)
    episodes = collect(
        RandomMoveEngine(
            tokenizer, args.seed, on_board=args.moves == "on-board", bare=args.bare_moves
        ),
        ENV_ID,
        args.episodes,
        seed=args.seed,
        tokenizer=tokenizer,
        env_kwargs={"tool": not args.text_moves},
        max_turns=args.max_turns,
        history_turns=args.history_turns,
    )
    print(f"{len(episodes)} random-move episodes, {sum(len(e.token_ids) for e in episodes)} tokens")
    direction_ids: list[int] = []
    if args.direction_loss == "any":
        for direction in DIRECTIONS:
            ids = tokenizer.encode(direction, add_special_tokens=False)
            if len(ids) != 1:
                raise SystemExit(f"--direction-loss any: {direction!r} is {len(ids)} tokens, not 1")
            direction_ids.append(ids[0])
    model.train()
    params = trainable(model, args)
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    start, step = time.monotonic(), 0
    for epoch in range(args.epochs):
        for batch in batches(episodes, args.batch_size, rng):
            loss = sft_loss(model, batch, tokenizer.pad_token_id, direction_ids)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            step += 1
            if step % 10 == 0:
                elapsed = time.monotonic() - start
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} ({elapsed:.0f} s)")
            if step == args.max_steps:
                break
        if step == args.max_steps:
            break
    model.eval()
    # save_pretrained also writes its own config.json; the shipped one is hand-written and stays.
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        target = Path(args.out_dir) / "model.safetensors"
        shutil.copyfile(Path(tmp) / "model.safetensors", target)
        if config is not None:  # another shape: its config goes with the weights
            shutil.copyfile(Path(tmp) / "config.json", Path(args.out_dir) / "config.json")
    print(f"wrote {target}")


def check(args: argparse.Namespace) -> None:
    model, tokenizer = load(args.out_dir)
    engine = HFEngine(model, tokenizer)
    episodes = collect(
        engine,
        ENV_ID,
        args.check_episodes,
        seed=10_000,
        tokenizer=tokenizer,
        temperature=1.0,
        max_tokens=16,
        history_turns=args.history_turns,
        env_kwargs={"tool": not args.text_moves},
    )
    invalid = sum(t.info.get("invalid_action", False) for e in episodes for t in e.turns)
    turns = sum(len(e.turns) for e in episodes)
    success = sum(bool(e.turns and e.turns[-1].info.get("success")) for e in episodes)
    rate = success / len(episodes)
    print(f"invalid actions {invalid}/{turns}; success {success}/{len(episodes)} = {rate:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--episodes", type=int, default=2048, help="random-move episodes to learn from"
    )
    parser.add_argument("--max-turns", type=int, default=6, help="turns per training episode")
    parser.add_argument(
        "--history-turns",
        type=int,
        default=None,
        help="learn each turn in a history window (as agentgym train's); default: the whole "
        "conversation, as the shipped weights were made",
    )
    parser.add_argument(
        "--moves",
        choices=["any", "on-board"],
        default="any",
        help="the random moves learned from: any direction, or any that stays on the board",
    )
    parser.add_argument(
        "--text-moves",
        action="store_true",
        help="play FrozenLake-v0(tool=False): no tool schema in the prompt",
    )
    parser.add_argument(
        "--tiny-config",
        default="",
        metavar="K=V,...",
        help="tiny config fields to change (e.g. hidden_size=256); the config is written too",
    )
    parser.add_argument(
        "--bare-moves",
        action="store_true",
        help="answer with the bare direction word (a valid move too) instead of ```down```",
    )
    parser.add_argument(
        "--freeze-attention",
        action="store_true",
        help="train embeddings, MLPs and norms only: attention keeps its random weights",
    )
    parser.add_argument(
        "--readout-only",
        action="store_true",
        help="train the output layer and final norm only (needs tie_word_embeddings=false): the "
        "format is a linear readout of a random network",
    )
    parser.add_argument(
        "--direction-loss",
        choices=["sampled", "any"],
        default="sampled",
        help="score the direction token on the one sampled (cross-entropy), or on the total "
        "probability of the four directions (any), which leaves their split to the board",
    )
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: none)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out-dir", default=str(TINY_DIR))
    parser.add_argument("--check", action="store_true", help="evaluate the shipped weights instead")
    parser.add_argument("--check-episodes", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(2)
    check(args) if args.check else train(args)


if __name__ == "__main__":
    main()
