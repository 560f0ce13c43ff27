"""Train an agent program, not an env scaffold: draft an answer, then check it, on Math-v0.

    python examples/agent_selfcheck_math.py --updates 20

The agent is plain OpenAI-SDK code: it asks for a draft, sends the draft back with a request to
check it, and returns the checked answer. It never sees agentgym: its client's base URL is a
gateway session that records both calls token for token (docs/gateway.md), and Math-v0 grades
the answer it returns. Both calls are one context (the check continues the draft), so GRPO trains
the draft and the check together. The model is a local transformers directory (--model-dir), or
the tiny default policy; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentgym import models
from agentgym.gateway.source import AgentProgramSource
from agentgym.trainers import fit, make
from agentgym.trainers.colocate import colocated_engine

MODEL = "agentgym-tiny"
MAX_TOKENS = 64


async def draft_then_check(client: Any, task: dict[str, Any]) -> str:
    """The agent: ``task["messages"]`` is Math-v0's question; returns the final answer."""
    messages = list(task["messages"])
    draft = await client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=MAX_TOKENS, temperature=1.0
    )
    messages.append(draft.choices[0].message)
    messages.append(
        {
            "role": "user",
            "content": "Check your answer step by step. If it is wrong, correct it. "
            "End with the final answer in \\boxed{}.",
        }
    )
    checked = await client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=MAX_TOKENS, temperature=1.0
    )
    return checked.choices[0].message.content or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="default: the tiny policy")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--groups", type=int, default=4, help="questions per update")
    parser.add_argument("--group-size", type=int, default=4, help="tries per question")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    trainer = make(
        "grpo",
        policy=models.load(args.model_dir),
        config={
            "group_size": args.group_size,
            "batch_size": args.groups * args.group_size,
            "learning_rate": args.learning_rate,
            "seed": args.seed,
        },
    )
    engine, _ = colocated_engine(trainer, "auto")  # gets the weights after every update
    tasks = [{"seed": i} for i in range(1000)]  # Math-v0's question of each reset seed
    source = AgentProgramSource(
        engine,
        trainer.tokenizer,
        draft_then_check,
        tasks,
        group_size=args.group_size,
        reward="agentgym/Math-v0",  # grades the returned answer
        seed=args.seed,
        model_name=MODEL,
    )
    history = fit(trainer, source, steps=args.updates, engine=engine)
    summary = {
        "updates": trainer.step_count,
        "reward_mean": [round(row.get("reward_mean", 0.0), 4) for row in history],
        "outcomes": dict(source.stats),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
