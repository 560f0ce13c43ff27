"""Tokens/s of HFEngine serving N concurrent requests vs one ``model.generate`` call per request.

Both sides sample the same number of new tokens per request (``ignore_eos`` / ``min_new_tokens``)
at temperature 1 from the same prompts, on CPU with the same torch threads, in one run. The
tokens/s counts generated tokens over wall time, prefill included on both sides::

    .venv/bin/python benchmarks/engine_throughput.py                 # tiny policy and ~100M config
    .venv/bin/python benchmarks/engine_throughput.py --models tiny --threads 2

The ~100M model is the tiny policy's Qwen2 architecture scaled up (hidden 768, 12 layers, 12
heads / 4 KV heads, MLP 2816), with seeded random weights.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass

import torch

from agentgym.inference import HFEngine, SamplingParams
from agentgym.models import load, tiny_config

SIZES = {
    "tiny": {},
    "100M": {
        "hidden_size": 768,
        "intermediate_size": 2816,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
    },
}


@dataclass
class Workload:
    requests: int
    new_tokens: int
    prompt_min: int
    prompt_max: int


WORKLOADS = {"tiny": Workload(32, 64, 32, 128), "100M": Workload(32, 32, 16, 48)}


def prompts(workload: Workload, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [
        [
            rng.randrange(3, vocab)
            for _ in range(rng.randint(workload.prompt_min, workload.prompt_max))
        ]
        for _ in range(workload.requests)
    ]


def bench_generate(model: torch.nn.Module, batch: list[list[int]], new_tokens: int) -> float:
    """Seconds for one ``model.generate`` call per request, one after the other."""
    start = time.perf_counter()
    for i, prompt in enumerate(batch):
        torch.manual_seed(i)
        ids = torch.tensor([prompt])
        model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=0,
        )
    return time.perf_counter() - start


def bench_engine(
    model: torch.nn.Module, tokenizer: object, batch: list[list[int]], new_tokens: int
) -> float:
    """Seconds for HFEngine to serve every request concurrently."""

    async def run() -> float:
        engine = HFEngine(model, tokenizer, max_batch_size=len(batch))
        sampling = [
            SamplingParams(max_tokens=new_tokens, seed=i, ignore_eos=True)
            for i in range(len(batch))
        ]
        await engine.generate(batch[0][:4], SamplingParams(max_tokens=2))  # start the worker
        start = time.perf_counter()
        outs = await asyncio.gather(
            *(engine.generate(p, s) for p, s in zip(batch, sampling, strict=True))
        )
        elapsed = time.perf_counter() - start
        await engine.close()
        assert all(len(o.token_ids) == new_tokens for o in outs)
        return elapsed

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument(
        "--threads", type=int, default=2, help="torch intra-op threads (both sides)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for name in args.models:
        model, tokenizer = load(config=tiny_config(**SIZES[name]), seed=0)
        work = WORKLOADS[name]
        batch = prompts(work, model.config.vocab_size)
        bench_generate(model, batch[:1], 2)  # warm up both paths
        bench_engine(model, tokenizer, batch[:2], 2)
        total = work.requests * work.new_tokens
        t_gen = bench_generate(model, batch, work.new_tokens)
        t_eng = bench_engine(model, tokenizer, batch, work.new_tokens)
        rows.append(
            (name, model.num_parameters(), work, total / t_gen, total / t_eng, t_gen / t_eng)
        )
        print(f"... {name} done", flush=True)
    print(f"\ntorch {torch.__version__}, {args.threads} thread(s), CPU\n")
    print(
        "| model | params | requests x new tokens | prompt tokens | generate() tok/s "
        "| HFEngine tok/s | ratio |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, params, work, gen, eng, ratio in rows:
        print(
            f"| {name} | {params / 1e6:.1f}M | {work.requests} x {work.new_tokens} | "
            f"{work.prompt_min}-{work.prompt_max} | {gen:,.0f} | {eng:,.0f} | {ratio:.1f}x |"
        )


if __name__ == "__main__":
    main()
