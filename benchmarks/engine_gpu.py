"""HFEngine on a GPU: exactness of its log-probs, its generation speed beside transformers'
fastest ``generate``, and a GRPO step's time split, on a model directory (by default the
Qwen2.5-0.5B-shaped one from ``scripts/build_real_model.py``).

Sections (each a function returning a dict of figures; ``scripts/gpu_check.py`` runs them in
subprocesses with a time budget each and gathers one JSON)::

    .venv/bin/python benchmarks/engine_gpu.py --model DIR --section generation
    .venv/bin/python benchmarks/engine_gpu.py --model DIR --section logprobs --tiny   # CPU ok

- ``logprobs``: the engine's sampling log-probs against a teacher-forced forward of the same
  model, largest absolute gap, in fp32 and bf16, per decode mode (eager; on a GPU also the CUDA
  graphs that ``decode="auto"`` picks there).
- ``generation``: tokens/s at 64 requests x 256 new tokens (EOS ignored) in bf16: HFEngine
  (graphs, compiled) against ``model.generate`` with ``cache_implementation="static"`` (which
  transformers compiles) and plain ``generate``; each as a fraction of the memory-bandwidth bound
  (bytes a decode step must read, weights plus the average KV cache, over the copy bandwidth
  measured on the card).
- ``grpo_step``: 8 prompts x 8 completions x 256 tokens, torch backend, engine colocated
  (``agentgym.trainers.colocate``): generation, update and weight push seconds, peak memory,
  the update's model FLOPs utilisation (6 x parameters x tokens over the card's bf16 peak).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import torch

PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12}
"""Dense bf16 tensor-core peaks by card name (H100 SXM's; a PCIe H100 peaks lower)."""


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _load(model_dir: str, dtype: torch.dtype) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(_device()).eval()
    return model, AutoTokenizer.from_pretrained(model_dir)


def _prompts(rows: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(10, vocab, (rows, length), generator=generator).tolist()


def _serve(engine: Any, prompts: list[list[int]], new: int) -> tuple[list[Any], float]:
    from agentgym.inference import SamplingParams

    async def run() -> tuple[list[Any], float]:
        jobs = [
            engine.generate(p, SamplingParams(max_tokens=new, seed=i, ignore_eos=True))
            for i, p in enumerate(prompts)
        ]
        _sync()
        start = time.perf_counter()
        outs = await asyncio.gather(*jobs)
        _sync()
        return outs, time.perf_counter() - start

    return asyncio.run(run())


def _modes() -> list[str]:
    return ["eager", "graphs"] if torch.cuda.is_available() else ["eager", "static"]


def logprobs(model_dir: str, tiny: bool) -> dict[str, Any]:
    from agentgym.core.aio import run_sync
    from agentgym.inference import HFEngine

    rows, new = (4, 8) if tiny else (16, 64)
    figures: dict[str, Any] = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        model, tok = _load(model_dir, dtype)
        prompts = _prompts(rows, 24, len(tok))
        for mode in _modes():
            engine = HFEngine(model, tok, decode=mode, max_batch_size=rows)
            outs, _ = _serve(engine, prompts, new)
            worst = 0.0
            with torch.no_grad():
                for prompt, out in zip(prompts, outs, strict=True):
                    ids = torch.tensor([prompt + out.token_ids], device=model.device)
                    logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
                    expected = torch.log_softmax(logits, -1).gather(
                        -1, torch.tensor(out.token_ids, device=model.device)[:, None]
                    )[:, 0]
                    got = torch.tensor(out.logprobs, device=model.device)
                    worst = max(worst, float((got - expected).abs().max()))
            static = engine._batch.static
            figures[f"{name}/{mode}"] = {
                "max_abs_diff": worst,
                "decode": engine.stats.decode,
                "graph_fallback": None if static is None else static.fallback,
            }
            run_sync(engine.close())
        del model
    figures["fp32_within_1e-4"] = all(
        v["max_abs_diff"] <= 1e-4 for k, v in figures.items() if k.startswith("fp32/")
    )
    return figures


def copy_bandwidth() -> float:
    """Bytes/s of a large device-to-device copy (read + write), the bound's bandwidth."""
    if not torch.cuda.is_available():
        return float("nan")
    x = torch.empty(2**29, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    y.copy_(x)
    _sync()
    start = time.perf_counter()
    for _ in range(10):
        y.copy_(x)
    _sync()
    return 2 * x.numel() * 10 / (time.perf_counter() - start)


def _bound(model: Any, rows: int, prompt: int, new: int, bandwidth: float) -> float:
    """tokens/s if each decode step only read the weights and the (average) KV cache once."""
    config = model.config
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 2  # bf16
    kv = rows * (prompt + new / 2) * per_token
    return rows / ((weights + kv) / bandwidth)


def _hf_generate(model: Any, prompts: list[list[int]], new: int, static: bool) -> float:
    ids = torch.tensor(prompts, device=model.device)
    options: dict[str, Any] = {"cache_implementation": "static"} if static else {}

    def once() -> float:
        _sync()
        start = time.perf_counter()
        model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=new,
            min_new_tokens=new,
            pad_token_id=0,
            **options,
        )
        _sync()
        return time.perf_counter() - start

    once()  # warm-up (compiles the static-cache decode step)
    return len(prompts) * new / once()


def generation(model_dir: str, tiny: bool) -> dict[str, Any]:
    from agentgym.core.aio import run_sync
    from agentgym.inference import HFEngine

    rows, prompt_len, new = (4, 16, 8) if tiny else (64, 32, 256)
    dtype = torch.float32 if tiny and not torch.cuda.is_available() else torch.bfloat16
    model, tok = _load(model_dir, dtype)
    prompts = _prompts(rows, prompt_len, len(tok))
    bandwidth = copy_bandwidth()
    bound = _bound(model, rows, prompt_len, new, bandwidth)
    figures: dict[str, Any] = {
        "shape": f"{rows} x {new}, prompts of {prompt_len}",
        "dtype": str(dtype),
        "copy_bandwidth_GBps": bandwidth / 1e9,
        "bandwidth_bound_tok_s": bound,
    }
    # transformers' generate first: on an H200 (torch 2.11, transformers 5.24) its sampling
    # failed after HFEngine had decoded with CUDA graphs and then compiled in this process
    # ("Offset increment outside graph capture encountered unexpectedly"); each alone did not
    for name, static in (("static", True), ("dynamic", False)):
        try:
            figures[f"generate_{name}_tok_s"] = _hf_generate(model, prompts, new, static=static)
        except RuntimeError as error:
            figures[f"generate_{name}_error"] = str(error)[:300]
    modes = ["graphs", "compiled"] if torch.cuda.is_available() else ["eager", "static"]
    for mode in modes:
        engine = HFEngine(model, tok, decode=mode, max_batch_size=rows, prefix_cache_bytes=0)
        _serve(engine, prompts, new)  # warm-up: records (and compiles) the bucket's graph
        _, seconds = _serve(engine, prompts, new)
        figures[f"hfengine_{mode}_tok_s"] = rows * new / seconds
        figures[f"hfengine_{mode}_decode"] = engine.stats.decode
        run_sync(engine.close())
    best = max(figures[f"hfengine_{m}_tok_s"] for m in modes)
    figures["hfengine_best_tok_s"] = best
    for name in ("static", "dynamic"):
        if f"generate_{name}_tok_s" in figures:
            figures[f"hfengine_vs_generate_{name}"] = best / figures[f"generate_{name}_tok_s"]
    figures["hfengine_fraction_of_bound"] = best / bound
    return figures


def _episodes(prompts: list[list[int]], outs: list[Any], group: int) -> list[Any]:
    from agentgym.core.types import Episode, Turn, assistant

    episodes = []
    for i, out in enumerate(outs):
        prompt = prompts[i // group]
        ids = prompt + list(out.token_ids)
        reward = float((i * 7919) % 5) / 4  # spread inside each group
        episodes.append(
            Episode(
                env_id="bench",
                turns=[Turn(assistant(""), (), reward, True, False, {})],
                token_ids=ids,
                loss_mask=[0] * len(prompt) + [1] * len(out.token_ids),
                logprobs=[0.0] * len(prompt) + list(out.logprobs),
                turn_spans=[(len(prompt), len(ids))],
                group=i // group,
            )
        )
    return episodes


def grpo_step(model_dir: str, tiny: bool) -> dict[str, Any]:
    from agentgym.core.aio import run_sync
    from agentgym.trainers import make
    from agentgym.trainers.colocate import colocated_engine

    prompts_n, group, new, steps = (2, 2, 8, 1) if tiny else (8, 8, 256, 3)
    model, tok = _load(model_dir, torch.float32)
    trainer = make(
        "grpo",
        "torch",
        policy=(model, tok),
        config={
            "group_size": group,
            "batch_size": prompts_n * group,
            "max_new_tokens": new,
            "learning_rate": 1e-6,
            "kl_beta": 0.0,
            "num_minibatches": 1,
        },
    )
    engine, shared = colocated_engine(trainer, max_batch_size=prompts_n * group)
    prompts = _prompts(prompts_n, 32, len(tok))
    flat = [p for p in prompts for _ in range(group)]
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    rows = []
    for _ in range(steps):
        outs, generate_s = _serve(engine, flat, new)
        episodes = _episodes(prompts, outs, group)
        start = time.perf_counter()
        trainer.step(episodes, push_weights=False)
        _sync()
        update_s = time.perf_counter() - start
        start = time.perf_counter()
        trainer.push_weights()
        _sync()
        rows.append((generate_s, update_s, time.perf_counter() - start, episodes))
    run_sync(engine.close())
    generate_s, update_s, push_s, episodes = rows[-1]  # the first steps warm up
    tokens = sum(len(e.token_ids) for e in episodes)
    params = sum(p.numel() for p in model.parameters())
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    peak = next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)
    flops = 6 * params * tokens
    return {
        "shape": f"{prompts_n} prompts x {group} completions x {new} tokens",
        "precision": trainer.backend.precision,
        "engine_shares_weights": shared,
        "engine_decode": engine.stats.decode,
        "generate_s": generate_s,
        "update_s": update_s,
        "weight_push_s": push_s,
        "step_s": generate_s + update_s + push_s,
        "update_tokens": tokens,
        "update_tok_s": tokens / update_s,
        "peak_memory_GiB": torch.cuda.max_memory_allocated() / 2**30
        if torch.cuda.is_available()
        else None,
        "update_mfu": flops / update_s / peak if peak else None,
    }


SECTIONS: dict[str, Callable[[str, bool], dict[str, Any]]] = {
    "logprobs": logprobs,
    "generation": generation,
    "grpo_step": grpo_step,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a model directory")
    parser.add_argument("--section", choices=list(SECTIONS), required=True)
    parser.add_argument("--tiny", action="store_true", help="toy sizes (CPU smoke test)")
    args = parser.parse_args()
    print(json.dumps(SECTIONS[args.section](args.model, args.tiny), indent=2))


if __name__ == "__main__":
    main()
