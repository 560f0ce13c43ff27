"""One GRPO training step, agentgym against TRL's ``GRPOTrainer``: tokens/s and peak RSS.

Both sides train the tiny policy (``agentgym.models.load()``) on the same work: ``--prompts``
chat prompts × ``--group-size`` completions × ``--max-new-tokens`` sampled tokens each (EOS
ignored on both sides: ``ignore_eos`` / ``min_new_tokens``), temperature 1, one optimizer step
(AdamW, the same learning rate, grad-norm clip 1), no KL (β = 0), one iteration, group-normalised
advantages, losses averaged per sequence then over sequences, seeded random rewards. A step is
generation plus update, timed together; each side takes ``--warmup`` untimed steps, then
``--repeats`` timed ones, and reports their median. TRL's gradient checkpointing (on by default
in its ``GRPOConfig``) is turned off: agentgym does not checkpoint activations.

Each side runs in its own subprocess with the same ``torch.set_num_threads``, so its peak RSS
(``VmHWM``) is its own. Both get ``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it: with
GNU OpenMP's default spin-waiting on a machine whose cores other jobs keep busy, TRL's step
stalled ~20x and agentgym's did not, which measures the machine, not the frameworks.
tokens/s = generated completion tokens / step wall time::

    .venv/bin/python benchmarks/grpo_vs_trl.py --out grpo_vs_trl.json

TRL is the ``bench`` extra (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from typing import Any

PROMPTS = [
    "You are on a frozen lake. Reach the goal G without falling into a hole H. Which way?",
    "Grid:\nSFFF\nFHFH\nFFFH\nHFFG\nYou are at S. Answer with one move: left, down, right, up.",
    "Walk from the start to the goal on the 4x4 lake; holes end the episode. Next move?",
    "The ice is slippery. Pick a direction that gets you closer to the goal.",
    "You stand at row 0, column 0. The goal is at row 3, column 3. Move?",
    "Avoid the holes at (1,1), (1,3), (2,3) and (3,0). What is your next action?",
    "Answer in a fenced block with one of: left, down, right, up.",
    "Start S, goal G, holes H. Plan one step and say which way you go.",
]


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rewards_for(n: int, step: int, seed: int) -> list[float]:
    rng = random.Random(seed * 1000 + step)
    return [rng.random() for _ in range(n)]


def messages(args: argparse.Namespace) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}] for i in range(args.prompts)]


# -- agentgym ------------------------------------------------------------------------------------


def run_agentgym(args: argparse.Namespace) -> dict[str, Any]:
    import asyncio

    import torch

    from agentgym.core.types import Episode, Turn, assistant
    from agentgym.inference import HFEngine, SamplingParams
    from agentgym.models import load
    from agentgym.trainers import make

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, tokenizer = load(args.model)
    prompts = [
        list(
            tokenizer.apply_chat_template(
                m, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
        for m in messages(args)
    ]
    n = args.prompts * args.group_size
    trainer = make(
        "grpo",
        backend="torch",
        policy=(model, tokenizer),
        config={
            "group_size": args.group_size,
            "batch_size": n,
            "learning_rate": args.lr,
            "temperature": 1.0,
            "max_new_tokens": args.max_new_tokens,
            "kl_beta": 0.0,
            "ppo_epochs": 1,
            "num_minibatches": 1,
            "seed": args.seed,
        },
    )
    sampling = SamplingParams(temperature=1.0, max_tokens=args.max_new_tokens, ignore_eos=True)

    async def one_step(engine: HFEngine, step: int) -> tuple[float, int, dict[str, float]]:
        start = time.perf_counter()
        jobs = [engine.generate(p, sampling) for p in prompts for _ in range(args.group_size)]
        completions = await asyncio.gather(*jobs)
        generated = time.perf_counter() - start
        flat = [p for p in prompts for _ in range(args.group_size)]
        rewards = rewards_for(n, step, args.seed)
        episodes = []
        for i, (prompt, c) in enumerate(zip(flat, completions, strict=True)):
            ids = prompt + list(c.token_ids)
            episodes.append(
                Episode(
                    env_id="bench",
                    turns=[Turn(assistant(c.text or ""), (), rewards[i], True, False, {})],
                    token_ids=ids,
                    loss_mask=[0] * len(prompt) + [1] * len(c.token_ids),
                    logprobs=[0.0] * len(prompt) + list(c.logprobs),
                    turn_spans=[(len(prompt), len(ids))],
                    group=i // args.group_size,
                )
            )
        metrics = trainer.step(episodes, push_weights=False)
        elapsed = time.perf_counter() - start
        metrics = {**metrics, "generate_s": generated}
        return elapsed, sum(len(c.token_ids) for c in completions), metrics

    async def main() -> dict[str, Any]:
        engine = HFEngine(
            model, tokenizer, max_batch_size=n, seed=args.seed, threads=args.engine_threads
        )
        try:
            for step in range(args.warmup):
                await one_step(engine, step)
            times, updates, generations, tokens = [], [], [], 0
            for step in range(args.warmup, args.warmup + args.repeats):
                elapsed, tokens, metrics = await one_step(engine, step)
                assert metrics.get("update") == 1.0, metrics
                times.append(elapsed)
                updates.append(metrics["step_s"])
                generations.append(metrics["generate_s"])
        finally:
            await engine.close()
        return {
            "step_s": statistics.median(times),
            "step_times": times,
            "update_s": statistics.median(updates),  # trainer.step alone
            "generate_s": statistics.median(generations),  # the engine's 64 completions
            # batch-size bucket -> the torch threads the engine's decode steps run on
            "decode_threads": engine.stats.decode_threads,
            "tokens": tokens,
        }

    return asyncio.run(main())


# -- TRL -----------------------------------------------------------------------------------------


def run_trl(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from agentgym.models import load

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, tokenizer = load(args.model)
    n = args.prompts * args.group_size
    dataset = Dataset.from_list([{"prompt": m} for m in messages(args)])
    calls = {"step": 0}

    def reward(completions: list[Any], **_: Any) -> list[float]:
        out = rewards_for(len(completions), calls["step"], args.seed)
        calls["step"] += 1
        return out

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.start = 0.0

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            self.times.append(time.perf_counter() - self.start)

    timer = Timer()
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            use_cpu=True,
            bf16=False,
            fp16=False,
            per_device_train_batch_size=n,
            gradient_accumulation_steps=1,
            steps_per_generation=1,
            num_generations=args.group_size,
            max_completion_length=args.max_new_tokens,
            generation_kwargs={"min_new_tokens": args.max_new_tokens},
            temperature=1.0,
            beta=0.0,
            num_iterations=1,
            epsilon=0.2,
            loss_type="grpo",
            scale_rewards="group",
            learning_rate=args.lr,
            lr_scheduler_type="constant",
            warmup_steps=0,
            weight_decay=0.0,
            max_grad_norm=1.0,
            gradient_checkpointing=False,
            max_steps=args.warmup + args.repeats,
            logging_strategy="no",
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            seed=args.seed,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[timer],
        )
        trainer.train()
    assert len(timer.times) == args.warmup + args.repeats, timer.times
    times = timer.times[args.warmup :]
    # min_new_tokens = max_completion_length: every completion has exactly max_new_tokens.
    return {
        "step_s": statistics.median(times),
        "step_times": times,
        "tokens": n * args.max_new_tokens,
    }


# -- driver --------------------------------------------------------------------------------------

SIDES = {"agentgym": run_agentgym, "trl": run_trl}


def child(args: argparse.Namespace) -> None:
    result = SIDES[args.side](args)
    result["peak_rss_mb"] = peak_rss_mb()
    result["tokens_per_s"] = result["tokens"] / result["step_s"]
    print("RESULT " + json.dumps(result), flush=True)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--engine-threads",
        type=int,
        help="agentgym only: a fixed torch thread count for HFEngine's steps (default: the engine "
        "times its decode steps at 1 and --threads threads and keeps the faster); the update "
        "keeps --threads",
    )
    parser.add_argument("--model", help="a local model directory (default: the tiny policy)")
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps before the timed one")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=list(SIDES))
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--side", choices=list(SIDES), help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse()
    if args.side:
        child(args)
        return
    forwarded = [
        f"--prompts={args.prompts}",
        f"--group-size={args.group_size}",
        f"--max-new-tokens={args.max_new_tokens}",
        f"--threads={args.threads}",
        *([f"--engine-threads={args.engine_threads}"] if args.engine_threads else []),
        f"--lr={args.lr}",
        f"--warmup={args.warmup}",
        f"--repeats={args.repeats}",
        f"--seed={args.seed}",
        *([f"--model={args.model}"] if args.model else []),
    ]
    env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "TOKENIZERS_PARALLELISM": "false"}
    results: dict[str, Any] = {}
    for side in args.sides:
        proc = subprocess.run(
            [sys.executable, __file__, f"--side={side}", *forwarded],
            capture_output=True,
            text=True,
            env=env,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not lines:
            results[side] = {"error": (proc.stderr or proc.stdout)[-2000:]}
            print(
                f"{side} failed (rc {proc.returncode}):\n{results[side]['error']}", file=sys.stderr
            )
            continue
        results[side] = json.loads(lines[-1][len("RESULT ") :])

    n = args.prompts * args.group_size
    print(
        f"\nOne GRPO step: {args.prompts} prompts × {args.group_size} completions × "
        f"{args.max_new_tokens} new tokens ({n * args.max_new_tokens} tokens), "
        f"{args.threads} torch threads"
        + (f" (agentgym's engine {args.engine_threads})" if args.engine_threads else "")
        + f", OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}; median of "
        f"{args.repeats} steps after {args.warmup} warm-up step(s)\n"
    )
    print("| side | step s | tokens | tokens/s | peak RSS MB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for side, r in results.items():
        if "error" in r:
            print(f"| {side} | failed | | | |")
        else:
            print(
                f"| {side} | {r['step_s']:.3f} | {r['tokens']} | {r['tokens_per_s']:,.0f} | "
                f"{r['peak_rss_mb']:,.0f} |"
            )
    ours, theirs = results.get("agentgym", {}), results.get("trl", {})
    ratios = {}
    if "tokens_per_s" in ours and "tokens_per_s" in theirs:
        ratios = {
            "tokens_per_s": ours["tokens_per_s"] / theirs["tokens_per_s"],
            "peak_rss_mb": ours["peak_rss_mb"] / theirs["peak_rss_mb"],
        }
        print(
            f"| **agentgym / TRL** | | | **{ratios['tokens_per_s']:.2f}x** | "
            f"**{ratios['peak_rss_mb']:.2f}x** |"
        )
    if args.out:
        config = vars(args) | {"side": None, "omp_wait_policy": env["OMP_WAIT_POLICY"]}
        payload = {"config": config, "results": results, "ratios": ratios}
        with open(args.out, "w") as f:
            json.dump(payload, f, indent=2)


if __name__ == "__main__":
    main()
