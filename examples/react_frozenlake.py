"""FrozenLake through a ReAct scaffold: the model thinks, acts, and reads observations.

    python examples/react_frozenlake.py --episodes 4 --updates 2

The ReAct scaffold (``agentgym.rollout.ReActScaffold``) adds a format instruction to the system
prompt, hands the env only what follows the reply's last ``Action:`` line, and shows the env's
answer back to the model as ``Observation: ...``. The episodes stay token-exact: the ids the
model sampled are trained on as sampled, whatever the scaffold writes around them. The script
plays a few episodes with the tiny default policy (or ``--model-dir``), prints one of them as
the model saw it, then takes ``--updates`` GRPO steps on ReAct episodes (``CollectorSource``
with the same scaffold). The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json

from agentgym import models
from agentgym.inference import HFEngine
from agentgym.rollout import ReActScaffold, collect
from agentgym.rollout.collector_source import CollectorSource
from agentgym.trainers import fit, make

ENV = "agentgym/FrozenLake-v0"
ENV_KWARGS = {"tool": False, "size": 3}  # text moves (```down```) on small maps


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="a local model; default: tiny policy")
    parser.add_argument("--episodes", type=int, default=4, help="episodes to play and show")
    parser.add_argument("--updates", type=int, default=2, help="GRPO updates (0: none)")
    parser.add_argument("--history-turns", type=int, default=None, help="ReAct's window")
    parser.add_argument("--max-tokens", type=int, default=48, help="most tokens per reply")
    parser.add_argument("--out", default="runs/react-frozenlake", help="checkpoints go here")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    scaffold = ReActScaffold(history_turns=args.history_turns)
    model, tokenizer = models.load(args.model_dir, seed=args.seed)
    engine = HFEngine(*models.load(args.model_dir, seed=args.seed), seed=args.seed)

    episodes = collect(
        engine, ENV, args.episodes, args.seed, env_kwargs=ENV_KWARGS, max_turns=4,
        sampling_seed=args.seed, max_tokens=args.max_tokens, scaffold=scaffold,
    )  # fmt: skip
    shown = episodes[0]
    print("--- one episode, as the model saw it ---")
    for message in shown.messages:
        print(f"[{message['role']}] {message['content']}")
    turns = [t for e in episodes for t in e.turns]
    valid = sum(not t.info.get("invalid_action", False) for t in turns)
    print(f"--- {len(episodes)} episodes, {len(turns)} turns, {valid} valid actions ---")

    trainer = make(
        "grpo",
        policy=(model, tokenizer),
        engine=engine,
        config={"group_size": 4, "batch_size": 8, "max_new_tokens": args.max_tokens,
                "seed": args.seed},
    )  # fmt: skip
    source = CollectorSource(
        engine, ENV, group_size=4, seed=args.seed, env_kwargs=ENV_KWARGS, max_turns=4,
        max_tokens=args.max_tokens, scaffold=scaffold,
    )  # fmt: skip
    history = fit(trainer, source, steps=args.updates, out=args.out) if args.updates else []
    summary = {
        "episodes": len(episodes),
        "turns": len(turns),
        "valid_actions": valid,
        "updates": len(history),
        "reward_mean": history[-1]["reward_mean"] if history else None,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
